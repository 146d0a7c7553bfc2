/* cases_basic.c: op-test cases for the elementwise ops (unary, binary with broadcasting, scalar variants),
 * matmul / bmm / linear, sum / mean, and the shape ops (reshape, view, transpose, permute, slice,
 * contiguous, cast, concat), each with a double-precision reference. */
#include "op_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SHAPE(...)                                                                                                     \
    (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

static void same_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = c->ndim[0];
    memcpy(sh, c->shape[0], sizeof c->shape[0]);
}

/* ---- unary ---- */

/* variants: a single element, odd 2-D, a strided 3-D view past a 32-wide tile, a longer 1-D run */
static void unary_make(ot_case *c, int v, uint64_t *r, ot_dist dist) {
    switch (v) {
    case 0: ot_input(c, 0, SHAPE(1)); break;
    case 1: ot_input(c, 0, SHAPE(7, ot_rand_int(r, 9, 15))); break;
    case 2:
        ot_input(c, 0, SHAPE(3, 5, 33));
        c->strided[0] = true;
        break;
    default: ot_input(c, 0, SHAPE(1031)); break;
    }
    c->dist[0] = dist;
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}

#define UNARY(NAME, DIST, CALL, EXPR)                                                                                  \
    static void NAME##_make(ot_case *c, int v, uint64_t *r) { unary_make(c, v, r, DIST); }                             \
    static ampc_tensor *NAME##_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {    \
        (void)i, (void)c;                                                                                              \
        return CALL;                                                                                                   \
    }                                                                                                                  \
    static void NAME##_ref(const ot_case *c, const double *const *in, double *out) {                                   \
        int64_t n = ot_numel(c->ndim[0], c->shape[0]);                                                                 \
        for (int64_t k = 0; k < n; k++) {                                                                              \
            double x = in[0][k];                                                                                       \
            out[k] = (EXPR);                                                                                           \
        }                                                                                                              \
    }                                                                                                                  \
    static const ot_op NAME##_op = {#NAME, 4, NAME##_make, NAME##_run, same_shape, NAME##_ref, NULL};

UNARY(neg, OT_NORMAL, ampc_neg(ctx, in[0]), -x)
UNARY(exp, OT_NORMAL, ampc_exp(ctx, in[0]), exp(x))
UNARY(log, OT_POSITIVE, ampc_log(ctx, in[0]), log(x))
UNARY(sqrt, OT_POSITIVE, ampc_sqrt(ctx, in[0]), sqrt(x))
UNARY(tanh, OT_NORMAL, ampc_tanh(ctx, in[0]), tanh(x))
UNARY(sigmoid, OT_NORMAL, ampc_sigmoid(ctx, in[0]), 1 / (1 + exp(-x)))
UNARY(relu, OT_AWAY_FROM_0, ampc_relu(ctx, in[0]), x > 0 ? x : 0)
UNARY(gelu_erf, OT_NORMAL, ampc_gelu(ctx, in[0], AMPC_GELU_ERF), 0.5 * x * (1 + erf(x / sqrt(2.0))))
UNARY(gelu_tanh, OT_NORMAL, ampc_gelu(ctx, in[0], AMPC_GELU_TANH),
      0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))))
UNARY(add_scalar, OT_NORMAL, ampc_add_scalar(ctx, in[0], 1.7), x + (double)(float)1.7)
UNARY(sub_scalar, OT_NORMAL, ampc_sub_scalar(ctx, in[0], -0.3), x - (double)(float)-0.3)
UNARY(mul_scalar, OT_NORMAL, ampc_mul_scalar(ctx, in[0], 2.5), x * 2.5)
UNARY(div_scalar, OT_NORMAL, ampc_div_scalar(ctx, in[0], 0.7), x / (double)(float)0.7)

/* ---- binary with broadcasting ---- */

static void binary_make(ot_case *c, int v, uint64_t *r, bool div) {
    switch (v) {
    case 0:
        ot_input(c, 0, SHAPE(5, 7));
        ot_input(c, 1, SHAPE(5, 7));
        break;
    case 1:
        ot_input(c, 0, SHAPE(4, 1, 3));
        ot_input(c, 1, SHAPE(5, 3));
        break;
    case 2:
        ot_input(c, 0, SHAPE(1));
        ot_input(c, 1, SHAPE(6, ot_rand_int(r, 2, 9)));
        break;
    case 3:
        ot_input(c, 0, SHAPE(3, 4));
        ot_input(c, 1, SHAPE(3, 4));
        c->strided[0] = c->strided[1] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(2, 3, 4, 5));
        ot_input(c, 1, SHAPE(3, 1, 5));
        break;
    }
    if (div) c->dist[1] = OT_POSITIVE;
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}

static void bcast_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = c->ndim[0] > c->ndim[1] ? c->ndim[0] : c->ndim[1];
    for (int i = 0; i < *nd; i++) {
        int ia = c->ndim[0] - *nd + i, ib = c->ndim[1] - *nd + i;
        int64_t ea = ia >= 0 ? c->shape[0][ia] : 1, eb = ib >= 0 ? c->shape[1][ib] : 1;
        sh[i] = ea == 1 ? eb : ea;
    }
}

/* Row-major offset into operand k of output element (multi-index idx of the broadcast shape). */
static int64_t bcast_offset(const ot_case *c, int k, int nd, const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < c->ndim[k]; i++) {
        int oi = nd - c->ndim[k] + i;
        off = off * c->shape[k][i] + (c->shape[k][i] == 1 ? 0 : idx[oi]);
    }
    return off;
}

static void binary_ref(const ot_case *c, const double *const *in, double *out, int kind) {
    int nd;
    int64_t sh[4], idx[4] = {0};
    bcast_shape(c, &nd, sh);
    int64_t n = ot_numel(nd, sh);
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k;
        for (int i = nd - 1; i >= 0; i--) idx[i] = rem % sh[i], rem /= sh[i];
        double a = in[0][bcast_offset(c, 0, nd, idx)], b = in[1][bcast_offset(c, 1, nd, idx)];
        out[k] = kind == 0 ? a + b : kind == 1 ? a - b : kind == 2 ? a * b : a / b;
    }
}

#define BINARY(NAME, KIND, CALL)                                                                                       \
    static void NAME##_make(ot_case *c, int v, uint64_t *r) { binary_make(c, v, r, KIND == 3); }                       \
    static ampc_tensor *NAME##_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {    \
        (void)i, (void)c;                                                                                              \
        return CALL(ctx, in[0], in[1]);                                                                                \
    }                                                                                                                  \
    static void NAME##_ref(const ot_case *c, const double *const *in, double *out) { binary_ref(c, in, out, KIND); }   \
    static const ot_op NAME##_op = {#NAME, 5, NAME##_make, NAME##_run, bcast_shape, NAME##_ref, NULL};

BINARY(add, 0, ampc_add)
BINARY(sub, 1, ampc_sub)
BINARY(mul, 2, ampc_mul)
BINARY(div, 3, ampc_div)

/* ---- matmul, bmm, linear ---- */

/* ip[0] = flags; in0 = a, in1 = b as stored (a is (K, M) under AMPC_TRANS_A, b is (N, K) under TRANS_B) */
static void matmul_make(ot_case *c, int v, uint64_t *r) {
    int64_t M = ot_rand_int(r, 2, 6), N = ot_rand_int(r, 2, 6), K = ot_rand_int(r, 2, 9);
    unsigned f = 0;
    switch (v) {
    case 0: M = N = K = 1; break;
    case 1: M = 17, K = 33, N = 5; break;
    case 2: f = AMPC_TRANS_A; break;
    case 3:
        f = AMPC_TRANS_B;
        M = 33;
        break;
    case 4: f = AMPC_TRANS_A | AMPC_TRANS_B; break;
    default: break;
    }
    c->ip[0] = (int)f;
    int64_t ar = f & AMPC_TRANS_A ? K : M, ac = f & AMPC_TRANS_A ? M : K;
    int64_t br = f & AMPC_TRANS_B ? N : K, bc = f & AMPC_TRANS_B ? K : N;
    switch (v) {
    case 5:
        ot_input(c, 0, SHAPE(3, ar, ac));
        ot_input(c, 1, SHAPE(3, br, bc));
        break; /* batched */
    case 6:
        ot_input(c, 0, SHAPE(2, 3, ar, ac));
        ot_input(c, 1, SHAPE(br, bc));
        break; /* shared b */
    case 7:
        ot_input(c, 0, SHAPE(2, 1, ar, ac));
        ot_input(c, 1, SHAPE(1, 3, br, bc));
        break; /* broadcast */
    case 8:
        ot_input(c, 0, SHAPE(ar, ac));
        ot_input(c, 1, SHAPE(2, br, bc));
        c->strided[0] = c->strided[1] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(ar, ac));
        ot_input(c, 1, SHAPE(br, bc));
        break;
    }
    c->K = K;
    snprintf(c->label, sizeof c->label, "v%d M%lld N%lld K%lld flags%u", v, (long long)M, (long long)N, (long long)K,
             f);
}

static void matmul_dims(const ot_case *c, int64_t *M, int64_t *N, int64_t *K) {
    unsigned f = (unsigned)c->ip[0];
    const int64_t *a = c->shape[0] + c->ndim[0] - 2, *b = c->shape[1] + c->ndim[1] - 2;
    *M = f & AMPC_TRANS_A ? a[1] : a[0], *K = f & AMPC_TRANS_A ? a[0] : a[1];
    *N = f & AMPC_TRANS_B ? b[0] : b[1];
}

static void matmul_shape(const ot_case *c, int *nd, int64_t *sh) {
    int64_t M, N, K;
    matmul_dims(c, &M, &N, &K);
    int na = c->ndim[0] - 2, nb = c->ndim[1] - 2, nbd = na > nb ? na : nb;
    for (int i = 0; i < nbd; i++) {
        int ia = na - nbd + i, ib = nb - nbd + i;
        int64_t ea = ia >= 0 ? c->shape[0][ia] : 1, eb = ib >= 0 ? c->shape[1][ib] : 1;
        sh[i] = ea == 1 ? eb : ea;
    }
    sh[nbd] = M, sh[nbd + 1] = N;
    *nd = nbd + 2;
}

static void matmul_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t M, N, K, sh[4];
    int nd;
    unsigned f = (unsigned)c->ip[0];
    matmul_dims(c, &M, &N, &K);
    matmul_shape(c, &nd, sh);
    int nbd = nd - 2, na = c->ndim[0] - 2, nb = c->ndim[1] - 2;
    int64_t batches = ot_numel(nbd, sh);
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t idx[2] = {0, 0}, rem = bi, oa = 0, ob = 0;
        for (int i = nbd - 1; i >= 0; i--) idx[i] = rem % sh[i], rem /= sh[i];
        for (int i = 0; i < na; i++) oa = oa * c->shape[0][i] + (c->shape[0][i] == 1 ? 0 : idx[nbd - na + i]);
        for (int i = 0; i < nb; i++) ob = ob * c->shape[1][i] + (c->shape[1][i] == 1 ? 0 : idx[nbd - nb + i]);
        const double *a = in[0] + oa * M * K, *b = in[1] + ob * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (f & AMPC_TRANS_A ? a[k * M + m] : a[m * K + k]) *
                         (f & AMPC_TRANS_B ? b[n * K + k] : b[k * N + n]);
                out[(bi * M + m) * N + n] = s;
            }
    }
}

static ampc_tensor *matmul_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_matmul(ctx, in[0], in[1], (unsigned)c->ip[0]);
}
static const ot_op matmul_op = {"matmul", 9, matmul_make, matmul_run, matmul_shape, matmul_ref, NULL};

static void bmm_make(ot_case *c, int v, uint64_t *r) {
    matmul_make(c, v == 0 ? 1 : v == 1 ? 3 : 4, r); /* 2-D shapes with each flag combination ... */
    int64_t a[2] = {c->shape[0][0], c->shape[0][1]}, b[2] = {c->shape[1][0], c->shape[1][1]};
    ot_input(c, 0, SHAPE(2, a[0], a[1])); /* ... given a batch of 2 */
    ot_input(c, 1, SHAPE(2, b[0], b[1]));
}
static ampc_tensor *bmm_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_bmm(ctx, in[0], in[1], (unsigned)c->ip[0]);
}
static const ot_op bmm_op = {"bmm", 3, bmm_make, bmm_run, matmul_shape, matmul_ref, NULL};

/* in0 = x (..., in), in1 = w (out, in), in2 = bias (out) when ip[0] */
static void linear_make(ot_case *c, int v, uint64_t *r) {
    int64_t in = v == 0 ? 1 : v == 1 ? 7 : 17, out = v == 0 ? 1 : ot_rand_int(r, 3, 9);
    switch (v) {
    case 0: ot_input(c, 0, SHAPE(1, in)); break;
    case 1: ot_input(c, 0, SHAPE(5, in)); break;
    case 2:
        ot_input(c, 0, SHAPE(2, 3, in));
        c->strided[0] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(33, in));
        c->strided[1] = true;
        break;
    }
    ot_input(c, 1, SHAPE(out, in));
    c->ip[0] = v != 2;
    if (c->ip[0]) ot_input(c, 2, SHAPE(out));
    c->K = in;
    snprintf(c->label, sizeof c->label, "v%d in%lld out%lld bias%d", v, (long long)in, (long long)out, c->ip[0]);
}
static void linear_shape(const ot_case *c, int *nd, int64_t *sh) {
    same_shape(c, nd, sh);
    sh[*nd - 1] = c->shape[1][0];
}
static void linear_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t I = c->shape[1][1], O = c->shape[1][0], rows = ot_numel(c->ndim[0], c->shape[0]) / I;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < O; o++) {
            double s = c->ip[0] ? in[2][o] : 0;
            for (int64_t k = 0; k < I; k++) s += in[0][r * I + k] * in[1][o * I + k];
            out[r * O + o] = s;
        }
}
static ampc_tensor *linear_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_linear(ctx, in[0], in[1], c->ip[0] ? in[2] : NULL);
}
static const ot_op linear_op = {"linear", 4, linear_make, linear_run, linear_shape, linear_ref, NULL};

/* ---- sum and mean: ip[0..3] dims, ip[4] how many (0 = all), ip[5] keepdim, ip[6] mean ---- */

static void reduce_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    switch (v) {
    case 0:
        ot_input(c, 0, SHAPE(5, 7));
        c->ip[4] = 0;
        break;
    case 1:
        ot_input(c, 0, SHAPE(4, 6, 3));
        c->ip[0] = 1, c->ip[4] = 1, c->ip[5] = 1;
        break;
    case 2:
        ot_input(c, 0, SHAPE(3, 4, 5));
        c->ip[0] = 0, c->ip[1] = 2, c->ip[4] = 2;
        c->strided[0] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(2, 3, 4, 37));
        c->ip[0] = -1, c->ip[4] = 1;
        break;
    }
    snprintf(c->label, sizeof c->label, "v%d", v);
}

static bool reduced(const ot_case *c, int d) {
    if (c->ip[4] == 0) return true;
    for (int i = 0; i < c->ip[4]; i++)
        if ((c->ip[i] < 0 ? c->ip[i] + c->ndim[0] : c->ip[i]) == d) return true;
    return false;
}

static void reduce_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = 0;
    for (int d = 0; d < c->ndim[0]; d++)
        if (!reduced(c, d)) sh[(*nd)++] = c->shape[0][d];
        else if (c->ip[5]) sh[(*nd)++] = 1;
}

static void reduce_ref(const ot_case *c, const double *const *in, double *out) {
    int nd;
    int64_t sh[4], n = ot_numel(c->ndim[0], c->shape[0]), count = 1;
    reduce_shape(c, &nd, sh);
    for (int d = 0; d < c->ndim[0]; d++) count *= reduced(c, d) ? c->shape[0][d] : 1;
    memset(out, 0, (size_t)ot_numel(nd, sh) * sizeof *out);
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, o = 0, mul = 1;
        for (int d = c->ndim[0] - 1; d >= 0; d--) {
            int64_t i = rem % c->shape[0][d];
            rem /= c->shape[0][d];
            if (!reduced(c, d)) o += i * mul, mul *= c->shape[0][d];
        }
        out[o] += in[0][k] / (c->ip[6] ? (double)count : 1.0);
    }
}

static ampc_tensor *reduce_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return (c->ip[6] ? ampc_mean : ampc_sum)(ctx, in[0], c->ip, c->ip[4], c->ip[5]);
}

static void sum_make(ot_case *c, int v, uint64_t *r) {
    reduce_make(c, v, r);
    int nd;
    int64_t sh[4];
    reduce_shape(c, &nd, sh);
    c->K = ot_numel(c->ndim[0], c->shape[0]) / ot_numel(nd, sh);
}
static void mean_make(ot_case *c, int v, uint64_t *r) {
    sum_make(c, v, r);
    c->ip[6] = 1;
}
static const ot_op sum_op = {"sum", 4, sum_make, reduce_run, reduce_shape, reduce_ref, NULL};
static const ot_op mean_op = {"mean", 4, mean_make, reduce_run, reduce_shape, reduce_ref, NULL};

/* ---- shape ops ---- */

/* out[k] = in[0][src(k)], where src is computed from the output multi-index */
typedef int64_t (*gather_fn)(const ot_case *c, const int64_t *oidx);

static void gather_ref(const ot_case *c, const double *in, double *out, int nd, const int64_t *sh, gather_fn src) {
    int64_t n = ot_numel(nd, sh), idx[4];
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k;
        for (int i = nd - 1; i >= 0; i--) idx[i] = rem % sh[i], rem /= sh[i];
        out[k] = in[src(c, idx)];
    }
}

static int64_t offset_of(const ot_case *c, const int64_t *idx) {
    int64_t o = 0;
    for (int i = 0; i < c->ndim[0]; i++) o = o * c->shape[0][i] + idx[i];
    return o;
}

/* permute (transpose is a permute of two dims): ip[0..3] = perm */
static void permute_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    static const int perms[4][4] = {{1, 0}, {2, 1, 0}, {3, 1, 0, 2}, {0, 2, 1}};
    static const int64_t shapes[4][4] = {{3, 4}, {2, 3, 5}, {2, 3, 4, 5}, {3, 33, 2}};
    static const int nds[4] = {2, 3, 4, 3};
    ot_input(c, 0, nds[v], shapes[v]);
    memcpy(c->ip, perms[v], sizeof perms[v]);
    c->strided[0] = v == 3;
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}
static void permute_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = c->ndim[0];
    for (int i = 0; i < *nd; i++) sh[i] = c->shape[0][c->ip[i]];
}
static int64_t permute_src(const ot_case *c, const int64_t *oidx) {
    int64_t idx[4];
    for (int i = 0; i < c->ndim[0]; i++) idx[c->ip[i]] = oidx[i];
    return offset_of(c, idx);
}
static void permute_ref(const ot_case *c, const double *const *in, double *out) {
    int nd;
    int64_t sh[4];
    permute_shape(c, &nd, sh);
    gather_ref(c, in[0], out, nd, sh, permute_src);
}
static ampc_tensor *permute_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_permute(in[0], c->ip);
}
static const ot_op permute_op = {"permute", 4, permute_make, permute_run, permute_shape, permute_ref, NULL};

/* transpose of (ip[0], ip[1]) expressed as the equivalent permutation for the reference */
static void transpose_make(ot_case *c, int v, uint64_t *r) {
    permute_make(c, v, r);
    int nd = c->ndim[0], d0 = v == 2 ? 1 : 0, d1 = nd - 1;
    for (int i = 0; i < nd; i++) c->ip[i] = i;
    c->ip[d0] = d1, c->ip[d1] = d0;
    c->ip[4] = d0, c->ip[5] = d1 - nd; /* the call uses a negative dim */
}
static ampc_tensor *transpose_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_transpose(in[0], c->ip[4], c->ip[5]);
}
static const ot_op transpose_op = {"transpose", 4, transpose_make, transpose_run, permute_shape, permute_ref, NULL};

/* slice: ip[0] dim, ip[1] start, ip[2] end, ip[3] step (the call's raw values) */
static void slice_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    static const int args[4][4] = {{0, 1, 6, 2}, {-1, -5, 100, 3}, {1, 0, 1, 1}, {2, 2, 40, 5}};
    static const int64_t shapes[4][4] = {{7, 5}, {4, 9}, {3, 6, 2}, {2, 3, 37}};
    static const int nds[4] = {2, 2, 3, 3};
    ot_input(c, 0, nds[v], shapes[v]);
    memcpy(c->ip, args[v], sizeof args[v]);
    c->strided[0] = v == 2;
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}
static void slice_norm(const ot_case *c, int *d, int64_t *start, int64_t *len) {
    *d = c->ip[0] < 0 ? c->ip[0] + c->ndim[0] : c->ip[0];
    int64_t n = c->shape[0][*d], s = c->ip[1] < 0 ? c->ip[1] + n : c->ip[1], e = c->ip[2] < 0 ? c->ip[2] + n : c->ip[2];
    if (e > n) e = n;
    *start = s, *len = (e - s + c->ip[3] - 1) / c->ip[3];
}
static void slice_shape(const ot_case *c, int *nd, int64_t *sh) {
    int d;
    int64_t s, len;
    same_shape(c, nd, sh);
    slice_norm(c, &d, &s, &len);
    sh[d] = len;
}
static int64_t slice_src(const ot_case *c, const int64_t *oidx) {
    int d;
    int64_t s, len, idx[4];
    slice_norm(c, &d, &s, &len);
    memcpy(idx, oidx, sizeof idx);
    idx[d] = s + oidx[d] * c->ip[3];
    return offset_of(c, idx);
}
static void slice_ref(const ot_case *c, const double *const *in, double *out) {
    int nd;
    int64_t sh[4];
    slice_shape(c, &nd, sh);
    gather_ref(c, in[0], out, nd, sh, slice_src);
}
static ampc_tensor *slice_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_slice(in[0], c->ip[0], c->ip[1], c->ip[2], c->ip[3]);
}
static const ot_op slice_op = {"slice", 4, slice_make, slice_run, slice_shape, slice_ref, NULL};

/* reshape / view / contiguous keep the row-major values; ip[0] selects the call */
static void reshape_make(ot_case *c, int v, uint64_t *r) {
    unary_make(c, v % 3 + 1, r, OT_NORMAL);
    c->strided[0] = c->strided[0] && v != 1; /* view needs a viewable input */
}
static void reshape_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = 2;
    sh[0] = c->shape[0][0], sh[1] = ot_numel(c->ndim[0], c->shape[0]) / c->shape[0][0];
}
static void copy_ref(const ot_case *c, const double *const *in, double *out) {
    memcpy(out, in[0], (size_t)ot_numel(c->ndim[0], c->shape[0]) * sizeof *out);
}
static ampc_tensor *reshape_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_reshape(in[0], 2, (int64_t[]){c->shape[0][0], -1});
}
static ampc_tensor *view_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_view(in[0], 2, (int64_t[]){c->shape[0][0], -1});
}
static ampc_tensor *contiguous_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i, (void)c;
    return ampc_tensor_contiguous(in[0]);
}
static const ot_op reshape_op = {"reshape", 3, reshape_make, reshape_run, reshape_shape, copy_ref, NULL};
static void view_make(ot_case *c, int v, uint64_t *r) {
    reshape_make(c, v, r);
    c->strided[0] = false;
}
static const ot_op view_op = {"view", 3, view_make, view_run, reshape_shape, copy_ref, NULL};
static const ot_op contiguous_op = {"contiguous", 4, neg_make, contiguous_run, same_shape, copy_ref, NULL};

/* cast to ip[0]; the forward rounds to the target, the backward rounds the gradient to the source */
static const ampc_dtype cast_targets[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
static void cast_make(ot_case *c, int v, uint64_t *r) {
    unary_make(c, v % 4, r, OT_NORMAL);
    c->ip[0] = v % 3;
}
static ampc_dtype cast_dtype(const ot_case *c, ampc_dtype in) {
    (void)in;
    return cast_targets[c->ip[0]];
}
static ampc_tensor *cast_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)ctx, (void)i;
    return ampc_tensor_cast(in[0], cast_targets[c->ip[0]]);
}
static const ot_op cast_op = {"cast", 6, cast_make, cast_run, same_shape, copy_ref, cast_dtype};

/* concat along ip[0] */
static void concat_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    switch (v) {
    case 0:
        ot_input(c, 0, SHAPE(2, 3, 4));
        ot_input(c, 1, SHAPE(2, 1, 4));
        ot_input(c, 2, SHAPE(2, 5, 4));
        c->ip[0] = 1;
        break;
    case 1:
        ot_input(c, 0, SHAPE(3, 2));
        ot_input(c, 1, SHAPE(3, 7));
        c->ip[0] = -1;
        c->strided[1] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(1, 33));
        ot_input(c, 1, SHAPE(4, 33));
        c->ip[0] = 0;
        c->no_grad[0] = true;
        break;
    }
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}
static void concat_shape(const ot_case *c, int *nd, int64_t *sh) {
    same_shape(c, nd, sh);
    int d = c->ip[0] < 0 ? c->ip[0] + *nd : c->ip[0];
    sh[d] = 0;
    for (int i = 0; i < c->nin; i++) sh[d] += c->shape[i][d];
}
static void concat_ref(const ot_case *c, const double *const *in, double *out) {
    int nd;
    int64_t sh[4];
    concat_shape(c, &nd, sh);
    int d = c->ip[0] < 0 ? c->ip[0] + nd : c->ip[0];
    int64_t outer = ot_numel(d, sh), inner = ot_numel(nd - d - 1, sh + d + 1), k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < c->nin; i++) {
            int64_t run = c->shape[i][d] * inner;
            memcpy(out + k, in[i] + o * run, (size_t)run * sizeof *out);
            k += run;
        }
}
static ampc_tensor *concat_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_concat(ctx, (const ampc_tensor *const *)in, c->nin, c->ip[0]);
}
static const ot_op concat_op = {"concat", 3, concat_make, concat_run, concat_shape, concat_ref, NULL};

const ot_op *const ot_ops_basic[] = {&neg_op,
                                     &exp_op,
                                     &log_op,
                                     &sqrt_op,
                                     &tanh_op,
                                     &sigmoid_op,
                                     &relu_op,
                                     &gelu_erf_op,
                                     &gelu_tanh_op,
                                     &add_scalar_op,
                                     &sub_scalar_op,
                                     &mul_scalar_op,
                                     &div_scalar_op,
                                     &add_op,
                                     &sub_op,
                                     &mul_op,
                                     &div_op,
                                     &matmul_op,
                                     &bmm_op,
                                     &linear_op,
                                     &sum_op,
                                     &mean_op,
                                     &permute_op,
                                     &transpose_op,
                                     &slice_op,
                                     &reshape_op,
                                     &view_op,
                                     &contiguous_op,
                                     &cast_op,
                                     &concat_op,
                                     NULL};
