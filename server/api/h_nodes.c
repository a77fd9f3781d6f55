/* GET /api/v1/nodes, GET /api/v1/nodes/{id}, POST /api/v1/nodes/{id}/drain and /undrain. */
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One node query: its arguments and its JSON text result. */
struct node_query {
    const char *id;
    bool draining;
    char *json;
};

static int node_list(struct db_conn *c, void *arg)
{
    struct node_query *a = arg;
    return store_node_list(c, &a->json);
}

static int node_get(struct db_conn *c, void *arg)
{
    struct node_query *a = arg;
    return store_node_get(c, a->id, &a->json);
}

static int node_set_draining(struct db_conn *c, void *arg)
{
    struct node_query *a = arg;
    return store_node_set_draining(c, a->id, a->draining, &a->json);
}

enum MHD_Result h_nodes_list(struct srv_request *req)
{
    struct node_query a = {0};
    int qs = db_with_conn(req->srv->db, node_list, &a);
    char *list = a.json;
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
    struct node_query a = {.id = req->args[0]};
    int qs = db_with_conn(req->srv->db, node_get, &a);
    return reply_node(req, qs, a.json);
}

static enum MHD_Result set_draining(struct srv_request *req, bool draining)
{
    struct node_query a = {.id = req->args[0], .draining = draining};
    int qs = db_with_conn(req->srv->db, node_set_draining, &a);
    if (qs > 0)
        control_kick(req->srv->control);
    return reply_node(req, qs, a.json);
}

enum MHD_Result h_nodes_drain(struct srv_request *req)
{
    return set_draining(req, true);
}

enum MHD_Result h_nodes_undrain(struct srv_request *req)
{
    return set_draining(req, false);
}
