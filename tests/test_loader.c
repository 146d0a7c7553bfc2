/* test_loader.c: the loaders over the data_fixtures.h data sets: the documented Fisher-Yates order
 * re-derived here, each sample once per epoch, drop_last; the eval split in order with its end reported
 * once; data-parallel shards (the rows of each global batch, each once); cursor resume, the same batches
 * with one thread, and bad cursors refused. */
#include "data_fixtures.h"

#include <stdlib.h>

TU_CONTEXT(7, 2)

/* The documented shuffle, written again from ampc.h. */
static void ref_perm(uint64_t seed, int64_t epoch, int n, int *perm) {
    for (int i = 0; i < n; i++) perm[i] = i;
    uint64_t k = 0;
    for (int i = n - 1; i >= 1; i--, k++) {
        uint32_t w[4];
        ampc_rng_block(seed, 0x6461746100000000ull + (uint64_t)epoch, k / 4, w);
        int j = (int)(((uint64_t)w[k % 4] * (uint64_t)(i + 1)) >> 32);
        int t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

/* The sample ids of the next batch into ids (returns B; 0 at an end). */
static int next_ids(ampc_loader *ld, int *ids) {
    ampc_tensor *x, *y;
    bool end;
    ASSERT_OK(ampc_loader_next(ld, &x, &y, &end));
    if (end) {
        assert_null(x);
        return 0;
    }
    int B = (int)ampc_tensor_dim(x, 0);
    for (int b = 0; b < B; b++) ids[b] = row_id(x, b);
    ampc_ctx_step_end(g_ctx);
    return B;
}

static void test_shuffle_epochs(void **state) {
    (void)state;
    tu_dir_make("data");
    write_fashion();
    ampc_dataset *ds;
    ASSERT_OK(open_fashion(&ds));
    const ampc_loader_params tp = {.batch = 5, .seed = 42, .shuffle = true, .repeat = true};
    ampc_loader *ld, *same, *other;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &tp, &ld));
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &tp, &same));
    ampc_loader_params op = tp;
    op.seed = 43;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &op, &other));
    int order[3][NTRAIN], ids[8], ids2[8], ref[NTRAIN];
    bool other_differs = false;
    for (int e = 0; e < 3; e++) {
        int got = 0;
        bool seen[NTRAIN] = {false};
        while (got < NTRAIN) {
            int B = next_ids(ld, ids);
            assert_int_equal(B, got + 5 <= NTRAIN ? 5 : NTRAIN - got); /* kept last batch of 2 */
            assert_int_equal(next_ids(same, ids2), B);
            assert_memory_equal(ids, ids2, B * sizeof(int));
            assert_int_equal(next_ids(other, ids2), B);
            if (memcmp(ids, ids2, B * sizeof(int))) other_differs = true;
            for (int b = 0; b < B; b++, got++) {
                assert_false(seen[ids[b]]); /* every sample exactly once */
                seen[ids[b]] = true;
                order[e][got] = ids[b];
            }
        }
        ampc_loader_cursor c;
        ASSERT_OK(ampc_loader_get_cursor(ld, &c));
        assert_true(c.epoch == e && c.position == NTRAIN);
        ref_perm(42, e, NTRAIN, ref);
        assert_memory_equal(order[e], ref, sizeof ref);
    }
    assert_true(other_differs);
    assert_true(memcmp(order[0], order[1], sizeof order[0]) && memcmp(order[1], order[2], sizeof order[0]));
    ampc_loader_free(ld);
    ampc_loader_free(same);
    ampc_loader_free(other);
    /* drop_last: 7 batches of 5, the last 2 of each epoch's order never seen */
    ampc_loader_params dp = tp;
    dp.drop_last = true;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &dp, &ld));
    assert_int_equal(ampc_loader_num_batches(ld), 7);
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 7; k++) {
            assert_int_equal(next_ids(ld, ids), 5);
            assert_memory_equal(ids, order[e] + 5 * k, 5 * sizeof(int));
        }
    ampc_loader_free(ld);
    ampc_dataset_free(ds);
    tu_dir_remove();
}

static void test_eval_order_and_end(void **state) {
    (void)state;
    tu_dir_make("data");
    write_fashion();
    ampc_dataset *ds;
    ASSERT_OK(open_fashion(&ds));
    ampc_loader *ld;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.batch = 10}, &ld));
    assert_int_equal(ampc_loader_num_batches(ld), 4);
    int ids[10];
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < 4; k++) {
            int B = next_ids(ld, ids);
            assert_int_equal(B, k < 3 ? 10 : 7);
            for (int b = 0; b < B; b++) assert_int_equal(ids[b], 10 * k + b);
        }
        assert_int_equal(next_ids(ld, ids), 0); /* the end, reported once */
        ampc_loader_cursor c;
        ASSERT_OK(ampc_loader_get_cursor(ld, &c));
        assert_true(c.epoch == pass + 1 && c.position == 0);
    }
    ampc_tensor *x, *y;
    ASSERT_OK(ampc_loader_next(ld, &x, &y, NULL)); /* end may be NULL */
    assert_non_null(x);
    ampc_ctx_step_end(g_ctx);
    ampc_loader_free(ld);
    ampc_dataset_free(ds);
    tu_dir_remove();
}

/* Runs k batches of ld and returns their concatenated bytes (x then y per batch). */
static uint8_t *run_batches(ampc_loader *ld, int k, size_t *len) {
    uint8_t *out = NULL;
    size_t n = 0;
    for (int i = 0; i < k; i++) {
        ampc_tensor *x, *y;
        ASSERT_OK(ampc_loader_next(ld, &x, &y, NULL));
        size_t bx = (size_t)ampc_tensor_numel(x) * ampc_dtype_size(ampc_tensor_dtype(x));
        size_t by = (size_t)ampc_tensor_numel(y) * 8;
        out = realloc(out, n + bx + by);
        memcpy(out + n, ampc_tensor_data(x), bx);
        memcpy(out + n + bx, ampc_tensor_data(y), by);
        n += bx + by;
        ampc_ctx_step_end(ampc_tensor_ctx(x));
    }
    *len = n;
    return out;
}

/* Data-parallel shards: the shards of a global batch are its rows, in order, each once (uneven ones too:
 * ampc_loader_shard_rows' split), the cursor moves by the global batch on every shard, and bad shard
 * parameters are refused naming them. */
static void test_loader_shards(void **state) {
    (void)state;
    char t[400];
    for (int i = 0; i < 400; i++) t[i] = (char)('a' + i * 7 % 26);
    tu_dir_make("data");
    write_file("shards.txt", t, sizeof t, false);
    ampc_dataset *ds;
    ASSERT_OK(open_text("shards.txt", 0, &ds));
    int64_t first, rows;
    ampc_loader_shard_rows(5, 0, 2, &first, &rows), assert_true(first == 0 && rows == 3);
    ampc_loader_shard_rows(5, 1, 2, &first, &rows), assert_true(first == 3 && rows == 2);
    ampc_loader_shard_rows(5, 2, 3, &first, &rows), assert_true(first == 4 && rows == 1);
    ampc_loader_shard_rows(5, 0, 0, &first, &rows), assert_true(first == 0 && rows == 5); /* 0: one shard */
    ampc_loader_params p = {.batch = 5, .context = 8, .seed = 3, .shuffle = true, .drop_last = true, .repeat = true};
    ampc_loader *whole, *part[2];
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &p, &whole));
    for (int r = 0; r < 2; r++) {
        ampc_loader_params q = p;
        q.shard_index = r, q.shard_count = 2;
        ASSERT_OK(ampc_loader_new(g_ctx, ds, &q, &part[r]));
    }
    for (int step = 0; step < 12; step++) { /* past an epoch (49 windows: 9 batches of 5) */
        ampc_tensor *x, *y, *xs[2], *ys[2];
        ASSERT_OK(ampc_loader_next(whole, &x, &y, NULL));
        int64_t all[5 * 8], got[5 * 8];
        ASSERT_OK(ampc_tensor_copy_to(x, all, AMPC_DTYPE_I64));
        for (int r = 0; r < 2; r++) {
            ASSERT_OK(ampc_loader_next(part[r], &xs[r], &ys[r], NULL));
            assert_int_equal(ampc_tensor_dim(xs[r], 0), r ? 2 : 3);
        }
        ASSERT_OK(ampc_tensor_copy_to(xs[0], got, AMPC_DTYPE_I64));
        ASSERT_OK(ampc_tensor_copy_to(xs[1], got + 3 * 8, AMPC_DTYPE_I64));
        assert_memory_equal(all, got, sizeof all);
        ampc_loader_cursor cw, c0, c1;
        ASSERT_OK(ampc_loader_get_cursor(whole, &cw));
        ASSERT_OK(ampc_loader_get_cursor(part[0], &c0));
        ASSERT_OK(ampc_loader_get_cursor(part[1], &c1));
        assert_true(cw.epoch == c0.epoch && cw.position == c0.position && c0.epoch == c1.epoch &&
                    c0.position == c1.position);
        ampc_ctx_step_end(g_ctx);
    }
    ampc_loader_free(whole), ampc_loader_free(part[0]), ampc_loader_free(part[1]);
    ampc_loader *ld = (ampc_loader *)1;
    static const int bad[][2] = {{2, 2}, {-1, 2}, {0, -1}};
    for (int i = 0; i < 3; i++) {
        ampc_loader_params q = p;
        q.shard_index = bad[i][0], q.shard_count = bad[i][1];
        assert_int_equal(ampc_loader_new(g_ctx, ds, &q, &ld), AMPC_STATUS_INVALID_ARG);
        assert_null(ld);
        ASSERT_ERROR_MENTIONS("shard", "shard_index < shard_count");
    }
    ampc_loader_params q = p; /* more shards than rows: the first batch says so */
    q.batch = 1, q.shard_index = 1, q.shard_count = 2;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &q, &ld));
    ampc_tensor *x, *y;
    assert_int_equal(ampc_loader_next(ld, &x, &y, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("batch of 1", "shard 1 of 2", "at least the number of shards");
    ampc_loader_free(ld);
    ampc_ctx_step_end(g_ctx);
    ampc_dataset_free(ds);
    tu_dir_remove();
}

static void test_cursor_resume(void **state) {
    (void)state;
    ampc_dataset *ds;
    ASSERT_OK(ampc_dataset_open(NULL, &ds));
    const ampc_loader_params tp = {
        .batch = 64, .context = 32, .seed = 5, .shuffle = true, .drop_last = true, .repeat = true};
    ampc_loader *a, *b;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &tp, &a));
    int64_t per_epoch = ampc_loader_num_batches(a);
    assert_int_equal(per_epoch, ampc_loader_num_samples(a) / 64);
    size_t n1, n2;
    free(run_batches(a, (int)per_epoch - 3, &n1)); /* resume 3 batches before the epoch ends */
    ampc_loader_cursor c;
    ASSERT_OK(ampc_loader_get_cursor(a, &c));
    assert_true(c.epoch == 0 && c.position == (per_epoch - 3) * 64);
    uint8_t *want = run_batches(a, 10, &n1);
    ASSERT_OK(ampc_loader_get_cursor(a, &c));
    assert_true(c.epoch == 1 && c.position == 7 * 64);
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &tp, &b));
    ASSERT_OK(ampc_loader_set_cursor(b, &(ampc_loader_cursor){0, (per_epoch - 3) * 64}));
    uint8_t *got = run_batches(b, 10, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(want, got, n1);
    free(got);
    /* the same batches with one thread */
    ampc_ctx *one;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1}, &one));
    ampc_loader *c1;
    ASSERT_OK(ampc_loader_new(one, ds, &tp, &c1));
    ASSERT_OK(ampc_loader_set_cursor(c1, &(ampc_loader_cursor){0, (per_epoch - 3) * 64}));
    got = run_batches(c1, 10, &n2);
    assert_memory_equal(want, got, n1);
    free(got);
    free(want);
    ampc_loader_free(c1);
    ampc_ctx_free(one);
    /* bad cursors */
    assert_int_equal(ampc_loader_set_cursor(b, &(ampc_loader_cursor){-1, 0}), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("epoch -1");
    assert_int_equal(ampc_loader_set_cursor(b, &(ampc_loader_cursor){0, ampc_loader_num_samples(b) + 1}),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("out of range");
    ampc_loader_free(a);
    ampc_loader_free(b);
    ampc_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_epochs),
        cmocka_unit_test(test_eval_order_and_end),
        cmocka_unit_test(test_loader_shards),
        cmocka_unit_test(test_cursor_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
