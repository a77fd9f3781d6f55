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
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct pg_embedded {
    char bin_dir[PATH_MAX];
    char pgdata[PATH_MAX];
    char sockdir[PATH_MAX];
    char logfile[PATH_MAX];
    bool as_postgres; /* running as root: run PostgreSQL as the postgres user */
    uid_t uid;
    gid_t gid;
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

/* Copies the lines a PostgreSQL tool appended to the log file after `offset` (at most the last
 * 20) into the server's log, so a failure explains itself where the operator looks first. */
static void copy_tool_output(const char *logfile, off_t offset)
{
    int fd = open(logfile, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[16384];
    off_t size = lseek(fd, 0, SEEK_END);
    if (size - offset > (off_t)sizeof(buf) - 1)
        offset = size - (off_t)sizeof(buf) + 1;
    ssize_t n = offset >= 0 && size > offset ? pread(fd, buf, (size_t)(size - offset), offset) : 0;
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
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

/* Writes `in` single-quoted for /bin/sh into out (a ' becomes '\''); cuts it short when out is
 * too small (the caller quotes a unix-socket directory, under 108 bytes, into 2 * PATH_MAX). */
static void shell_quote(const char *in, char *out, size_t len)
{
    size_t o = 0;
    if (len < 3)
        return;
    out[o++] = '\'';
    for (; *in != '\0' && o + 6 < len; in++) {
        if (*in == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else {
            out[o++] = *in;
        }
    }
    out[o++] = '\'';
    out[o] = '\0';
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
    const char *status[] = {"pg_ctl", "status", "-D", pg->pgdata, NULL};
    if (run_pg_tool(pg, status) == 0) {
        TY_WARN("pg", "the embedded PostgreSQL was already running (left by an earlier server); "
                      "using it");
    } else {
        /* pg_ctl hands -o to /bin/sh: the socket directory is single-quoted for it. */
        char quoted[2 * PATH_MAX], opts[2 * PATH_MAX + 128];
        shell_quote(pg->sockdir, quoted, sizeof(quoted));
        snprintf(opts, sizeof(opts),
                 "-k %s -c listen_addresses='' -c max_connections=300 -c shared_buffers=128MB",
                 quoted);
        const char *start[] = {"pg_ctl", "start", "-D", pg->pgdata, "-l", pg->logfile,
                               "-w",     "-t",    "60", "-o",       opts, NULL};
        if (run_pg_tool(pg, start) != 0) {
            TY_ERROR("pg",
                     "could not start the embedded PostgreSQL in %s; its output is above and "
                     "in %s",
                     pg->pgdata, pg->logfile);
            goto fail;
        }
    }
    char host[2 * PATH_MAX], admin[2 * PATH_MAX + 64];
    conninfo_quote(pg->sockdir, host, sizeof(host));
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
    free(pg);
    return -1;
}

void pg_embedded_stop(struct pg_embedded *pg)
{
    if (pg == NULL)
        return;
    const char *stop[] = {"pg_ctl", "stop", "-D", pg->pgdata, "-m", "fast", "-w", "-t", "60", NULL};
    if (run_pg_tool(pg, stop) != 0)
        TY_WARN("pg", "pg_ctl stop failed; see %s", pg->logfile);
    else
        TY_INFO("pg", "embedded PostgreSQL stopped");
    free(pg);
}
