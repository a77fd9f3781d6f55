/* GET /api/v1/nodes, GET /api/v1/nodes/{id}, POST /api/v1/nodes/{id}/drain and /undrain.
 * Drain: no new workers are placed on the node; by default its running jobs are preempted
 * (checkpoint, stop, restart elsewhere); with {"preempt": false} they finish there. */
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
    bool draining, preempt;
    char *json;
    char *preempted; /* drain with preempt: JSON array of the preempted jobs' ids */
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
    return store_node_set_draining(c, a->id, a->draining, a->preempt, &a->json, &a->preempted);
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

/* Reads the drain body: empty, or {"preempt": bool} (default true). Returns 0, or -1 having
 * replied 400/415 (*ret). */
static int drain_options(struct srv_request *req, bool *preempt, enum MHD_Result *ret)
{
    *preempt = true;
    if (req->body_len == 0)
        return 0;
    json_t *in = srv_body_json(req, ret);
    if (in == NULL)
        return -1;
    const char *key;
    json_t *value;
    json_object_foreach(in, key, value)
    {
        if (strcmp(key, "preempt") != 0) {
            *ret =
                srv_reply_problem(req, SRV_P_INVALID_BODY, NULL,
                                  "unknown field '%s' (the body may hold \"preempt\" only)", key);
            json_decref(in);
            return -1;
        }
    }
    json_t *p = json_object_get(in, "preempt");
    if (p != NULL && !json_is_boolean(p)) {
        *ret = srv_reply_problem(req, SRV_P_INVALID_BODY, NULL,
                                 "\"preempt\" must be true (running jobs checkpoint and move) or "
                                 "false (they finish on the node)");
        json_decref(in);
        return -1;
    }
    if (p != NULL)
        *preempt = json_is_true(p);
    json_decref(in);
    return 0;
}

/* The drained node's reply: the node with "preempted_jobs" (the ids of the jobs moved away, [] when
 * none or with preempt false). Takes both strings. */
static enum MHD_Result reply_drained(struct srv_request *req, int qs, char *node, char *preempted)
{
    json_t *n = qs > 0 && node ? json_loads(node, 0, NULL) : NULL;
    json_t *jobs = preempted ? json_loads(preempted, 0, NULL) : json_array();
    free(preempted);
    if (n == NULL || jobs == NULL) {
        json_decref(n);
        json_decref(jobs);
        return reply_node(req, qs, node);
    }
    free(node);
    json_object_set_new(n, "preempted_jobs", jobs);
    char *text = json_dumps(n, JSON_COMPACT);
    json_decref(n);
    if (text == NULL)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", text, strlen(text), NULL);
}

enum MHD_Result h_nodes_drain(struct srv_request *req)
{
    enum MHD_Result ret;
    struct node_query a = {.id = req->args[0], .draining = true};
    if (drain_options(req, &a.preempt, &ret) != 0)
        return ret;
    int qs = db_with_conn(req->srv->db, node_set_draining, &a);
    if (qs > 0)
        control_kick(req->srv->control);
    return reply_drained(req, qs, a.json, a.preempted);
}

enum MHD_Result h_nodes_undrain(struct srv_request *req)
{
    struct node_query a = {.id = req->args[0], .draining = false};
    int qs = db_with_conn(req->srv->db, node_set_draining, &a);
    if (qs > 0)
        control_kick(req->srv->control);
    return reply_node(req, qs, a.json);
}
