/* Unit tests for server/artifacts/ (artifact.c, artifact_local.c): the local, content-addressed
 * backend of the artifact store, in a temporary directory. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "archive.h"
#include "artifact.h"
#include "dir_manifest.h"
#include "shared.h"
#include "util.h"

struct fixture {
    char dir[64];
    struct artifact_store *st;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/ty-artifact-XXXXXX");
    if (f == NULL || mkdtemp(f->dir) == NULL)
        return -1;
    f->st = artifact_store_open_local(f->dir);
    *state = f;
    return f->st ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    artifact_store_close(f->st);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static int append(struct fixture *f, const char *key, int64_t off, const char *s, int64_t *size)
{
    return artifact_append(f->st, key, off, s, strlen(s), size);
}

static void appends_grow_the_staged_upload_only_at_its_end(void **state)
{
    struct fixture *f = *state;
    int64_t size = -1;
    assert_int_equal(f->st->ops->staged_size(f->st->be, "k1", &size), 0);
    assert_int_equal(size, 0);
    assert_int_equal(append(f, "k1", 0, "hello ", &size), 0);
    assert_int_equal(size, 6);
    assert_int_equal(append(f, "k1", 0, "hello ", &size), ARTIFACT_EOFFSET);
    assert_int_equal(size, 6);
    assert_int_equal(append(f, "k1", 7, "world", &size), ARTIFACT_EOFFSET);
    assert_int_equal(append(f, "k1", 6, "world", &size), 0);
    assert_int_equal(size, 11);
    assert_int_equal(f->st->ops->staged_size(f->st->be, "k1", &size), 0);
    assert_int_equal(size, 11);
}

static void commit_with_the_right_hash_stores_the_object_under_it(void **state)
{
    struct fixture *f = *state;
    int64_t size;
    assert_int_equal(append(f, "k2", 0, "hello world", &size), 0);
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    util_sha256_hex("hello world", 11, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "k2", sha, loc, &size), 0);
    assert_int_equal(size, 11);
    char want[128];
    snprintf(want, sizeof(want), "sha256/%.2s/%s", sha, sha);
    assert_string_equal(loc, want);
    int fd = f->st->ops->open_read(f->st->be, loc);
    assert_true(fd >= 0);
    char buf[32] = {0};
    assert_int_equal(read(fd, buf, sizeof(buf)), 11);
    close(fd);
    assert_string_equal(buf, "hello world");
    assert_int_equal(f->st->ops->staged_size(f->st->be, "k2", &size), 0);
    assert_int_equal(size, 0);
    assert_int_equal(f->st->ops->remove(f->st->be, loc), 0);
    assert_int_equal(f->st->ops->open_read(f->st->be, loc), ARTIFACT_ENOTFOUND);
}

static void commit_with_a_wrong_hash_discards_the_staging(void **state)
{
    struct fixture *f = *state;
    int64_t size;
    assert_int_equal(append(f, "k3", 0, "hello world", &size), 0);
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    util_sha256_hex("hello worle", 11, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "k3", sha, loc, &size), ARTIFACT_ECORRUPT);
    assert_string_equal(loc, "");
    assert_int_equal(f->st->ops->staged_size(f->st->be, "k3", &size), 0);
    assert_int_equal(size, 0);
    assert_int_equal(f->st->ops->commit(f->st->be, "k3", sha, loc, &size), ARTIFACT_ENOTFOUND);
}

/* An append fed in small pieces across several of the backend's blocks, and one dropped halfway
 * (a chunk that failed its checksum, a request cut mid-body): the dropped bytes leave no trace,
 * in the file or in the running hash, and the upload goes on from where it stood. */
static void streamed_appends_keep_or_drop_their_bytes_whole(void **state)
{
    struct fixture *f = *state;
    size_t n = 5 * 1024 * 1024 / 2 + 123, piece = 7001;
    char *all = malloc(2 * n);
    assert_non_null(all);
    for (size_t i = 0; i < 2 * n; i++)
        all[i] = (char)(i * 7 + i / 65536);
    struct artifact_append *ap = NULL;
    int64_t size = -1;
    assert_int_equal(f->st->ops->append_begin(f->st->be, "ks", 0, &ap, &size), 0);
    for (size_t off = 0; off < n; off += piece)
        assert_int_equal(f->st->ops->append_data(ap, all + off, n - off < piece ? n - off : piece),
                         0);
    assert_int_equal(f->st->ops->append_end(ap, 1, &size), 0);
    assert_int_equal(size, (int64_t)n);

    assert_int_equal(f->st->ops->append_begin(f->st->be, "ks", (int64_t)n, &ap, &size), 0);
    assert_int_equal(f->st->ops->append_data(ap, "garbage that must not stay", 26), 0);
    size_t junk_len = 3 * 1024 * 1024;
    char *junk = malloc(junk_len);
    assert_non_null(junk);
    memset(junk, 'x', junk_len);
    assert_int_equal(f->st->ops->append_data(ap, junk, junk_len), 0);
    free(junk);
    assert_int_equal(f->st->ops->append_end(ap, 0, &size), 0);
    assert_int_equal(size, (int64_t)n);
    assert_int_equal(f->st->ops->staged_size(f->st->be, "ks", &size), 0);
    assert_int_equal(size, (int64_t)n);

    assert_int_equal(artifact_append(f->st, "ks", (int64_t)n, all + n, n, &size), 0);
    assert_int_equal(size, (int64_t)(2 * n));
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    util_sha256_hex(all, 2 * n, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "ks", sha, loc, &size), 0);
    assert_int_equal(size, (int64_t)(2 * n));
    free(all);
}

/* While an append is open, every other call on its upload is told it is busy at once (it does
 * not wait: both requests may be served by one HTTP thread); once it ends, they go through. */
static void an_open_append_makes_other_calls_on_its_upload_busy(void **state)
{
    struct fixture *f = *state;
    struct artifact_append *ap = NULL, *other = NULL;
    int64_t size = -1;
    assert_int_equal(f->st->ops->append_begin(f->st->be, "kb", 0, &ap, &size), 0);
    assert_int_equal(f->st->ops->append_data(ap, "hello", 5), 0);
    assert_int_equal(f->st->ops->append_begin(f->st->be, "kb", 0, &other, &size), ARTIFACT_EBUSY);
    assert_null(other);
    assert_int_equal(f->st->ops->staged_size(f->st->be, "kb", &size), ARTIFACT_EBUSY);
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    util_sha256_hex("hello", 5, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "kb", sha, loc, &size), ARTIFACT_EBUSY);
    assert_int_equal(artifact_append(f->st, "other", 0, "x", 1, &size), 0);
    assert_int_equal(f->st->ops->append_end(ap, 1, &size), 0);
    assert_int_equal(f->st->ops->staged_size(f->st->be, "kb", &size), 0);
    assert_int_equal(size, 5);
    assert_int_equal(f->st->ops->commit(f->st->be, "kb", sha, loc, &size), 0);
}

/* Appends from page-aligned buffers at block-aligned offsets go (where the filesystem takes it)
 * through O_DIRECT, their unaligned tails and other appends through the page cache: the stored
 * object is still exactly the bytes sent, in order. */
static void aligned_and_unaligned_appends_store_the_same_bytes(void **state)
{
    struct fixture *f = *state;
    size_t n = 5 * 4096 + 100;
    char *all = malloc(3 * n), *aligned = NULL;
    assert_non_null(all);
    assert_int_equal(posix_memalign((void **)&aligned, 4096, n), 0);
    for (size_t i = 0; i < 3 * n; i++)
        all[i] = (char)(i * 131 + i / 4096);
    int64_t size = -1;
    memcpy(aligned, all, 2 * 4096);
    assert_int_equal(artifact_append(f->st, "kd", 0, aligned, 2 * 4096, &size), 0);
    memcpy(aligned, all + 2 * 4096, n);
    assert_int_equal(artifact_append(f->st, "kd", 2 * 4096, aligned, n, &size), 0);
    int64_t off = 2 * 4096 + (int64_t)n;
    assert_int_equal(size, off);
    assert_int_equal(artifact_append(f->st, "kd", off, all + off, 3 * n - (size_t)off, &size), 0);
    assert_int_equal(size, (int64_t)(3 * n));
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    util_sha256_hex(all, 3 * n, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "kd", sha, loc, &size), 0);
    int fd = f->st->ops->open_read(f->st->be, loc);
    assert_true(fd >= 0);
    char *back = malloc(3 * n + 1);
    assert_non_null(back);
    assert_int_equal(read(fd, back, 3 * n + 1), (ssize_t)(3 * n));
    close(fd);
    assert_memory_equal(back, all, 3 * n);
    free(back);
    free(aligned);
    free(all);
}

/* The chunk checksum of uploads (X-Chunk-CRC32C): the standard check values, and the same
 * result whole or in pieces of every alignment (the 8-byte steps and the byte tail). */
static void crc32c_matches_the_standard_and_extends_in_pieces(void **state)
{
    (void)state;
    assert_int_equal(util_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(util_crc32c(0, "", 0), 0);
    unsigned char zeros[32] = {0};
    assert_int_equal(util_crc32c(0, zeros, sizeof(zeros)), 0x8a9136aau);
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 31 + 7);
    uint32_t whole = util_crc32c(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= 17; cut++) {
        uint32_t c = util_crc32c(0, buf, cut);
        assert_int_equal(util_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
    }
    buf[500] ^= 1;
    assert_int_not_equal(util_crc32c(0, buf, sizeof(buf)), whole);
}

static void keys_locations_and_hashes_are_validated(void **state)
{
    struct fixture *f = *state;
    int64_t size;
    assert_int_equal(append(f, "../escape", 0, "x", &size), ARTIFACT_EINVAL);
    assert_int_equal(append(f, "a/b", 0, "x", &size), ARTIFACT_EINVAL);
    assert_int_equal(append(f, "", 0, "x", &size), ARTIFACT_EINVAL);
    assert_true(artifact_key_valid("12-1-3-node_a.b"));
    assert_false(artifact_sha256_valid("ABC"));
    assert_int_equal(f->st->ops->open_read(f->st->be, "sha256/../../etc/passwd"), ARTIFACT_EINVAL);
    char loc[ARTIFACT_LOCATION_MAX];
    assert_int_equal(f->st->ops->commit(f->st->be, "k4", "nothex", loc, &size), ARTIFACT_EINVAL);
}

static void tar_members_end_before_the_end_of_archive_blocks(void **state)
{
    struct fixture *f = *state;
    char cmd[512], path[128];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && mkdir d && printf 'abc' > d/a && head -c 600 /dev/zero > d/b && "
             "tar --format=gnu -cf t.tar -C d a b && printf 'not a tar at all' > bad",
             f->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/t.tar", f->dir);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    int64_t len = -1;
    assert_int_equal(artifact_tar_data_len(fd, &len), 0);
    assert_int_equal(len, 512 + 512 + 512 + 1024); /* a: header + 1 block; b: header + 2 */
    close(fd);
    snprintf(path, sizeof(path), "%s/bad", f->dir);
    fd = open(path, O_RDONLY);
    assert_int_equal(artifact_tar_data_len(fd, &len), -1);
    close(fd);
}

static void storage_paths_are_absolute_normalised_and_allowed(void **state)
{
    (void)state;
    char why[256];
    const char *allow = "/mnt/shared:/srv/ckpt/";
    assert_int_equal(shared_path_check(allow, "/mnt/shared", why, sizeof(why)), 0);
    assert_int_equal(shared_path_check(allow, "/mnt/shared/runs/a", why, sizeof(why)), 0);
    assert_int_equal(shared_path_check(allow, "/srv/ckpt/x", why, sizeof(why)), 0);
    const char *bad[] = {"/mnt/shared/../etc", "/mnt/shared/./a", "/mnt/shared//a",
                         "/mnt/shared/a/",     "/mnt/shared/..",  "/mnt/shared/a/."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(shared_path_check(allow, bad[i], why, sizeof(why)), -1);
        assert_non_null(strstr(why, "normalised"));
    }
    assert_int_equal(shared_path_check(allow, "/mnt/sharedx", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "under a directory this server allows"));
    assert_int_equal(shared_path_check(allow, "/etc", why, sizeof(why)), -1);
    assert_int_equal(shared_path_check(allow, "s3://bucket/x", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "absolute"));
    assert_int_equal(shared_path_check(NULL, "/mnt/shared", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "--storage-path-allow"));
    assert_int_equal(shared_path_check("", "/mnt/shared", why, sizeof(why)), -1);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void the_manifest_digest_covers_names_and_contents(void **state)
{
    struct fixture *f = *state;
    char d[128], sub[160], sha1[65], sha2[65];
    int64_t bytes = 0, files = 0;
    snprintf(d, sizeof(d), "%s/part", f->dir);
    snprintf(sub, sizeof(sub), "%s/sub", d);
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file(d, "a.txt", "alpha");
    write_file(sub, "b.bin", "beta!");
    assert_int_equal(dir_manifest(d, sha1, &bytes, &files), 0);
    assert_int_equal(bytes, 10);
    assert_int_equal(files, 2);
    assert_int_equal(dir_manifest(d, sha2, &bytes, &files), 0);
    assert_string_equal(sha1, sha2);
    write_file(sub, "b.bin", "betA!"); /* same size, one byte differs */
    assert_int_equal(dir_manifest(d, sha2, &bytes, &files), 0);
    assert_string_not_equal(sha1, sha2);
    write_file(sub, "b.bin", "beta!");
    char from[256], to[256];
    snprintf(from, sizeof(from), "%s/a.txt", d);
    snprintf(to, sizeof(to), "%s/c.txt", d);
    assert_int_equal(rename(from, to), 0);
    assert_int_equal(dir_manifest(d, sha2, &bytes, &files), 0);
    assert_string_not_equal(sha1, sha2);
    assert_int_equal(rename(to, from), 0);
    assert_int_equal(dir_manifest(d, sha2, &bytes, &files), 0);
    assert_string_equal(sha1, sha2);
    snprintf(to, sizeof(to), "%s/missing", f->dir);
    assert_int_equal(dir_manifest(to, sha2, &bytes, &files), -1);
}

static void removal_takes_only_part_directories_under_the_allow_list(void **state)
{
    struct fixture *f = *state;
    char ck[160], part[192], cmd[256];
    snprintf(ck, sizeof(ck), "%s/sp/job-1/attempt-1/checkpoint-2", f->dir);
    snprintf(part, sizeof(part), "%s/node-a", ck);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/sub'", part);
    assert_int_equal(system(cmd), 0);
    write_file(part, "sub/x", "x");
    assert_int_equal(shared_remove(f->dir, ck), -1); /* not a part directory */
    assert_int_equal(shared_remove("/nonexistent-ty", part), -1);
    struct stat sb;
    assert_int_equal(stat(part, &sb), 0);
    int fd = shared_open_tar(f->dir, part);
    assert_true(fd >= 0);
    int64_t len = 0;
    assert_int_equal(artifact_tar_data_len(fd, &len), 0);
    assert_true(len > 0);
    close(fd);
    assert_int_equal(shared_open_tar("/nonexistent-ty", part), -1);
    assert_int_equal(shared_remove(f->dir, part), 0);
    assert_int_equal(stat(part, &sb), -1);
    char job[128];
    snprintf(job, sizeof(job), "%s/sp/job-1", f->dir);
    assert_int_equal(stat(job, &sb), -1); /* emptied parents go too, up to the job's */
    snprintf(job, sizeof(job), "%s/sp", f->dir);
    assert_int_equal(stat(job, &sb), 0);
    assert_int_equal(shared_remove(f->dir, part), 0); /* already gone */
}

/* A job's workers own the layout's directories: one swapped for a symbolic link (here into
 * another directory under the same allowed root, whose real path passes any prefix check) is
 * neither packed nor emptied: every component below the allowed prefix is opened without
 * following links. */
static void a_symbolic_link_in_a_part_path_is_never_followed(void **state)
{
    struct fixture *f = *state;
    char elsewhere[160], part[224], cmd[512], link[160];
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere/job-2", f->dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/attempt-1/checkpoint-1/node-a' '%s/sp'", elsewhere,
             f->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(part, sizeof(part), "%s/attempt-1/checkpoint-1/node-a", elsewhere);
    write_file(part, "keep", "not the job's to delete");
    snprintf(link, sizeof(link), "%s/sp/job-2", f->dir);
    assert_int_equal(symlink(elsewhere, link), 0);
    snprintf(part, sizeof(part), "%s/attempt-1/checkpoint-1/node-a", link);
    assert_int_equal(shared_open_dir(f->dir, part), -1);
    assert_int_equal(shared_open_tar(f->dir, part), -1);
    assert_int_equal(shared_remove(f->dir, part), -1);
    snprintf(part, sizeof(part), "%s/attempt-1/checkpoint-1/node-a/keep", elsewhere);
    struct stat sb;
    assert_int_equal(stat(part, &sb), 0);
    /* The same directory reached without the link is opened. */
    snprintf(part, sizeof(part), "%s/attempt-1/checkpoint-1/node-a", elsewhere);
    int fd = shared_open_dir(f->dir, part);
    assert_true(fd >= 0);
    close(fd);
}

/* The SHA-256 runs across appends; a store opened afresh on the same directory (a server
 * restart) re-hashes what is staged, and so does one whose staging grew behind its back (another
 * server on the same directory): the commit checks the bytes on disk either way. */
static void the_running_hash_survives_a_restart_and_follows_the_disk(void **state)
{
    struct fixture *f = *state;
    int64_t size;
    char sha[65], loc[ARTIFACT_LOCATION_MAX];
    assert_int_equal(append(f, "r1", 0, "hello ", &size), 0);
    artifact_store_close(f->st);
    f->st = artifact_store_open_local(f->dir);
    assert_non_null(f->st);
    assert_int_equal(append(f, "r1", 6, "world", &size), 0);
    util_sha256_hex("hello world", 11, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "r1", sha, loc, &size), 0);
    assert_int_equal(size, 11);

    assert_int_equal(append(f, "r2", 0, "abc", &size), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/uploads/r2", f->dir);
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "def", 3), 3);
    close(fd);
    assert_int_equal(append(f, "r2", 6, "ghi", &size), 0);
    util_sha256_hex("abcdefghi", 9, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "r2", sha, loc, &size), 0);

    assert_int_equal(append(f, "r3", 0, "abc", &size), 0);
    snprintf(path, sizeof(path), "%s/uploads/r3", f->dir);
    fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "X", 1), 1);
    close(fd);
    util_sha256_hex("abc", 3, sha);
    assert_int_equal(f->st->ops->commit(f->st->be, "r3", sha, loc, &size), ARTIFACT_ECORRUPT);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(storage_paths_are_absolute_normalised_and_allowed),
    cmocka_unit_test(crc32c_matches_the_standard_and_extends_in_pieces),
    cmocka_unit_test_setup_teardown(streamed_appends_keep_or_drop_their_bytes_whole, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(an_open_append_makes_other_calls_on_its_upload_busy, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(aligned_and_unaligned_appends_store_the_same_bytes, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(the_manifest_digest_covers_names_and_contents, setup, teardown),
    cmocka_unit_test_setup_teardown(a_symbolic_link_in_a_part_path_is_never_followed, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(removal_takes_only_part_directories_under_the_allow_list, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(tar_members_end_before_the_end_of_archive_blocks, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(appends_grow_the_staged_upload_only_at_its_end, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(commit_with_the_right_hash_stores_the_object_under_it, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(commit_with_a_wrong_hash_discards_the_staging, setup, teardown),
    cmocka_unit_test_setup_teardown(keys_locations_and_hashes_are_validated, setup, teardown),
    cmocka_unit_test_setup_teardown(the_running_hash_survives_a_restart_and_follows_the_disk, setup,
                                    teardown),
};

TY_TEST_MAIN(tests)
