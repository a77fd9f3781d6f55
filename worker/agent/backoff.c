/* Reconnect backoff: pure arithmetic, the randomness is passed in. */
#include "agent.h"

int64_t agent_backoff_delay_ms(unsigned attempt, double u)
{
    int64_t base = AGENT_BACKOFF_BASE_MS;
    for (unsigned i = 0; i < attempt && base < AGENT_BACKOFF_MAX_MS; i++)
        base *= 2;
    if (base > AGENT_BACKOFF_MAX_MS)
        base = AGENT_BACKOFF_MAX_MS;
    if (!(u >= 0.0)) /* also catches NaN */
        u = 0.0;
    if (u >= 1.0)
        u = 0.999999;
    int64_t d = (int64_t)((double)base * (0.5 + u));
    return d < 1 ? 1 : d;
}
