/* The store's named, typed column readers (server/store/db_col.c), on results built without a
 * server (PQmakeEmptyPGresult). */
#include "ty_test.h"

#include "db_query.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/* A result with columns id (bigint), n (int), ok (bool), x (float8), name (text) and one row of
 * the given values (NULL: SQL NULL). Free with PQclear. */
static PGresult *one_row(const char *id, const char *n, const char *ok, const char *x,
                         const char *name)
{
    PGresult *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    assert_non_null(res);
    PGresAttDesc atts[5] = {
        {.name = "id", .typid = 20, .typlen = 8},    {.name = "n", .typid = 23, .typlen = 4},
        {.name = "ok", .typid = 16, .typlen = 1},    {.name = "x", .typid = 701, .typlen = 8},
        {.name = "name", .typid = 25, .typlen = -1},
    };
    assert_int_equal(PQsetResultAttrs(res, 5, atts), 1);
    const char *values[5] = {id, n, ok, x, name};
    for (int c = 0; c < 5; c++)
        assert_int_equal(
            PQsetvalue(res, 0, c, (char *)values[c], values[c] ? (int)strlen(values[c]) : -1), 1);
    return res;
}

static void db_columns_are_read_by_name(void **state)
{
    (void)state;
    PGresult *res = one_row("9007199254740993", "-7", "t", "0.25", "gpu-node");
    int64_t id = 0;
    int n = 0;
    bool ok = false;
    double x = 0;
    const char *name = NULL;
    assert_int_equal(db_col(res, "x"), 3);
    assert_int_equal(db_col_text(res, 0, "name", &name), 0);
    assert_string_equal(name, "gpu-node");
    assert_int_equal(db_col_double(res, 0, "x", &x), 0);
    assert_true(x == 0.25);
    assert_int_equal(db_col_bool(res, 0, "ok", &ok), 0);
    assert_true(ok);
    assert_int_equal(db_col_int(res, 0, "n", &n), 0);
    assert_int_equal(n, -7);
    assert_int_equal(db_col_int64(res, 0, "id", &id), 0);
    assert_true(id == INT64_C(9007199254740993));
    assert_false(db_col_is_null(res, 0, "id"));
    PQclear(res);
}

static void db_column_missing_is_refused(void **state)
{
    (void)state;
    PGresult *res = one_row("1", "2", "f", "3", "a");
    int64_t id = 42;
    const char *text = "kept";
    assert_int_equal(db_col(res, "nope"), -1);
    assert_int_equal(db_col_int64(res, 0, "nope", &id), -1);
    assert_true(id == 42);
    assert_int_equal(db_col_text_opt(res, 0, "nope", &text), -1);
    assert_string_equal(text, "kept");
    assert_true(db_col_is_null(res, 0, "nope"));
    PQclear(res);
}

static void db_column_null_is_refused_where_a_value_is_required(void **state)
{
    (void)state;
    PGresult *res = one_row(NULL, NULL, NULL, NULL, NULL);
    int64_t id = 5;
    int n = 6;
    bool ok = true;
    double x = 7;
    const char *text = "kept";
    assert_true(db_col_is_null(res, 0, "id"));
    assert_int_equal(db_col_int64(res, 0, "id", &id), -1);
    assert_int_equal(db_col_int(res, 0, "n", &n), -1);
    assert_int_equal(db_col_bool(res, 0, "ok", &ok), -1);
    assert_int_equal(db_col_double(res, 0, "x", &x), -1);
    assert_int_equal(db_col_text(res, 0, "name", &text), -1);
    assert_true(id == 5 && n == 6 && ok && x == 7);
    assert_string_equal(text, "kept");
    assert_int_equal(db_col_text_opt(res, 0, "name", &text), 0);
    assert_null(text);
    PQclear(res);
}

static void db_column_out_of_range_or_malformed_is_refused(void **state)
{
    (void)state;
    PGresult *res = one_row("12x", "2147483648", "true", "nan", "");
    int64_t id = 0;
    int n = 0;
    bool ok = false;
    double x = 0;
    assert_int_equal(db_col_int64(res, 0, "id", &id), -1);
    assert_int_equal(db_col_int(res, 0, "n", &n), -1);
    assert_int_equal(db_col_int64(res, 0, "n", &id), 0); /* fits a bigint */
    assert_true(id == INT64_C(2147483648));
    assert_int_equal(db_col_bool(res, 0, "ok", &ok), -1);
    assert_int_equal(db_col_double(res, 0, "x", &x), -1);
    assert_int_equal(db_col_int64(res, 0, "name", &id), -1); /* empty text */
    PQclear(res);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(db_columns_are_read_by_name),
    cmocka_unit_test(db_column_missing_is_refused),
    cmocka_unit_test(db_column_null_is_refused_where_a_value_is_required),
    cmocka_unit_test(db_column_out_of_range_or_malformed_is_refused),
};
TY_TEST_MAIN(tests)
