/* Named, typed column readers (db_query.h): a result read by column name, each value parsed with
 * its range checked, so that a statement whose columns move or change type fails loudly. */
#include "db_query.h"

#include "log.h"
#include "util.h"

#include <float.h>
#include <limits.h>
#include <string.h>

int db_col(const PGresult *res, const char *name)
{
    int col = PQfnumber(res, name);
    if (col < 0)
        TY_BUG("store", "the result has no column \"%s\"", name);
    return col;
}

bool db_col_is_null(const PGresult *res, int row, const char *name)
{
    int col = db_col(res, name);
    return col < 0 || PQgetisnull(res, row, col);
}

int db_col_text_opt(const PGresult *res, int row, const char *name, const char **out)
{
    int col = db_col(res, name);
    if (col < 0)
        return -1;
    *out = PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
    return 0;
}

/* The value of a column that must not be NULL, or NULL (logged). */
static const char *value_nn(const PGresult *res, int row, const char *name)
{
    const char *v = NULL;
    if (db_col_text_opt(res, row, name, &v) != 0)
        return NULL;
    if (v == NULL)
        TY_BUG("store", "column \"%s\" is NULL in row %d", name, row);
    return v;
}

int db_col_text(const PGresult *res, int row, const char *name, const char **out)
{
    const char *v = value_nn(res, row, name);
    if (v == NULL)
        return -1;
    *out = v;
    return 0;
}

int db_col_int64(const PGresult *res, int row, const char *name, int64_t *out)
{
    const char *v = value_nn(res, row, name);
    if (v == NULL)
        return -1;
    if (util_parse_int64(v, INT64_MIN, INT64_MAX, out) != 0) {
        TY_BUG("store", "column \"%s\": '%s' is not an integer", name, v);
        return -1;
    }
    return 0;
}

int db_col_int(const PGresult *res, int row, const char *name, int *out)
{
    const char *v = value_nn(res, row, name);
    int64_t n;
    if (v == NULL)
        return -1;
    if (util_parse_int64(v, INT_MIN, INT_MAX, &n) != 0) {
        TY_BUG("store", "column \"%s\": '%s' is not an int", name, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int db_col_bool(const PGresult *res, int row, const char *name, bool *out)
{
    const char *v = value_nn(res, row, name);
    if (v == NULL)
        return -1;
    if (strcmp(v, "t") != 0 && strcmp(v, "f") != 0) {
        TY_BUG("store", "column \"%s\": '%s' is not a boolean", name, v);
        return -1;
    }
    *out = v[0] == 't';
    return 0;
}

int db_col_double(const PGresult *res, int row, const char *name, double *out)
{
    const char *v = value_nn(res, row, name);
    if (v == NULL)
        return -1;
    if (util_parse_double(v, -DBL_MAX, DBL_MAX, out) != 0) {
        TY_BUG("store", "column \"%s\": '%s' is not a finite number", name, v);
        return -1;
    }
    return 0;
}
