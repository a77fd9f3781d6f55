/* Node identity and resources: the node-id file, the credential, CPU count, memory (GPUs: nvml.c).
 */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *agent__credential_load(const char *data_dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/node.credential", data_dir);
    char *text = util_read_file(path, NULL);
    if (!text) {
        if (errno != ENOENT)
            TY_WARN("agent", "cannot read %s: %s; joining with the cluster token", path,
                    strerror(errno));
        return NULL;
    }
    text[strcspn(text, "\r\n \t")] = '\0';
    if (!*text || strlen(text) > APROTO_MAX_SECRET) {
        free(text);
        return NULL;
    }
    return text;
}

int agent__credential_save(struct agent *a, const char *credential)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/node.credential", a->data_dir);
    size_t len = strlen(credential);
    char *line = malloc(len + 2);
    if (!line)
        return -1;
    memcpy(line, credential, len);
    memcpy(line + len, "\n", 2);
    int rc = util_write_file_durable(path, line, len + 1, 0600);
    free(line);
    if (rc != 0) {
        TY_ERROR("agent", "cannot keep the node credential in %s: %s", path, strerror(errno));
        return -1;
    }
    char *copy = strdup(credential);
    if (!copy)
        return -1;
    free(a->node_credential);
    a->node_credential = copy;
    TY_INFO("agent", "the server gave this node a credential (kept in %s)", path);
    return 0;
}

char *agent__node_id_load(const char *data_dir, const char *declared)
{
    if (declared)
        return strdup(declared);
    char path[4096];
    snprintf(path, sizeof(path), "%s/node-id", data_dir);
    char *text = util_read_file(path, NULL);
    if (text) {
        text[strcspn(text, "\r\n \t")] = '\0';
        if (aproto_job_id_valid(text) == 0)
            return text;
        TY_WARN("agent", "%s holds an invalid node id; generating a new one", path);
        free(text);
    } else if (errno != ENOENT) {
        TY_ERROR("agent", "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char rnd[8];
    if (util_random_bytes(rnd, sizeof(rnd)) != 0) {
        TY_ERROR("agent", "no random bytes for a node id");
        return NULL;
    }
    char id[32];
    int off = snprintf(id, sizeof(id), "n-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        off += snprintf(id + off, sizeof(id) - (size_t)off, "%02x", rnd[i]);
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        TY_ERROR("agent", "cannot create %s: %s", tmp, strerror(errno));
        return NULL;
    }
    size_t len = strlen(id);
    bool ok = write(fd, id, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        TY_ERROR("agent", "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return NULL;
    }
    TY_INFO("agent", "new node id %s (kept in %s)", id, path);
    return strdup(id);
}

int64_t agent__detect_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

int64_t agent__detect_memory_mb(void)
{
    char *text = util_read_file("/proc/meminfo", NULL);
    if (!text)
        return 0;
    int64_t mb = 0;
    const char *p = strstr(text, "MemTotal:");
    if (p) {
        char *end;
        long long kb = strtoll(p + 9, &end, 10);
        if (end != p + 9 && kb > 0)
            mb = kb / 1024;
    }
    free(text);
    return mb;
}
