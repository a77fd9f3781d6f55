/* Running PostgreSQL as a child of the server: see pg_embedded.h. */
#include "pg_embedded.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG_READY_TIMEOUT_S 60 /* a (re)started postmaster must accept connections by then */
#define PG_WATCH_POLL_MS 200  /* how often the watcher looks at the postmaster */

struct pg_embedded {
    char bin_dir[PATH_MAX];
    char pgdata[PATH_MAX];
    char sockdir[PATH_MAX];
    char logfile[PATH_MAX];
    char ping_conninfo[2 * PATH_MAX + 96]; /* the postgres database, for PQping */
    bool as_postgres; /* running as root: run PostgreSQL as the postgres user */
    uid_t uid;
    gid_t gid;
    pid_t pm_pid;  /* the postmaster */
    bool pm_child; /* started by this process (waitpid tells its end), not adopted */
    /* The watcher (pg_embedded_watch): */
    pthread_t watcher;
    bool watching;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;                 /* under lock: pg_embedded_stop asks the watcher to end */
    int restart_attempts;          /* failed restarts before giving up */
    void (*on_give_up)(void *arg); /* called once by the watcher when it gives up */
    void *give_up_arg;
    bool gave_up; /* atomic: the postmaster is gone for good */
};

/* Finds the newest /usr/lib/postgresql/<major>/bin holding initdb. */
static int find_bin_dir(char *out, size_t len)
{
    DIR *d = opendir("/usr/lib/postgresql");
    if (d == NULL)
        return -1;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end != '\0' || v <= best)
            continue;
        char probe[PATH_MAX];
        int n = snprintf(probe, sizeof(probe), "/usr/lib/postgresql/%s/bin/initdb", e->d_name);
        if (n < (int)sizeof(probe) && access(probe, X_OK) == 0)
            best = v;
    }
    closedir(d);
    if (best < 0)
        return -1;
    snprintf(out, len, "/usr/lib/postgresql/%ld/bin", best);
    return 0;
}

/* In a forked child: drops to the postgres user (when running as root) and leaves the caller's
 * working directory, which that user may not be able to reach. Returns 0 or -1. */
static int child_become_postgres(const struct pg_embedded *pg)
{
    if (pg->as_postgres &&
        (setgroups(1, &pg->gid) != 0 || setgid(pg->gid) != 0 || setuid(pg->uid) != 0))
        return -1;
    return chdir("/");
}

/* Reads what was appended to logfile after `offset` (at most its last cap - 1 bytes) into buf,
 * NUL-terminated. Returns the bytes read, or <= 0 when there are none. */
static ssize_t read_log_tail(const char *logfile, off_t offset, char *buf, size_t cap)
{
    int fd = open(logfile, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size - offset > (off_t)cap - 1)
        offset = size - (off_t)cap + 1;
    ssize_t n = offset >= 0 && size > offset ? pread(fd, buf, (size_t)(size - offset), offset) : 0;
    close(fd);
    if (n > 0)
        buf[n] = '\0';
    return n;
}

/* Copies the lines a PostgreSQL tool appended to the log file after `offset` (at most the last
 * 20) into the server's log, so a failure explains itself where the operator looks first. */
static void copy_tool_output(const char *logfile, off_t offset)
{
    char buf[16384];
    ssize_t n = read_log_tail(logfile, offset, buf, sizeof(buf));
    if (n <= 0)
        return;
    const char *lines[20];
    size_t count = 0;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (count == 20)
            memmove(lines, lines + 1, sizeof(lines[0]) * --count);
        lines[count++] = line;
    }
    for (size_t i = 0; i < count; i++)
        TY_ERROR("pg", "postgres: %s", lines[i]);
}

/* Runs argv (argv[0] is a program name in bin_dir) as the PostgreSQL user, with output
 * appended to the log file. Returns the exit status, or -1 if it could not run; on a failure
 * the tool's output is copied into the server's log. */
static int run_pg_tool(const struct pg_embedded *pg, const char *const *argv)
{
    char prog[PATH_MAX + 32];
    if (snprintf(prog, sizeof(prog), "%s/%s", pg->bin_dir, argv[0]) >= (int)sizeof(prog))
        return -1;
    struct stat st;
    off_t offset = stat(pg->logfile, &st) == 0 ? st.st_size : 0;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(pg->logfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            close(devnull);
        }
        if (child_become_postgres(pg) != 0)
            _exit(126);
        /* argv[0] is the full path: PostgreSQL's tools find their siblings (initdb finds
         * postgres) through it, and would search PATH for a bare name. */
        const char *args[16];
        size_t n = 0;
        args[n++] = prog;
        for (size_t i = 1; argv[i] != NULL && n < sizeof(args) / sizeof(args[0]) - 1; i++)
            args[n++] = argv[i];
        args[n] = NULL;
        execv(prog, (char *const *)args);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (rc == 126 || rc == 127)
        TY_ERROR("pg", "could not run %s as the postgres user (exit %d)", prog, rc);
    if (rc != 0 && strcmp(argv[1], "status") != 0)
        copy_tool_output(pg->logfile, offset);
    return rc;
}

/* Writes how a child ended (its wait status) into out: "exited with code N" or "was killed
 * by signal N (name)". */
static void describe_end(int status, char *out, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "exited with code %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Copies the last non-empty line PostgreSQL appended to its log after `offset` into out (empty
 * when there is none). */
static void last_log_line(const char *logfile, off_t offset, char *out, size_t len)
{
    out[0] = '\0';
    char buf[4096];
    ssize_t n = read_log_tail(logfile, offset, buf, sizeof(buf));
    if (n <= 0)
        return;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    const char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    size_t take = strnlen(line, len - 1);
    memcpy(out, line, take);
    out[take] = '\0';
}

/* Starts the postmaster as a child of this process, in a session of its own (a terminal's ^C
 * does not reach it) and with default signal handling, its output appended to the log file.
 * Only async-signal-safe calls between fork and exec: the server may have threads by now.
 * Returns its pid, or -1. */
static pid_t spawn_postmaster(const struct pg_embedded *pg)
{
    char prog[PATH_MAX + 32];
    if (snprintf(prog, sizeof(prog), "%s/postgres", pg->bin_dir) >= (int)sizeof(prog))
        return -1;
    const char *const args[] = {prog,
                                "-D",
                                pg->pgdata,
                                "-k",
                                pg->sockdir,
                                "-c",
                                "listen_addresses=",
                                "-c",
                                "max_connections=300",
                                "-c",
                                "shared_buffers=128MB",
                                NULL};
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(pg->logfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    if (child_become_postgres(pg) != 0)
        _exit(126);
    execv(prog, (char *const *)args);
    _exit(127);
}

/* Whether pg_embedded_stop asked the watcher to end. */
static bool stop_asked(struct pg_embedded *pg)
{
    pthread_mutex_lock(&pg->lock);
    bool stopping = pg->stopping;
    pthread_mutex_unlock(&pg->lock);
    return stopping;
}

/* Starts the postmaster and waits until it accepts connections (crash recovery, if it needs
 * one, happens before that), or until pg_embedded_stop asks the watcher to end. Returns 0, or
 * -1 with the reason in `why` (how it ended and the last line it logged, or the stop). */
static int start_postmaster(struct pg_embedded *pg, char *why, size_t why_len)
{
    struct stat st;
    off_t offset = stat(pg->logfile, &st) == 0 ? st.st_size : 0;
    pid_t pid = spawn_postmaster(pg);
    if (pid < 0) {
        snprintf(why, why_len, "cannot fork to start postgres: %s", strerror(errno));
        return -1;
    }
    char ended[96], line[512];
    for (int i = 0; i < PG_READY_TIMEOUT_S * 10; i++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            describe_end(status, ended, sizeof(ended));
            if (WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127))
                snprintf(ended, sizeof(ended), "could not be run as the postgres user (exit %d)",
                         WEXITSTATUS(status));
            last_log_line(pg->logfile, offset, line, sizeof(line));
            snprintf(why, why_len, "postgres %s%s%s", ended, line[0] ? ": " : "", line);
            return -1;
        }
        if (PQping(pg->ping_conninfo) == PQPING_OK || stop_asked(pg)) {
            pg->pm_pid = pid; /* stopping: pg_embedded_stop stops this one */
            pg->pm_child = true;
            if (!stop_asked(pg))
                return 0;
            snprintf(why, why_len, "the server is stopping");
            return -1;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    last_log_line(pg->logfile, offset, line, sizeof(line));
    snprintf(why, why_len, "postgres did not accept connections within %d s (stopped)%s%s",
             PG_READY_TIMEOUT_S, line[0] ? "; it logged: " : "", line);
    return -1;
}

/* The pid in the first line of postmaster.pid, or -1. */
static pid_t read_postmaster_pid(const struct pg_embedded *pg)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/postmaster.pid", pg->pgdata);
    size_t len;
    char *text = util_read_file(path, &len);
    if (text == NULL)
        return -1;
    long pid = strtol(text, NULL, 10);
    free(text);
    return pid > 0 ? (pid_t)pid : -1;
}

/* Whether the postmaster has ended; if so, how, in `how`. Its own child is reaped (waitpid
 * tells the exit code or signal); an adopted one is looked up in /proc (gone, or a zombie
 * nobody reaps). */
static bool postmaster_ended(struct pg_embedded *pg, char *how, size_t how_len)
{
    if (pg->pm_child) {
        int status;
        pid_t r = waitpid(pg->pm_pid, &status, WNOHANG);
        if (r == 0)
            return false;
        if (r == pg->pm_pid) {
            pg->pm_child = false;
            describe_end(status, how, how_len);
            return true;
        }
        pg->pm_child = false; /* reaped elsewhere: /proc decides */
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pg->pm_pid);
    size_t len;
    char *stat_line = util_read_file(path, &len);
    if (stat_line == NULL) {
        if (errno != ENOENT && kill(pg->pm_pid, 0) == 0)
            return false;
        snprintf(how, how_len, "is gone (its exit code is unknown: an earlier server started it)");
        return true;
    }
    const char *paren = strrchr(stat_line, ')');
    bool zombie = paren && (paren[1] == ' ') && (paren[2] == 'Z' || paren[2] == 'X');
    free(stat_line);
    if (zombie)
        snprintf(how, how_len,
                 "has ended (its exit code is unknown: an earlier server started it)");
    return zombie;
}

/* Whether the postgres user can reach (search) `dir` through every directory above it: see
 * util_uid_can_reach. Always 1 when not running as root. */
static int postgres_can_reach(const struct pg_embedded *pg, const char *dir, char *blocked,
                              size_t blocked_len)
{
    if (!pg->as_postgres)
        return 1;
    return util_uid_can_reach(pg->uid, pg->gid, dir, blocked, blocked_len);
}

/* Chooses the directory that holds the cluster, its socket and its log: the data directory
 * `abs`, the one recorded in <abs>/postgres.location by an earlier start, or (as root, when the
 * postgres user cannot reach `abs`) a new directory under `fallback`, recorded there. */
static int choose_home(const struct pg_embedded *pg, const char *abs, const char *fallback,
                       char *home, size_t home_len)
{
    char location_file[PATH_MAX + 32];
    snprintf(location_file, sizeof(location_file), "%s/postgres.location", abs);
    size_t len;
    char *recorded = util_read_file(location_file, &len);
    if (recorded != NULL) {
        recorded[strcspn(recorded, "\n")] = '\0';
        int n = snprintf(home, home_len, "%s", recorded);
        free(recorded);
        if (n <= 0 || (size_t)n >= home_len || home[0] != '/') {
            TY_ERROR("pg",
                     "%s does not hold an absolute directory path; remove it to start a new "
                     "embedded database",
                     location_file);
            return -1;
        }
        if (access(home, F_OK) != 0)
            TY_WARN("pg", "%s names %s, which is gone: a new, empty database is made there",
                    location_file, home);
        if (util_mkdir_p(home, 0711) != 0)
            return -1;
        TY_INFO("pg", "the embedded PostgreSQL lives in %s (recorded in %s)", home, location_file);
        return 0;
    }
    char blocked[PATH_MAX];
    int reach = postgres_can_reach(pg, abs, blocked, sizeof(blocked));
    if (reach < 0) {
        TY_ERROR("pg", "could not check whether the postgres user can reach %s", abs);
        return -1;
    }
    if (reach == 1) {
        snprintf(home, home_len, "%s", abs);
        return 0;
    }
    if (fallback == NULL || fallback[0] == '\0' || strcmp(fallback, "none") == 0) {
        TY_ERROR("pg",
                 "the postgres user cannot reach the data directory %s (%s is not searchable by "
                 "it); start the server with a --data-dir it can reach (e.g. under /var/lib), "
                 "--pg-fallback-dir DIR, or --database-url",
                 abs, blocked);
        return -1;
    }
    char fallback_blocked[PATH_MAX];
    if (util_mkdir_p(fallback, 0755) != 0 ||
        postgres_can_reach(pg, fallback, fallback_blocked, sizeof(fallback_blocked)) != 1) {
        TY_ERROR("pg",
                 "the postgres user cannot reach the data directory %s (%s is not searchable by "
                 "it), nor the fallback directory %s; start the server with a --data-dir or "
                 "--pg-fallback-dir it can reach, or --database-url",
                 abs, blocked, fallback);
        return -1;
    }
    if (snprintf(home, home_len, "%s/XXXXXX", fallback) >= (int)home_len || mkdtemp(home) == NULL ||
        chmod(home, 0711) != 0) {
        TY_ERROR("pg", "cannot create a directory under %s: %s", fallback, strerror(errno));
        return -1;
    }
    char line[PATH_MAX + 1];
    int n = snprintf(line, sizeof(line), "%s\n", home);
    if (util_write_file_durable(location_file, line, (size_t)n, 0600) != 0) {
        TY_ERROR("pg", "cannot write %s: %s", location_file, strerror(errno));
        rmdir(home);
        return -1;
    }
    TY_INFO("pg",
            "the postgres user cannot reach %s (%s is not searchable by it), so the embedded "
            "PostgreSQL lives in %s (recorded in %s; remove both to wipe the database)",
            abs, blocked, home, location_file);
    return 0;
}

/* Writes `in` as a single-quoted libpq connection-string value into out (' and \ escaped with
 * a backslash); cut short like shell_quote. */
static void conninfo_quote(const char *in, char *out, size_t len)
{
    size_t o = 0;
    if (len < 3)
        return;
    out[o++] = '\'';
    for (; *in != '\0' && o + 4 < len; in++) {
        if (*in == '\'' || *in == '\\')
            out[o++] = '\\';
        out[o++] = *in;
    }
    out[o++] = '\'';
    out[o] = '\0';
}

static int give_to_postgres(const struct pg_embedded *pg, const char *path)
{
    if (!pg->as_postgres)
        return 0;
    if (chown(path, pg->uid, pg->gid) != 0) {
        TY_ERROR("pg", "cannot give %s to the postgres user: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int create_database(const char *conninfo_postgres)
{
    PGconn *c = PQconnectdb(conninfo_postgres);
    int rc = -1;
    if (PQstatus(c) != CONNECTION_OK) {
        TY_ERROR("pg", "cannot connect to the embedded database: %s", PQerrorMessage(c));
        goto out;
    }
    PGresult *r = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = 'trainyard'");
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    if (!exists) {
        r = PQexec(c, "CREATE DATABASE trainyard");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            TY_ERROR("pg", "CREATE DATABASE trainyard: %s", PQresultErrorMessage(r));
            PQclear(r);
            goto out;
        }
        PQclear(r);
    }
    rc = 0;
out:
    PQfinish(c);
    return rc;
}

int pg_embedded_start(const char *data_dir, const char *bin_dir, const char *fallback_dir,
                      struct pg_embedded **out, char *conninfo, size_t conninfo_len)
{
    struct pg_embedded *pg = calloc(1, sizeof(*pg));
    if (pg == NULL)
        return -1;
    pthread_mutex_init(&pg->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pg->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (bin_dir)
        snprintf(pg->bin_dir, sizeof(pg->bin_dir), "%s", bin_dir);
    else if (find_bin_dir(pg->bin_dir, sizeof(pg->bin_dir)) != 0) {
        TY_ERROR("pg", "no PostgreSQL server found under /usr/lib/postgresql (install the "
                       "'postgresql' package, or pass --database-url)");
        goto fail;
    }
    char abs[PATH_MAX];
    if (realpath(data_dir, abs) == NULL) {
        TY_ERROR("pg", "data directory %s: %s", data_dir, strerror(errno));
        goto fail;
    }
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (pw == NULL) {
            TY_ERROR("pg", "running as root, but there is no 'postgres' user to run PostgreSQL "
                           "as (install the 'postgresql' package)");
            goto fail;
        }
        pg->as_postgres = true;
        pg->uid = pw->pw_uid;
        pg->gid = pw->pw_gid;
    }
    /* PostgreSQL must be able to reach its directories through the data directory. */
    if (pg->as_postgres)
        chmod(abs, 0711);
    char home[PATH_MAX];
    if (choose_home(pg, abs, fallback_dir, home, sizeof(home)) != 0)
        goto fail;
    if (snprintf(pg->pgdata, sizeof(pg->pgdata), "%s/postgres", home) >= (int)sizeof(pg->pgdata) ||
        snprintf(pg->sockdir, sizeof(pg->sockdir), "%s/run", home) >= (int)sizeof(pg->sockdir) ||
        snprintf(pg->logfile, sizeof(pg->logfile), "%s/postgres.log", home) >=
            (int)sizeof(pg->logfile)) {
        TY_ERROR("pg", "data directory path %s is too long", home);
        goto fail;
    }
    if (strlen(pg->sockdir) + strlen("/.s.PGSQL.5432") >=
        sizeof(((struct sockaddr_un *)0)->sun_path)) {
        TY_ERROR("pg",
                 "data directory path %s is too long for a unix socket; use a shorter "
                 "--data-dir",
                 home);
        goto fail;
    }
    if (pg->as_postgres && strcmp(home, abs) != 0)
        chmod(home, 0711);
    if (util_mkdir_p(pg->sockdir, 0700) != 0 || give_to_postgres(pg, pg->sockdir) != 0)
        goto fail;
    int lfd = open(pg->logfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (lfd >= 0)
        close(lfd);
    if (give_to_postgres(pg, pg->logfile) != 0)
        goto fail;

    char version_file[PATH_MAX + 16];
    snprintf(version_file, sizeof(version_file), "%s/PG_VERSION", pg->pgdata);
    if (access(version_file, F_OK) != 0) {
        TY_INFO("pg", "initialising the embedded PostgreSQL cluster in %s", pg->pgdata);
        if (util_mkdir_p(pg->pgdata, 0700) != 0 || give_to_postgres(pg, pg->pgdata) != 0)
            goto fail;
        const char *initdb[] = {"initdb", "-D", pg->pgdata, "-U",          "trainyard", "-A",
                                "trust",  "-E", "UTF8",     "--no-locale", NULL};
        int rc = run_pg_tool(pg, initdb);
        if (rc != 0) {
            TY_ERROR("pg", "initdb %s failed (exit %d); its output is above and in %s", pg->pgdata,
                     rc, pg->logfile);
            goto fail;
        }
    }
    char host[2 * PATH_MAX];
    conninfo_quote(pg->sockdir, host, sizeof(host));
    snprintf(pg->ping_conninfo, sizeof(pg->ping_conninfo),
             "host=%s dbname=postgres user=trainyard connect_timeout=5", host);
    const char *status[] = {"pg_ctl", "status", "-D", pg->pgdata, NULL};
    if (run_pg_tool(pg, status) == 0) {
        TY_WARN("pg", "the embedded PostgreSQL was already running (left by an earlier server); "
                      "using it");
        pg->pm_pid = read_postmaster_pid(pg);
    } else {
        struct stat st;
        off_t offset = stat(pg->logfile, &st) == 0 ? st.st_size : 0;
        char why[1024];
        if (start_postmaster(pg, why, sizeof(why)) != 0) {
            copy_tool_output(pg->logfile, offset);
            TY_ERROR("pg",
                     "could not start the embedded PostgreSQL in %s (%s); its output is above "
                     "and in %s",
                     pg->pgdata, why, pg->logfile);
            goto fail;
        }
    }
    char admin[2 * PATH_MAX + 64];
    snprintf(admin, sizeof(admin), "host=%s dbname=postgres user=trainyard", host);
    if (create_database(admin) != 0) {
        pg_embedded_stop(pg);
        return -1;
    }
    snprintf(conninfo, conninfo_len, "host=%s dbname=trainyard user=trainyard", host);
    TY_INFO("pg", "embedded PostgreSQL running (socket in %s, log %s)", pg->sockdir, pg->logfile);
    *out = pg;
    return 0;
fail:
    pthread_mutex_destroy(&pg->lock);
    pthread_cond_destroy(&pg->wake);
    free(pg);
    return -1;
}

/* ---- The watcher ------------------------------------------------------------------------- */

/* Waits up to ms on the watcher's condition. Returns true when pg_embedded_stop asks it to end.
 * Called with pg->lock held. */
static bool watcher_wait(struct pg_embedded *pg, int ms)
{
    struct timespec until = util_clock_in_ms(CLOCK_MONOTONIC, ms);
    while (!pg->stopping && pthread_cond_timedwait(&pg->wake, &pg->lock, &until) != ETIMEDOUT)
        ;
    return pg->stopping;
}

/* Restarts the postmaster after it ended: up to restart_attempts tries, the n-th after n
 * seconds (orphaned backends of the dead one may still hold its shared memory for a moment).
 * Returns 0 once one is up; -1 when every try failed (the last reason in `why`) or the server
 * is stopping. */
static int restart_postmaster(struct pg_embedded *pg, char *why, size_t why_len)
{
    for (int attempt = 1; attempt <= pg->restart_attempts; attempt++) {
        pthread_mutex_lock(&pg->lock);
        bool stopping = watcher_wait(pg, 1000 * attempt);
        pthread_mutex_unlock(&pg->lock);
        if (stopping)
            return -1;
        if (start_postmaster(pg, why, why_len) == 0) {
            TY_INFO("pg", "the embedded PostgreSQL is back (pid %d, restart attempt %d)",
                    (int)pg->pm_pid, attempt);
            return 0;
        }
        TY_WARN("pg", "restart attempt %d of %d failed: %s", attempt, pg->restart_attempts, why);
    }
    return -1;
}

static void *watcher_main(void *arg)
{
    struct pg_embedded *pg = arg;
    pthread_mutex_lock(&pg->lock);
    while (!watcher_wait(pg, PG_WATCH_POLL_MS)) {
        pthread_mutex_unlock(&pg->lock);
        char how[160], why[1024] = "no restart attempted (--pg-restart-attempts 0)";
        if (postmaster_ended(pg, how, sizeof(how))) {
            TY_WARN("pg",
                    "the embedded PostgreSQL (postmaster pid %d) %s; restarting it (crash "
                    "recovery)",
                    (int)pg->pm_pid, how);
            if (restart_postmaster(pg, why, sizeof(why)) != 0) {
                pthread_mutex_lock(&pg->lock);
                bool stopping = pg->stopping;
                pthread_mutex_unlock(&pg->lock);
                if (stopping)
                    return NULL;
                __atomic_store_n(&pg->gave_up, true, __ATOMIC_RELEASE);
                if (pg->on_give_up)
                    pg->on_give_up(pg->give_up_arg);
                TY_ERROR("pg",
                         "the embedded PostgreSQL in %s could not be restarted (%d attempts; last: "
                         "%s; log %s): exiting so that a supervisor can act",
                         pg->pgdata, pg->restart_attempts, why, pg->logfile);
                return NULL;
            }
        }
        pthread_mutex_lock(&pg->lock);
    }
    pthread_mutex_unlock(&pg->lock);
    return NULL;
}

int pg_embedded_watch(struct pg_embedded *pg, int restart_attempts, void (*on_give_up)(void *),
                      void *arg)
{
    if (pg->pm_pid <= 0) {
        TY_WARN("pg",
                "the embedded PostgreSQL's pid is unknown (no %s/postmaster.pid): it is not "
                "watched",
                pg->pgdata);
        return 0;
    }
    pg->restart_attempts = restart_attempts;
    pg->on_give_up = on_give_up;
    pg->give_up_arg = arg;
    if (pthread_create(&pg->watcher, NULL, watcher_main, pg) != 0) {
        TY_ERROR("pg", "cannot start the thread that watches the embedded PostgreSQL");
        return -1;
    }
    pg->watching = true;
    return 0;
}

bool pg_embedded_gave_up(const struct pg_embedded *pg)
{
    return pg != NULL && __atomic_load_n(&pg->gave_up, __ATOMIC_ACQUIRE);
}

void pg_embedded_stop(struct pg_embedded *pg)
{
    if (pg == NULL)
        return;
    if (pg->watching) {
        pthread_mutex_lock(&pg->lock);
        pg->stopping = true;
        pthread_cond_signal(&pg->wake);
        pthread_mutex_unlock(&pg->lock);
        pthread_join(pg->watcher, NULL);
    }
    pthread_mutex_destroy(&pg->lock);
    pthread_cond_destroy(&pg->wake);
    if (!pg_embedded_gave_up(pg)) {
        const char *stop[] = {"pg_ctl", "stop", "-D", pg->pgdata, "-m",
                              "fast",   "-w",   "-t", "60",       NULL};
        if (run_pg_tool(pg, stop) == 0) {
            TY_INFO("pg", "embedded PostgreSQL stopped");
            if (pg->pm_child) /* it has exited: reap it */
                while (waitpid(pg->pm_pid, NULL, 0) < 0 && errno == EINTR)
                    ;
        } else {
            TY_WARN("pg", "pg_ctl stop failed; see %s", pg->logfile);
            /* A postmaster still starting (a restart cut short) may have no postmaster.pid
             * for pg_ctl yet: SIGINT is its fast shutdown. */
            if (pg->pm_child)
                kill(pg->pm_pid, SIGINT);
        }
    }
    free(pg);
}
