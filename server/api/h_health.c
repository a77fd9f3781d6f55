/* GET /api/v1/health: liveness, database reachability, this server's role among the servers
 * sharing its database (leader or follower) and whether it asks for a token ("auth": "token" or
 * "none": the dashboard's first request, so that a page without a token never draws a 401);
 * needs no token. */
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

static int ping(struct db_conn *c, void *arg)
{
    (void)arg;
    return store_ping(c);
}

enum MHD_Result h_health(struct srv_request *req)
{
    if (db_with_conn(req->srv->db, ping, NULL) < 0)
        return srv_reply_json(
            req, MHD_HTTP_SERVICE_UNAVAILABLE,
            json_pack("{s:s, s:s}", "status", "degraded", "database", "unreachable"));
    return srv_reply_json(
        req, MHD_HTTP_OK,
        json_pack("{s:s, s:s, s:s, s:s}", "status", "ok", "database", "ok", "role",
                  control_is_leader(req->srv->control) ? "leader" : "follower", "auth",
                  req->srv->cfg.auth_mode == SRV_AUTH_NONE ? "none" : "token"));
}
