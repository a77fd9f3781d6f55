/* Which paths the dashboard's file server (server/http/static.c) may open, which URLs it claims
 * from the REST API, and where it finds the built files. */
#include "ty_test.h"

#include "static.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void plain_dashboard_paths_are_allowed(void **state)
{
    (void)state;
    const char *ok[] = {"/index.html", "/assets/index-AbC_1-2.js", "/favicon.ico", "/a/b/c.css"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (!srv_static_path_ok(ok[i]))
            fail_msg("refused '%s'", ok[i]);
}

static void paths_that_could_leave_the_directory_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "index.html",
        "/..",
        "/../x",
        "/assets/../../x",
        "/./index.html",
        "/.git/x",
        "//etc/pass",
        "/a//b",
        "/a\\..\\b",
        "/a b",
        "/%2e%2e/x",
        "/a/.",
        "/a/..",
        "/.hidden",
        "/x?y=1",
        "/a/~root",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (srv_static_path_ok(bad[i]))
            fail_msg("allowed '%s'", bad[i]);
    char longpath[600];
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    assert_false(srv_static_path_ok(longpath));
    assert_false(srv_static_path_ok(NULL));
}

static void the_api_keeps_its_own_paths(void **state)
{
    (void)state;
    assert_false(srv_static_claims("/api/v1/nope"));
    assert_false(srv_static_claims("/api"));
    assert_false(srv_static_claims("/metrics"));
    assert_true(srv_static_claims("/"));
    assert_true(srv_static_claims("/assets/x.js"));
    assert_true(srv_static_claims("/apiary.html"));
}

static void the_build_output_beside_the_executable_is_found(void **state)
{
    (void)state;
    char root[] = "/tmp/ty-static-XXXXXX";
    assert_non_null(mkdtemp(root));
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/server", root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/server/trainyard-server", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    /* Nothing built yet: no directory. */
    assert_null(srv_static_find_dir(NULL, path));
    char web[PATH_MAX], index[PATH_MAX + 16];
    snprintf(web, sizeof(web), "%s/web", root);
    assert_int_equal(mkdir(web, 0755), 0);
    snprintf(web, sizeof(web), "%s/web/dist", root);
    assert_int_equal(mkdir(web, 0755), 0);
    snprintf(index, sizeof(index), "%s/index.html", web);
    f = fopen(index, "w");
    assert_non_null(f);
    fclose(f);
    char *found = srv_static_find_dir(NULL, path);
    assert_non_null(found);
    assert_string_equal(found, web);
    free(found);
    /* --web-dir wins, as given. */
    found = srv_static_find_dir("/somewhere/else", path);
    assert_string_equal(found, "/somewhere/else");
    free(found);
    unlink(index);
    rmdir(web);
    snprintf(web, sizeof(web), "%s/web", root);
    rmdir(web);
    unlink(path);
    snprintf(path, sizeof(path), "%s/server", root);
    rmdir(path);
    rmdir(root);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(plain_dashboard_paths_are_allowed),
    cmocka_unit_test(paths_that_could_leave_the_directory_are_refused),
    cmocka_unit_test(the_api_keeps_its_own_paths),
    cmocka_unit_test(the_build_output_beside_the_executable_is_found),
};
TY_TEST_MAIN(tests)
