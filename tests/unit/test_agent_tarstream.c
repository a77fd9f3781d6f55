/* Unit tests for worker/agent/tarstream.c: a checkpoint directory as a tar stream made on the
 * fly. GNU tar reads what it makes (long names, sub-directories, empty files, symbolic links),
 * any offset reads the same bytes as one pass, and a file gone since the walk is an error that
 * names it. Each test works in a fresh directory under $TMPDIR (or /tmp), removed at the end. */
#include "ty_test.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *scratch(void)
{
    const char *t = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof(tmpl), "%s/ty-tar-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(tmpl));
    char *p = strdup(tmpl);
    assert_non_null(p);
    return p;
}

static void put(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Reads all of path into buf (cap bytes): the length. */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static const char LONG_NAME[] = "a-name-of-more-than-one-hundred-bytes-which-needs-a-gnu-long-"
                                "link-member-before-its-header-0123456789-abcdefghij.bin";

/* root/ck: a.txt, empty, link -> a.txt, sub/b.bin (1000 bytes), sub/<LONG_NAME>. */
static void make_tree(const char *root, char *ck, size_t n)
{
    char p[1024];
    snprintf(ck, n, "%s/ck", root);
    assert_int_equal(mkdir(ck, 0755), 0);
    snprintf(p, sizeof(p), "%s/a.txt", ck);
    put(p, "hello", 5);
    snprintf(p, sizeof(p), "%s/empty", ck);
    put(p, "", 0);
    snprintf(p, sizeof(p), "%s/link", ck);
    assert_int_equal(symlink("a.txt", p), 0);
    snprintf(p, sizeof(p), "%s/sub", ck);
    assert_int_equal(mkdir(p, 0755), 0);
    char body[1000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)(i * 7);
    snprintf(p, sizeof(p), "%s/sub/b.bin", ck);
    put(p, body, sizeof(body));
    snprintf(p, sizeof(p), "%s/sub/%s", ck, LONG_NAME);
    put(p, "long", 4);
}

/* The whole stream, read in pieces of `step` bytes (malloc'd; *len its length). */
static char *read_all(struct agent_tar *t, size_t step, size_t *len)
{
    size_t total = (size_t)agent__tar_size(t);
    char *buf = malloc(total + 1);
    assert_non_null(buf);
    size_t off = 0;
    while (off < total) {
        ssize_t r = agent__tar_read(t, (int64_t)off, buf + off, step);
        assert_true(r > 0);
        off += (size_t)r;
    }
    assert_int_equal(agent__tar_read(t, (int64_t)total, buf, step), 0);
    *len = total;
    return buf;
}

static void agent_tarstream_gnu_tar_unpacks_it_and_any_offset_reads_the_same(void **state)
{
    (void)state;
    char *root = scratch(), ck[600], p[1200], out[700], buf[2048];
    make_tree(root, ck, sizeof(ck));
    struct agent_tar *t = agent__tar_open(ck);
    assert_non_null(t);
    assert_int_equal(agent__tar_files(t), 4);
    assert_int_equal(agent__tar_size(t) % 512, 0);
    size_t len = 0, len2 = 0;
    char *whole = read_all(t, 1 << 20, &len);
    char *pieces = read_all(t, 777, &len2); /* odd steps: every boundary crossed mid-block */
    assert_int_equal(len, len2);
    assert_memory_equal(whole, pieces, len);
    struct agent_tar *again = agent__tar_open(ck); /* a new walk: the same bytes (resumable) */
    size_t len3 = 0;
    char *third = read_all(again, 4096, &len3);
    assert_int_equal(len, len3);
    assert_memory_equal(whole, third, len);

    snprintf(p, sizeof(p), "%s/part.tar", root);
    put(p, whole, len);
    snprintf(out, sizeof(out), "%s/out", root);
    assert_int_equal(mkdir(out, 0755), 0);
    char cmd[2000];
    snprintf(cmd, sizeof(cmd), "tar -xf '%s' -C '%s'", p, out);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/a.txt", out);
    assert_int_equal(slurp(p, buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "hello", 5);
    snprintf(p, sizeof(p), "%s/empty", out);
    assert_int_equal(slurp(p, buf, sizeof(buf)), 0);
    snprintf(p, sizeof(p), "%s/sub/b.bin", out);
    assert_int_equal(slurp(p, buf, sizeof(buf)), 1000);
    assert_int_equal((unsigned char)buf[999], (unsigned char)(999 * 7));
    snprintf(p, sizeof(p), "%s/sub/%s", out, LONG_NAME);
    assert_int_equal(slurp(p, buf, sizeof(buf)), 4);
    snprintf(p, sizeof(p), "%s/link", out);
    ssize_t n = readlink(p, buf, sizeof(buf) - 1);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "a.txt", 5);

    free(whole);
    free(pieces);
    free(third);
    agent__tar_free(t);
    agent__tar_free(again);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(root);
}

static void agent_tarstream_a_file_gone_since_the_walk_is_an_error_naming_it(void **state)
{
    (void)state;
    char *root = scratch(), ck[600], p[1200];
    make_tree(root, ck, sizeof(ck));
    struct agent_tar *t = agent__tar_open(ck);
    assert_non_null(t);
    snprintf(p, sizeof(p), "%s/sub/b.bin", ck);
    assert_int_equal(unlink(p), 0);
    char *buf = malloc((size_t)agent__tar_size(t));
    assert_non_null(buf);
    assert_int_equal(agent__tar_read(t, 0, buf, (size_t)agent__tar_size(t)), -1);
    assert_non_null(strstr(agent__tar_error(t), "file sub/b.bin"));
    free(buf);
    agent__tar_free(t);
    snprintf(p, sizeof(p), "%s/missing", root);
    assert_null(agent__tar_open(p));
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(root);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_tarstream_gnu_tar_unpacks_it_and_any_offset_reads_the_same),
    cmocka_unit_test(agent_tarstream_a_file_gone_since_the_walk_is_an_error_naming_it),
};

TY_TEST_MAIN(tests)
