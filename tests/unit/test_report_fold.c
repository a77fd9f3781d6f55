/* Unit tests for server/control/report_fold.c: the blocks of report_blocks summed up by the
 * control thread as it sends a series' reports. What a block holds is compared with PostgreSQL's
 * own summing up in tests/integration/test_metrics.py; here, when a block is sent and when it is
 * left to the maintenance. */
#include "ty_test.h"

#include "report_fold.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Adds report `seq` of (job 1, attempt 1, rank) with values `json` (a JSON object). */
static void add(struct report_fold *f, struct store_report_blocks *out, int rank, int64_t seq,
                const char *json)
{
    json_t *values = json_loads(json, 0, NULL);
    assert_non_null(values);
    struct aproto_metric metrics[16];
    size_t n = 0;
    const char *name;
    json_t *value;
    json_object_foreach(values, name, value)
    {
        assert_true(n < 16);
        metrics[n++] = (struct aproto_metric){
            .name = name, .is_number = json_is_number(value), .number = json_number_value(value)};
    }
    int64_t step = seq * 10;
    struct store_report r = {.job = 1,
                             .seq = seq,
                             .attempt = 1,
                             .rank = rank,
                             .step = &step,
                             .time = "2030-01-02T03:04:05.123Z",
                             .metrics = metrics,
                             .n_metrics = n};
    report_fold_add(f, &r, out);
    json_decref(values);
}

/* The row of `name` in out's block k, or NULL. */
static const struct store_block_row *row_of(const struct store_report_blocks *out, size_t k,
                                            const char *name)
{
    for (size_t i = 0; i < out->nrows; i++)
        if (out->row[i].at == k && strcmp(out->text + out->row[i].name, name) == 0)
            return &out->row[i];
    return NULL;
}

static void a_block_is_sent_with_the_first_report_past_it(void **state)
{
    (void)state;
    struct report_fold *f = report_fold_new();
    struct store_report_blocks out = {0};
    report_fold_begin(f, &out);
    for (int64_t seq = 1; seq <= 15; seq++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"loss\": %lld, \"acc\": 0.5}", (long long)(20 - seq));
        add(f, &out, 0, seq, json);
    }
    assert_int_equal(out.n, 0); /* block 0 may still grow */
    add(f, &out, 0, 16, "{\"loss\": 1}");
    assert_int_equal(out.n, 1);
    assert_true(out.block[0].block == 0 && out.block[0].reports == 15);
    const struct store_block_row *loss = row_of(&out, 0, "loss");
    assert_non_null(loss);
    assert_true(loss->count == 15 && loss->seq_first == 1 && loss->seq_last == 15);
    assert_true(loss->v_first == 19 && loss->v_last == 5 && loss->v_min == 5 && loss->v_max == 19);
    assert_true(loss->step_first == 10 && loss->step_last == 150);
    assert_string_equal(out.text + loss->start_at, "2030-01-02T03:04:05.123Z");
    assert_non_null(row_of(&out, 0, "acc"));
    assert_int_equal(out.nrows, 2);
    report_fold_blocks_free(&out);
    report_fold_free(f);
}

static void names_in_another_order_and_a_name_left_out_are_summed_up(void **state)
{
    (void)state;
    struct report_fold *f = report_fold_new();
    struct store_report_blocks out = {0};
    report_fold_begin(f, &out);
    add(f, &out, 0, 16, "{\"a\": 1, \"b\": 2, \"c\": -0.0}");
    add(f, &out, 0, 17, "{\"c\": 3, \"a\": 4}");
    add(f, &out, 0, 18, "{\"b\": 5, \"a\": -1}");
    add(f, &out, 0, 32, "{\"a\": 0}");
    assert_int_equal(out.n, 1);
    const struct store_block_row *a = row_of(&out, 0, "a"), *b = row_of(&out, 0, "b"),
                                 *c = row_of(&out, 0, "c");
    assert_true(a && b && c);
    assert_true(a->count == 3 && a->v_min == -1 && a->v_max == 4 && a->v_last == -1);
    assert_true(b->count == 2 && b->seq_first == 16 && b->seq_last == 18 && b->v_last == 5);
    assert_true(c->count == 2 && c->v_first == 0 && !signbit(c->v_first) && c->v_max == 3);
    report_fold_blocks_free(&out);
    report_fold_free(f);
}

static void a_block_not_seen_whole_is_left_to_the_maintenance(void **state)
{
    (void)state;
    struct report_fold *f = report_fold_new();
    struct store_report_blocks out = {0};
    report_fold_begin(f, &out);
    /* rank 0: a value that is not a number; rank 1: a report again, out of order; rank 2: a
     * report the batch did not store (forgotten); rank 3: whole */
    for (int64_t seq = 16; seq < 20; seq++)
        for (int rank = 0; rank < 4; rank++)
            add(f, &out, rank, seq, rank == 0 && seq == 17 ? "{\"x\": \"text\"}" : "{\"x\": 1}");
    add(f, &out, 1, 17, "{\"x\": 1}");
    struct store_report gone = {.job = 1, .seq = 18, .attempt = 1, .rank = 2};
    report_fold_forget(f, &gone);
    for (int rank = 0; rank < 4; rank++)
        add(f, &out, rank, 32, "{\"x\": 2}");
    assert_int_equal(out.n, 1);
    assert_int_equal(out.block[0].rank, 3);
    /* the next block of each is summed up again */
    for (int rank = 0; rank < 4; rank++)
        add(f, &out, rank, 48, "{\"x\": 3}");
    assert_int_equal(out.n, 5);
    report_fold_begin(f, &out); /* a new batch: out emptied */
    assert_int_equal(out.n, 0);
    assert_int_equal(out.nrows, 0);
    report_fold_clear(f); /* a failed batch: every series starts over */
    add(f, &out, 0, 49, "{\"x\": 3}");
    add(f, &out, 0, 64, "{\"x\": 3}");
    assert_int_equal(out.n, 1); /* block 3 from seq 49 on: the batch checks the stored count */
    assert_int_equal(out.block[0].reports, 1);
    report_fold_blocks_free(&out);
    report_fold_free(f);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_block_is_sent_with_the_first_report_past_it),
    cmocka_unit_test(names_in_another_order_and_a_name_left_out_are_summed_up),
    cmocka_unit_test(a_block_not_seen_whole_is_left_to_the_maintenance),
};

TY_TEST_MAIN(tests)
