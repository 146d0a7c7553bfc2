/* loader.c: batches from one split of a data set. The order of an epoch is a pure function of (seed,
 * epoch) through the counter-based RNG, and the cursor {epoch, position} is the loader's whole state, so
 * a checkpoint that saves the cursor resumes with exactly the batches the uninterrupted run would have
 * seen. Batches are written on the host through the tensors' host maps (on the CPU straight into the step
 * arena), one sample per parallel-for item, each item writing only its own rows, so the bits do not depend
 * on the thread count. */
#include "data.h"

#include "../tensor/tensor.h"

#include <stdlib.h>
#include <string.h>

struct ampc_loader {
    ampc_ctx *ctx;
    const ampc_dataset *ds;
    ampc_loader_params p; /* defaults filled in */
    int64_t n;            /* samples per epoch */
    uint32_t *perm;       /* the order of epoch perm_epoch (shuffle only) */
    int64_t perm_epoch;   /* -1: perm not made yet */
    ampc_loader_cursor cur;
    const uint8_t *ids; /* language modelling: the split's ids, id_bytes each (1: bytes, 2: uint16 LE) */
    int id_bytes;
    float lut[256]; /* images: pixel byte -> normalised F32 */
};

static ampc_status check_params(const char *fn, const ampc_dataset *ds, const ampc_loader_params *p) {
    bool text = ds->task == AMPC_TASK_CHAR_LM;
    if ((unsigned)p->split >= AMPC_SPLIT_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: split %d is not an ampc_split (train, eval)", fn,
                          (int)p->split);
    if (p->batch < 1)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: batch %lld must be >= 1", fn, (long long)p->batch);
    if (text && p->context < 1)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: context %lld must be >= 1", fn, (long long)p->context);
    if (!text && p->context != 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: context %lld given for the image data set %s; it applies to "
                          "text only (leave it 0)",
                          fn, (long long)p->context, ds->name);
    return AMPC_OK;
}

/* Samples in the split: images, or windows of T + 1 ids at stride T; fails when there are none or, with
 * drop_last, fewer than one batch, or (token files, which are not capped) 2^32 windows or more, past what
 * the 32-bit order can number. */
static ampc_status count_samples(const char *fn, ampc_loader *ld) {
    const ampc_dataset *ds = ld->ds;
    const char *split = ampc_split_name(ld->p.split);
    if (ds->task == AMPC_TASK_CHAR_LM) {
        size_t len;
        ld->ids = ampc_dataset_ids(ds, ld->p.split, &len, &ld->id_bytes);
        const char *unit = ld->id_bytes == 1 ? "bytes" : "tokens";
        int64_t T = ld->p.context;
        if ((uint64_t)len < (uint64_t)T + 1)
            return ampci_fail(AMPC_STATUS_INVALID_ARG,
                              "%s: the %s split of %s has %zu %s, too short for one window "
                              "of context %lld + 1 = %lld %s",
                              fn, split, ds->name, len, unit, (long long)T, (long long)T + 1, unit);
        uint64_t n = (len - 1) / (uint64_t)T;
        if (n >= (uint64_t)1 << 32)
            return ampci_fail(AMPC_STATUS_INVALID_ARG,
                              "%s: the %s split of %s has %zu %s, %llu windows of context %lld; expected fewer "
                              "than 2^32 windows (a longer context, or a shorter file)",
                              fn, split, ds->name, len, unit, (unsigned long long)n, (long long)T);
        ld->n = (int64_t)n;
    } else {
        ld->n = ds->count[ld->p.split];
    }
    if (ld->p.drop_last && ld->n < ld->p.batch)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: the %s split of %s has %lld samples, fewer than one batch of "
                          "%lld (drop_last would leave nothing)",
                          fn, split, ds->name, (long long)ld->n, (long long)ld->p.batch);
    return AMPC_OK;
}

ampc_status ampc_loader_new(ampc_ctx *ctx, const ampc_dataset *ds, const ampc_loader_params *params,
                            ampc_loader **out) {
    static const char fn[] = "ampc_loader_new";
    if (!ctx || !ds || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx, ds and out must not be NULL", fn);
    *out = NULL;
    ampc_loader_params p = params ? *params : (ampc_loader_params){0};
    if (p.batch == 0) p.batch = 32;
    if (p.context == 0 && ds->task == AMPC_TASK_CHAR_LM) p.context = 64;
    if (p.shard_count == 0) p.shard_count = 1;
    if (p.shard_count < 0 || p.shard_index < 0 || p.shard_index >= p.shard_count)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: shard %d of %d; expected 0 <= shard_index < shard_count", fn,
                          p.shard_index, p.shard_count);
    ampc_status s = check_params(fn, ds, &p);
    if (s != AMPC_OK) return s;
    ampc_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    *ld = (ampc_loader){.ctx = ctx, .ds = ds, .p = p, .perm_epoch = -1};
    s = count_samples(fn, ld);
    /* Every split stays below 2^32 samples (images and text are capped at 1 GiB, token windows are
     * counted above), which the 32-bit order and the multiply-shift draw rely on. */
    AMPCI_ASSERT(s != AMPC_OK || (uint64_t)ld->n < ((uint64_t)1 << 32));
    if (s == AMPC_OK && p.shuffle && !(ld->perm = malloc((size_t)ld->n * sizeof *ld->perm)))
        s = ampci_fail(AMPC_STATUS_OOM, "%s: out of memory for the order of %lld samples", fn, (long long)ld->n);
    if (s != AMPC_OK) {
        ampc_loader_free(ld);
        return s;
    }
    for (int v = 0; v < 256; v++)
        ld->lut[v] = (float)(((double)v / 255.0 - AMPC_FASHION_MNIST_MEAN) / AMPC_FASHION_MNIST_STD);
    *out = ld;
    return AMPC_OK;
}

void ampc_loader_free(ampc_loader *ld) {
    if (!ld) return;
    free(ld->perm);
    free(ld);
}

/* The Fisher-Yates shuffle documented in ampc.h, for epoch e. */
static void make_perm(ampc_loader *ld, int64_t e) {
    uint32_t *perm = ld->perm, w[4] = {0};
    int64_t n = ld->n;
    for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    uint64_t k = 0;
    for (int64_t i = n - 1; i >= 1; i--, k++) {
        if (k % 4 == 0) ampc_rng_block(ld->p.seed, AMPC_DATA_SHUFFLE_STREAM + (uint64_t)e, k / 4, w);
        uint64_t j = ((uint64_t)w[k % 4] * (uint64_t)(i + 1)) >> 32;
        uint32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    ld->perm_epoch = e;
}

static int64_t sample_at(ampc_loader *ld, int64_t pos) {
    if (!ld->p.shuffle) return pos;
    if (ld->perm_epoch != ld->cur.epoch) make_perm(ld, ld->cur.epoch);
    return ld->perm[pos];
}

/* ---- filling a batch ---- */

/* Rows [begin, end) of a batch: x and y of the samples idx names. */
typedef struct batch_rows {
    const ampc_loader *ld;
    const int64_t *idx; /* sample index of each batch row */
    void *x;
    int64_t *y;
} batch_rows;

AMPCI_ROW_BODY(fill_images, batch_rows, j, begin, end, chunk) {
    const ampc_dataset *ds = j->ld->ds;
    const int split = j->ld->p.split, px = AMPCI_IMAGE_SIDE * AMPCI_IMAGE_SIDE;
    for (int64_t b = begin; b < end; b++) {
        const uint8_t *src = ds->pixels[split] + (size_t)j->idx[b] * px;
        float *dst = (float *)j->x + (size_t)b * px;
        for (int i = 0; i < px; i++) dst[i] = j->ld->lut[src[i]];
        j->y[b] = ds->labels[split][j->idx[b]];
    }
}

/* Window i of a split is ids [i*T, i*T + T]; bytes and uint16 tokens differ only in how an id is read
 * (little-endian bytes, so a token file means the same on any host). */
AMPCI_ROW_BODY(fill_text, batch_rows, j, begin, end, chunk) {
    const int64_t T = j->ld->p.context;
    const int w = j->ld->id_bytes;
    for (int64_t b = begin; b < end; b++) {
        const uint8_t *src = j->ld->ids + (size_t)(j->idx[b] * T) * (size_t)w;
        int64_t *x = (int64_t *)j->x + b * T, *y = j->y + b * T;
        if (w == 1) {
            for (int64_t t = 0; t < T; t++) x[t] = src[t], y[t] = src[t + 1];
        } else {
            for (int64_t t = 0; t < T; t++)
                x[t] = src[2 * t] | src[2 * t + 1] << 8, y[t] = src[2 * t + 2] | src[2 * t + 3] << 8;
        }
    }
}

/* Arena tensors for a batch of B rows. */
static ampc_status alloc_batch(const char *fn, ampc_loader *ld, int64_t B, ampc_tensor **x, ampc_tensor **y) {
    ampc_ctx *ctx = ld->ctx;
    if (ld->ds->task == AMPC_TASK_CHAR_LM) {
        int64_t shape[2] = {B, ld->p.context};
        *x = ampci_tensor_arena(fn, ctx, AMPC_DTYPE_I64, 2, shape);
        *y = *x ? ampci_tensor_arena(fn, ctx, AMPC_DTYPE_I64, 2, shape) : NULL;
    } else {
        int64_t xs[4] = {B, 1, AMPCI_IMAGE_SIDE, AMPCI_IMAGE_SIDE};
        *x = ampci_tensor_arena(fn, ctx, AMPC_DTYPE_F32, 4, xs);
        *y = *x ? ampci_tensor_arena(fn, ctx, AMPC_DTYPE_I64, 1, (int64_t[]){B}) : NULL;
    }
    if (*x && *y) return AMPC_OK;
    *x = *y = NULL;
    return ampc_last_status() != AMPC_OK ? ampc_last_status() : AMPC_STATUS_OOM;
}

/* Rows left in the current epoch for the next batch: B, fewer at the end without drop_last, 0 when the
 * epoch is over. */
static int64_t rows_left(const ampc_loader *ld) {
    int64_t left = ld->n - ld->cur.position;
    if (left >= ld->p.batch) return ld->p.batch;
    return ld->p.drop_last ? 0 : left;
}

ampc_status ampc_loader_next(ampc_loader *ld, ampc_tensor **x, ampc_tensor **y, bool *end) {
    static const char fn[] = "ampc_loader_next";
    if (end) *end = false;
    if (!ld || !x || !y) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ld, x and y must not be NULL", fn);
    *x = *y = NULL;
    int64_t B = rows_left(ld);
    if (B == 0) {
        ld->cur = (ampc_loader_cursor){ld->cur.epoch + 1, 0};
        if (!ld->p.repeat) {
            if (end) *end = true;
            return AMPC_OK;
        }
        B = rows_left(ld); /* >= 1: n >= 1, and n >= batch with drop_last */
    }
    int64_t lo, rows;
    ampc_loader_shard_rows(B, ld->p.shard_index, ld->p.shard_count, &lo, &rows);
    if (rows == 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: a batch of %lld samples leaves shard %d of %d nothing; "
                          "the batch must be at least the number of shards",
                          fn, (long long)B, ld->p.shard_index, ld->p.shard_count);
    int64_t *idx = ampci_arena_alloc(ld->ctx, (size_t)rows * sizeof *idx, fn);
    if (!idx) return ampc_last_status();
    ampc_status s = alloc_batch(fn, ld, rows, x, y);
    if (s != AMPC_OK) return s;
    for (int64_t b = 0; b < rows; b++) idx[b] = sample_at(ld, ld->cur.position + lo + b);
    /* the batch is written on the host: into the tensors themselves on the CPU, into host copies that go to
     * the device at the unmap elsewhere (write-only maps: nothing is read back) */
    ampci_host_mapping mx, my;
    void *hx = ampci_tensor_host_map(*x, AMPCI_MAP_WRITE, AMPC_SYNC_READ, fn, &mx);
    void *hy = hx ? ampci_tensor_host_map(*y, AMPCI_MAP_WRITE, AMPC_SYNC_READ, fn, &my) : NULL;
    if (!hy) {
        ampci_host_unmap(&mx);
        *x = *y = NULL;
        return ampc_last_status();
    }
    batch_rows job = {ld, idx, hx, hy};
    bool text = ld->ds->task == AMPC_TASK_CHAR_LM;
    ampc_parallel_for(ld->ctx, rows, text ? 64 : 16, text ? fill_text : fill_images, &job);
    ampci_host_unmap(&mx), ampci_host_unmap(&my);
    ld->cur.position += B; /* the cursor counts whole global batches: the same on every shard */
    return AMPC_OK;
}

void ampc_loader_shard_rows(int64_t batch, int index, int count, int64_t *first, int64_t *rows) {
    if (count < 1) count = 1, index = 0;
    int64_t q = batch / count, r = batch % count;
    *first = (int64_t)index * q + (index < r ? index : r);
    *rows = q + (index < r);
}

ampc_status ampc_loader_get_cursor(const ampc_loader *ld, ampc_loader_cursor *out) {
    if (!ld || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_loader_get_cursor: ld and out must not be NULL");
    *out = ld->cur;
    return AMPC_OK;
}

ampc_status ampc_loader_set_cursor(ampc_loader *ld, const ampc_loader_cursor *c) {
    static const char fn[] = "ampc_loader_set_cursor";
    if (!ld || !c) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ld and cursor must not be NULL", fn);
    if (c->epoch < 0 || c->position < 0 || c->position > ld->n)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: cursor {epoch %lld, position %lld} is out of range; expected "
                          "epoch >= 0 and position in [0, %lld]",
                          fn, (long long)c->epoch, (long long)c->position, (long long)ld->n);
    ld->cur = *c;
    return AMPC_OK;
}

int64_t ampc_loader_num_samples(const ampc_loader *ld) { return ld ? ld->n : 0; }

int64_t ampc_loader_num_batches(const ampc_loader *ld) {
    if (!ld) return 0;
    return ld->p.drop_last ? ld->n / ld->p.batch : (ld->n + ld->p.batch - 1) / ld->p.batch;
}
