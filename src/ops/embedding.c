/* embedding.c: the embedding lookup (rows of a (V, D) weight picked by integer ids) and the sinusoidal
 * positional encoding added to (..., T, D) activations. The lookup copies rows in the weight's own dtype
 * (a copy is exact, so this equals computing in F32 and rounding once); its backward scatter-adds the
 * output gradient rows into a (V, D) F32 buffer in id order through the kernel table, which makes
 * repeated ids sum deterministically. */
#include "ops.h"


#include <math.h>
#include <string.h>

#define ROW_GRAIN_ELEMS 16384   /* elements per parallel chunk of gathered rows */
#define COL_BLOCK 64            /* columns per parallel block of the gradient scatter */

/* ---- embedding ---- */

typedef struct embedding_saved {
    int64_t *ids;   /* (n) validated ids, arena */
    int64_t n;
} embedding_saved;

/* ids as int64 (arena) after checking ids is an I32/I64 tensor of ctx with at most 3 dims whose values
 * all lie in [0, V). */
static int64_t *checked_ids(ampc_ctx *ctx, const char *op, const ampc_tensor *weight, const ampc_tensor *ids) {
    char a[128], b[128];
    if (!ids) return ampci_null_input(op, "ids");
    if (ids->ctx != ctx)
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: ids %s belong to another context", op,
                               ampc_tensor_describe(ids, a, sizeof a));
    if (ids->dtype != AMPC_DTYPE_I32 && ids->dtype != AMPC_DTYPE_I64)
        return ampci_fail_null(AMPC_STATUS_DTYPE, "%s: ids %s have dtype %s; expected I32 or I64", op,
                               ampc_tensor_describe(ids, a, sizeof a), ampc_dtype_name(ids->dtype));
    if (ids->ndim > AMPC_MAX_DIMS - 1)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: ids %s have %d dims; expected at most %d (the output adds D)",
                               op, ampc_tensor_describe(ids, a, sizeof a), ids->ndim, AMPC_MAX_DIMS - 1);
    int64_t n = ampci_numel(ids), V = weight->shape[0];
    int64_t *v = ampci_arena_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof *v, op);
    if (!v) return NULL;
    ampci_tensor_gather(ids, v, AMPC_DTYPE_I64);
    for (int64_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= V)
            return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: id %lld at flat position %lld of ids %s is out of "
                                   "range for weight %s (expected 0 <= id < V = %lld)", op, (long long)v[i], (long long)i,
                                   ampc_tensor_describe(ids, a, sizeof a), ampc_tensor_describe(weight, b, sizeof b),
                                   (long long)V);
    return v;
}

typedef struct gather_job {
    unsigned char *out;
    const unsigned char *w;
    const int64_t *ids;
    size_t row_bytes;
} gather_job;

static void gather_rows(void *vp, int64_t b, int64_t e, int64_t chunk) {
    (void)chunk;
    const gather_job *j = vp;
    for (int64_t i = b; i < e; i++)
        memcpy(j->out + (size_t)i * j->row_bytes, j->w + (size_t)j->ids[i] * j->row_bytes, j->row_bytes);
}

typedef struct scatter_job {
    const struct ampc_kernels *k;
    float *gw;
    const float *g;
    const embedding_saved *sv;
    int64_t dim;
} scatter_job;

/* Column blocks [b, e) of the scatter-add: each block walks every id in order, so any split over threads
 * gives the same sums. */
static void scatter_cols(void *vp, int64_t b, int64_t e, int64_t chunk) {
    (void)chunk;
    const scatter_job *j = vp;
    j->k->embedding_bw(j->gw + b, j->g + b, j->sv->ids, j->sv->n, e - b, j->dim);
}

static ampc_status embedding_backward(ampci_node *n, const ampc_tensor *gout) {
    const embedding_saved *sv = n->saved;
    ampc_tensor *w = n->in[0];
    scatter_job j = {n->ctx->kernels, ampci_zeros(n->ctx, n->op, ampci_numel(w)), ampci_as_f32(n->op, gout), sv,
                     w->shape[1]};
    if (!j.gw || !j.g) return ampc_last_status();
    ampc_parallel_for(n->ctx, j.dim, COL_BLOCK, scatter_cols, &j);
    return ampci_accumulate_f32(n->op, w, j.gw);
}

ampc_tensor *ampc_embedding(ampc_ctx *ctx, const ampc_tensor *weight, const ampc_tensor *ids) {
    static const char op[] = "ampc_embedding";
    const ampc_tensor *ac_[2] = {weight, ids};
    if (!ampci_op_enter(ctx, AMPCI_OP_EMBEDDING, ac_, 2)) return NULL;
    weight = ac_[0], ids = ac_[1];
    if (!ampci_op_input(ctx, op, weight, "weight")) return NULL;
    char a[128];
    if (weight->ndim != 2)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: weight %s; expected 2-D (V, D)", op,
                               ampc_tensor_describe(weight, a, sizeof a));
    embedding_saved sv = {checked_ids(ctx, op, weight, ids), 0};
    if (!sv.ids) return NULL;
    sv.n = ampci_numel(ids);
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof shape[0]);
    shape[ids->ndim] = weight->shape[1];
    const ampc_tensor *wc = ampc_tensor_is_contiguous(weight) ? weight : ampci_copy_as(op, weight, weight->dtype);
    ampc_tensor *out = wc ? ampci_tensor_arena(op, ctx, weight->dtype, ids->ndim + 1, shape) : NULL;
    if (!out) return NULL;
    gather_job j = {ampci_tensor_ptr(out), ampci_tensor_ptr(wc), sv.ids,
                    (size_t)weight->shape[1] * ampc_dtype_size(weight->dtype)};
    int64_t D = weight->shape[1];
    ampc_parallel_for(ctx, sv.n, D >= ROW_GRAIN_ELEMS ? 1 : ROW_GRAIN_ELEMS / (D > 0 ? D : 1), gather_rows, &j);
    if (ampci_wants_grad(ctx, &weight, 1)) {
        ampci_node *node = ampci_record(ctx, op, out, &weight, 1, embedding_backward, 0, sizeof sv);
        if (!node) return NULL;
        *(embedding_saved *)node->saved = sv;
    }
    return out;
}

/* ---- positional encoding ---- */

/* PE (T, D) of "Attention is all you need": PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(...),
 * evaluated in double and rounded to F32 (the op adds in F32). */
static float *pe_table(ampc_ctx *ctx, const char *op, int64_t T, int64_t D) {
    float *pe = ampci_scratch(ctx, op, T * D);
    if (!pe) return NULL;
    for (int64_t j = 0; j < D; j++) {
        double inv_freq = pow(10000.0, -(double)(j - j % 2) / (double)D);
        for (int64_t t = 0; t < T; t++) {
            double a = (double)t * inv_freq;
            pe[t * D + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
    }
    return pe;
}

typedef struct pe_job {
    float *y;
    const float *x, *pe;
    int64_t td;   /* T * D: the period of PE in the flat index */
} pe_job;

static void pe_range(void *vp, int64_t b, int64_t e) {
    const pe_job *j = vp;
    for (int64_t i = b; i < e; i++) j->y[i] = j->x[i] + j->pe[i % j->td];
}

static ampc_status pe_backward(ampci_node *n, const ampc_tensor *gout) {
    float *g = (float *)ampci_as_f32(n->op, gout);   /* read only: the gradient passes through unchanged */
    return g ? ampci_accumulate_f32(n->op, n->in[0], g) : ampc_last_status();
}

ampc_tensor *ampc_positional_encoding(ampc_ctx *ctx, const ampc_tensor *x) {
    static const char op[] = "ampc_positional_encoding";
    const ampc_tensor *ac_[1] = {x};
    if (!ampci_op_enter(ctx, AMPCI_OP_POSITIONAL_ENCODING, ac_, 1)) return NULL;
    x = ac_[0];
    if (!ampci_op_input(ctx, op, x, "x")) return NULL;
    char a[128];
    if (x->ndim < 2)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: x %s; expected at least 2 dims (..., T, D)", op,
                               ampc_tensor_describe(x, a, sizeof a));
    int64_t T = x->shape[x->ndim - 2], D = x->shape[x->ndim - 1], numel = ampci_numel(x);
    pe_job j = {ampci_scratch(ctx, op, numel), ampci_as_f32(op, x), pe_table(ctx, op, T, D), T * D};
    if (!j.y || !j.x || !j.pe) return NULL;
    if (numel) ampci_parallel(ctx, numel, pe_range, &j);
    ampci_as_f32_done(x, j.x);
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, j.y);
    if (out && ampci_wants_grad(ctx, &x, 1)) {
        if (!ampci_record(ctx, op, out, &x, 1, pe_backward, 0, 0)) return NULL;
    }
    return out;
}
