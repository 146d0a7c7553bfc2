/* embedding.c: the embedding lookup (rows of a (V, D) weight picked by integer ids) and the sinusoidal
 * positional encoding added to (..., T, D) activations. The lookup copies rows in the weight's own dtype
 * (a copy is exact, so this equals computing in F32 and rounding once); its backward scatter-adds the
 * output gradient rows into a (V, D) F32 buffer in id order through the kernel table, which makes
 * repeated ids sum deterministically. */
#include "ops.h"

#include <math.h>
#include <string.h>

#define COL_BLOCK 64 /* columns per parallel block of the gradient scatter */

/* ---- embedding ---- */

typedef struct embedding_saved {
    int64_t *ids; /* (n) validated ids, arena */
    int64_t n;
} embedding_saved;

/* ids as int64 (arena) after checking ids is an I32/I64 tensor of ctx with at most 3 dims whose values
 * all lie in [0, V). */
static int64_t *checked_ids(ampc_ctx *ctx, const char *op, const ampc_tensor *weight, const ampc_tensor *ids) {
    char a[128], b[128];
    if (!ampci_op_index_input(ctx, op, ids, "ids", "")) return NULL;
    if (ids->ndim > AMPC_MAX_DIMS - 1)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: ids %s have %d dims; expected at most %d (the output adds D)",
                               op, ampc_tensor_describe(ids, a, sizeof a), ids->ndim, AMPC_MAX_DIMS - 1);
    int64_t n = ampci_numel(ids), V = weight->shape[0];
    int64_t *v = ampci_arena_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof *v, op);
    if (!v) return NULL;
    ampci_tensor_gather(ids, v, AMPC_DTYPE_I64);
    for (int64_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= V)
            return ampci_fail_null(AMPC_STATUS_INVALID_ARG,
                                   "%s: id %lld at flat position %lld of ids %s is out of "
                                   "range for weight %s (expected 0 <= id < V = %lld)",
                                   op, (long long)v[i], (long long)i, ampc_tensor_describe(ids, a, sizeof a),
                                   ampc_tensor_describe(weight, b, sizeof b), (long long)V);
    return v;
}

/* Rows [r0, r1) of out = the weight rows the ids pick (row_bytes each, any dtype). */
typedef struct gather_rows {
    unsigned char *out;
    const unsigned char *w;
    const int64_t *ids;
    size_t row_bytes;
} gather_rows;

AMPCI_ROW_BODY(gather_run, gather_rows, j, r0, r1, chunk) {
    for (int64_t i = r0; i < r1; i++)
        memcpy(j->out + (size_t)i * j->row_bytes, j->w + (size_t)j->ids[i] * j->row_bytes, j->row_bytes);
}

/* Column blocks [c0, c1) of the scatter-add gw (V, dim) += g rows at the ids: each block walks every id in
 * order, so any split over threads gives the same sums. */
typedef struct scatter_cols {
    const struct ampc_kernels *k;
    float *gw;
    const float *g;
    const embedding_saved *sv;
    int64_t dim;
} scatter_cols;

AMPCI_ROW_BODY(scatter_run, scatter_cols, j, c0, c1, chunk) {
    j->k->embedding_bw(j->gw + c0, j->g + c0, j->sv->ids, j->sv->n, c1 - c0, j->dim);
}

static ampc_status embedding_backward(ampci_node *n, const ampc_tensor *gout) {
    const embedding_saved *sv = n->saved;
    ampc_tensor *w = n->in[0];
    scatter_cols j = {n->ctx->kernels, ampci_zeros(n->ctx, n->op, ampci_numel(w)), ampci_as_f32(n->op, gout), sv,
                      w->shape[1]};
    if (!j.gw || !j.g) return ampc_last_status();
    ampc_parallel_for(n->ctx, j.dim, COL_BLOCK, scatter_run, &j);
    return ampci_accumulate_f32(n->op, w, j.gw);
}

/* The weight's rows are copied exactly: the output needs no anomaly check. */
static const ampci_op_desc embedding_op = {"ampc_embedding",
                                           AMPCI_OP_EMBEDDING,
                                           2,
                                           {"weight", "ids"},
                                           .index = 2u,
                                           .exact = true,
                                           .backward = embedding_backward,
                                           .saved_size = sizeof(embedding_saved)};

ampc_tensor *ampc_embedding(ampc_ctx *ctx, const ampc_tensor *weight, const ampc_tensor *ids) {
    const char *op = embedding_op.name;
    ampci_op_call c = {.op = &embedding_op, .ctx = ctx, .in = {weight, ids}};
    if (!ampci_op_begin(&c)) return NULL;
    weight = c.in[0], ids = c.in[1];
    char a[128];
    if (weight->ndim != 2)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: weight %s; expected 2-D (V, D)", op,
                               ampc_tensor_describe(weight, a, sizeof a));
    embedding_saved sv = {checked_ids(ctx, op, weight, ids), 0};
    if (!sv.ids) return NULL;
    sv.n = ampci_numel(ids);
    int64_t shape[AMPC_MAX_DIMS], D = weight->shape[1];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof shape[0]);
    shape[ids->ndim] = D;
    const ampc_tensor *wc = ampc_tensor_is_contiguous(weight) ? weight : ampci_copy_as(op, weight, weight->dtype);
    ampc_tensor *out = wc ? ampci_tensor_arena(op, ctx, weight->dtype, ids->ndim + 1, shape) : NULL;
    if (!out) return NULL;
    ampci_parallel_rows(ctx, sv.n, D, gather_run,
                        &(gather_rows){ampci_dev_ptr(out), ampci_dev_ptr(wc), sv.ids,
                                       (size_t)D * ampc_dtype_size(weight->dtype)});
    return ampci_op_end(&c, out, &sv);
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

/* Elements [b, e) of y = x + PE, PE repeating every td = T * D elements of the flat index. */
typedef struct pe_map {
    float *y;
    const float *x, *pe;
    int64_t td;
} pe_map;

AMPCI_ROW_BODY(pe_run, pe_map, j, b, e, chunk) {
    for (int64_t i = b; i < e; i++) j->y[i] = j->x[i] + j->pe[i % j->td];
}

static ampc_status pe_backward(ampci_node *n, const ampc_tensor *gout) {
    float *g = (float *)ampci_as_f32(n->op, gout); /* read only: the gradient passes through unchanged */
    return g ? ampci_accumulate_f32(n->op, n->in[0], g) : ampc_last_status();
}

static const ampci_op_desc positional_encoding_op = {
    "ampc_positional_encoding", AMPCI_OP_POSITIONAL_ENCODING, 1, {"x"}, .backward = pe_backward};

ampc_tensor *ampc_positional_encoding(ampc_ctx *ctx, const ampc_tensor *x) {
    const char *op = positional_encoding_op.name;
    ampci_op_call c = {.op = &positional_encoding_op, .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    char a[128];
    if (x->ndim < 2)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: x %s; expected at least 2 dims (..., T, D)", op,
                               ampc_tensor_describe(x, a, sizeof a));
    int64_t T = x->shape[x->ndim - 2], D = x->shape[x->ndim - 1], numel = ampci_numel(x);
    pe_map j = {ampci_scratch(ctx, op, numel), ampci_as_f32(op, x), pe_table(ctx, op, T, D), T * D};
    if (!j.y || !j.x || !j.pe) return NULL;
    if (numel) ampci_parallel_rows(ctx, numel, 1, pe_run, &j);
    ampci_as_f32_done(x, j.x);
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, x->ndim, x->shape, j.y), NULL);
}
