/* Worker isolation (docs/decisions.md "Workers run under uids of their own"): which uid a worker
 * runs as (--run-as), its private temporary directory, the modes of the agent's data directory,
 * read access to a checkpoint it resumes from, and the clean-up once a uid is free again (every
 * process left under it killed, its temporary directories removed, its grants revoked).
 *
 * With --run-as auto (the default) a root agent runs each job's workers on this node under a uid
 * of the job's own, from --worker-uids; an agent that is not root runs them as itself. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Set-up                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Parses "LO-HI" (uids, LO <= HI, neither 0). 0 or -1. */
static int parse_uid_range(const char *s, uid_t *lo, uid_t *hi)
{
    int64_t l = 0, h = 0;
    const char *dash = s ? strchr(s, '-') : NULL;
    if (!dash || dash == s)
        return -1;
    char left[32];
    size_t n = (size_t)(dash - s);
    if (n >= sizeof(left))
        return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    if (util_parse_int64(left, 1, 4294967294LL, &l) != 0 ||
        util_parse_int64(dash + 1, 1, 4294967294LL, &h) != 0 || l > h)
        return -1;
    *lo = (uid_t)l;
    *hi = (uid_t)h;
    return 0;
}

/* chmod that logs; for directories of the agent's own. */
static void set_mode(const char *path, mode_t mode)
{
    if (chmod(path, mode) != 0)
        TY_WARN("agent", "cannot chmod %s to %o: %s", path, (unsigned)mode, strerror(errno));
}

/* Copies the regular files and directories under src into dest (created 0755, files 0644), for
 * workers that cannot read src. Returns 0, or -1 (logged). */
static int copy_tree_public(const char *src, const char *dest)
{
    if (util_mkdir_p(dest, 0755) != 0 || chmod(dest, 0755) != 0) {
        TY_ERROR("agent", "cannot create %s: %s", dest, strerror(errno));
        return -1;
    }
    DIR *d = opendir(src);
    if (!d) {
        TY_ERROR("agent", "cannot read %s: %s", src, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char from[4200], to[4200];
        struct stat st;
        snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", dest, e->d_name);
        if (lstat(from, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            rc = copy_tree_public(from, to);
        } else if (S_ISREG(st.st_mode)) {
            size_t len;
            char *data = util_read_file(from, &len);
            if (!data || util_write_file_durable(to, data, len, 0644) != 0) {
                TY_ERROR("agent", "cannot copy %s to %s: %s", from, to, strerror(errno));
                rc = -1;
            }
            free(data);
        }
    }
    closedir(d);
    return rc;
}

/* Workers under uids of their own may not be able to read --python-path (a clone under /root):
 * the agent publishes a copy in <data>/python (readable by all; the data directory is 0711) and
 * puts that on the workers' PYTHONPATH instead. */
static int publish_python_path(struct agent *a)
{
    const char *src = a->cfg->python_path;
    if (!src || !*src)
        return 0;
    char dest[4200];
    snprintf(dest, sizeof(dest), "%s/python", a->data_dir);
    if (copy_tree_public(src, dest) != 0)
        return -1;
    char *copy = strdup(dest);
    if (!copy)
        return -1;
    TY_INFO("agent", "workers import trainyard from %s (a copy of %s)", dest, src);
    free(a->cfg->python_path);
    a->cfg->python_path = copy;
    return 0;
}

int agent__isolation_init(struct agent *a)
{
    const char *run_as = a->cfg->run_as ? a->cfg->run_as : "auto";
    a->uid_lo = a->uid_hi = AGENT_NO_UID;
    a->run_as_user[0] = '\0';
    if (strcmp(run_as, "none") == 0 || (strcmp(run_as, "auto") == 0 && geteuid() != 0)) {
        TY_INFO("agent", "workers run as the agent's own user (uid %ld)", (long)geteuid());
    } else if (geteuid() != 0) {
        TY_ERROR("agent", "--run-as %s needs an agent running as root", run_as);
        return -1;
    } else if (strcmp(run_as, "auto") == 0 || strcmp(run_as, "uids") == 0) {
        if (parse_uid_range(a->cfg->worker_uids, &a->uid_lo, &a->uid_hi) != 0) {
            TY_ERROR("agent", "--worker-uids must be LO-HI, 1 <= LO <= HI < 4294967295");
            return -1;
        }
        TY_INFO("agent", "each job's workers run under a uid of their own from %lu-%lu",
                (unsigned long)a->uid_lo, (unsigned long)a->uid_hi);
    } else {
        struct passwd *pw = getpwnam(run_as);
        if (!pw || pw->pw_uid == 0) {
            TY_ERROR("agent", "--run-as %s: no such user (or root)", run_as);
            return -1;
        }
        a->uid_lo = a->uid_hi = pw->pw_uid;
        a->run_as_gid = pw->pw_gid;
        snprintf(a->run_as_user, sizeof(a->run_as_user), "%s", run_as);
        TY_INFO("agent", "workers run as %s (uid %ld): jobs are not isolated from each other",
                run_as, (long)pw->pw_uid);
    }
    /* Workers reach report.sock through the data directory (search only); everything else in it
     * is the agent's: logs and checkpoints 0700 (a resumed checkpoint is granted per job). */
    char path[4200];
    set_mode(a->data_dir, 0711);
    snprintf(path, sizeof(path), "%s/logs", a->data_dir);
    set_mode(path, 0700);
    snprintf(path, sizeof(path), "%s/checkpoints", a->data_dir);
    if (util_mkdir_p(path, 0711) != 0) {
        TY_ERROR("agent", "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    set_mode(path, 0711);
    if (a->uid_lo == AGENT_NO_UID)
        return 0;
    char abs[4200], blocked[4200];
    if (!realpath(a->data_dir, abs)) {
        TY_ERROR("agent", "data directory %s: %s", a->data_dir, strerror(errno));
        return -1;
    }
    int reach = util_uid_can_reach(a->uid_lo, a->uid_lo, abs, blocked, sizeof(blocked));
    if (reach != 1) {
        if (reach == 0)
            TY_ERROR("agent",
                     "workers (uid %lu) cannot reach the data directory %s (%s is not searchable "
                     "by them), so they could not report; use a --data-dir they can reach (e.g. "
                     "under /var/lib)",
                     (unsigned long)a->uid_lo, abs, blocked);
        else
            TY_ERROR("agent", "could not check whether workers can reach %s", abs);
        return -1;
    }
    return publish_python_path(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Uids                                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Whether a process of the host has uid among its real, effective, saved or filesystem uids. */
static bool uid_has_processes(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return true; /* cannot tell: keep the uid */
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        char *line = strstr(buf, "\nUid:");
        unsigned long ids[4];
        if (line && sscanf(line + 5, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4)
            for (int i = 0; i < 4; i++)
                found = found || ids[i] == (unsigned long)uid;
    }
    closedir(d);
    return found;
}

/* The uid lock directory (--uid-lock-dir), created 0755 when absent; -1 (logged) when it is not
 * a directory of root's that only root may write. */
static int lock_dir_open(const struct agent *a)
{
    const char *dir = a->cfg->uid_lock_dir;
    if (!dir || dir[0] != '/') {
        TY_ERROR("agent", "--uid-lock-dir must be an absolute path");
        return -1;
    }
    if (util_mkdir_p(dir, 0755) != 0 && errno != EEXIST) {
        TY_ERROR("agent", "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = agent__open_dir_nofollow(dir);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022) != 0) {
        TY_ERROR("agent",
                 "--uid-lock-dir %s must be a directory of root's that only root may "
                 "write (not a link)",
                 dir);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Reserves uid on this host for job_id: a flock on <uid-lock-dir>/uid-<uid>.lock (0600, root's),
 * taken only while no process of the uid is left (one of a crashed agent's workers would be).
 * 1 when reserved (added to a->uid_holds), 0 when another agent or process has it, -1 on
 * error. */
static int uid_try_hold(struct agent *a, uid_t uid, const char *job_id)
{
    int dfd = lock_dir_open(a);
    if (dfd < 0)
        return -1;
    char name[64];
    snprintf(name, sizeof(name), "uid-%lu.lock", (unsigned long)uid);
    int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    close(dfd);
    if (fd < 0) {
        TY_ERROR("agent", "cannot open %s/%s: %s", a->cfg->uid_lock_dir, name, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return 0;
    }
    if (uid_has_processes(uid)) {
        close(fd);
        return 0;
    }
    struct agent_uid_hold *h = calloc(1, sizeof(*h));
    if (!h) {
        close(fd);
        return -1;
    }
    h->uid = uid;
    h->fd = fd;
    snprintf(h->job_id, sizeof(h->job_id), "%s", job_id);
    h->next = a->uid_holds;
    a->uid_holds = h;
    return 1;
}

static struct agent_uid_hold *hold_of_uid(const struct agent *a, uid_t uid)
{
    for (struct agent_uid_hold *h = a->uid_holds; h; h = h->next)
        if (h->uid == uid)
            return h;
    return NULL;
}

void agent__uid_rehold(struct agent *a, const struct agent_worker *w)
{
    if (w->uid == AGENT_NO_UID || a->run_as_user[0] || hold_of_uid(a, w->uid))
        return;
    int dfd = lock_dir_open(a);
    char name[64];
    snprintf(name, sizeof(name), "uid-%lu.lock", (unsigned long)w->uid);
    int fd = dfd < 0 ? -1 : openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dfd >= 0)
        close(dfd);
    struct agent_uid_hold *h = fd >= 0 ? calloc(1, sizeof(*h)) : NULL;
    if (!h || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        TY_ERROR("agent", "cannot reserve uid %lu of re-adopted job %s again: %s",
                 (unsigned long)w->uid, w->job_id, h ? "another agent holds it" : strerror(errno));
        free(h);
        if (fd >= 0)
            close(fd);
        return;
    }
    h->uid = w->uid;
    h->fd = fd;
    snprintf(h->job_id, sizeof(h->job_id), "%s", w->job_id);
    h->next = a->uid_holds;
    a->uid_holds = h;
}

int agent__worker_credentials(struct agent *a, struct agent_worker *w)
{
    w->uid = w->gid = AGENT_NO_UID;
    if (a->uid_lo == AGENT_NO_UID)
        return 0;
    if (a->run_as_user[0]) {
        w->uid = a->uid_lo;
        w->gid = a->run_as_gid;
        return 0;
    }
    for (const struct agent_uid_hold *h = a->uid_holds; h; h = h->next) {
        if (strcmp(h->job_id, w->job_id) == 0) {
            w->uid = w->gid = h->uid;
            return 0;
        }
    }
    for (uid_t u = a->uid_lo;; u++) {
        int r = hold_of_uid(a, u) ? 0 : uid_try_hold(a, u, w->job_id);
        if (r == 1) {
            w->uid = w->gid = u;
            return 0;
        }
        if (r < 0) {
            errno = EIO;
            return -1;
        }
        if (u == a->uid_hi)
            break;
    }
    errno = EAGAIN;
    return -1;
}

const char *agent__uid_holder(const struct agent *a, uid_t uid)
{
    const struct agent_uid_hold *h = hold_of_uid(a, uid);
    return h ? h->job_id : NULL;
}

uid_t agent__uid_of_job(const struct agent *a, const char *job_id)
{
    for (const struct agent_uid_hold *h = a->uid_holds; h; h = h->next)
        if (strcmp(h->job_id, job_id) == 0)
            return h->uid;
    return AGENT_NO_UID;
}

void agent__uid_give(struct agent *a, uid_t uid, const char *job_id)
{
    struct agent_uid_hold *h = hold_of_uid(a, uid);
    if (h)
        snprintf(h->job_id, sizeof(h->job_id), "%s", job_id);
}

const char *agent__worker_user(const struct agent *a, const struct agent_worker *w, char *buf,
                               size_t len)
{
    if (w->uid == AGENT_NO_UID)
        return NULL;
    if (a->run_as_user[0])
        return a->run_as_user;
    snprintf(buf, len, "trainyard-%lu", (unsigned long)w->uid);
    return buf;
}

/* SIGKILLs every process of `uid` (a child that takes the uid and signals -1: the kernel then
 * picks exactly the processes that uid may signal, which are its own). Only for an agent
 * without cgroups, on a uid this host has reserved for the job (uid_try_hold). */
static void kill_uid(uid_t uid)
{
    pid_t p = fork();
    if (p == 0) {
        if (syscall(SYS_setgroups, 0, NULL) == 0 && syscall(SYS_setresgid, uid, uid, uid) == 0 &&
            syscall(SYS_setresuid, uid, uid, uid) == 0)
            kill(-1, SIGKILL);
        _exit(0);
    }
    if (p > 0)
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
            ;
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                        */
/* ------------------------------------------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    if (remove(path) != 0 && errno != ENOENT)
        TY_DEBUG("proc", "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void agent__remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void agent__forget_job(struct agent *a, const char *job_id)
{
    for (struct agent_worker *w = a->workers; w; w = w->next) {
        if (strcmp(w->job_id, job_id) == 0 && w->status != AGENT_WORKER_EXITED) {
            TY_WARN("agent", "job %s deleted while a worker of it runs here; staging kept", job_id);
            return;
        }
    }
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/checkpoints/%s", a->data_dir, job_id) >=
        sizeof(path))
        return;
    agent__remove_tree(path);
    if ((size_t)snprintf(path, sizeof(path), "%s/code/run/%s", a->data_dir, job_id) < sizeof(path))
        agent__remove_tree(path); /* its attempts' copies of its code package, if any were left */
    TY_INFO("agent", "job %s deleted: its checkpoint staging removed", job_id);
}

/* Whether a worker that still runs reads from path or from below it (its resume checkpoint). */
static bool round_in_use(const struct agent *a, const char *path)
{
    size_t n = strlen(path);
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        if (w->status != AGENT_WORKER_EXITED && w->grant_dir &&
            strncmp(w->grant_dir, path, n) == 0 &&
            (w->grant_dir[n] == '\0' || w->grant_dir[n] == '/'))
            return true;
    return false;
}

void agent__delete_checkpoint(struct agent *a, const char *job_id, int64_t attempt, int64_t index)
{
    char path[PATH_MAX], owners[PATH_MAX + 16];
    if (aproto_job_id_valid(job_id) != 0 || attempt < 0 || index < 0 ||
        (size_t)snprintf(path, sizeof(path), "%s/checkpoints/%s/%lld/%lld", a->data_dir, job_id,
                         (long long)attempt, (long long)index) >= sizeof(path))
        return;
    if (round_in_use(a, path)) {
        TY_WARN("agent",
                "checkpoint %s/%lld/%lld deleted by retention is read by a running worker; kept",
                job_id, (long long)attempt, (long long)index);
        return;
    }
    agent__remove_tree(path);
    /* Its owners file (checkpoint.c) and the count of a round still waiting for ranks
     * (upload.c). */
    static const char *const beside[] = {".owners.json", ".reports"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(owners, sizeof(owners), "%s%s", path, beside[i]);
        if (unlink(owners) != 0 && errno != ENOENT)
            TY_WARN("agent", "cannot remove %s: %s", owners, strerror(errno));
    }
    TY_INFO("agent", "checkpoint %s/%lld/%lld deleted by retention: its staging copy removed",
            job_id, (long long)attempt, (long long)index);
}

int agent__worker_tmp_dir(struct agent_worker *w)
{
    char tmpl[512];
    snprintf(tmpl, sizeof(tmpl), "/tmp/trainyard-%s.%lld.%lld-XXXXXX", w->job_id,
             (long long)w->attempt, (long long)w->rank);
    if (!mkdtemp(tmpl)) /* mode 0700 */
        return -1;
    if (w->uid != AGENT_NO_UID && chown(tmpl, w->uid, w->gid) != 0) {
        int e = errno;
        rmdir(tmpl);
        errno = e;
        return -1;
    }
    w->tmp_dir = strdup(tmpl);
    if (!w->tmp_dir) {
        rmdir(tmpl);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* The group and modes nftw callbacks apply (the agent is single-threaded). */
static gid_t grant_gid;

static int grant_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)f;
    if (flag == FTW_SL || flag == FTW_SLN || (flag != FTW_D && !S_ISREG(st->st_mode)))
        return 0;
    bool dir = flag == FTW_D;
    if (lchown(path, 0, grant_gid) != 0 ||
        chmod(path, grant_gid ? (dir ? 0750 : 0640) : (dir ? 0700 : 0600)) != 0)
        TY_WARN("proc", "cannot set the access of %s: %s", path, strerror(errno));
    return 0;
}

/* Gives group `gid` read access to checkpoint directory `dir` (under <data>/checkpoints) and
 * search access to the directories above it; gid 0 takes it back. Returns 0, or -1 when `dir`
 * is not under <data>/checkpoints/. */
static int set_checkpoint_access(const struct agent *a, const char *dir, gid_t gid)
{
    char root[4200];
    int n = snprintf(root, sizeof(root), "%s/checkpoints/", a->data_dir);
    if (n < 0 || (size_t)n >= sizeof(root) || strncmp(dir, root, (size_t)n) != 0 ||
        strstr(dir, "/..") != NULL)
        return -1;
    char path[4200];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + n; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (lchown(path, 0, gid) != 0 || chmod(path, gid ? 0710 : 0700) != 0)
            TY_WARN("proc", "cannot set the access of %s: %s", path, strerror(errno));
        *p = '/';
    }
    grant_gid = gid;
    nftw(dir, grant_entry, 16, FTW_PHYS);
    return 0;
}

int agent__grant_checkpoint(struct agent *a, struct agent_worker *w, const char *dir)
{
    if (w->uid == AGENT_NO_UID || !dir || set_checkpoint_access(a, dir, w->gid) != 0)
        return 0;
    w->grant_dir = strdup(dir);
    return w->grant_dir ? 0 : -1;
}

/* Removes entry `name` of the directory dfd and all below it, never following a link. */
static void remove_all_at(int dfd, const char *name, int depth)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT || (errno != EISDIR && errno != EPERM))
        return;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 && depth < 64 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            remove_all_at(dirfd(d), e->d_name, depth + 1);
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        TY_DEBUG("proc", "cannot remove %s: %s", name, strerror(errno));
}

int agent__open_dir_nofollow(const char *dir)
{
    if (!dir || dir[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    char copy[PATH_MAX];
    if ((size_t)snprintf(copy, sizeof(copy), "%s", dir) >= sizeof(copy)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); fd >= 0 && c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, "..") == 0) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        if (strcmp(c, ".") == 0)
            continue;
        int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        errno = e;
        fd = next;
    }
    return fd;
}

/* Removes path (absolute) and all below it, following no link on the way there or below. */
static void remove_path_nofollow(const char *path)
{
    char parent[PATH_MAX];
    if ((size_t)snprintf(parent, sizeof(parent), "%s", path) >= sizeof(parent))
        return;
    char *slash = strrchr(parent, '/');
    if (!slash || !slash[1])
        return;
    *slash = '\0';
    int dfd = agent__open_dir_nofollow(parent[0] ? parent : "/");
    if (dfd < 0) {
        TY_WARN("proc", "%s not removed: cannot open %s without following links: %s", path, parent,
                strerror(errno));
        return;
    }
    remove_all_at(dfd, slash + 1, 0);
    close(dfd);
}

void agent__remove_owned(const char *dir, uid_t uid)
{
    int dfd = agent__open_dir_nofollow(dir);
    int fd = dfd >= 0 ? dup(dfd) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        if (dfd >= 0)
            close(dfd);
        return;
    }
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == uid)
            remove_all_at(dfd, e->d_name, 0);
    closedir(d);
    close(dfd);
}

/* Whether a worker still needs uid: one runs under it, or one's cgroups are not yet removed. */
static bool uid_needed(const struct agent *a, uid_t uid)
{
    if (agent__warm_uses_uid(a, uid))
        return true;
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        if (w->uid == uid && (w->status == AGENT_WORKER_RUNNING || w->cg_n > 0))
            return true;
    return false;
}

/* Kills what is left in the cgroups of exited workers and removes those cgroups. */
static void drain_cgroups(struct agent *a)
{
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (w->status != AGENT_WORKER_RUNNING && w->cg_n > 0) {
            agent__cgroup_kill(w);
            agent__cgroup_remove(w);
        }
}

/* Once no worker needs the uid of hold h: makes sure no process of it is left, removes what it
 * wrote to /tmp, /var/tmp and /dev/shm, takes back its grants, and gives the uid back to the
 * host. Returns true when it was given back (h freed and unlinked from a->uid_holds). */
static bool uid_try_release(struct agent *a, struct agent_uid_hold *h)
{
    uid_t uid = h->uid;
    if (uid_needed(a, uid))
        return false;
    /* Without cgroups, what outlived the workers is found by uid: the uid is this job's alone
     * on the host (uid_try_hold), so nothing of another job's can be hit. */
    if (a->cg.version == 0)
        kill_uid(uid);
    if (uid_has_processes(uid))
        return false; /* still dying: the poll timer tries again */
    static const char *const shared[] = {"/tmp", "/var/tmp", "/dev/shm"};
    for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
        agent__remove_owned(shared[i], uid);
    for (struct agent_worker *o = a->workers; o; o = o->next) {
        if (o->uid != uid || o->status == AGENT_WORKER_RUNNING)
            continue;
        if (o->tmp_dir)
            remove_path_nofollow(o->tmp_dir);
        UTIL_FREE(o->tmp_dir);
        if (o->grant_dir)
            set_checkpoint_access(a, o->grant_dir, 0);
        UTIL_FREE(o->grant_dir);
    }
    for (struct agent_uid_hold **pp = &a->uid_holds; *pp; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    close(h->fd);
    TY_DEBUG("proc", "uid %lu of job %s given back", (unsigned long)uid, h->job_id);
    free(h);
    return true;
}

void agent__isolation_worker_done(struct agent *a, struct agent_worker *w)
{
    drain_cgroups(a);
    if (w->uid == AGENT_NO_UID) {
        if (w->tmp_dir)
            remove_path_nofollow(w->tmp_dir);
        UTIL_FREE(w->tmp_dir);
        return;
    }
    struct agent_uid_hold *h = hold_of_uid(a, w->uid);
    if (h)
        uid_try_release(a, h);
}

void agent__isolation_poll(struct agent *a)
{
    drain_cgroups(a);
    for (struct agent_uid_hold *h = a->uid_holds, *next; h; h = next) {
        next = h->next;
        uid_try_release(a, h);
    }
    /* Exited workers the server already acknowledged, kept until their cgroups were gone. */
    for (struct agent_worker **pp = &a->workers; *pp;) {
        struct agent_worker *w = *pp;
        if (w->acked && w->cg_n == 0) {
            *pp = w->next;
            agent__worker_free(w);
        } else {
            pp = &w->next;
        }
    }
}

void agent__uid_release_all(struct agent *a)
{
    drain_cgroups(a);
    while (a->uid_holds) {
        struct agent_uid_hold *h = a->uid_holds;
        if (!uid_try_release(a, h)) { /* a worker outlives the agent: the lock goes with us */
            a->uid_holds = h->next;
            close(h->fd);
            free(h);
        }
    }
}

void agent__worker_free(struct agent_worker *w)
{
    free(w->job_id);
    free(w->error);
    free(w->reason);
    free(w->tmp_dir);
    free(w->grant_dir);
    free(w->storage_path);
    free(w->packages[0]);
    free(w->packages[1]);
    for (size_t i = 0; i < AGENT_CG_MAX; i++)
        free(w->cg_dirs[i]);
    free(w);
}
