/* Unit tests for the agent's option table and parsers (worker/agent/config.c, parse.c) and its
 * reconnect backoff (backoff.c). */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* ---- backoff ---- */

static void agent_backoff_doubles_from_200ms_to_10s(void **state)
{
    (void)state;
    /* u = 0.5 is the jitter-free midpoint. */
    assert_int_equal(agent_backoff_delay_ms(0, 0.5), 200);
    assert_int_equal(agent_backoff_delay_ms(1, 0.5), 400);
    assert_int_equal(agent_backoff_delay_ms(2, 0.5), 800);
    assert_int_equal(agent_backoff_delay_ms(5, 0.5), 6400);
    assert_int_equal(agent_backoff_delay_ms(6, 0.5), 10000);
    assert_int_equal(agent_backoff_delay_ms(1000, 0.5), 10000);
    assert_int_equal(agent_backoff_delay_ms(4000000000u, 0.5), 10000);
}

static void agent_backoff_jitter_stays_within_half(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 12; a++) {
        int64_t mid = agent_backoff_delay_ms(a, 0.5);
        int64_t lo = agent_backoff_delay_ms(a, 0.0);
        int64_t hi = agent_backoff_delay_ms(a, 0.999999);
        assert_int_equal(lo, mid / 2);
        assert_true(hi < mid * 3 / 2 + 1 && hi >= mid * 3 / 2 - 1);
        for (double u = 0; u < 1; u += 0.01) {
            int64_t d = agent_backoff_delay_ms(a, u);
            assert_true(d >= lo && d <= hi);
        }
    }
    /* Out-of-range randomness is clamped, never a negative or huge delay. */
    assert_int_equal(agent_backoff_delay_ms(0, -3), 100);
    assert_true(agent_backoff_delay_ms(0, 7) <= 300);
}

/* ---- parsers ---- */

static void agent_port_range_parses_and_checks_bounds(void **state)
{
    (void)state;
    int lo, hi;
    char err[256];
    assert_int_equal(agent_parse_port_range("29500-29999", &lo, &hi, err, sizeof(err)), 0);
    assert_int_equal(lo, 29500);
    assert_int_equal(hi, 29999);
    assert_int_equal(agent_parse_port_range("80-80", &lo, &hi, err, sizeof(err)), 0);
    const char *bad[] = {"",         "29500", "-1",  "1-",    "0-10",
                         "10-70000", "20-10", "a-b", "1-2-3", " 1-2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (agent_parse_port_range(bad[i], &lo, &hi, err, sizeof(err)) == 0)
            fail_msg("accepted port range '%s'", bad[i]);
}

static void agent_fingerprint_parses_sha256_hex_with_or_without_colons(void **state)
{
    (void)state;
    unsigned char fp[32];
    char err[256];
    const char *hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
    char text[128];
    snprintf(text, sizeof(text), "sha256:%s", hex);
    assert_int_equal(agent_parse_fingerprint(text, fp, err, sizeof(err)), 0);
    assert_int_equal(fp[0], 0x00);
    assert_int_equal(fp[1], 0x11);
    assert_int_equal(fp[15], 0xff);
    assert_int_equal(fp[31], 0xff);
    unsigned char fp2[32];
    const char *openssl_form = "SHA256 Fingerprint=00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:"
                               "FF:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff";
    assert_int_equal(agent_parse_fingerprint(openssl_form, fp2, err, sizeof(err)), 0);
    assert_memory_equal(fp, fp2, sizeof(fp));
    const char *bad[] = {
        "",
        hex, /* no sha256: */
        "sha1:00112233445566778899aabbccddeeff00112233",
        "sha256:0011",                                                               /* short */
        "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff00", /* long */
        "sha256:0g112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",   /* not hex */
        "sha256:0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",    /* odd */
        "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff:", /* trailing : */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (agent_parse_fingerprint(bad[i], fp, err, sizeof(err)) == 0)
            fail_msg("accepted fingerprint '%s'", bad[i]);
}

static void agent_gpu_list_parses_sorted_unique_indices(void **state)
{
    (void)state;
    int *g;
    size_t n;
    char err[256];
    assert_int_equal(agent_parse_gpu_list("3,0, 1,2", &g, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(g[i], i);
    free(g);
    assert_int_equal(agent_parse_gpu_list("none", &g, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    assert_null(g);
    assert_int_equal(agent_parse_gpu_list("", &g, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    const char *bad[] = {"0,0", "1,,2", "-1", "x", "1.5", "0,", "99999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (agent_parse_gpu_list(bad[i], &g, &n, err, sizeof(err)) == 0)
            fail_msg("accepted GPU list '%s'", bad[i]);
        assert_null(g);
    }
}

static void agent_server_url_parses_host_port_path(void **state)
{
    (void)state;
    char *host, *path, err[256];
    int port;
    bool tls;
    assert_int_equal(
        agent_parse_server_url("ws://10.1.2.3:8081", &host, &port, &path, &tls, err, sizeof(err)),
        0);
    assert_string_equal(host, "10.1.2.3");
    assert_int_equal(port, 8081);
    assert_string_equal(path, "/agent");
    assert_false(tls);
    free(host);
    free(path);
    assert_int_equal(
        agent_parse_server_url("wss://head.example/", &host, &port, &path, &tls, err, sizeof(err)),
        0);
    assert_string_equal(host, "head.example");
    assert_int_equal(port, 443);
    assert_string_equal(path, "/agent");
    assert_true(tls);
    free(host);
    free(path);
    assert_int_equal(agent_parse_server_url("ws://[::1]:9/custom/agent", &host, &port, &path, &tls,
                                            err, sizeof(err)),
                     0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9);
    assert_string_equal(path, "/custom/agent");
    free(host);
    free(path);
    const char *bad[] = {"http://x:1",   "ws://",    "ws://:80",  "ws://h:0",
                         "ws://h:99999", "ws://h:x", "ws://[::1", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (agent_parse_server_url(bad[i], &host, &port, &path, &tls, err, sizeof(err)) == 0)
            fail_msg("accepted URL '%s'", bad[i]);
        assert_null(host);
        assert_null(path);
    }
}

static void agent_server_list_takes_every_server_of_a_cluster(void **state)
{
    (void)state;
    struct agent_server_url *urls = NULL;
    size_t n = 0;
    bool tls = true;
    char err[256];
    assert_int_equal(agent_parse_server_list("ws://a:1, ws://b:2/x ,ws://a:3", &urls, &n, &tls, err,
                                             sizeof(err)),
                     0);
    assert_int_equal(n, 3);
    assert_false(tls);
    assert_string_equal(urls[0].url, "ws://a:1");
    assert_string_equal(urls[1].host, "b");
    assert_int_equal(urls[1].port, 2);
    assert_string_equal(urls[1].path, "/x");
    assert_int_equal(urls[2].port, 3);
    agent_server_urls_free(urls, n);
    assert_int_equal(agent_parse_server_list("wss://h", &urls, &n, &tls, err, sizeof(err)), 0);
    assert_int_equal(n, 1);
    assert_true(tls);
    agent_server_urls_free(urls, n);
    const char *bad[] = {"ws://a:1,wss://b:2",      "ws://a:1,,ws://b:2", "ws://a:1,", "",
                         "ws://a:1,ws://a:1/agent", "ws://a:1,http://b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (agent_parse_server_list(bad[i], &urls, &n, &tls, err, sizeof(err)) == 0)
            fail_msg("accepted server list '%s'", bad[i]);
        assert_null(urls);
        assert_int_equal(n, 0);
    }
}

static void agent_labels_accept_json_or_pairs(void **state)
{
    (void)state;
    json_t *o;
    char err[256];
    assert_int_equal(agent_parse_labels("{\"zone\":\"a\",\"rack\":\"7\"}", &o, err, sizeof(err)),
                     0);
    assert_string_equal(json_string_value(json_object_get(o, "rack")), "7");
    json_decref(o);
    assert_int_equal(agent_parse_labels("zone=a,pool=gpu", &o, err, sizeof(err)), 0);
    assert_string_equal(json_string_value(json_object_get(o, "pool")), "gpu");
    assert_int_equal(json_object_size(o), 2);
    json_decref(o);
    assert_int_equal(agent_parse_labels(NULL, &o, err, sizeof(err)), 0);
    assert_int_equal(json_object_size(o), 0);
    json_decref(o);
    assert_int_equal(agent_parse_labels("{\"a\":1}", &o, err, sizeof(err)), -1);
    assert_int_equal(agent_parse_labels("novalue", &o, err, sizeof(err)), -1);
    assert_int_equal(agent_parse_labels("{bad", &o, err, sizeof(err)), -1);
}

static void agent_resources_accept_custom_numbers_only(void **state)
{
    (void)state;
    json_t *o;
    char err[256];
    assert_int_equal(agent_parse_resources("{\"tpu\":4,\"ssd\":0.5}", &o, err, sizeof(err)), 0);
    assert_int_equal(json_object_size(o), 2);
    json_decref(o);
    assert_int_equal(agent_parse_resources(NULL, &o, err, sizeof(err)), 0);
    json_decref(o);
    assert_int_equal(agent_parse_resources("{\"GPU\":4}", &o, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--gpus"));
    assert_int_equal(agent_parse_resources("{\"tpu\":\"4\"}", &o, err, sizeof(err)), -1);
    assert_int_equal(agent_parse_resources("{\"tpu\":-1}", &o, err, sizeof(err)), -1);
    assert_int_equal(agent_parse_resources("[1]", &o, err, sizeof(err)), -1);
}

/* ---- the option table ---- */

static int load(struct agent_config *cfg, int argc, const char **argv)
{
    return agent_config_load(cfg, argc, (char **)argv);
}

static void agent_config_defaults(void **state)
{
    (void)state;
    struct agent_config cfg;
    const char *argv[] = {"trainyard-agent"};
    unsetenv("TRAINYARD_AGENT_SERVER");
    unsetenv("TRAINYARD_AGENT_GPUS");
    assert_int_equal(load(&cfg, 1, argv), 0);
    assert_string_equal(cfg.server, "ws://127.0.0.1:8081");
    assert_string_equal(cfg.url_host, "127.0.0.1");
    assert_int_equal(cfg.url_port, 8081);
    assert_string_equal(cfg.data_dir, "./trainyard-agent-data");
    assert_int_equal(cfg.port_lo, 29500);
    assert_int_equal(cfg.port_hi, 29999);
    assert_int_equal(cfg.stop_grace_s, 10);
    assert_false(cfg.gpus_declared);
    assert_null(cfg.token);
    assert_non_null(strstr(cfg.python_path, "worker/python"));
    agent_config_free(&cfg);
}

static void agent_config_flags_win_over_environment(void **state)
{
    (void)state;
    struct agent_config cfg;
    setenv("TRAINYARD_AGENT_SERVER", "ws://env-host:1", 1);
    setenv("TRAINYARD_CLUSTER_TOKEN", "from-env", 1);
    const char *argv[] = {"trainyard-agent", "--server=ws://flag-host:2",
                          "--gpus",          "1,0",
                          "--gpu-type",      "H100",
                          "--cpus",          "16",
                          "--labels",        "a=b"};
    assert_int_equal(load(&cfg, 10, argv), 0);
    assert_string_equal(cfg.url_host, "flag-host");
    assert_int_equal(cfg.url_port, 2);
    assert_string_equal(cfg.token, "from-env");
    assert_true(cfg.gpus_declared);
    assert_int_equal(cfg.n_gpus, 2);
    assert_int_equal(cfg.gpu_list[0], 0);
    assert_int_equal(cfg.cpus, 16);
    assert_string_equal(cfg.gpu_type, "H100");
    agent_config_free(&cfg);
    unsetenv("TRAINYARD_AGENT_SERVER");
    unsetenv("TRAINYARD_CLUSTER_TOKEN");
}

static void agent_config_rejects_bad_values(void **state)
{
    (void)state;
    struct agent_config cfg;
    const char *cases[][3] = {
        {"--bogus", "1", NULL},
        {"--port-range", "5-1", NULL},
        {"--gpus", "0,0", NULL},
        {"--cpus", "-2", NULL},
        {"--stop-grace-s", "x", NULL},
        {"--server", "http://x", NULL},
        {"--resources", "{\"CPU\":1}", NULL},
        {"--log-level", "loud", NULL},
        {"--node-id", "a/b", NULL},
        {"--labels", "{", NULL},
        {"positional", NULL, NULL},
        {"--token", NULL, NULL}, /* missing value */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *argv[] = {"trainyard-agent", cases[i][0], cases[i][1]};
        int argc = cases[i][1] ? 3 : 2;
        if (load(&cfg, argc, argv) != -1)
            fail_msg("accepted %s %s", cases[i][0], cases[i][1] ? cases[i][1] : "");
    }
    setenv("TRAINYARD_AGENT_CPUS", "many", 1);
    const char *argv[] = {"trainyard-agent"};
    assert_int_equal(load(&cfg, 1, argv), -1);
    unsetenv("TRAINYARD_AGENT_CPUS");
}

static void agent_config_pins_need_wss(void **state)
{
    (void)state;
    struct agent_config cfg;
    const char *pin = "--server-fingerprint=sha256:"
                      "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const char *plain[] = {"trainyard-agent", "--server", "ws://h:1", pin};
    assert_int_equal(load(&cfg, 4, plain), -1);
    const char *ca[] = {"trainyard-agent", "--server", "ws://h:1", "--ca-file", "/x.pem"};
    assert_int_equal(load(&cfg, 5, ca), -1);
    const char *tls[] = {"trainyard-agent", "--server", "wss://h:1", pin};
    assert_int_equal(load(&cfg, 4, tls), 0);
    assert_true(cfg.pinned);
    assert_int_equal(cfg.pin[1], 0x11);
    agent_config_free(&cfg);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_server_list_takes_every_server_of_a_cluster),
    cmocka_unit_test(agent_backoff_doubles_from_200ms_to_10s),
    cmocka_unit_test(agent_backoff_jitter_stays_within_half),
    cmocka_unit_test(agent_port_range_parses_and_checks_bounds),
    cmocka_unit_test(agent_fingerprint_parses_sha256_hex_with_or_without_colons),
    cmocka_unit_test(agent_config_pins_need_wss),
    cmocka_unit_test(agent_gpu_list_parses_sorted_unique_indices),
    cmocka_unit_test(agent_server_url_parses_host_port_path),
    cmocka_unit_test(agent_labels_accept_json_or_pairs),
    cmocka_unit_test(agent_resources_accept_custom_numbers_only),
    cmocka_unit_test(agent_config_defaults),
    cmocka_unit_test(agent_config_flags_win_over_environment),
    cmocka_unit_test(agent_config_rejects_bad_values),
};
TY_TEST_MAIN(tests)
