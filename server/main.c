/* trainyard-server: REST API, embedded or external PostgreSQL, migrations, auth.
 * Start-up order: config → data dir → database → migrations → admin token → control (and the
 * websocket hub) → streams → HTTP.
 * Shutdown (SIGINT/SIGTERM) runs it backwards and joins every thread. */
#include "artifact.h"
#include "auth.h"
#include "cache.h"
#include "control.h"
#include "db.h"
#include "db_migrate.h"
#include "embed.h"
#include "http.h"
#include "log.h"
#include "pg_embedded.h"
#include "server.h"
#include "static.h"
#include "stream.h"
#include "submit_queue.h"
#include "util.h"
#include "version.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const struct ty_embedded_file srv_migrations[];
extern const struct ty_embedded_file srv_definitions[];

static void print_routes(void)
{
    json_t *routes = json_array();
    for (const struct srv_route *r = srv_routes; r->method; r++)
        json_array_append_new(routes, json_pack("{s:s, s:s, s:s}", "method", r->method, "path",
                                                r->pattern, "role", srv_role_name(r->min_role)));
    json_dumpf(routes, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(routes);
}

/* The embedded PostgreSQL could not be restarted (its watcher logs why next): shut down, and
 * main exits non-zero so that a supervisor acts. The pool's connection failures are not logged
 * as errors any more: the watcher's line stays the last error. `arg`: the pool. */
static void embedded_database_lost(void *arg)
{
    db_quiet_connect_errors(arg);
    kill(getpid(), SIGTERM);
}

/* Waits until the database answers (it may still be starting). Returns 0 or -1. */
static int wait_for_database(struct db *db)
{
    for (int i = 0; i < 30; i++) {
        struct db_conn *c = db_acquire(db);
        if (c) {
            db_release(db, c);
            return 0;
        }
        if (i == 0)
            TY_WARN("db", "database not reachable yet; retrying for 30 s");
        sleep(1);
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-routes") == 0) {
        print_routes();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("trainyard-server %s\n", TRAINYARD_VERSION);
        return 0;
    }
    struct srv srv;
    memset(&srv, 0, sizeof(srv));
    if (srv_config_load(&srv.cfg, argc, argv) != 0)
        return 2;

    /* Signals are taken synchronously by sigwait() below; every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = 1;
    if (util_mkdir_p(srv.cfg.data_dir, 0700) != 0) {
        TY_ERROR("main", "cannot create data directory %s: %s", srv.cfg.data_dir, strerror(errno));
        goto out;
    }
    char artifact_dir[PATH_MAX];
    snprintf(artifact_dir, sizeof(artifact_dir), "%s/artifacts", srv.cfg.data_dir);
    srv.artifacts =
        artifact_store_open_local(srv.cfg.artifact_dir ? srv.cfg.artifact_dir : artifact_dir);
    if (srv.artifacts == NULL)
        goto out;
    srv.artifacts->shared_allow = srv.cfg.storage_path_allow;
    char conninfo[PATH_MAX + 128];
    if (srv.cfg.database_url) {
        snprintf(conninfo, sizeof(conninfo), "%s", srv.cfg.database_url);
    } else if (pg_embedded_start(srv.cfg.data_dir, srv.cfg.pg_bin_dir, srv.cfg.pg_fallback_dir,
                                 &srv.pg, conninfo, sizeof(conninfo)) != 0) {
        goto out;
    }
    /* One connection per HTTP thread, plus a few for the server's own loops. */
    int pool = srv.cfg.db_pool_size > 0 ? (int)srv.cfg.db_pool_size : (int)srv.cfg.http_threads + 4;
    srv.db = db_create(conninfo, pool);
    if (srv.db == NULL)
        goto out;
    db_set_timeouts(srv.db, (int)srv.cfg.db_acquire_timeout_ms, (int)srv.cfg.db_connect_timeout_s);
    if (srv.pg != NULL && pg_embedded_watch(srv.pg, (int)srv.cfg.pg_restart_attempts,
                                            embedded_database_lost, srv.db) != 0)
        goto out;
    if (wait_for_database(srv.db) != 0) {
        TY_ERROR("main", "cannot reach the database");
        goto out;
    }
    srv.job_cache = cache_create(4096, 1.0);
    srv.token_cache = cache_create(1024, 2.0);
    srv.submits = submit_queue_create();
    if (srv.job_cache == NULL || srv.token_cache == NULL || srv.submits == NULL)
        goto out;
    if (db_migrate(srv.db, srv_migrations, srv_definitions) < 0 || srv_auth_bootstrap(&srv) != 0)
        goto out;
    srv.control = control_start(&srv);
    if (srv.control == NULL)
        goto out;
    srv.web_dir = srv_static_find_dir(srv.cfg.web_dir, "/proc/self/exe");
    if (srv.web_dir)
        TY_INFO("main", "web dashboard at / from %s", srv.web_dir);
    else
        TY_WARN("main", "no web dashboard: it was not built (node and npm missing) and "
                        "--web-dir is not set");
    srv.stream = stream_start(&srv, control_hub(srv.control));
    if (srv.stream == NULL || srv_http_start(&srv) != 0)
        goto out;
    TY_INFO("main", "trainyard-server %s ready", TRAINYARD_VERSION);

    int sig = 0;
    sigwait(&sigs, &sig);
    if (pg_embedded_gave_up(srv.pg)) {
        TY_INFO("main", "shutting down: the embedded PostgreSQL is gone");
    } else {
        TY_INFO("main", "%s received: shutting down", strsignal(sig));
        rc = 0;
    }
out:
    srv_http_stop(&srv);
    stream_stop(srv.stream); /* before the hub, which control_stop stops */
    control_stop(srv.control);
    pg_embedded_stop(srv.pg); /* its watcher's on_give_up uses the pool */
    db_destroy(srv.db);
    cache_destroy(srv.job_cache);
    cache_destroy(srv.token_cache);
    submit_queue_destroy(srv.submits);
    artifact_store_close(srv.artifacts);
    free(srv.web_dir);
    srv_config_free(&srv.cfg);
    return rc;
}
