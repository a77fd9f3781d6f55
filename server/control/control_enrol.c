/* Who may register as a node (docs/agent-protocol.md, "Node credentials"). The cluster token
 * only enrols: a node that joins with it is given a credential of its own (kept by its agent,
 * stored here only as a SHA-256), and while that node is ALIVE only its credential registers
 * its id again, so the cluster token alone cannot take over a running node and its launches.
 * A LOST node may enrol again with the cluster token (its agent lost its data directory, say);
 * it then gets a new credential. With --auth none there are no credentials. */
#include "control_internal.h"

#include "agent_proto.h"
#include "store.h"
#include "token.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compares two hex digests in constant time. */
static bool same_hash(const char *a, const char *b)
{
    size_t n = strlen(a);
    if (n != strlen(b))
        return false;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* Whether `secret` hashes to `hash` (SHA-256 hex); false for a NULL secret. */
static bool secret_matches(const char *secret, const char *hash)
{
    if (secret == NULL || hash == NULL)
        return false;
    char h[65];
    util_sha256_hex(secret, strlen(secret), h);
    return same_hash(h, hash);
}

int ctl__enrol(struct control *ctl, const struct aproto_node_msg *reg,
               char minted[CTL_CREDENTIAL_MAX], char minted_hash[65], char *why, size_t whylen)
{
    minted[0] = minted_hash[0] = '\0';
    if (ctl->cluster_token_hash == NULL)
        return 0;
    const char *id = reg->node.id;
    char *stored = NULL;
    bool alive = false;
    if (store_node_auth(ctl->db, id, &stored, &alive) < 0) {
        snprintf(why, whylen, "the server could not check the node; retry");
        return -1;
    }
    bool proven = secret_matches(reg->node.credential, stored);
    bool owned = stored != NULL && alive;
    free(stored);
    if (proven)
        return 0;
    if (owned) {
        snprintf(why, whylen, "node id %s belongs to a live node: its node credential is required",
                 id);
        return -1;
    }
    if (!secret_matches(reg->token, ctl->cluster_token_hash)) {
        snprintf(why, whylen, "unknown cluster join token");
        return -1;
    }
    if (srv_token_mint("tyn_", minted, CTL_CREDENTIAL_MAX, minted_hash) != 0) {
        snprintf(why, whylen, "the server could not make a node credential; retry");
        return -1;
    }
    return 0;
}
