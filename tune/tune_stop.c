/* Stopping criteria: Ray Tune's RunConfig(stop={...}) as a dict of thresholds. See tune.h. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

enum tune_decision tune_stop_check(const json_t *stop, const json_t *metrics, double iteration,
                                   char *reason, size_t reasonlen)
{
    if (reasonlen)
        reason[0] = '\0';
    const char *key;
    const json_t *bound;
    json_object_foreach((json_t *)stop, key, bound)
    {
        if (!json_is_number(bound))
            continue;
        const json_t *v = json_object_get(metrics, key);
        double x;
        if (json_is_number(v))
            x = json_number_value(v);
        else if (strcmp(key, "training_iteration") == 0)
            x = iteration;
        else
            continue;
        if (x >= json_number_value(bound)) {
            snprintf(reason, reasonlen, "stop: %s %g >= %g", key, x, json_number_value(bound));
            return TUNE_STOP;
        }
    }
    return TUNE_CONTINUE;
}
