/* Token minting (token.h). */
#include "token.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

int srv_token_format(const char *prefix, const unsigned char *raw, size_t n, char *out, size_t size)
{
    size_t plen = strlen(prefix);
    if (size == 0)
        return -1;
    out[0] = '\0';
    if (plen + 2 * n + 1 > size)
        return -1;
    memcpy(out, prefix, plen);
    for (size_t i = 0; i < n; i++)
        snprintf(out + plen + 2 * i, 3, "%02x", raw[i]);
    out[plen + 2 * n] = '\0';
    return (int)(plen + 2 * n);
}

int srv_token_mint(const char *prefix, char *token, size_t size, char hash[65])
{
    unsigned char raw[SRV_TOKEN_RANDOM_BYTES];
    if (util_random_bytes(raw, sizeof(raw)) != 0)
        return -1;
    int len = srv_token_format(prefix, raw, sizeof(raw), token, size);
    memset(raw, 0, sizeof(raw));
    if (len < 0)
        return -1;
    if (hash)
        util_sha256_hex(token, (size_t)len, hash);
    return 0;
}
