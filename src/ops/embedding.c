/* embedding.c: the embedding lookup (rows of a (V, D) weight picked by integer ids) and the sinusoidal
 * positional encoding added to (..., T, D) activations, on the device (kernels/dev_nn.h). The lookup
 * copies rows in the weight's own dtype (a copy is exact, so this equals computing in F32 and rounding
 * once); its backward scatter-adds the output gradient rows into a (V, D) F32 buffer in id order through
 * the kernel table, which makes repeated ids sum deterministically. The ids are converted to int64 and
 * range-checked on the device; the host reads the check's result once. */
#include "ops.h"

#include <string.h>

/* ---- embedding ---- */

typedef struct embedding_saved {
    int64_t *ids; /* (n) validated ids, device memory */
    int64_t n;
} embedding_saved;

/* ids as int64 (device memory: what the gather reads and the node saves) after checking ids is an
 * I32/I64 tensor of ctx with at most 3 dims whose values all lie in [0, V) (on the device, the result read
 * at one synchronisation point). */
static int64_t *checked_ids(ampc_ctx *ctx, const char *op, const ampc_tensor *weight, const ampc_tensor *ids) {
    char a[128], b[128];
    if (!ampci_op_index_input(ctx, op, ids, "ids", "")) return NULL;
    if (ids->ndim > AMPC_MAX_DIMS - 1)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: ids %s have %d dims; expected at most %d (the output adds D)",
                               op, ampc_tensor_describe(ids, a, sizeof a), ids->ndim, AMPC_MAX_DIMS - 1);
    int64_t V = weight->shape[0], r[3];
    int64_t *v = ampci_ids_checked(ctx, op, ids, V, false, 0, r);
    if (v && r[0] >= 0)
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG,
                               "%s: id %lld at flat position %lld of ids %s is out of "
                               "range for weight %s (expected 0 <= id < V = %lld)",
                               op, (long long)r[1], (long long)r[0], ampc_tensor_describe(ids, a, sizeof a),
                               ampc_tensor_describe(weight, b, sizeof b), (long long)V);
    return v;
}

static ampc_status embedding_backward(ampci_node *n, const ampc_tensor *gout) {
    const embedding_saved *sv = n->saved;
    ampc_tensor *w = n->in[0];
    const float *g = ampci_as_f32(n->op, gout);
    float *gw = ampci_scratch(n->ctx, n->op, ampci_numel(w));
    if (!g || !gw ||
        AMPCI_DEV(n->ctx, embedding_bw, .gw = gw, .gy = g, .ids = sv->ids, .n = sv->n, .rows = w->shape[0],
                  .cols = w->shape[1]) != AMPC_OK)
        return ampc_last_status();
    return ampci_accumulate_f32(n->op, w, gw);
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
    if (AMPCI_DEV(ctx, embedding, .out = ampci_dev_ptr(out), .w = ampci_dev_ptr(wc), .dt = weight->dtype, .ids = sv.ids,
                  .n = sv.n, .cols = D) != AMPC_OK)
        return NULL;
    return ampci_op_end(&c, out, &sv);
}

/* ---- positional encoding ---- */

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
    float *y = ampci_scratch(ctx, op, numel);
    const float *xf = ampci_as_f32(op, x);
    if (!y || !xf || AMPCI_DEV(ctx, positional_encoding, .y = y, .x = xf, .n = numel, .T = T, .D = D) != AMPC_OK)
        return NULL;
    ampci_as_f32_done(x, xf);
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, x->ndim, x->shape, y), NULL);
}
