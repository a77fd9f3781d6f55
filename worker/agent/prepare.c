/* Downloads a launch needs, off the event loop (issues 11 and 15). A launch whose checkpoint to
 * resume from, or whose code package, is not in this node's cache yet goes to one preparation
 * thread, which fetches it into the cache (checkpoints/fetched/<sha256>, code/<sha256>); the
 * event loop's timer then launches it as if it had just arrived, and the caches hit. A 1 GiB
 * download used to run inside the event loop: no heartbeat went out meanwhile, and the server
 * marked the node LOST and failed the job.
 *
 * One thread, first in first out: two launches of the same checkpoint never fetch it at once,
 * and the second finds it cached. A download that fails leaves the cache empty; the launch then
 * goes on without it exactly as before (no checkpoint: the job's event says so; no code: its
 * workers exit 127 with the reason). */
#include "agent.h"

#include "log.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct prep_item {
    struct prep_item *next;
    char *text; /* the launch message, parsed again when its downloads are done */
    size_t len;
    char *job_id;
    int64_t attempt;
    int64_t ckpt_id; /* > 0: fetch this checkpoint */
    char *ckpt_sha256;
    char *ckpt_shared;  /* with ckpt_id: copied from this directory on shared storage, or NULL */
    char *code_sha256;  /* non-NULL: fetch this code package */
    char *ckpkg_sha256; /* non-NULL: fetch this checkpoint package (into the code cache) */
    bool cancelled;     /* stopped meanwhile: not launched (guarded by the prep's mu) */
};

struct agent_prep {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct prep_item *todo, *todo_tail; /* guarded by mu */
    struct prep_item *done, *done_tail; /* guarded by mu */
    struct prep_item *current;          /* being fetched; guarded by mu */
};

static void item_free(struct prep_item *it)
{
    if (it == NULL)
        return;
    free(it->text);
    free(it->job_id);
    free(it->ckpt_sha256);
    free(it->ckpt_shared);
    free(it->code_sha256);
    free(it->ckpkg_sha256);
    free(it);
}

static void push(struct prep_item **head, struct prep_item **tail, struct prep_item *it)
{
    it->next = NULL;
    if (*tail)
        (*tail)->next = it;
    else
        *head = it;
    *tail = it;
}

static struct prep_item *pop(struct prep_item **head, struct prep_item **tail)
{
    struct prep_item *it = *head;
    if (it) {
        *head = it->next;
        if (*head == NULL)
            *tail = NULL;
    }
    return it;
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Whether <data>/<sub>/<sha256> is in the cache. */
static bool cached(const struct agent *a, const char *sub, const char *sha256)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s/%s", a->data_dir, sub, sha256);
    return is_dir(path);
}

static void *prep_main(void *arg)
{
    struct agent *a = arg;
    struct agent_prep *p = a->prep;
    sigset_t chld; /* exits of the workers are the event loop's to read (signalfd) */
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, NULL);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->todo == NULL)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop)
            break;
        struct prep_item *it = pop(&p->todo, &p->todo_tail);
        p->current = it;
        pthread_mutex_unlock(&p->mu);
        TY_INFO("prepare", "job %s attempt %lld: fetching what its launch needs", it->job_id,
                (long long)it->attempt);
        bool failed = false;
        if (it->ckpt_id > 0) {
            char *dir =
                agent__checkpoint_fetch(a, it->ckpt_id, it->ckpt_sha256, it->ckpt_shared, true);
            failed = dir == NULL;
            free(dir);
        }
        const char *why = NULL;
        if (it->code_sha256 &&
            agent__code_fetch(a, it->job_id, it->attempt, it->code_sha256, &why) != 0) {
            TY_WARN("prepare", "job %s: code package %s: %s", it->job_id, it->code_sha256,
                    why ? why : "unknown error");
            failed = true;
        }
        if (it->ckpkg_sha256 &&
            agent__code_fetch(a, it->job_id, it->attempt, it->ckpkg_sha256, &why) != 0) {
            TY_WARN("prepare", "job %s: checkpoint package %s: %s", it->job_id, it->ckpkg_sha256,
                    why ? why : "unknown error");
            failed = true;
        }
        if (failed) /* the job's event names the URL and the error, when the store was at fault */
            agent__uploader_fetch_failed(a, it->job_id, it->attempt);
        pthread_mutex_lock(&p->mu);
        p->current = NULL;
        push(&p->done, &p->done_tail, it);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int agent__prepare_start(struct agent *a)
{
    struct agent_prep *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    a->prep = p;
    if (pthread_create(&p->thread, NULL, prep_main, a) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        a->prep = NULL;
        return -1;
    }
    return 0;
}

void agent__prepare_stop(struct agent *a)
{
    struct agent_prep *p = a->prep;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    struct prep_item *it;
    while ((it = pop(&p->todo, &p->todo_tail)) != NULL)
        item_free(it);
    while ((it = pop(&p->done, &p->done_tail)) != NULL)
        item_free(it);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    a->prep = NULL;
}

bool agent__prepare_launch(struct agent *a, const struct aproto_launch *l, const char *text,
                           size_t len)
{
    struct agent_prep *p = a->prep;
    bool need_ckpt = l->checkpoint_dir == NULL && l->checkpoint_fetch_id > 0 &&
                     l->checkpoint_fetch_sha256 &&
                     !cached(a, "checkpoints/fetched", l->checkpoint_fetch_sha256);
    bool need_code = l->code_sha256 && !agent__code_cached(a, l->code_sha256);
    bool need_pkg = l->checkpoint_package && l->checkpoint_dir == NULL &&
                    l->checkpoint_fetch_id <= 0 && !agent__code_cached(a, l->checkpoint_package);
    if (p == NULL || (!need_ckpt && !need_code && !need_pkg))
        return false;
    struct prep_item *it = calloc(1, sizeof(*it));
    if (it == NULL)
        return false;
    it->text = malloc(len + 1);
    it->job_id = strdup(l->job_id);
    it->ckpt_sha256 = need_ckpt ? strdup(l->checkpoint_fetch_sha256) : NULL;
    it->code_sha256 = need_code ? strdup(l->code_sha256) : NULL;
    const char *shared = need_ckpt ? l->checkpoint_fetch_shared : NULL;
    it->ckpt_shared = shared ? strdup(shared) : NULL;
    it->ckpkg_sha256 = need_pkg ? strdup(l->checkpoint_package) : NULL;
    if (!it->text || !it->job_id || (need_ckpt && !it->ckpt_sha256) ||
        (shared && !it->ckpt_shared) || (need_code && !it->code_sha256) ||
        (need_pkg && !it->ckpkg_sha256)) {
        item_free(it);
        return false; /* out of memory: launch inline, as without the thread */
    }
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    it->attempt = l->attempt;
    it->ckpt_id = need_ckpt ? l->checkpoint_fetch_id : 0;
    pthread_mutex_lock(&p->mu);
    push(&p->todo, &p->todo_tail, it);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    TY_INFO("prepare", "job %s attempt %lld waits for its downloads:%s%s%s", l->job_id,
            (long long)l->attempt, need_ckpt ? " checkpoint" : "", need_code ? " code" : "",
            need_pkg ? " checkpoint-package" : "");
    return true;
}

void agent__prepare_cancel(struct agent *a, const char *job_id, int64_t attempt)
{
    struct agent_prep *p = a->prep;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    struct prep_item *lists[] = {p->todo, p->done, p->current};
    for (size_t i = 0; i < 3; i++) {
        for (struct prep_item *it = lists[i]; it; it = i < 2 ? it->next : NULL) {
            if ((job_id == NULL || strcmp(it->job_id, job_id) == 0) &&
                (attempt < 0 || it->attempt == attempt))
                it->cancelled = true;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

bool agent__prepare_wants(struct agent *a, const char *sha256)
{
    struct agent_prep *p = a->prep;
    if (p == NULL)
        return false;
    bool wants = false;
    pthread_mutex_lock(&p->mu);
    struct prep_item *lists[] = {p->todo, p->done, p->current};
    for (size_t i = 0; i < 3 && !wants; i++) {
        for (struct prep_item *it = lists[i]; it && !wants; it = i < 2 ? it->next : NULL)
            wants = (it->code_sha256 && strcmp(it->code_sha256, sha256) == 0) ||
                    (it->ckpkg_sha256 && strcmp(it->ckpkg_sha256, sha256) == 0);
    }
    pthread_mutex_unlock(&p->mu);
    return wants;
}

void agent__prepare_poll(struct agent *a)
{
    struct agent_prep *p = a->prep;
    if (p == NULL)
        return;
    /* One at a time: those still in `done` keep their packages from agent__code_trim. */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        struct prep_item *it = pop(&p->done, &p->done_tail);
        pthread_mutex_unlock(&p->mu);
        if (it == NULL)
            break;
        struct aproto_server_msg m;
        char err[256];
        if (it->cancelled) {
            TY_INFO("prepare",
                    "job %s attempt %lld was stopped while its downloads ran: not "
                    "launched",
                    it->job_id, (long long)it->attempt);
        } else if (aproto_server_msg_parse(it->text, it->len, &m, err, sizeof(err)) == 0) {
            if (m.type == APROTO_MSG_LAUNCH)
                agent__launch(a, &m.launch, false);
            aproto_server_msg_free(&m);
        } else {
            TY_ERROR("prepare", "job %s: the launch no longer parses: %s", it->job_id, err);
        }
        item_free(it);
    }
}
