/* common.c: the op-layer helpers of ops.h: the prologue and epilogue every public op runs (anomaly
 * record, autocast's casts, input checks; output check, tape record, hand-off to model code's frame),
 * dtype promotion, F32 staging, results, gradient hand-off and broadcasting. */
#include "ops.h"

#include <string.h>

/* The cast of t to dtype `to` for autocast: from the weight-cast cache when the plan allows it. */
static const ampc_tensor *autocast_cast(ampc_ctx *ctx, const ampc_tensor *t, ampc_dtype to, bool cache) {
    const ampc_tensor *c = cache ? ampci_autocast_cache_find(ctx, t, to) : NULL;
    if (c) return c;
    ampc_tensor *fresh = ampci_op_cast(t, to);
    if (!fresh) return NULL;
    ampci_autocast_count_cast(ctx);
    if (cache) ampci_autocast_cache_put(ctx, t, to, fresh);
    return fresh;
}

/* Records the op for anomaly reports and, inside an enabled autocast region, replaces in[0..n) by their
 * casts as autocast's plan says. False (error recorded) when the op is banned or a cast fails. NULL entries
 * stay NULL (the checks report them). */
static bool enter(ampc_ctx *ctx, ampci_op op, const ampc_tensor **in, int n) {
    for (int i = 0; i < n; i++) /* a sharded parameter is gathered before its use */
        if (in[i] && in[i]->storage->absent && ampci_tensor_present(in[i]) != AMPC_OK) return false;
    ampci_anomaly_op(ctx, ampci_op_name(op), in, n);
    ampc_dtype to_small[AMPCI_OP_MAX_IN], *to = to_small;
    bool cache_small[AMPCI_OP_MAX_IN], *cache = cache_small;
    if (n > AMPCI_OP_MAX_IN) { /* concat: any number of inputs */
        to = ampci_arena_alloc(ctx, (size_t)n * sizeof *to, ampci_op_name(op));
        cache = ampci_arena_alloc(ctx, (size_t)n * sizeof *cache, ampci_op_name(op));
        if (!to || !cache) return false;
    }
    if (!ampci_autocast_plan(ctx, op, in, n, to, cache)) return false;
    bool cast = false;
    for (int i = 0; i < n; i++) {
        if (!in[i] || in[i]->dtype == to[i]) continue;
        if (!(in[i] = autocast_cast(ctx, in[i], to[i], cache[i]))) return false;
        cast = true;
    }
    if (cast) ampci_anomaly_op(ctx, ampci_op_name(op), in, n); /* the casts above were ops too */
    return true;
}

/* The call's inputs: its list (concat) or in[]. */
static const ampc_tensor **inputs(ampci_op_call *c, int *n) {
    *n = c->list ? c->n : c->op->nin;
    return c->list ? c->list : c->in;
}

bool ampci_op_begin(ampci_op_call *c) {
    const ampci_op_desc *d = c->op;
    int n;
    const ampc_tensor **in = inputs(c, &n);
    c->saves = d->saves;
    for (int i = 0; i < n; i++) /* before autocast reads them: a handle from an ended step is refused */
        if (in[i] && ampci_tensor_usable(d->name, i < d->nin ? d->in_names[i] : "an input", in[i]) != AMPC_OK)
            return false;
    if (c->ctx && !enter(c->ctx, d->id, in, n)) return false; /* a NULL context is reported below */
    for (int i = 0; i < d->nin; i++) {
        bool skip = (d->index >> i & 1) || (!in[i] && (d->optional >> i & 1));
        if (!skip && !ampci_op_input(c->ctx, d->name, in[i], d->in_names[i])) return false;
    }
    return true;
}

/* Records out on the tape when one of the call's float inputs requires grad (index inputs never are);
 * *node is the node (NULL when none was needed). */
static bool record(ampci_op_call *c, ampc_tensor *out, const ampc_tensor **in, int n, const void *saved,
                   ampci_node **node_out) {
    const ampci_op_desc *d = c->op;
    const ampc_tensor *floats[AMPCI_OP_MAX_IN], **rec = in;
    int nrec = n;
    if (d->index) {
        rec = floats, nrec = 0;
        for (int i = 0; i < n; i++)
            if (!(d->index >> i & 1)) rec[nrec++] = in[i];
    }
    *node_out = NULL;
    if (!ampci_wants_grad(c->ctx, rec, nrec)) return true;
    ampci_node *node = ampci_record(c->ctx, d->name, out, rec, nrec, d->backward, c->saves, d->saved_size);
    if (node && d->saved_size) memcpy(node->saved, saved, d->saved_size);
    *node_out = node;
    return node != NULL;
}

/* Range statistics (while attached): an autocast op's output is summarised; a shape op's view or a cast
 * carries its input's site. */
static void stats(ampci_op_call *c, ampc_tensor *out, const ampc_tensor **in, int n, ampci_node *node) {
    const ampci_op_desc *d = c->op;
    if (d->id < AMPCI_OP_COUNT) ampci_stats_output(c->ctx, d->id, ampci_op_name(d->id), out, in, n, node);
    else if (n > 0 && in[0]) ampci_stats_carry(out, in[0]);
}

ampc_tensor *ampci_op_end(ampci_op_call *c, ampc_tensor *out, const void *saved) {
    if (!out || (!c->op->exact && !ampci_check_output(c->ctx, out))) return NULL;
    int n;
    const ampc_tensor **in = inputs(c, &n);
    ampci_node *node;
    if (!record(c, out, in, n, saved, &node)) return NULL;
    if (c->ctx->stats) stats(c, out, in, n, node);
    if (!c->internal) ampci_frame_add(out, in, n);
    return out;
}

bool ampci_op_dtype(ampc_dtype dt) { return dt == AMPC_DTYPE_F32 || dt == AMPC_DTYPE_F16 || dt == AMPC_DTYPE_BF16; }

bool ampci_op_input(ampc_ctx *ctx, const char *op, const ampc_tensor *t, const char *what) {
    if (!t) {
        ampci_null_input(op, what);
        return false;
    }
    char b[128];
    if (!ctx) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", op);
        return false;
    }
    if (t->ctx != ctx) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s %s belongs to another context", op, what,
                   ampc_tensor_describe(t, b, sizeof b));
        return false;
    }
    if (!ampci_op_dtype(t->dtype)) {
        ampci_fail(AMPC_STATUS_DTYPE, "%s: %s %s has dtype %s; expected F32, F16 or BF16", op, what,
                   ampc_tensor_describe(t, b, sizeof b), ampc_dtype_name(t->dtype));
        return false;
    }
    return true;
}

bool ampci_op_index_input(ampc_ctx *ctx, const char *op, const ampc_tensor *t, const char *what, const char *kind) {
    char b[128];
    if (!t) {
        ampci_null_input(op, what);
        return false;
    }
    if (t->ctx != ctx) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s %s belong to another context", op, what,
                   ampc_tensor_describe(t, b, sizeof b));
        return false;
    }
    if (t->dtype != AMPC_DTYPE_I32 && t->dtype != AMPC_DTYPE_I64) {
        ampci_fail(AMPC_STATUS_DTYPE, "%s: %s %s have dtype %s; expected I32 or I64%s", op, what,
                   ampc_tensor_describe(t, b, sizeof b), ampc_dtype_name(t->dtype), kind);
        return false;
    }
    return true;
}

int64_t *ampci_ids_checked(ampc_ctx *ctx, const char *op, const ampc_tensor *ids, int64_t limit, bool has_ignore,
                           int64_t ignore_index, int64_t r[3]) {
    int64_t n = ampci_numel(ids);
    int64_t *v = ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof *v, op);
    int64_t *check = v ? ampci_step_alloc(ctx, 3 * sizeof *check, op) : NULL;
    if (!check || ampci_tensor_gather(ids, v, AMPC_DTYPE_I64) != AMPC_OK ||
        AMPCI_DEV(ctx, index_check, .ids = v, .n = n, .limit = limit, .has_ignore = has_ignore,
                  .ignore_index = ignore_index, .result = check) != AMPC_OK)
        return NULL;
    ampci_sync_read(ctx, AMPC_SYNC_INDEX, r, check, 3 * sizeof *r);
    ampci_step_free(ctx, check);
    return v;
}

ampc_dtype ampci_promote(ampc_dtype a, ampc_dtype b) { return a == b ? a : AMPC_DTYPE_F32; }

bool ampci_same_dtype(const char *op, const ampc_tensor *a, const char *an, const ampc_tensor *b, const char *bn) {
    if (a->dtype == b->dtype) return true;
    char x[128], y[128];
    ampci_fail(AMPC_STATUS_DTYPE, "%s: %s %s and %s %s must have the same dtype (cast one, or run under autocast)", op,
               an, ampc_tensor_describe(a, x, sizeof x), bn, ampc_tensor_describe(b, y, sizeof y));
    return false;
}

const float *ampci_as_f32(const char *op, const ampc_tensor *t) {
    if (t->dtype == AMPC_DTYPE_F32 && ampc_tensor_is_contiguous(t)) return (const float *)ampci_dev_ptr(t);
    float *buf = ampci_scratch(t->ctx, op, ampci_numel(t));
    return buf && ampci_tensor_gather(t, buf, AMPC_DTYPE_F32) == AMPC_OK ? buf : NULL;
}

void ampci_as_f32_done(const ampc_tensor *t, const float *f) {
    if (f && f != (const float *)ampci_dev_ptr(t)) ampci_step_free(t->ctx, (void *)f);
}

float *ampci_scratch(ampc_ctx *ctx, const char *op, int64_t n) {
    return ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(float), op);
}

float *ampci_zeros(ampc_ctx *ctx, const char *op, int64_t n) {
    float *p = ampci_scratch(ctx, op, n);
    if (p) ampci_dev_memset(ctx, p, 0, (size_t)(n > 0 ? n : 1) * sizeof(float));
    return p;
}

ampc_tensor *ampci_output(const char *op, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    int64_t n = ampci_shape_numel(op, ndim, shape);
    void *data = n < 0 ? NULL : ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * ampc_dtype_size(dtype), op);
    return data ? ampci_tensor_wrap(op, ctx, dtype, ndim, shape, data) : NULL;
}

ampc_tensor *ampci_result(const char *op, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, float *buf) {
    if (!buf) return NULL;
    ampc_tensor *t;
    if (dtype == AMPC_DTYPE_F32) {
        t = ampci_tensor_wrap(op, ctx, dtype, ndim, shape, buf);
    } else {
        t = ampci_output(op, ctx, dtype, ndim, shape);
        if (t && AMPCI_DEV(ctx, convert, .dst = ampci_dev_ptr(t), .dst_dt = dtype, .src = buf, .src_dt = AMPC_DTYPE_F32,
                           .n = ampci_numel(t)) != AMPC_OK)
            t = NULL;
        ampci_step_free(ctx, buf); /* the F32 values are dead once rounded */
    }
    return t;
}

ampc_status ampci_accumulate_f32(const char *op, ampc_tensor *t, float *g) {
    if (!g) return ampc_last_status();
    ampc_tensor *w = ampci_tensor_wrap(op, t->ctx, AMPC_DTYPE_F32, t->ndim, t->shape, g);
    return w ? ampci_grad_accumulate(t, w) : ampc_last_status();
}

/* ---- broadcasting ---- */

bool ampci_broadcast(const char *op, const ampc_tensor *a, const ampc_tensor *b, ampci_bcast *bc) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    memset(bc, 0, sizeof *bc);
    bc->ndim = nd;
    int64_t ca = 1, cb = 1; /* running row-major strides of a and b */
    for (int i = 3; i >= 0; i--) {
        int ia = a->ndim - (4 - i), ib = b->ndim - (4 - i);
        int64_t ea = ia >= 0 ? a->shape[ia] : 1, eb = ib >= 0 ? b->shape[ib] : 1;
        if (ea != eb && ea != 1 && eb != 1) {
            char x[128], y[128];
            ampci_fail(AMPC_STATUS_SHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                       ampc_tensor_describe(a, x, sizeof x), ampc_tensor_describe(b, y, sizeof y), i - (4 - nd),
                       (long long)ea, (long long)eb);
            return false;
        }
        int64_t e = ea == 1 ? eb : ea;
        bc->dims[i] = e;
        bc->sa[i] = ea == 1 ? 0 : ca;
        bc->sb[i] = eb == 1 ? 0 : cb;
        ca *= ea, cb *= eb;
    }
    bc->n = 1;
    for (int i = 0; i < nd; i++) bc->shape[i] = bc->dims[4 - nd + i], bc->n *= bc->shape[i];
    return true;
}

bool ampci_sum_to_operand(const char *op, ampc_ctx *ctx, const ampci_bcast *bc, int which, const float *g, float *dst,
                          int64_t dst_n) {
    (void)op;
    return AMPCI_DEV(ctx, sum_to, .bc = *bc, .which = which, .g = g, .dst = dst, .n = dst_n) == AMPC_OK;
}

const void *ampci_matrix_data(const ampc_tensor *t, bool *transposed) {
    if (ampc_tensor_is_contiguous(t)) {
        *transposed = false;
        return ampci_dev_ptr(t);
    }
    /* A transposed view: the last two dims swapped on an otherwise row-major layout, i.e. the data read
     * row-major is (..., cols, rows). Extent-1 dims may have any stride. */
    int d = t->ndim;
    if (d < 2) return NULL;
    int64_t r = t->shape[d - 2], c = t->shape[d - 1];
    if ((r != 1 && t->stride[d - 2] != 1) || (c != 1 && t->stride[d - 1] != r)) return NULL;
    int64_t expect = r * c;
    for (int i = d - 3; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return NULL;
        expect *= t->shape[i];
    }
    *transposed = true;
    return ampci_dev_ptr(t);
}
