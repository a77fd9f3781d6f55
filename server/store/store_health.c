/* The health check's query. */
#include "store.h"

#include "db_query.h"

int store_ping(struct db_conn *c)
{
    int qs = db_exec_simple(c, "SELECT 1");
    return qs < 0 ? qs : 1;
}
