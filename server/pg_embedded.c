/* Running PostgreSQL as a child of the server: see pg_embedded.h. */
#include "pg_embedded.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* Runs argv (argv[0] is a program name in bin_dir) as the PostgreSQL user, with output
 * appended to the log file. Returns the exit status, or -1 if it could not run. */
static int run_pg_tool(const struct pg_embedded *pg, const char *const *argv)
{
    char prog[PATH_MAX + 32];
    if (snprintf(prog, sizeof(prog), "%s/%s", pg->bin_dir, argv[0]) >= (int)sizeof(prog))
        return -1;
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
        if (pg->as_postgres && (setgid(pg->gid) != 0 || setuid(pg->uid) != 0))
            _exit(126);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

int pg_embedded_start(const char *data_dir, const char *bin_dir, struct pg_embedded **out,
                      char *conninfo, size_t conninfo_len)
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
    if (snprintf(pg->pgdata, sizeof(pg->pgdata), "%s/postgres", abs) >= (int)sizeof(pg->pgdata) ||
        snprintf(pg->sockdir, sizeof(pg->sockdir), "%s/run", abs) >= (int)sizeof(pg->sockdir) ||
        snprintf(pg->logfile, sizeof(pg->logfile), "%s/postgres.log", abs) >=
            (int)sizeof(pg->logfile)) {
        TY_ERROR("pg", "data directory path %s is too long", abs);
        goto fail;
    }
    if (strlen(pg->sockdir) + strlen("/.s.PGSQL.5432") >=
        sizeof(((struct sockaddr_un *)0)->sun_path)) {
        TY_ERROR("pg",
                 "data directory path %s is too long for a unix socket; use a shorter "
                 "--data-dir",
                 abs);
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
        /* PostgreSQL must be able to reach its directories through the data directory. */
        chmod(abs, 0711);
    }
    if (ty_mkdir_p(pg->sockdir, 0700) != 0 || give_to_postgres(pg, pg->sockdir) != 0)
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
        if (ty_mkdir_p(pg->pgdata, 0700) != 0 || give_to_postgres(pg, pg->pgdata) != 0)
            goto fail;
        const char *initdb[] = {"initdb", "-D", pg->pgdata, "-U",          "trainyard", "-A",
                                "trust",  "-E", "UTF8",     "--no-locale", NULL};
        if (run_pg_tool(pg, initdb) != 0) {
            TY_ERROR("pg", "initdb failed; see %s", pg->logfile);
            goto fail;
        }
    }
    const char *status[] = {"pg_ctl", "status", "-D", pg->pgdata, NULL};
    if (run_pg_tool(pg, status) == 0) {
        TY_WARN("pg", "the embedded PostgreSQL was already running (left by an earlier server); "
                      "using it");
    } else {
        char opts[PATH_MAX + 128];
        snprintf(opts, sizeof(opts),
                 "-k %s -c listen_addresses='' -c max_connections=300 -c shared_buffers=128MB",
                 pg->sockdir);
        const char *start[] = {"pg_ctl", "start", "-D", pg->pgdata, "-l", pg->logfile,
                               "-w",     "-t",    "60", "-o",       opts, NULL};
        if (run_pg_tool(pg, start) != 0) {
            TY_ERROR("pg", "could not start the embedded PostgreSQL; see %s", pg->logfile);
            goto fail;
        }
    }
    char admin[PATH_MAX + 64];
    snprintf(admin, sizeof(admin), "host=%s dbname=postgres user=trainyard", pg->sockdir);
    if (create_database(admin) != 0) {
        pg_embedded_stop(pg);
        return -1;
    }
    snprintf(conninfo, conninfo_len, "host=%s dbname=trainyard user=trainyard", pg->sockdir);
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
