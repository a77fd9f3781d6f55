/* common/util.c: util_write_file_durable replaces a file whole, with the requested mode, leaves no
 * temporary behind, and reports a failure with errno. */
#include "ty_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static void durable_write_replaces_the_file_whole(void **state)
{
    (void)state;
    char dir[] = "/tmp/ty-util-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], tmp[160];
    snprintf(path, sizeof(path), "%s/token", dir);
    snprintf(tmp, sizeof(tmp), "%s.ty-tmp", path);

    assert_int_equal(util_write_file_durable(path, "first version\n", 14, 0600), 0);
    assert_int_equal(util_write_file_durable(path, "second\n", 7, 0600), 0);
    size_t len = 0;
    char *text = util_read_file(path, &len);
    assert_non_null(text);
    assert_int_equal(len, 7);
    assert_string_equal(text, "second\n");
    free(text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(access(tmp, F_OK), -1); /* no temporary left behind */

    unlink(path);
    rmdir(dir);
}

static void durable_write_into_a_missing_directory_fails_with_errno(void **state)
{
    (void)state;
    errno = 0;
    assert_int_equal(util_write_file_durable("/nonexistent-ty-dir/file", "x", 1, 0600), -1);
    assert_int_equal(errno, ENOENT);
}

/* A burst of bad-peer lines from one call site: about LOG_BAD_PEER_PER_S a second get through
 * (two windows at most, should the burst straddle a second), the rest are counted and reported
 * by the next line that is written. */
static void bad_peer_lines_are_throttled(void **state)
{
    (void)state;
    struct log_throttle t = {0};
    unsigned allowed = 0, suppressed = 0, reported = 0;
    for (int i = 0; i < 1000; i++) {
        if (log_throttle_allow(&t, LOG_BAD_PEER_PER_S, &suppressed)) {
            allowed++;
            reported += suppressed;
        }
    }
    assert_true(allowed >= LOG_BAD_PEER_PER_S && allowed <= 2 * LOG_BAD_PEER_PER_S);
    assert_true(reported <= 1000 - allowed);
    t.window -= 5; /* a later second: lines get through again, with the count of those left out */
    assert_true(log_throttle_allow(&t, LOG_BAD_PEER_PER_S, &suppressed));
    assert_int_equal(reported + suppressed, 1000 - allowed);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(bad_peer_lines_are_throttled),
    cmocka_unit_test(durable_write_replaces_the_file_whole),
    cmocka_unit_test(durable_write_into_a_missing_directory_fails_with_errno),
};
TY_TEST_MAIN(tests)
