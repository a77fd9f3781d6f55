/* GET /api/v1/goodput: goodput summed per owner and over the cluster (README, "Goodput and the
 * startup breakdown"), over the jobs the caller may see that were placed and run or ended in the
 * last day: {"window_s", "cluster": {useful_s, lost_s, wall_s, ratio}, "owners": [{"owner", ...}]}.
 * The overview page shows it; /metrics has the same sums. */
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>

struct goodput_read {
    const struct srv_identity *who;
    char *rows;
};

static int goodput_read(struct db_conn *c, void *arg)
{
    struct goodput_read *r = arg;
    return store_goodput_by_owner(c, r->who, &r->rows);
}

static json_t *sums(double useful, double lost, double wall)
{
    return json_pack("{s:f, s:f, s:f, s:o}", "useful_s", useful, "lost_s", lost, "wall_s", wall,
                     "ratio", wall > 0 ? json_real(useful / wall) : json_null());
}

enum MHD_Result h_goodput(struct srv_request *req)
{
    struct goodput_read r = {&req->who, NULL};
    int qs = db_with_conn(req->srv->db, goodput_read, &r);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    json_t *rows = r.rows ? json_loads(r.rows, 0, NULL) : NULL;
    free(r.rows);
    json_t *owners = json_array();
    double total[3] = {0};
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        double v[3];
        for (size_t k = 0; k < 3; k++) {
            v[k] = json_number_value(json_array_get(row, k + 1));
            total[k] += v[k];
        }
        json_t *o = sums(v[0], v[1], v[2]);
        json_object_set(o, "owner", json_array_get(row, 0));
        json_array_append_new(owners, o);
    }
    json_decref(rows);
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:i, s:o, s:o}", "window_s", 86400, "cluster",
                                    sums(total[0], total[1], total[2]), "owners", owners));
}
