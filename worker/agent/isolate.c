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

static bool uid_running(const struct agent *a, uid_t uid)
{
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        if (w->status == AGENT_WORKER_RUNNING && w->uid == uid)
            return true;
    return false;
}

/* The uids in lo-hi that a live process of this node has as its real, effective or saved uid
 * (zombies aside), from /proc/PID/status: another agent's workers (two agents on one node with
 * overlapping --worker-uids) or what an earlier job left. Such a uid is not given to a job: its
 * processes could signal them, and the uid's clean-up (kill_uid) would kill them. Returns how
 * many, in *out (malloc'd, possibly with repeats; NULL when none); 0 when /proc cannot be read. */
static size_t uids_in_use(uid_t lo, uid_t hi, uid_t **out)
{
    *out = NULL;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[2048];
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* gone meanwhile */
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        const char *state = strstr(buf, "\nState:\t");
        const char *uids = strstr(buf, "\nUid:\t");
        if (!uids || (state && state[8] == 'Z'))
            continue;
        char *p = (char *)uids + 6;
        for (int i = 0; i < 3; i++) {
            unsigned long u = strtoul(p, &p, 10);
            if (u < lo || u > hi)
                continue;
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                uid_t *grown = realloc(*out, ncap * sizeof(**out));
                if (!grown)
                    break;
                *out = grown;
                cap = ncap;
            }
            (*out)[n++] = (uid_t)u;
        }
    }
    closedir(d);
    return n;
}

static bool uid_listed(const uid_t *list, size_t n, uid_t uid)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == uid)
            return true;
    return false;
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
    for (const struct agent_worker *o = a->workers; o; o = o->next) {
        if (o != w && o->status == AGENT_WORKER_RUNNING && o->uid != AGENT_NO_UID &&
            strcmp(o->job_id, w->job_id) == 0) {
            w->uid = o->uid;
            w->gid = o->gid;
            return 0;
        }
    }
    uid_t *busy = NULL;
    size_t n_busy = uids_in_use(a->uid_lo, a->uid_hi, &busy);
    for (uid_t u = a->uid_lo;; u++) {
        if (!uid_running(a, u) && !uid_listed(busy, n_busy, u)) {
            free(busy);
            w->uid = w->gid = u;
            return 0;
        }
        if (u == a->uid_hi)
            break;
    }
    free(busy);
    errno = EAGAIN;
    return -1;
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
 * picks exactly the processes that uid may signal, which are its own). */
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

/* Removes every /tmp/trainyard-JOB.* directory owned by uid: those of the job's workers the
 * agent already forgot (their exits were acknowledged) included. */
static void remove_job_tmp_dirs(const char *job_id, uid_t uid)
{
    char prefix[300];
    int n = snprintf(prefix, sizeof(prefix), "trainyard-%s.", job_id);
    DIR *d = opendir("/tmp");
    if (!d || n < 0 || (size_t)n >= sizeof(prefix)) {
        if (d)
            closedir(d);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[600];
        struct stat st;
        if (strncmp(e->d_name, prefix, (size_t)n) != 0 ||
            (size_t)snprintf(path, sizeof(path), "/tmp/%s", e->d_name) >= sizeof(path) ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid)
            continue;
        agent__remove_tree(path);
    }
    closedir(d);
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

void agent__isolation_worker_done(struct agent *a, struct agent_worker *w)
{
    if (w->uid == AGENT_NO_UID) {
        if (w->tmp_dir)
            agent__remove_tree(w->tmp_dir);
        UTIL_FREE(w->tmp_dir);
        return;
    }
    if (uid_running(a, w->uid))
        return; /* other workers of the job still run under it */
    /* Nothing may outlive the uid's last worker: the next job to get it must find no process
     * and no file of this one. Only then is it safe to remove (as root) what the uid wrote. */
    uid_t uid = w->uid;
    kill_uid(uid);
    remove_job_tmp_dirs(w->job_id, uid);
    for (struct agent_worker *o = a->workers; o; o = o->next) {
        if (o->uid != uid || o->status == AGENT_WORKER_RUNNING)
            continue;
        if (o->tmp_dir)
            agent__remove_tree(o->tmp_dir);
        UTIL_FREE(o->tmp_dir);
        if (o->grant_dir)
            set_checkpoint_access(a, o->grant_dir, 0);
        UTIL_FREE(o->grant_dir);
    }
}

void agent__worker_free(struct agent_worker *w)
{
    free(w->job_id);
    free(w->error);
    free(w->tmp_dir);
    free(w->grant_dir);
    free(w->storage_path);
    free(w->packages[0]);
    free(w->packages[1]);
    free(w);
}
