/* GET /api/v1/nodes, GET /api/v1/nodes/{id}, POST /api/v1/nodes/{id}/drain and /undrain. */
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result h_nodes_list(struct srv_request *req)
{
    struct db_conn *c = db_acquire(req->srv->db);
    char *list = NULL;
    int qs = c ? store_node_list(c, &list) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs <= 0 || list == NULL)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    return srv_reply_wrapped(req, "nodes", list);
}

static enum MHD_Result reply_node(struct srv_request *req, int qs, char *node)
{
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0 || node == NULL)
        return srv_reply_problem(req, SRV_P_NODE_NOT_FOUND, NULL, "there is no node '%s'",
                                 req->args[0]);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", node, strlen(node), NULL);
}

enum MHD_Result h_nodes_get(struct srv_request *req)
{
    struct db_conn *c = db_acquire(req->srv->db);
    char *node = NULL;
    int qs = c ? store_node_get(c, req->args[0], &node) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    return reply_node(req, qs, node);
}

static enum MHD_Result set_draining(struct srv_request *req, bool draining)
{
    struct db_conn *c = db_acquire(req->srv->db);
    char *node = NULL;
    int qs = c ? store_node_set_draining(c, req->args[0], draining, &node) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs > 0)
        control_kick(req->srv->control);
    return reply_node(req, qs, node);
}

enum MHD_Result h_nodes_drain(struct srv_request *req)
{
    return set_draining(req, true);
}

enum MHD_Result h_nodes_undrain(struct srv_request *req)
{
    return set_draining(req, false);
}
