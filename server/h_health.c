/* GET /api/v1/health: liveness and database reachability; needs no token. */
#include "db.h"
#include "handlers.h"
#include "server.h"

#include <stdlib.h>

enum MHD_Result h_health(struct srv_request *req)
{
    struct db_conn *c = db_acquire(req->srv->db);
    int qs = c ? db_exec_simple(c, "SELECT 1") : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs < 0)
        return srv_reply_json(
            req, MHD_HTTP_SERVICE_UNAVAILABLE,
            json_pack("{s:s, s:s}", "status", "degraded", "database", "unreachable"));
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:s, s:s}", "status", "ok", "database", "ok"));
}

enum MHD_Result srv_reply_db_error(struct srv_request *req, int qs)
{
    if (qs == DB_SOFT_ERROR)
        return srv_reply_problem(req, SRV_P_DATABASE_UNAVAILABLE, NULL,
                                 "the database is unavailable; retry shortly");
    return srv_reply_problem(req, SRV_P_INTERNAL, NULL, "database error; see the server log");
}
