/* PHASE 2 placeholder */
#include "agent.h"
void agent__spool_reload(struct agent *a) { (void)a; }
