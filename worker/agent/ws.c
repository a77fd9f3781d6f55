/* The websocket client: connect to the server's /agent endpoint, register, heartbeat, deliver
 * events until acked, act on launch/stop, and reconnect with backoff when the link drops.
 * Single-threaded: everything runs in lws callbacks and lws_sul timers. Writes happen only in
 * LWS_CALLBACK_CLIENT_WRITEABLE, one message per callback. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <ifaddrs.h>
#include <libwebsockets.h>

#include <netdb.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>

struct agent__timers {
    lws_sorted_usec_list_t reconnect;
    lws_sorted_usec_list_t heartbeat;
    struct agent *a;
};

static struct agent__timers *timers_of(struct agent *a)
{
    return a->timers;
}

/* ------------------------------------------------------------------------------------------ */
/* Connecting                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void schedule_reconnect(struct agent *a);

static void connect_now(lws_sorted_usec_list_t *sul)
{
    struct agent__timers *t = lws_container_of(sul, struct agent__timers, reconnect);
    struct agent *a = t->a;
    if (a->shutting_down || a->wsi)
        return;
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof(ci));
    ci.context = a->ctx;
    const struct agent_server_url *srv = &a->cfg->servers[a->server_index];
    ci.address = srv->host;
    ci.port = srv->port;
    ci.path = srv->path;
    ci.host = srv->host;
    ci.origin = srv->host;
    ci.protocol = APROTO_SUBPROTOCOL;
    ci.local_protocol_name = APROTO_SUBPROTOCOL;
    ci.ssl_connection = a->cfg->url_tls ? LCCSCF_USE_SSL : 0;
    /* A pinned certificate replaces the CA and name checks: pin_matches() decides. */
    if (a->cfg->pinned)
        ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
                             LCCSCF_ALLOW_EXPIRED | LCCSCF_ALLOW_INSECURE;
    ci.pwsi = &a->wsi;
    TY_DEBUG("ws", "connecting to %s", srv->url);
    if (!lws_client_connect_via_info(&ci)) {
        a->wsi = NULL;
        schedule_reconnect(a);
    }
}

static void schedule_reconnect(struct agent *a)
{
    if (a->shutting_down)
        return;
    double u = drand48();
    int64_t ms = agent_backoff_delay_ms(a->reconnect_attempt, u);
    if (a->reconnect_attempt < 64)
        a->reconnect_attempt++;
    /* Several servers: the next one in turn (a dead one is skipped at the next failure). */
    a->server_index = (a->server_index + 1) % a->cfg->n_servers;
    TY_DEBUG("ws", "reconnecting in %lld ms", (long long)ms);
    lws_sul_schedule(a->ctx, 0, &timers_of(a)->reconnect, connect_now,
                     (lws_usec_t)ms * LWS_US_PER_MS);
}

/* A heartbeat with the free space of the data directory (left out when statvfs fails). */
static void send_heartbeat(struct agent *a)
{
    struct statvfs vfs;
    struct aproto_disk disk = {.path = a->data_dir};
    bool known = statvfs(a->data_dir, &vfs) == 0;
    if (known) {
        disk.free_mb = (int64_t)((uint64_t)vfs.f_bavail * vfs.f_frsize / (1024 * 1024));
        disk.total_mb = (int64_t)((uint64_t)vfs.f_blocks * vfs.f_frsize / (1024 * 1024));
    }
    agent__ws_send_ctl(a, aproto_msg_heartbeat(known ? &disk : NULL));
}

static void heartbeat_due(lws_sorted_usec_list_t *sul)
{
    struct agent__timers *t = lws_container_of(sul, struct agent__timers, heartbeat);
    struct agent *a = t->a;
    if (!a->registered)
        return;
    send_heartbeat(a);
    lws_sul_schedule(a->ctx, 0, &t->heartbeat, heartbeat_due,
                     (lws_usec_t)a->heartbeat_interval_s * LWS_USEC_PER_SEC);
}

/* ------------------------------------------------------------------------------------------ */
/* Outgoing                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void ctl_clear(struct agent *a)
{
    for (size_t i = 0; i < a->n_ctl; i++)
        free(a->ctl[i]);
    a->n_ctl = 0;
}

void agent__ws_send_ctl(struct agent *a, char *text)
{
    if (!text) {
        TY_ERROR("ws", "out of memory building a message");
        return;
    }
    if (!a->wsi || !a->connected) {
        free(text);
        return;
    }
    if (a->n_ctl == a->cap_ctl) {
        size_t cap = a->cap_ctl ? a->cap_ctl * 2 : 8;
        char **n = realloc(a->ctl, cap * sizeof(*n));
        if (!n) {
            free(text);
            return;
        }
        a->ctl = n;
        a->cap_ctl = cap;
    }
    a->ctl[a->n_ctl++] = text;
    lws_callback_on_writable(a->wsi);
}

void agent__ws_kick(struct agent *a)
{
    if (a->wsi && a->connected && (a->n_ctl > 0 || (a->registered && agent__events_next_unsent(a))))
        lws_callback_on_writable(a->wsi);
}

/* Writes one text message. 0 or -1 (close the connection). */
static int write_text(struct lws *wsi, const char *text)
{
    size_t len = strlen(text);
    unsigned char *buf = malloc(LWS_PRE + len);
    if (!buf)
        return -1;
    memcpy(buf + LWS_PRE, text, len);
    int n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_TEXT);
    free(buf);
    if (n < (int)len) {
        TY_WARN("ws", "write to the server failed");
        return -1;
    }
    return 0;
}

static int on_writeable(struct agent *a, struct lws *wsi)
{
    if (a->n_ctl > 0) {
        char *text = a->ctl[0];
        memmove(a->ctl, a->ctl + 1, (a->n_ctl - 1) * sizeof(*a->ctl));
        a->n_ctl--;
        TY_DEBUG("ws", "-> %s", text);
        int rc = write_text(wsi, text);
        free(text);
        if (rc != 0)
            return -1;
    } else if (a->registered) {
        struct agent_event *e = agent__events_next_unsent(a);
        if (e) {
            TY_DEBUG("ws", "-> %s", e->text);
            if (write_text(wsi, e->text) != 0)
                return -1;
            e->sent = true;
        }
    }
    agent__ws_kick(a);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Incoming                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Finds the interface holding the advertised address, for the workers' gloo and NCCL
 * (agent_env_build): by default they bind to whatever the host name resolves to, often a
 * loopback address that other nodes cannot reach. */
static void learn_address_only(struct agent *a, struct lws *wsi);

static void learn_socket_ifname(struct agent *a)
{
    struct ifaddrs *ifs = NULL;
    a->socket_ifname[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        char host[NI_MAXHOST];
        if (getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), host, sizeof(host), NULL, 0,
                        NI_NUMERICHOST) == 0 &&
            strcmp(host, a->address) == 0 && strlen(i->ifa_name) < sizeof(a->socket_ifname)) {
            snprintf(a->socket_ifname, sizeof(a->socket_ifname), "%s", i->ifa_name);
            TY_INFO("ws", "workers use interface %s (%s) for gloo and NCCL", i->ifa_name,
                    a->address);
            break;
        }
    }
    freeifaddrs(ifs);
}

/* The local address of the connection, as the advertised address. */
static void learn_address(struct agent *a, struct lws *wsi)
{
    learn_address_only(a, wsi);
    learn_socket_ifname(a);
}

static void learn_address_only(struct agent *a, struct lws *wsi)
{
    if (a->cfg->address) {
        snprintf(a->address, sizeof(a->address), "%s", a->cfg->address);
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = (int)lws_get_socket_fd(wsi);
    char host[NI_MAXHOST];
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0, NI_NUMERICHOST) == 0) {
        if (strncmp(host, "::ffff:", 7) == 0)
            memmove(host, host + 7, strlen(host + 7) + 1);
        snprintf(a->address, sizeof(a->address), "%s", host);
    } else if (!a->address[0]) {
        snprintf(a->address, sizeof(a->address), "%s", a->hostname);
    }
}

static void send_register(struct agent *a)
{
    size_t n_workers;
    struct aproto_worker_event *workers = agent__workers_state(a, &n_workers);
    struct aproto_node_info n = {
        .id = a->node_id,
        .hostname = a->hostname,
        .address = a->address,
        .gpu_type = a->gpu_type,
        .version = AGENT_VERSION,
        .cpus = a->cpus,
        .memory_mb = a->memory_mb,
        .gpus = a->gpus,
        .n_gpus = a->n_gpus,
        .custom = a->cfg->resources_json,
        .labels = a->cfg->labels_json,
        .port_lo = a->cfg->port_lo,
        .port_hi = a->cfg->port_hi,
        .credential = a->node_credential,
    };
    agent__ws_send_ctl(a, aproto_msg_register(&n, a->cfg->token, workers, n_workers));
    free(workers);
}

/* A launch the parser refused still names its job and ranks most of the time: answer each rank
 * with worker_exited (127, error = the reason) so the server can fail the attempt instead of
 * waiting for workers that will never start. */
static void reject_launch(struct agent *a, const char *text, size_t len, const char *reason)
{
    struct aproto_launch_refused r;
    if (aproto_launch_refused_parse(text, len, &r) != 0)
        return;
    char msg[512];
    snprintf(msg, sizeof(msg), "invalid launch: %s", reason);
    for (size_t i = 0; i < r.n_ranks; i++) {
        int64_t seq = agent__next_seq(a);
        agent__event_push(
            a, AGENT_EV_EXITED,
            aproto_msg_worker_exited(seq, r.job_id, r.attempt, r.ranks[i], 127, -1, msg, NULL), seq,
            NULL);
    }
    aproto_launch_refused_free(&r);
}

/* Acts on one complete server message. Returns -1 to close the connection. */
static int on_message(struct agent *a, const char *text, size_t len)
{
    TY_DEBUG("ws", "<- %.*s", (int)(len > 2000 ? 2000 : len), text);
    struct aproto_server_msg m;
    char err[256];
    if (aproto_server_msg_parse(text, len, &m, err, sizeof(err)) != 0) {
        TY_BAD_PEER("ws", "server message refused: %s", err);
        if (m.type == APROTO_MSG_LAUNCH)
            reject_launch(a, text, len, err);
        return 0;
    }
    int rc = 0;
    switch (m.type) {
    case APROTO_MSG_REGISTERED:
        a->registered = true;
        a->reconnect_attempt = 0;
        a->heartbeat_interval_s = a->cfg->heartbeat_interval_s > 0 ? a->cfg->heartbeat_interval_s
                                  : m.heartbeat_interval_s > 0     ? m.heartbeat_interval_s
                                                                   : 5;
        /* The server marks a node LOST after about four of its heartbeat intervals: the
         * supervisors kill their workers when no agent has come back by then (adopt.c). */
        a->orphan_timeout_s = a->cfg->orphan_timeout_s > 0
                                  ? a->cfg->orphan_timeout_s
                                  : 4 * (m.heartbeat_interval_s > 0 ? m.heartbeat_interval_s
                                                                    : a->heartbeat_interval_s);
        agent__lease_write(a);
        if (m.credential)
            agent__credential_save(a, m.credential);
        agent__uploader_set_urls(a, m.api_urls, m.n_api_urls);
        if (m.node_id && strcmp(m.node_id, a->node_id) != 0)
            TY_WARN("ws", "server calls this node '%s', not '%s'", m.node_id, a->node_id);
        TY_INFO("ws", "registered with %s as %s (heartbeat every %llds)",
                a->cfg->servers[a->server_index].url, a->node_id,
                (long long)a->heartbeat_interval_s);
        send_heartbeat(a); /* the data directory's free space, at once */
        lws_sul_schedule(a->ctx, 0, &timers_of(a)->heartbeat, heartbeat_due,
                         (lws_usec_t)a->heartbeat_interval_s * LWS_USEC_PER_SEC);
        agent__ws_kick(a);
        break;
    case APROTO_MSG_ERROR:
        TY_ERROR("ws", "server refused this agent: %s", m.message);
        rc = -1;
        break;
    case APROTO_MSG_ACK:
        agent__events_ack(a, m.seq);
        break;
    case APROTO_MSG_LAUNCH:
        if (!agent__prepare_launch(a, &m.launch, text, len))
            agent__launch(a, &m.launch, a->prep == NULL);
        break;
    case APROTO_MSG_STOP:
        agent__stop(a, m.job_id, m.attempt, m.grace_s >= 0 ? m.grace_s : a->cfg->stop_grace_s,
                    m.notice_s);
        break;
    case APROTO_MSG_FORGET:
        agent__forget_job(a, m.job_id);
        break;
    case APROTO_MSG_CHECKPOINT_DELETE:
        agent__delete_checkpoint(a, m.job_id, m.attempt, m.index);
        break;
    default: /* the parser gives an agent->server type as UNKNOWN */
        TY_WARN("ws", "ignoring server message of unknown type '%s'", m.type_name);
        break;
    }
    aproto_server_msg_free(&m);
    return rc;
}

/* Accumulates a fragment; handles the message once complete. -1 closes. */
static int on_receive(struct agent *a, struct lws *wsi, const void *in, size_t len)
{
    if (!a->rx_too_big) {
        if (a->rx_len + len > APROTO_MAX_MESSAGE) {
            TY_BAD_PEER("ws", "server message above %u bytes dropped", APROTO_MAX_MESSAGE);
            a->rx_too_big = true;
            UTIL_FREE(a->rx);
            a->rx_len = a->rx_cap = 0;
        } else {
            if (a->rx_len + len + 1 > a->rx_cap) {
                size_t cap = a->rx_cap ? a->rx_cap : 4096;
                while (cap < a->rx_len + len + 1)
                    cap *= 2;
                char *n = realloc(a->rx, cap);
                if (!n)
                    return -1;
                a->rx = n;
                a->rx_cap = cap;
            }
            memcpy(a->rx + a->rx_len, in, len);
            a->rx_len += len;
        }
    }
    if (!lws_is_final_fragment(wsi))
        return 0;
    int rc = 0;
    if (!a->rx_too_big && a->rx_len > 0)
        rc = on_message(a, a->rx, a->rx_len);
    a->rx_len = 0;
    a->rx_too_big = false;
    if (a->rx_cap > 1024 * 1024) { /* give a huge buffer back */
        UTIL_FREE(a->rx);
        a->rx_cap = 0;
    }
    return rc;
}

static void link_down(struct agent *a)
{
    bool was = a->connected;
    a->wsi = NULL;
    a->connected = false;
    a->registered = false;
    ctl_clear(a);
    a->rx_len = 0;
    a->rx_too_big = false;
    lws_sul_cancel(&timers_of(a)->heartbeat);
    if (was && !a->shutting_down)
        TY_WARN("ws", "lost the server connection; workers keep running, reconnecting");
    schedule_reconnect(a);
}

/* Whether the server's certificate on `wsi` has the SHA-256 (of its DER) given by
 * --server-fingerprint; true when nothing is pinned. Logs the fingerprint seen on a mismatch. */
static bool pin_matches(struct agent *a, struct lws *wsi)
{
    if (!a->cfg->pinned)
        return true;
    SSL *ssl = lws_get_ssl(wsi);
    X509 *cert = ssl ? SSL_get1_peer_certificate(ssl) : NULL;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    bool ok = cert && X509_digest(cert, EVP_sha256(), md, &n) == 1 && n == sizeof(a->cfg->pin) &&
              memcmp(md, a->cfg->pin, n) == 0;
    X509_free(cert);
    if (!ok) {
        char hex[2 * EVP_MAX_MD_SIZE + 1] = "";
        for (unsigned int i = 0; i < n; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        TY_ERROR("ws",
                 "refusing %s: its certificate's fingerprint sha256:%s is not the pinned "
                 "--server-fingerprint",
                 a->cfg->servers[a->server_index].url, n ? hex : "(none)");
    }
    return ok;
}

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                       size_t len)
{
    (void)user;
    struct agent *a = lws_context_user(lws_get_context(wsi));
    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
        const char *why = in ? (const char *)in : "unknown error";
        bool tls_failed = a->cfg->url_tls && (strstr(why, "SSL") || strstr(why, "ssl") ||
                                              strstr(why, "cert") || strstr(why, "tls"));
        TY_WARN("ws", "cannot connect to %s: %s%s", a->cfg->servers[a->server_index].url, why,
                tls_failed ? " (the server's certificate did not verify: is it signed by a CA "
                             "in --ca-file, and issued for this host name?)"
                           : "");
        if (a->wsi == wsi || !a->connected)
            link_down(a);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        if (!pin_matches(a, wsi))
            return -1; /* before register: the token is never sent to it */
        a->wsi = wsi;
        a->connected = true;
        a->registered = false;
        a->rx_len = 0;
        ctl_clear(a);
        agent__events_reset_sent(a);
        learn_address(a, wsi);
        TY_INFO("ws", "connected to %s (advertising %s)", a->cfg->servers[a->server_index].url,
                a->address);
        send_register(a);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return on_receive(a, wsi, in, len);
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (wsi != a->wsi)
            return 0;
        return on_writeable(a, wsi);
    case LWS_CALLBACK_CLIENT_CLOSED:
        if (a->wsi == wsi || a->wsi == NULL)
            link_down(a);
        return 0;
    default:
        return 0;
    }
}

int agent__report_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                           size_t len);
/* supervise_reap.c: the SIGCHLD signalfd (agent__children_watch). */
int agent__children_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                             void *in, size_t len);

/* tail.c: the inotify descriptor of the log files (agent__tails_watch). */
int agent__tails_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                          size_t len);

static const struct lws_protocols protocols[] = {
    {APROTO_SUBPROTOCOL, ws_callback, 0, 65536, 0, NULL, 0},
    {"trainyard-report", agent__report_callback, 0, 0, 0, NULL, 0},
    {"trainyard-children", agent__children_callback, 0, 0, 0, NULL, 0},
    {"trainyard-logs", agent__tails_callback, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

const struct lws_protocols *agent__protocols(void)
{
    return protocols;
}

/* ------------------------------------------------------------------------------------------ */
/* Life cycle                                                                                   */
/* ------------------------------------------------------------------------------------------ */

int agent__ws_init(struct agent *a)
{
    struct agent__timers *t = calloc(1, sizeof(*t));
    if (!t)
        return -1;
    t->a = a;
    a->timers = t;
    lws_sul_schedule(a->ctx, 0, &t->reconnect, connect_now, 1);
    return 0;
}

void agent__ws_fini(struct agent *a)
{
    struct agent__timers *t = a->timers;
    if (t) {
        lws_sul_cancel(&t->reconnect);
        lws_sul_cancel(&t->heartbeat);
    }
    ctl_clear(a);
    UTIL_FREE(a->ctl);
    a->cap_ctl = 0;
    UTIL_FREE(a->rx);
    a->rx_cap = a->rx_len = 0;
}

void agent__ws_free_timers(struct agent *a)
{
    UTIL_FREE(a->timers);
}
