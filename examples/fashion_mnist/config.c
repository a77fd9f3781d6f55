/* Option table and JSON parsing for the trainer. See config.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fm_error.h"

typedef enum { OPT_INT, OPT_REAL, OPT_BOOL, OPT_STRING } opt_type;

typedef struct opt {
    const char *name;
    opt_type type;
    size_t offset;
    size_t size; /* field size in bytes (strings: buffer size) */
    double def;  /* numeric default; for strings see def_str */
    const char *def_str;
    double min, max; /* inclusive bounds for numbers */
    const char *help;
} opt;

#define OFF(field) offsetof(fm_config, field), sizeof(((fm_config *)0)->field)

static const opt options[] = {
    {"epochs", OPT_INT, OFF(epochs), 10, NULL, 1, 100000, "passes over the training set"},
    {"batch_size", OPT_INT, OFF(batch_size), 128, NULL, 1, 65536,
     "global batch, split across workers"},
    {"lr", OPT_REAL, OFF(lr), 0.05, NULL, 1e-8, 10, "learning rate"},
    {"momentum", OPT_REAL, OFF(momentum), 0.9, NULL, 0, 0.999, "SGD momentum"},
    {"lr_decay", OPT_REAL, OFF(lr_decay), 0.9, NULL, 0.01, 1,
     "lr multiplier applied after each epoch"},
    {"seed", OPT_INT, OFF(seed), 42, NULL, 0, 9007199254740991.0,
     "seed of the initial weights and shuffles"},
    {"data_dir", OPT_STRING, OFF(data_dir), 0, "/usr/share/datasets/fashion-mnist", 0, 0,
     "directory of the *-ubyte.gz files"},
    {"limit_train", OPT_INT, OFF(limit_train), 0, NULL, 0, 1e9,
     "use the first N training images (0 = all)"},
    {"limit_test", OPT_INT, OFF(limit_test), 0, NULL, 0, 1e9,
     "evaluate on the first N test images (0 = all)"},
    {"checkpoint_every", OPT_INT, OFF(checkpoint_every), 1, NULL, 0, 100000,
     "epochs between checkpoints (0 = none)"},
    {"checkpoint_root", OPT_STRING, OFF(checkpoint_root), 0, "", 0, 0,
     "where checkpoints go (\"\" = $TMPDIR or /tmp)"},
    {"resume_from", OPT_STRING, OFF(resume_from), 0, "", 0, 0,
     "checkpoint dir to start from (the SDK's wins)"},
    {"blas_threads", OPT_INT, OFF(blas_threads), 1, NULL, 0, 256,
     "OpenBLAS threads per worker (0 = its default)"},
    {"min_accuracy", OPT_REAL, OFF(min_accuracy), 0, NULL, 0, 1,
     "exit 3 when the final accuracy is lower"},
    {"standardize", OPT_BOOL, OFF(standardize), 1, NULL, 0, 1,
     "standardize pixels after scaling to [0,1]"},
};

#define NOPTIONS (sizeof options / sizeof options[0])

void fm_config_defaults(fm_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NOPTIONS; i++) {
        const opt *o = &options[i];
        char *field = (char *)c + o->offset;
        switch (o->type) {
        case OPT_INT:
            *(int64_t *)field = (int64_t)o->def;
            break;
        case OPT_REAL:
            *(double *)field = o->def;
            break;
        case OPT_BOOL:
            *(bool *)field = o->def != 0;
            break;
        case OPT_STRING:
            snprintf(field, o->size, "%s", o->def_str);
            break;
        }
    }
}

static const opt *find_option(const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

/* apply_option: checks `v` against o's type and bounds and stores it into c. */
static int apply_option(fm_config *c, const opt *o, const json_t *v, char *err, size_t errlen)
{
    char *field = (char *)c + o->offset;
    switch (o->type) {
    case OPT_INT: {
        if (!json_is_integer(v)) {
            fm_seterr(err, errlen, "config key \"%s\": expected an integer", o->name);
            return FM_EINVAL;
        }
        json_int_t n = json_integer_value(v);
        if ((double)n < o->min || (double)n > o->max) {
            fm_seterr(err, errlen, "config key \"%s\": %lld out of range [%.0f, %.0f]", o->name,
                      (long long)n, o->min, o->max);
            return FM_EINVAL;
        }
        *(int64_t *)field = (int64_t)n;
        return FM_OK;
    }
    case OPT_REAL: {
        if (!json_is_number(v)) {
            fm_seterr(err, errlen, "config key \"%s\": expected a number", o->name);
            return FM_EINVAL;
        }
        double d = json_number_value(v);
        if (!isfinite(d) || d < o->min || d > o->max) {
            fm_seterr(err, errlen, "config key \"%s\": %g out of range [%g, %g]", o->name, d,
                      o->min, o->max);
            return FM_EINVAL;
        }
        *(double *)field = d;
        return FM_OK;
    }
    case OPT_BOOL:
        if (!json_is_boolean(v)) {
            fm_seterr(err, errlen, "config key \"%s\": expected true or false", o->name);
            return FM_EINVAL;
        }
        *(bool *)field = json_is_true(v);
        return FM_OK;
    case OPT_STRING: {
        const char *s = json_string_value(v);
        if (s == NULL || s[0] == '\0') {
            fm_seterr(err, errlen, "config key \"%s\": expected a non-empty string", o->name);
            return FM_EINVAL;
        }
        if (strlen(s) >= o->size) {
            fm_seterr(err, errlen, "config key \"%s\": too long", o->name);
            return FM_EINVAL;
        }
        snprintf(field, o->size, "%s", s);
        return FM_OK;
    }
    }
    return FM_EINVAL;
}

int fm_config_from_json(fm_config *c, const json_t *obj, char *err, size_t errlen)
{
    if (obj == NULL)
        return FM_OK;
    if (!json_is_object(obj)) {
        fm_seterr(err, errlen, "config: train_loop_config must be a JSON object");
        return FM_EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        const opt *o = find_option(key);
        if (o == NULL) {
            fm_seterr(err, errlen, "config key \"%s\": unknown option", key);
            return FM_EINVAL;
        }
        int rc = apply_option(c, o, v, err, errlen);
        if (rc != FM_OK)
            return rc;
    }
    return FM_OK;
}

void fm_config_print_help(FILE *f)
{
    static const char *const type_names[] = {"integer", "number", "boolean", "string"};
    fprintf(f, "  %-17s %-8s %-10s %s\n", "key", "type", "default", "meaning");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const opt *o = &options[i];
        char def[96];
        if (o->type == OPT_STRING && o->def_str[0] == '\0')
            snprintf(def, sizeof def, "\"\"");
        else if (o->type == OPT_STRING)
            snprintf(def, sizeof def, "(below)");
        else if (o->type == OPT_BOOL)
            snprintf(def, sizeof def, "%s", o->def != 0 ? "true" : "false");
        else
            snprintf(def, sizeof def, "%g", o->def);
        fprintf(f, "  %-17s %-8s %-10s %s\n", o->name, type_names[o->type], def, o->help);
        if (o->type == OPT_STRING && o->def_str[0] != '\0')
            fprintf(f, "  %-37s default \"%s\"\n", "", o->def_str);
    }
}

json_t *fm_config_to_json(const fm_config *c)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    for (size_t i = 0; i < NOPTIONS; i++) {
        const opt *p = &options[i];
        const char *field = (const char *)c + p->offset;
        json_t *v = NULL;
        switch (p->type) {
        case OPT_INT:
            v = json_integer(*(const int64_t *)field);
            break;
        case OPT_REAL:
            v = json_real(*(const double *)field);
            break;
        case OPT_BOOL:
            v = json_boolean(*(const bool *)field);
            break;
        case OPT_STRING:
            v = json_string(field);
            break;
        }
        if (v == NULL || json_object_set_new(o, p->name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
