/* libFuzzer: query-string values (server/http/query.c, and util_parse_int64 that the handlers
 * use for numbers). The input is a query string "k=v&k2=v2..." as libmicrohttpd hands the
 * handlers its decoded values; each value goes to the parser of its key. */
#include "query.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void parse_value(const char *key, const char *value)
{
    char out[SRV_QUERY_RANKS_LEN], bad[40], detail[120];
    int count;
    int64_t v;
    if (strcmp(key, "status") == 0) {
        char statuses[256];
        (void)srv_query_statuses_array(value, statuses, sizeof(statuses), bad, sizeof(bad));
    } else if (strcmp(key, "name") == 0) {
        (void)srv_query_names_valid(value, detail, sizeof(detail));
    } else if (strcmp(key, "rank") == 0) {
        if (srv_query_ranks_array(value, out, sizeof(out), &count) != 0)
            (void)util_parse_int64(value, 0, INT32_MAX, &v);
    } else {
        (void)util_parse_int64(value, 1, INT64_MAX, &v);
        (void)util_parse_int64(value, INT64_MIN, INT64_MAX, &v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *q = malloc(size + 1);
    if (!q)
        return 0;
    memcpy(q, data, size);
    q[size] = '\0';
    char *save = NULL;
    for (char *pair = strtok_r(q, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        if (!eq)
            continue;
        *eq = '\0';
        parse_value(pair, eq + 1);
    }
    free(q);
    return 0;
}
