/* Running statements on a pooled connection (db.h): for the store_*.c files and the migrator
 * only, so that SQL and libpq stay inside the store. */
#ifndef SRV_DB_QUERY_H
#define SRV_DB_QUERY_H

#include "db.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

/* A statement: prepared under `name` on first use on each connection (and again after a
 * reconnect). Declare them `static const` next to the store function that uses them. */
struct db_stmt {
    const char *name;
    const char *sql;
    int nparams;
    bool readonly; /* false: a run that returns or changes rows bumps the data generation */
};

/* The connection's libpq handle. */
PGconn *db_pg(struct db_conn *c);

/* Runs `stmt` with text `params` (NULL entries are SQL NULL). On success returns the row count
 * (for commands: rows affected) and, when `res` is non-NULL, stores the result there (caller
 * PQclear()s it; only when there is at least one row). On error returns DB_SOFT_ERROR or
 * DB_HARD_ERROR and stores nothing. */
int db_exec(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
            PGresult **res);
/* db_exec in two halves, so that the caller works while PostgreSQL runs the statement: db_send
 * sends it (0, or DB_SOFT_ERROR / DB_HARD_ERROR and nothing was sent) and db_collect waits for its
 * result (db_exec's return and `res`). Nothing else may run on `c` in between. */
int db_send(struct db_conn *c, const struct db_stmt *stmt, const char *const *params);
/* db_exec and db_send where parameter i is lengths[i] bytes in PostgreSQL's binary format when
 * formats[i] is 1 (db_array.h), text when 0; NULL lengths and formats: all text. */
int db_exec_params(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                   const int *lengths, const int *formats, PGresult **res);
int db_send_params(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                   const int *lengths, const int *formats);
int db_collect(struct db_conn *c, const struct db_stmt *stmt, PGresult **res);
/* True when the statement db_send_params sent is done: db_collect reads its result without
 * waiting (and when the connection failed: db_collect then says so). Reads what has arrived. */
bool db_sent_done(struct db_conn *c);
/* The connection's socket, to poll for the result of what db_send_params sent (readable: call
 * db_sent_done); -1 when there is none. */
int db_socket(struct db_conn *c);
/* db_exec for a one-column query: *out receives a malloc'd copy of the first row's value (NULL
 * for SQL NULL). Same return convention; *out is untouched unless a row came back. */
int db_exec_text(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                 char **out);
/* Runs a parameterless command (BEGIN, COMMIT, migration files). Same return convention. */
int db_exec_simple(struct db_conn *c, const char *sql);
/* Says that the statement just run on `c` changed API tokens: bumps the token generation (db.h)
 * now and, inside a db_run_txn, again after its COMMIT. */
void db_tokens_changed(struct db_conn *c);

/* Named, typed column readers (db_col.c), for reading a result by column name, not position.
 * A column the statement does not return is our bug: logged (TY_BUG), and the reader fails. So is
 * a value that does not parse or is out of range, and SQL NULL where a value is required. Each
 * returns 0 and sets *out, or -1 and leaves *out untouched. Strings are borrowed from `res`. */
/* The number of column `name` in res, or -1 (logged) when there is none. */
int db_col(const PGresult *res, const char *name);
/* Whether the value is SQL NULL (a missing column, logged, reads as NULL). */
bool db_col_is_null(const PGresult *res, int row, const char *name);
/* The text of the value (SQL NULL refused). */
int db_col_text(const PGresult *res, int row, const char *name, const char **out);
/* The text of the value; *out is NULL for SQL NULL. */
int db_col_text_opt(const PGresult *res, int row, const char *name, const char **out);
/* A bigint, integer or smallint value. */
int db_col_int64(const PGresult *res, int row, const char *name, int64_t *out);
/* An integer value within the range of int. */
int db_col_int(const PGresult *res, int row, const char *name, int *out);
/* A boolean value ('t' or 'f'). */
int db_col_bool(const PGresult *res, int row, const char *name, bool *out);
/* A double precision (or any numeric) value, finite. */
int db_col_double(const PGresult *res, int row, const char *name, double *out);

/* SQLSTATE of the last failed db_exec on this connection ("" if none), e.g. "23505". */
const char *db_last_sqlstate(const struct db_conn *c);

#endif
