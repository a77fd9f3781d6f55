/* The parsed specs of pending jobs, kept across scheduling passes: a spec never changes, so each
 * is fetched and parsed once, not once per pass (a deep queue would otherwise cost a full parse
 * of every pending job on every submission). An open-addressing table keyed by job id. */
#include "control_internal.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

struct ctl_spec {
    int64_t id;
    unsigned pass; /* last pass that used it */
    struct jobspec js;
    char *message; /* status message last written for it */
};

static size_t slot_of(const struct ctl_specs *t, int64_t id)
{
    return ((uint64_t)id * 11400714819323198485ull) & (t->cap - 1);
}

static struct ctl_spec **find_slot(struct ctl_specs *t, int64_t id)
{
    size_t i = slot_of(t, id);
    while (t->slots[i] && t->slots[i]->id != id)
        i = (i + 1) & (t->cap - 1);
    return &t->slots[i];
}

/* Rebuilds the table with room for `want` entries, keeping only entries used in this pass. */
static int rebuild(struct ctl_specs *t, size_t want)
{
    size_t cap = 64;
    while (cap < 2 * want)
        cap *= 2;
    struct ctl_specs next = {.cap = cap, .pass = t->pass};
    next.slots = calloc(cap, sizeof(*next.slots));
    if (next.slots == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        struct ctl_spec *s = t->slots[i];
        if (s == NULL)
            continue;
        if (s->pass != t->pass) {
            jobspec_clear(&s->js);
            free(s->message);
            free(s);
            continue;
        }
        *find_slot(&next, s->id) = s;
        next.count++;
    }
    free(t->slots);
    *t = next;
    return 0;
}

const struct jobspec *ctl__spec_get(struct ctl_specs *t, int64_t id)
{
    if (t->cap == 0)
        return NULL;
    struct ctl_spec *s = *find_slot(t, id);
    if (s == NULL)
        return NULL;
    s->pass = t->pass;
    return &s->js;
}

const struct jobspec *ctl__spec_put(struct ctl_specs *t, int64_t id, const char *spec_json)
{
    if ((t->count + 1) * 2 > t->cap && rebuild(t, t->count + 1) != 0)
        return NULL;
    json_t *spec = json_loads(spec_json, 0, NULL);
    struct ctl_spec *s = calloc(1, sizeof(*s));
    char err[256];
    if (spec == NULL || s == NULL || jobspec_from_json(spec, &s->js, err, sizeof(err)) != 0) {
        TY_BUG("control", "stored spec of pending job %lld does not parse", (long long)id);
        json_decref(spec);
        free(s);
        return NULL;
    }
    json_decref(spec);
    s->id = id;
    s->pass = t->pass;
    *find_slot(t, id) = s;
    t->count++;
    return &s->js;
}

bool ctl__spec_message_changed(struct ctl_specs *t, int64_t id, const char *message)
{
    if (t->cap == 0)
        return true;
    struct ctl_spec *s = *find_slot(t, id);
    if (s == NULL)
        return true;
    if (s->message && strcmp(s->message, message) == 0)
        return false;
    free(s->message);
    s->message = strdup(message);
    return true;
}

void ctl__specs_next_pass(struct ctl_specs *t)
{
    /* Drop what the previous pass did not use (placed, stopped or deleted jobs). */
    if (t->cap)
        rebuild(t, t->count);
    t->pass++;
}

void ctl__specs_free(struct ctl_specs *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i]) {
            jobspec_clear(&t->slots[i]->js);
            free(t->slots[i]->message);
            free(t->slots[i]);
        }
    }
    free(t->slots);
    memset(t, 0, sizeof(*t));
}
