/* Unit tests for the agent protocol's `gpus` message (agent -> server,
 * common/agent_proto_gpus.c): a built message parses back to what was built, null samples stay
 * null, and malformed ones are refused naming the field. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

static int parse(const char *text, struct aproto_node_msg *m, char *err, size_t errlen)
{
    return aproto_node_msg_parse(text, strlen(text), m, err, errlen);
}

static void agent_gpus_message_round_trips(void **state)
{
    (void)state;
    struct aproto_gpu_row in[2] = {
        {.index = 0,
         .uuid = "GPU-1a2b",
         .name = "NVIDIA H100 80GB HBM3",
         .memory_mb = 81559,
         .memory_used_mb = 1024,
         .utilization_pct = 97,
         .temperature_c = 61,
         .power_mw = 412000},
        {.index = 3,
         .uuid = "GPU-3c4d",
         .name = "",
         .memory_mb = 0,
         .memory_used_mb = 0,
         .utilization_pct = -1,
         .temperature_c = -1,
         .power_mw = -1,
         .lost = true,
         .xid = 79},
    };
    char *text = aproto_msg_gpus(in, 2);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"utilization_pct\":null"));
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse(text, &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_GPUS);
    assert_int_equal(m.n_gpu_rows, 2);
    assert_int_equal(m.gpu_rows[0].index, 0);
    assert_string_equal(m.gpu_rows[0].uuid, "GPU-1a2b");
    assert_string_equal(m.gpu_rows[0].name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(m.gpu_rows[0].memory_mb, 81559);
    assert_int_equal(m.gpu_rows[0].memory_used_mb, 1024);
    assert_int_equal(m.gpu_rows[0].utilization_pct, 97);
    assert_int_equal(m.gpu_rows[0].temperature_c, 61);
    assert_int_equal(m.gpu_rows[0].power_mw, 412000);
    assert_false(m.gpu_rows[0].lost);
    assert_int_equal(m.gpu_rows[1].index, 3);
    assert_int_equal(m.gpu_rows[1].utilization_pct, -1);
    assert_int_equal(m.gpu_rows[1].temperature_c, -1);
    assert_int_equal(m.gpu_rows[1].power_mw, -1);
    assert_true(m.gpu_rows[1].lost);
    assert_int_equal(m.gpu_rows[0].xid, 0);
    assert_int_equal(m.gpu_rows[1].xid, 79);
    aproto_node_msg_free(&m);
    free(text);
}

static void agent_gpus_message_refuses_bad_rows(void **state)
{
    (void)state;
    static const char *const row = "\"uuid\":\"GPU-1\",\"name\":\"x\",\"memory_mb\":1,"
                                   "\"memory_used_mb\":0,\"lost\":false";
    char text[512];
    const struct {
        const char *gpus, *field;
    } cases[] = {
        {"{}", "'gpus' must be an array"},
        {"[1]", "'gpus[0]' must be an object"},
        {"[{\"index\":-1,%s}]", "'gpus[0].index'"},
        {"[{\"index\":0,%s,\"utilization_pct\":101}]", "'gpus[0].utilization_pct'"},
        {"[{\"index\":0,%s},{\"index\":0,%s}]", "'gpus[1].index' repeats"},
        {"[{\"index\":0,\"uuid\":\"\",\"name\":\"x\",\"memory_mb\":1,\"memory_used_mb\":0,"
         "\"lost\":false}]",
         "'gpus[0].uuid'"},
        {"[{\"index\":0,\"uuid\":\"GPU-\\\"\",\"name\":\"x\",\"memory_mb\":1,"
         "\"memory_used_mb\":0,\"lost\":false}]",
         "'gpus[0].uuid'"},
        {"[{\"index\":0,\"uuid\":\"GPU-1\",\"name\":\"x\",\"memory_mb\":1,"
         "\"memory_used_mb\":0,\"lost\":1}]",
         "'gpus[0].lost'"},
        {"[{\"index\":0,%s,\"xid\":-1}]", "'gpus[0].xid'"},
        {"[{\"index\":0,%s,\"xid\":\"79\"}]", "'gpus[0].xid'"},
        {"[{\"index\":0,%s,\"xid\":65536}]", "'gpus[0].xid'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char gpus[400];
        snprintf(gpus, sizeof(gpus), cases[i].gpus, row, row);
        snprintf(text, sizeof(text), "{\"type\":\"gpus\",\"gpus\":%s}", gpus);
        struct aproto_node_msg m;
        char err[256] = "";
        assert_int_equal(parse(text, &m, err, sizeof(err)), -1);
        assert_int_equal(m.type, APROTO_MSG_GPUS);
        if (!strstr(err, cases[i].field))
            fail_msg("case %zu: '%s' does not name %s", i, err, cases[i].field);
    }
}

/* An older agent sends no "xid"; null is none too; only an Xid is written out. */
static void agent_gpus_message_xid_is_optional(void **state)
{
    (void)state;
    static const char *const old =
        "{\"type\":\"gpus\",\"gpus\":[{\"index\":0,\"uuid\":\"GPU-1\",\"name\":\"x\","
        "\"memory_mb\":1,\"memory_used_mb\":0,\"lost\":true},{\"index\":1,\"uuid\":\"GPU-2\","
        "\"name\":\"x\",\"memory_mb\":1,\"memory_used_mb\":0,\"lost\":false,\"xid\":null}]}";
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse(old, &m, err, sizeof(err)), 0);
    assert_int_equal(m.n_gpu_rows, 2);
    assert_true(m.gpu_rows[0].lost);
    assert_int_equal(m.gpu_rows[0].xid, 0);
    assert_int_equal(m.gpu_rows[1].xid, 0);
    aproto_node_msg_free(&m);
    struct aproto_gpu_row row = {
        .uuid = "GPU-1", .name = "x", .utilization_pct = -1, .temperature_c = -1, .power_mw = -1};
    char *text = aproto_msg_gpus(&row, 1);
    assert_non_null(text);
    assert_null(strstr(text, "xid"));
    free(text);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_gpus_message_round_trips),
    cmocka_unit_test(agent_gpus_message_refuses_bad_rows),
    cmocka_unit_test(agent_gpus_message_xid_is_optional),
};

TY_TEST_MAIN(tests)
