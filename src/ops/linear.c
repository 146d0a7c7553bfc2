/* linear.c: GEMM-like ops: matmul (2-D and batched with broadcast batch dims, either operand
 * transposed), bmm and linear (x W^T + b). Operands keep their dtype and go straight to the device's GEMM
 * operation (F32 accumulation; kernels/dev_linear.h); transposed views are passed as transposed operands
 * instead of being copied. The GEMM's write-out adds linear's bias and rounds the result to its dtype, so
 * outputs make one trip to memory and need no F32 buffer. The backward is the usual pair of GEMMs, writing a
 * gradient in its input's dtype where that rounding would come next anyway; an operand shared by every
 * batch sums its gradient over the batches in one F32 buffer, in batch order. The bias gradient is a
 * column sum on the device.
 * Inside an FP8 region (src/amp/fp8.c) linear, and matmul with a parameter as its second operand, run on
 * FP8-quantised operands held as BF16 values q / scale, which the BF16 GEMMs multiply exactly as an FP8
 * GEMM would; the backward quantises the output gradient the same way and frees the copies. */
#include "ops.h"

#include <string.h>

/* One matrix operand: stored row-major with leading dimension ld, used transposed when t; bs are the
 * element strides of the (up to two) batch dims, 0 where the operand is broadcast. */
typedef struct mat {
    const void *p;
    int64_t ld;
    bool t;
    int64_t bs[2];
} mat;

typedef struct matmul_saved {
    const ampc_tensor *fp8; /* the parameter whose FP8 state quantised the operands, or NULL */
    unsigned flags;
    int64_t M, N, K, nb[2]; /* nb: batch extents of the result (1 where absent) */
    mat a, b;               /* as used by the forward (data of in[0], in[1] or their copies) */
    int64_t obs[2];         /* batch strides of the result */
} matmul_saved;

/* Where a batched GEMM's results go: F32 c, or (dt BF16/F16) c rounded once to dt by the kernel's
 * write-out; the bias (N F32 values, or NULL) is added to every row before that rounding. */
typedef struct gemm_dst {
    void *c;
    ampc_dtype dt;
    const float *bias;
} gemm_dst;

/* d.c (batches of (M, N), batch strides cbs) = a b per batch, one device GEMM operation; a c batch stride
 * of 0 sums those batches into one F32 block (an F32 gradient summed over broadcast batches). */
static ampc_status gemm_batched(ampc_ctx *ctx, ampc_dtype dt, int64_t M, int64_t N, int64_t K, const mat *a,
                                const mat *b, gemm_dst d, const int64_t cbs[2], const int64_t nb[2]) {
    ampci_gemm g = {.M = M,
                    .N = N,
                    .K = K,
                    .a = a->p,
                    .lda = a->ld,
                    .ta = a->t,
                    .b = b->p,
                    .ldb = b->ld,
                    .tb = b->t,
                    .ldc = N,
                    .bias = d.bias};
    if (d.dt == AMPC_DTYPE_F32) g.c = d.c;
    else g.c16 = d.c, g.c16_dt = d.dt;
    ampc_status s = AMPCI_DEV(ctx, gemm, .dt = dt, .g = g, .nb = {nb[0], nb[1]}, .as = {a->bs[0], a->bs[1]},
                              .bs = {b->bs[0], b->bs[1]}, .cs = {cbs[0], cbs[1]});
    if (s == AMPC_OK) ampci_matmul_flops_add(ctx, 2 * (uint64_t)M * (uint64_t)N * (uint64_t)K * nb[0] * nb[1]);
    return s;
}

/* An F32 GEMM destination. */
static gemm_dst f32_dst(float *c) { return (gemm_dst){c, AMPC_DTYPE_F32, NULL}; }

/* One gradient as batched GEMMs: x y (m, n, k per batch; nb batches, result batch strides bs). */
typedef struct grad_plan {
    ampc_dtype dt; /* the operands' */
    int64_t m, n, k;
    const mat *x, *y;
    int64_t bs[2];
    const int64_t *nb;
} grad_plan;

/* The gradient for t by plan p, handed to t: as F32 or, where ampci_grad_dtype allows (and no batch is
 * summed into another, which needs beta 1), in t's dtype straight from the GEMM's write-out: the rounding
 * ampci_grad_accumulate would do next, without the F32 buffer and the conversion pass. */
static ampc_status grad_via_gemm(ampci_node *n, ampc_tensor *t, const grad_plan *p) {
    ampc_dtype gdt = ampci_grad_dtype(t);
    bool sums = (p->bs[0] == 0 && p->nb[0] > 1) || (p->bs[1] == 0 && p->nb[1] > 1);
    if (gdt == AMPC_DTYPE_F32 || sums) {
        float *buf = ampci_scratch(n->ctx, n->op, ampci_numel(t));
        ampc_status s = buf ? gemm_batched(n->ctx, p->dt, p->m, p->n, p->k, p->x, p->y, f32_dst(buf), p->bs, p->nb)
                            : ampc_last_status();
        return s == AMPC_OK ? ampci_accumulate_f32(n->op, t, buf) : s;
    }
    ampc_tensor *g = ampci_output(n->op, n->ctx, gdt, t->ndim, t->shape);
    ampc_status s = g ? gemm_batched(n->ctx, p->dt, p->m, p->n, p->k, p->x, p->y,
                                     (gemm_dst){ampci_dev_ptr(g), gdt, NULL}, p->bs, p->nb)
                      : ampc_last_status();
    return s == AMPC_OK ? ampci_grad_accumulate(t, g) : s;
}

/* The operand view of t (its last two dims), copying t when it is neither row-major nor a transposed
 * row-major view. *used receives the tensor whose data is used. */
static bool operand(const char *op, const ampc_tensor *t, bool flag_t, mat *m, const ampc_tensor **used) {
    bool tr;
    const void *p = ampci_matrix_data(t, &tr);
    *used = t;
    if (!p) {
        ampc_tensor *c = ampci_copy_as(op, t, t->dtype);
        if (!c) return false;
        p = ampci_dev_ptr(c), tr = false, *used = c;
    }
    int64_t r = t->shape[t->ndim - 2], cdim = t->shape[t->ndim - 1];
    m->p = p;
    m->ld = tr ? r : cdim;
    m->t = flag_t != tr;
    return true;
}

/* ---- FP8 ---- */

/* The FP8 state's parameter for an op whose weight operand was w before autocast: w when an FP8 region is
 * open and w is a parameter (a leaf that requires grad). */
static const ampc_tensor *fp8_param(ampc_ctx *ctx, const ampc_tensor *w) {
    return ampc_fp8_enabled(ctx) && w && !w->node && w->requires_grad ? w : NULL;
}

/* The n values of dtype dt at p (an operand's memory, in its own layout) quantised for role: the BF16
 * copy's data, or NULL (error recorded). */
static const void *fp8_quantize_raw(ampc_ctx *ctx, const ampc_tensor *param, int role, const void *p, ampc_dtype dt,
                                    int64_t n, const char *op) {
    ampci_fp8_meta *m = ampci_fp8_meta_for(ctx, param);
    ampc_tensor *raw = m ? ampci_tensor_wrap(op, ctx, dt, 1, &n, (void *)p) : NULL;
    ampc_tensor *q = raw ? ampci_fp8_quantize(ctx, m, role, raw, op) : NULL;
    return q ? ampci_dev_ptr(q) : NULL;
}

/* An operand's quantised copy in place of its data (used: the tensor whose memory m points at). The
 * weight (role 1) is quantised from the parameter itself where autocast cast it, as TE quantises the
 * weight from its own dtype (a BF16 copy first would round twice); the layouts agree when both are
 * contiguous. */
static bool fp8_operand(ampc_ctx *ctx, const ampc_tensor *param, int role, mat *m, const ampc_tensor *used,
                        const char *op) {
    const ampc_tensor *src = role == 1 && used != param && ampc_tensor_is_contiguous(param) &&
                                     ampc_tensor_is_contiguous(used) && ampci_numel(param) == ampci_numel(used)
                                 ? param
                                 : used;
    const void *p = src == used ? m->p : ampci_dev_ptr(src);
    return (m->p = fp8_quantize_raw(ctx, param, role, p, src->dtype, ampci_numel(src), op)) != NULL;
}

/* The output gradient as node n's backward GEMMs read it: gout's data, or under FP8 (param: the state's
 * parameter) its quantised copy; NULL (error recorded) on failure. */
static const void *fp8_grad(ampci_node *n, const ampc_tensor *param, const ampc_tensor *gout) {
    return param ? fp8_quantize_raw(n->ctx, param, 2, ampci_dev_ptr(gout), gout->dtype, ampci_numel(gout), n->op)
                 : ampci_dev_ptr(gout);
}

/* The quantised copies are done with (g: the output gradient's, NULL in the forward). */
static void fp8_free(ampc_ctx *ctx, const void *g, const mat *a, const mat *b) {
    ampci_step_free(ctx, (void *)g), ampci_step_free(ctx, (void *)a->p), ampci_step_free(ctx, (void *)b->p);
}

/* Batch dims of a (nda - 2 of them) and b, right-aligned into two slots and broadcast. */
static bool batch_dims(const char *op, const ampc_tensor *a, const ampc_tensor *b, int64_t nb[2], int *nbd,
                       int64_t abs_[2], int64_t bbs[2]) {
    int na = a->ndim - 2, nbb = b->ndim - 2;
    *nbd = na > nbb ? na : nbb;
    int64_t sa = a->shape[a->ndim - 2] * a->shape[a->ndim - 1], sb = b->shape[b->ndim - 2] * b->shape[b->ndim - 1];
    for (int slot = 1; slot >= 0; slot--) {
        int ia = na - (2 - slot), ib = nbb - (2 - slot);
        int64_t ea = ia >= 0 ? a->shape[ia] : 1, eb = ib >= 0 ? b->shape[ib] : 1;
        if (ea != eb && ea != 1 && eb != 1) {
            char x[128], y[128];
            ampci_fail(AMPC_STATUS_SHAPE, "%s: batch dims of %s and %s do not broadcast (%lld vs %lld)", op,
                       ampc_tensor_describe(a, x, sizeof x), ampc_tensor_describe(b, y, sizeof y), (long long)ea,
                       (long long)eb);
            return false;
        }
        nb[slot] = ea == 1 ? eb : ea;
        abs_[slot] = ea == 1 ? 0 : sa;
        bbs[slot] = eb == 1 ? 0 : sb;
        sa *= ea, sb *= eb;
    }
    return true;
}

/* Gradient of operand `which` (0: a, 1: b) of a matmul, handed to that input. */
static ampc_status matmul_operand_grad(ampci_node *n, int which, const void *g) {
    const matmul_saved *sv = n->saved; /* FP8: g and the saved operands are BF16 copies */
    ampc_tensor *t = n->in[which];
    bool ta = sv->flags & AMPC_TRANS_A, tb = sv->flags & AMPC_TRANS_B;
    mat G = {g, sv->N, false, {sv->obs[0], sv->obs[1]}}, GT = G;
    GT.t = true;
    mat A = sv->a, B = sv->b, AT = sv->a, BT = sv->b;
    AT.t = !AT.t, BT.t = !BT.t;
    grad_plan p = {.dt = sv->fp8 ? AMPC_DTYPE_BF16 : t->dtype, .nb = sv->nb};
    if (which == 0) { /* !ta: G op(B)^T (M,N)(N,K); ta: op(B) G^T (K,N)(N,M) */
        p.x = ta ? &B : &G, p.y = ta ? &GT : &BT;
        p.m = ta ? sv->K : sv->M, p.n = ta ? sv->M : sv->K, p.k = sv->N;
    } else { /* !tb: op(A)^T G (K,M)(M,N); tb: G^T op(A) (N,M)(M,K) */
        p.x = tb ? &GT : &AT, p.y = tb ? &A : &G;
        p.m = tb ? sv->N : sv->K, p.n = tb ? sv->K : sv->N, p.k = sv->M;
    }
    p.bs[0] = which ? sv->b.bs[0] : sv->a.bs[0], p.bs[1] = which ? sv->b.bs[1] : sv->a.bs[1];
    return grad_via_gemm(n, t, &p);
}

static ampc_status matmul_backward(ampci_node *n, const ampc_tensor *gout) {
    const matmul_saved *sv = n->saved;
    const void *g = fp8_grad(n, sv->fp8, gout);
    ampc_status s = g ? AMPC_OK : ampc_last_status();
    for (int w = 0; w < 2 && s == AMPC_OK; w++)
        if (ampci_input_needs_grad(n, w)) s = matmul_operand_grad(n, w, g);
    if (sv->fp8) fp8_free(n->ctx, g, &sv->a, &sv->b);
    return s;
}

static const ampci_op_desc matmul_op = {"ampc_matmul",
                                        AMPCI_OP_MATMUL,
                                        2,
                                        {"a", "b"},
                                        .backward = matmul_backward,
                                        .saves = 3u,
                                        .saved_size = sizeof(matmul_saved)};
static const ampci_op_desc bmm_op = {"ampc_bmm",
                                     AMPCI_OP_BMM,
                                     2,
                                     {"a", "b"},
                                     .backward = matmul_backward,
                                     .saves = 3u,
                                     .saved_size = sizeof(matmul_saved)};

static ampc_tensor *matmul(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, unsigned flags, bool strict_bmm) {
    ampci_op_call c = {.op = strict_bmm ? &bmm_op : &matmul_op, .ctx = ctx, .in = {a, b}};
    const ampc_tensor *param = fp8_param(ctx, b); /* before autocast's cast */
    if (!ampci_op_begin(&c)) return NULL;
    a = c.in[0], b = c.in[1];
    const char *op = c.op->name;
    char x[128], y[128];
    if (a->ndim < 2 || b->ndim < 2 || (strict_bmm && (a->ndim != 3 || b->ndim != 3)))
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: operands %s and %s; expected %s", op,
                               ampc_tensor_describe(a, x, sizeof x), ampc_tensor_describe(b, y, sizeof y),
                               strict_bmm ? "3-D (B, M, K) and (B, K, N)" : "at least 2 dims each");
    if (flags & ~(AMPC_TRANS_A | AMPC_TRANS_B))
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: flags 0x%x; expected AMPC_TRANS_A and/or AMPC_TRANS_B", op,
                               flags);
    if (!ampci_same_dtype(op, a, "a", b, "b")) return NULL;
    bool ta = flags & AMPC_TRANS_A, tb = flags & AMPC_TRANS_B;
    int64_t ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1], br = b->shape[b->ndim - 2],
            bc = b->shape[b->ndim - 1];
    int64_t M = ta ? ac : ar, K = ta ? ar : ac, Kb = tb ? bc : br, N = tb ? br : bc;
    if (K != Kb || (strict_bmm && a->shape[0] != b->shape[0]))
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: %s%s x %s%s: inner dims %lld and %lld differ%s", op,
                               ampc_tensor_describe(a, x, sizeof x), ta ? "^T" : "",
                               ampc_tensor_describe(b, y, sizeof y), tb ? "^T" : "", (long long)K, (long long)Kb,
                               strict_bmm ? " (or batch sizes differ)" : "");
    matmul_saved sv = {.flags = flags, .M = M, .N = N, .K = K};
    int nbd;
    if (!batch_dims(op, a, b, sv.nb, &nbd, sv.a.bs, sv.b.bs)) return NULL;
    const ampc_tensor *ua, *ub;
    if (!operand(op, a, ta, &sv.a, &ua) || !operand(op, b, tb, &sv.b, &ub)) return NULL;
    sv.fp8 = param;
    if (param && (!fp8_operand(ctx, param, 0, &sv.a, ua, op) || !fp8_operand(ctx, param, 1, &sv.b, ub, op)))
        return NULL;
    if (param) c.saves = 0; /* the backward reads the quantised copies only: the inputs may go early */
    ampc_dtype gdt = param ? AMPC_DTYPE_BF16 : a->dtype;
    int64_t shape[AMPC_MAX_DIMS];
    for (int i = 0; i < nbd; i++) shape[i] = sv.nb[2 - nbd + i];
    shape[nbd] = M, shape[nbd + 1] = N;
    /* the output in its dtype, rounded by the GEMM's write-out */
    ampc_tensor *out = ampci_output(op, ctx, a->dtype, nbd + 2, shape);
    sv.obs[0] = M * N * sv.nb[1], sv.obs[1] = M * N;
    gemm_dst d = {out ? ampci_dev_ptr(out) : NULL, a->dtype, NULL};
    if (!out || gemm_batched(ctx, gdt, M, N, K, &sv.a, &sv.b, d, sv.obs, sv.nb) != AMPC_OK) return NULL;
    ampc_tensor *r = ampci_op_end(&c, out, &sv);
    if (param && (!r || !r->node)) fp8_free(ctx, NULL, &sv.a, &sv.b); /* no backward will read them */
    return r;
}

ampc_tensor *ampc_matmul(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, unsigned flags) {
    return matmul(ctx, a, b, flags, false);
}

ampc_tensor *ampc_bmm(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, unsigned flags) {
    return matmul(ctx, a, b, flags, true);
}

/* ---- linear: y = x W^T + b ---- */

typedef struct linear_saved {
    const ampc_tensor *fp8; /* the weight whose FP8 state quantised x and w, or NULL */
    int64_t rows, in, out;
    mat x, w; /* x: (rows, in) row-major; w: op(w) = W^T (in, out) */
} linear_saved;

/* The bias gradient: the column sums of g (rows, cols), in double, each column in row order (a device
 * operation), as F32 scratch; NULL (error recorded) on failure. */
static float *column_sums(ampc_ctx *ctx, const char *op, const ampc_tensor *g, int64_t rows, int64_t cols) {
    float *out = ampci_scratch(ctx, op, cols);
    if (!out || AMPCI_DEV(ctx, col_sum, .out = out, .g = ampci_dev_ptr(g), .dt = g->dtype, .rows = rows,
                          .cols = cols) != AMPC_OK)
        return NULL;
    return out;
}

static ampc_status linear_backward(ampci_node *n, const ampc_tensor *gout) {
    const linear_saved *sv = n->saved;
    ampc_dtype dt = sv->fp8 ? AMPC_DTYPE_BF16 : n->in[0]->dtype;
    static const int64_t one[2] = {1, 1};
    const void *g = fp8_grad(n, sv->fp8, gout);
    if (!g) return ampc_last_status();
    mat G = {g, sv->out, false, {0, 0}}, GT = G, W = sv->w;
    GT.t = true;
    W.t = !W.t; /* W itself (out, in) */
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) { /* gx (rows, in) = G (rows, out) W (out, in) */
        grad_plan p = {dt, sv->rows, sv->in, sv->out, &G, &W, {0, 0}, one};
        s = grad_via_gemm(n, n->in[0], &p);
    }
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) { /* gW (out, in) = G^T (out, rows) x (rows, in) */
        grad_plan p = {dt, sv->out, sv->in, sv->rows, &GT, &sv->x, {0, 0}, one};
        s = grad_via_gemm(n, n->in[1], &p);
    }
    if (s == AMPC_OK && ampci_input_needs_grad(n, 2)) { /* from the unquantised gradient, as TE */
        float *gb = column_sums(n->ctx, n->op, gout, sv->rows, sv->out);
        s = gb ? ampci_accumulate_f32(n->op, n->in[2], gb) : ampc_last_status();
    }
    if (sv->fp8) fp8_free(n->ctx, g, &sv->x, &sv->w);
    return s;
}

static bool linear_check(const char *op, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b) {
    char p[128], q[128], r[128];
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ampci_fail(AMPC_STATUS_SHAPE,
                   "%s: x %s, weight %s, bias %s; expected x (..., in), weight (out, in), "
                   "bias (out)",
                   op, ampc_tensor_describe(x, p, sizeof p), ampc_tensor_describe(w, q, sizeof q),
                   b ? ampc_tensor_describe(b, r, sizeof r) : "none");
        return false;
    }
    return ampci_same_dtype(op, x, "x", w, "weight") && (!b || ampci_same_dtype(op, x, "x", b, "bias"));
}

static const ampci_op_desc linear_op = {"ampc_linear",
                                        AMPCI_OP_LINEAR,
                                        3,
                                        {"x", "weight", "bias"},
                                        .optional = 4u,
                                        .backward = linear_backward,
                                        .saves = 3u,
                                        .saved_size = sizeof(linear_saved)};

ampc_tensor *ampc_linear(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b) {
    const char *op = linear_op.name;
    ampci_op_call c = {.op = &linear_op, .ctx = ctx, .in = {x, w, b}};
    const ampc_tensor *param = fp8_param(ctx, w); /* before autocast's cast */
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0], w = c.in[1], b = c.in[2];
    if (!linear_check(op, x, w, b)) return NULL;
    linear_saved sv = {.in = w->shape[1], .out = w->shape[0]};
    sv.rows = sv.in ? ampci_numel(x) / sv.in : 0;
    const ampc_tensor *xc = ampc_tensor_is_contiguous(x) ? x : ampci_copy_as(op, x, x->dtype), *uw;
    if (!xc || !operand(op, w, true, &sv.w, &uw)) return NULL;
    sv.x = (mat){ampci_dev_ptr(xc), sv.in, false, {0, 0}};
    sv.fp8 = param;
    if (param && (!fp8_operand(ctx, param, 0, &sv.x, xc, op) || !fp8_operand(ctx, param, 1, &sv.w, uw, op)))
        return NULL;
    if (param) c.saves = 0; /* the backward reads the quantised copies only: the inputs may go early */
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = sv.out;
    /* y in its dtype, the bias added and the result rounded by the GEMM's write-out */
    ampc_tensor *y = ampci_output(op, ctx, x->dtype, x->ndim, shape);
    const float *bf = b && y ? ampci_as_f32(op, b) : NULL;
    if (!y || (b && !bf)) return NULL;
    static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    gemm_dst d = {ampci_dev_ptr(y), x->dtype, bf};
    ampc_dtype gdt = param ? AMPC_DTYPE_BF16 : x->dtype;
    if (gemm_batched(ctx, gdt, sv.rows, sv.out, sv.in, &sv.x, &sv.w, d, zero, one) != AMPC_OK) return NULL;
    if (b) ampci_as_f32_done(b, bf);
    ampc_tensor *r = ampci_op_end(&c, y, &sv);
    if (param && (!r || !r->node)) fp8_free(ctx, NULL, &sv.x, &sv.w); /* no backward will read them */
    return r;
}
