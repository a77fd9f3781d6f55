/* PHASE 2 placeholder */
#include "agent.h"

#include <libwebsockets.h>

int agent__report_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                           void *in, size_t len)
{
    (void)wsi; (void)reason; (void)user; (void)in; (void)len;
    return 0;
}
int agent__report_listen(struct agent *a) { (void)a; return 0; }
void agent__report_close_all(struct agent *a) { (void)a; }
