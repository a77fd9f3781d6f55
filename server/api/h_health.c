/* GET /api/v1/health: liveness, database reachability and this server's role among the servers
 * sharing its database (leader or follower); needs no token. */
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
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:s, s:s, s:s}", "status", "ok", "database", "ok", "role",
                                    control_is_leader(req->srv->control) ? "leader" : "follower"));
}
