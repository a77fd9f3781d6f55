/* Unit tests for worker/agent/checkpoint.c: the agent taking over checkpoint directories. Each
 * test works in a fresh directory under $TMPDIR (or /tmp), removed at the end. */
#include "ty_test.h"

#include <errno.h>
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

/* A fresh scratch directory (malloc'd). */
static char *scratch(void)
{
    const char *t = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof(tmpl), "%s/ty-ckpt-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(tmpl));
    char *p = strdup(tmpl);
    assert_non_null(p);
    return p;
}

static void scratch_free(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static char *path2(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static void put(const char *dir, const char *name, const char *text)
{
    char *p = path2(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    free(p);
}

/* Contents of dir/name, or "" when missing (static buffer). */
static const char *get(const char *dir, const char *name)
{
    static char buf[256];
    char *p = path2(dir, name);
    FILE *f = fopen(p, "r");
    free(p);
    buf[0] = '\0';
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *mkdir_in(const char *dir, const char *name)
{
    char *p = path2(dir, name);
    assert_int_equal(mkdir(p, 0755), 0);
    return p;
}

static void agent_checkpoint_path_layout(void **state)
{
    (void)state;
    char *p = agent_checkpoint_path("/data", "42", 1, 3);
    assert_string_equal(p, "/data/checkpoints/42/1/3");
    free(p);
    assert_null(agent_checkpoint_path("/data", "../x", 1, 3));
    assert_null(agent_checkpoint_path("/data", "42", 1, 0));
    assert_null(agent_checkpoint_path("/data", "42", -1, 1));
}

static void agent_checkpoint_src_must_be_a_readable_absolute_directory(void **state)
{
    (void)state;
    char *root = scratch();
    char err[512];
    assert_int_equal(agent_checkpoint_check_src(root, err, sizeof(err)), 0);
    assert_int_equal(agent_checkpoint_check_src("rel/dir", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'rel/dir' is not an absolute path"));
    char *missing = path2(root, "nope");
    assert_int_equal(agent_checkpoint_check_src(missing, err, sizeof(err)), -1);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, "is not a directory the worker can read"));
    put(root, "file", "x");
    char *file = path2(root, "file");
    /* A file and a missing path get the same reason: no oracle through the agent's privileges. */
    char err2[512] = "";
    assert_int_equal(agent_checkpoint_check_src(file, err2, sizeof(err2)), -1);
    assert_non_null(strstr(err2, "is not a directory the worker can read"));
    free(missing);
    free(file);
    scratch_free(root);
}

static void agent_checkpoint_merge_moves_files_and_keeps_subdirectories(void **state)
{
    (void)state;
    char *root = scratch();
    char *src = mkdir_in(root, "src");
    char *sub = mkdir_in(src, "sub");
    put(src, "model.pt", "weights");
    put(sub, "opt.bin", "0123456789");
    char *link = path2(src, "link");
    assert_int_equal(symlink("/etc/passwd", link), 0);
    char *dest = path2(root, "data/checkpoints/7/1/1");
    int64_t bytes = -1;
    char err[512] = "";
    char *model = path2(src, "model.pt");
    struct stat st, before;
    assert_int_equal(stat(model, &before), 0);
    int rc = agent_checkpoint_merge(src, dest, 0, &bytes, err, sizeof(err));
    if (rc != 0)
        fail_msg("merge failed: %s", err);
    assert_string_equal(get(dest, "model.pt"), "weights");
    assert_string_equal(get(dest, "sub/opt.bin"), "0123456789");
    char *dlink = path2(dest, "link");
    assert_int_equal(lstat(dlink, &st), -1); /* symlinks are skipped */
    assert_int_equal((int)bytes, 7 + 10);
    /* Moved, not copied: the same inode, now private to the agent; the worker's directory keeps
     * its subdirectories and no files. */
    char *dmodel = path2(dest, "model.pt");
    assert_int_equal(stat(dmodel, &st), 0);
    assert_true(st.st_ino == before.st_ino && st.st_dev == before.st_dev);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(access(model, F_OK), -1);
    assert_int_equal(stat(sub, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    char *sub_file = path2(sub, "opt.bin");
    assert_int_equal(access(sub_file, F_OK), -1);
    /* The worker may now delete its directory: the staged files stay. */
    scratch_free(src);
    assert_string_equal(get(dest, "model.pt"), "weights");
    free(model);
    free(dmodel);
    free(sub_file);
    free(sub);
    free(link);
    free(dlink);
    free(dest);
    scratch_free(root);
}

/* Ranks 0 and 1 of one node both write "common.txt" and a file of their own; `first` reports
 * first. Rank 0's common.txt wins either way. */
static void merge_two_ranks(int first)
{
    char *root = scratch();
    char *s0 = mkdir_in(root, "r0"), *s1 = mkdir_in(root, "r1");
    put(s0, "common.txt", "zero");
    put(s0, "rank-0.txt", "a");
    put(s1, "common.txt", "one!");
    put(s1, "rank-1.txt", "bb");
    char *dest = path2(root, "ck/1");
    char err[512] = "";
    int64_t b0 = -1, b1 = -1;
    const char *srcs[2] = {s0, s1};
    int64_t *bs[2] = {&b0, &b1};
    for (int i = 0; i < 2; i++) {
        int rank = i == 0 ? first : 1 - first;
        if (agent_checkpoint_merge(srcs[rank], dest, rank, bs[rank], err, sizeof(err)) != 0)
            fail_msg("merge of rank %d failed: %s", rank, err);
    }
    assert_string_equal(get(dest, "common.txt"), "zero");
    assert_string_equal(get(dest, "rank-0.txt"), "a");
    assert_string_equal(get(dest, "rank-1.txt"), "bb");
    int64_t last = first == 0 ? b1 : b0;
    assert_int_equal((int)last, 4 + 1 + 2); /* the merged directory after the second rank */
    /* A resent copy of the same rank changes nothing. */
    int64_t again = -1;
    assert_int_equal(agent_checkpoint_merge(s1, dest, 1, &again, err, sizeof(err)), 0);
    assert_string_equal(get(dest, "common.txt"), "zero");
    assert_int_equal((int)again, 7);
    free(s0);
    free(s1);
    free(dest);
    scratch_free(root);
}

static void agent_checkpoint_lower_rank_wins_when_it_reports_first(void **state)
{
    (void)state;
    merge_two_ranks(0);
}

static void agent_checkpoint_lower_rank_wins_when_it_reports_second(void **state)
{
    (void)state;
    merge_two_ranks(1);
}

/* A checkpoint on another filesystem than the agent's data (tmpfs /dev/shm when it is one) is
 * copied instead of moved, with the same outcome for the worker. */
static void agent_checkpoint_from_another_filesystem_is_copied_and_taken(void **state)
{
    (void)state;
    char *root = scratch();
    char tmpl[] = "/dev/shm/ty-ckpt-src-XXXXXX";
    char *src = mkdtemp(tmpl) ? strdup(tmpl) : mkdir_in(root, "src");
    put(src, "model.pt", "weights on tmpfs");
    char *dest = path2(root, "ck/1");
    char err[512] = "";
    int64_t bytes = -1;
    if (agent_checkpoint_merge(src, dest, 0, &bytes, err, sizeof(err)) != 0)
        fail_msg("merge failed: %s", err);
    assert_string_equal(get(dest, "model.pt"), "weights on tmpfs");
    assert_int_equal((int)bytes, 16);
    char *model = path2(src, "model.pt");
    assert_int_equal(access(model, F_OK), -1);
    struct stat st;
    char *dmodel = path2(dest, "model.pt");
    assert_int_equal(stat(dmodel, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    rmdir(src);
    free(model);
    free(dmodel);
    free(src);
    free(dest);
    scratch_free(root);
}

static void agent_checkpoint_unreadable_source_is_an_error_naming_it(void **state)
{
    (void)state;
    char *root = scratch();
    char *dest = path2(root, "ck/1");
    char *missing = path2(root, "gone");
    char err[512] = "";
    int64_t bytes = 0;
    assert_int_equal(agent_checkpoint_merge(missing, dest, 0, &bytes, err, sizeof(err)), -1);
    assert_non_null(strstr(err, missing));
    free(dest);
    free(missing);
    scratch_free(root);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_checkpoint_path_layout),
    cmocka_unit_test(agent_checkpoint_src_must_be_a_readable_absolute_directory),
    cmocka_unit_test(agent_checkpoint_merge_moves_files_and_keeps_subdirectories),
    cmocka_unit_test(agent_checkpoint_lower_rank_wins_when_it_reports_first),
    cmocka_unit_test(agent_checkpoint_lower_rank_wins_when_it_reports_second),
    cmocka_unit_test(agent_checkpoint_from_another_filesystem_is_copied_and_taken),
    cmocka_unit_test(agent_checkpoint_unreadable_source_is_an_error_naming_it),
};

TY_TEST_MAIN(tests)
