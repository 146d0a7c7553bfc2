/* cases_nn.c: op-test cases for softmax, log_softmax, layer_norm, embedding, cross_entropy, mse_loss,
 * dropout and positional encoding, each with a double-precision reference written from the definitions
 * (not from ampc). Variants cover size 1, odd sizes, sizes past 32/64, strided inputs and softmax over a
 * non-last dim. */
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

static void scalar_shape(const ot_case *c, int *nd, int64_t *sh) {
    (void)c, (void)sh;
    *nd = 0;
}

/* ---- softmax / log_softmax: ip[0] = dim (as passed), ip[1] = log ---- */

static void softmax_make(ot_case *c, int v, uint64_t *r) {
    switch (v) {
    case 0:
        ot_input(c, 0, SHAPE(1));
        c->ip[0] = 0;
        break;
    case 1:
        ot_input(c, 0, SHAPE(7, ot_rand_int(r, 9, 15)));
        c->ip[0] = -1;
        break;
    case 2:
        ot_input(c, 0, SHAPE(3, 5, 33));
        c->ip[0] = 1;
        c->strided[0] = true;
        break; /* non-last dim */
    case 3:
        ot_input(c, 0, SHAPE(3, 67));
        c->ip[0] = 1;
        c->strided[0] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(2, 3, 4, 5));
        c->ip[0] = -3;
        break; /* dim 1 of 4 */
    }
    int d = c->ip[0] < 0 ? c->ip[0] + c->ndim[0] : c->ip[0];
    c->K = c->shape[0][d];
    snprintf(c->label, sizeof c->label, "v%d dim %d", v, c->ip[0]);
}

static void log_softmax_make(ot_case *c, int v, uint64_t *r) {
    softmax_make(c, v, r);
    c->ip[1] = 1;
}

static void softmax_ref(const ot_case *c, const double *const *in, double *out) {
    int nd = c->ndim[0], d = c->ip[0] < 0 ? c->ip[0] + nd : c->ip[0];
    int64_t n = c->shape[0][d], outer = ot_numel(d, c->shape[0]), inner = ot_numel(nd - d - 1, c->shape[0] + d + 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *x = in[0] + o * n * inner + i;
            double *y = out + o * n * inner + i, mx = -INFINITY, s = 0;
            for (int64_t k = 0; k < n; k++) mx = fmax(mx, x[k * inner]);
            for (int64_t k = 0; k < n; k++) s += exp(x[k * inner] - mx);
            for (int64_t k = 0; k < n; k++)
                y[k * inner] = c->ip[1] ? x[k * inner] - mx - log(s) : exp(x[k * inner] - mx) / s;
        }
}

static ampc_tensor *softmax_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return (c->ip[1] ? ampc_log_softmax : ampc_softmax)(ctx, in[0], c->ip[0]);
}

static const ot_op softmax_op = {"softmax", 5, softmax_make, softmax_run, same_shape, softmax_ref, NULL};
static const ot_op log_softmax_op = {"log_softmax", 5, log_softmax_make, softmax_run, same_shape, softmax_ref, NULL};

/* ---- layer_norm: in0 = x (..., D), in1 = w, in2 = b when ip[0]; dp[0] = eps ---- */

static void layer_norm_make(ot_case *c, int v, uint64_t *r) {
    int64_t D;
    switch (v) {
    case 0:
        D = 1;
        ot_input(c, 0, SHAPE(1, D));
        c->ip[0] = 1;
        break;
    case 1:
        D = ot_rand_int(r, 5, 9) | 1;
        ot_input(c, 0, SHAPE(5, D));
        c->ip[0] = 0;
        break;
    case 2:
        D = 33;
        ot_input(c, 0, SHAPE(2, 3, D));
        c->ip[0] = 1;
        c->strided[0] = true;
        break;
    case 3:
        D = 67;
        ot_input(c, 0, SHAPE(3, D));
        c->ip[0] = 1;
        break;
    default:
        D = 65;
        ot_input(c, 0, SHAPE(4, D));
        c->ip[0] = 0;
        c->strided[0] = true;
        break;
    }
    if (c->ip[0]) {
        ot_input(c, 1, SHAPE(D));
        ot_input(c, 2, SHAPE(D));
    }
    c->dp[0] = 1e-5;
    c->K = D;
    snprintf(c->label, sizeof c->label, "v%d D%lld affine %d", v, (long long)D, c->ip[0]);
}

static void layer_norm_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t D = c->shape[0][c->ndim[0] - 1], rows = ot_numel(c->ndim[0], c->shape[0]) / D;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0] + r * D;
        double mu = 0, var = 0;
        for (int64_t k = 0; k < D; k++) mu += x[k];
        mu /= (double)D;
        for (int64_t k = 0; k < D; k++) var += (x[k] - mu) * (x[k] - mu);
        double rs = 1 / sqrt(var / (double)D + c->dp[0]);
        for (int64_t k = 0; k < D; k++) {
            double xhat = (x[k] - mu) * rs;
            out[r * D + k] = c->ip[0] ? xhat * in[1][k] + in[2][k] : xhat;
        }
    }
}

static ampc_tensor *layer_norm_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_layer_norm(ctx, in[0], c->ip[0] ? in[1] : NULL, c->ip[0] ? in[2] : NULL, c->dp[0]);
}

static const ot_op layer_norm_op = {"layer_norm", 5, layer_norm_make, layer_norm_run, same_shape, layer_norm_ref, NULL};

/* ---- embedding: in0 = weight (V, D); ids = the integer input; ip[0]: pass ids as I32, ip[1]: as a
 * strided view ---- */

static void embedding_make(ot_case *c, int v, uint64_t *r) {
    int64_t V, D;
    switch (v) {
    case 0:
        V = 1, D = 1;
        c->int_ndim = 1, c->int_shape[0] = 1;
        break;
    case 1:
        V = 7, D = ot_rand_int(r, 9, 15) | 1;
        c->int_ndim = 2, c->int_shape[0] = 2, c->int_shape[1] = 5;
        c->ip[0] = 1;
        break;
    case 2:
        V = 11, D = 33;
        c->int_ndim = 3, c->int_shape[0] = 2, c->int_shape[1] = 3, c->int_shape[2] = 4;
        c->strided[0] = true;
        c->ip[1] = 1;
        break;
    default:
        V = 5, D = 67;
        c->int_ndim = 1, c->int_shape[0] = 9;
        break;
    }
    ot_input(c, 0, SHAPE(V, D));
    c->int_lo = 0, c->int_hi = V - 1;
    c->K = ot_numel(c->int_ndim, c->int_shape); /* a weight row sums up to every id's gradient */
    snprintf(c->label, sizeof c->label, "v%d V%lld D%lld ids %s%s", v, (long long)V, (long long)D,
             c->ip[0] ? "I32" : "I64", c->ip[1] ? " strided" : "");
}

static void embedding_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = c->int_ndim + 1;
    memcpy(sh, c->int_shape, (size_t)c->int_ndim * sizeof sh[0]);
    sh[c->int_ndim] = c->shape[0][1];
}

static void embedding_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t n = ot_numel(c->int_ndim, c->int_shape), D = c->shape[0][1];
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < D; k++) out[i * D + k] = in[0][c->ints[i] * D + k];
}

static ampc_tensor *embedding_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *ids, const ot_case *c) {
    const ampc_tensor *use = ids;
    if (c->ip[0]) use = ampc_tensor_cast(ids, AMPC_DTYPE_I32);
    if (c->ip[1]) use = ampc_tensor_transpose(ampc_tensor_contiguous(ampc_tensor_transpose(use, -1, -2)), -1, -2);
    return ampc_embedding(ctx, in[0], use);
}

static const ot_op embedding_op = {"embedding", 4, embedding_make, embedding_run, embedding_shape, embedding_ref, NULL};

/* ---- cross_entropy: in0 = logits (N, C); targets = the integer input; ip[0] = ignore_index ---- */

static void cross_entropy_make(ot_case *c, int v, uint64_t *r) {
    int64_t N, C;
    c->ip[0] = AMPC_IGNORE_INDEX_DEFAULT;
    c->int_lo = 0;
    switch (v) {
    case 0: N = 1, C = 1; break;
    case 1:
        N = 7, C = ot_rand_int(r, 9, 15) | 1;
        c->ip[0] = -1, c->int_lo = -1;
        break; /* some ignored */
    case 2:
        N = 5, C = 67;
        c->strided[0] = true;
        break;
    case 3:
        N = 33, C = 5;
        c->ip[0] = -1, c->int_lo = -1;
        c->strided[0] = true;
        break;
    default:
        N = 3, C = 2;
        c->ip[0] = 1, c->int_lo = 0;
        break; /* ignore_index inside [0, C) */
    }
    ot_input(c, 0, SHAPE(N, C));
    c->int_ndim = 1, c->int_shape[0] = N, c->int_hi = C - 1;
    c->K = N * C;
    snprintf(c->label, sizeof c->label, "v%d N%lld C%lld ignore %d", v, (long long)N, (long long)C, c->ip[0]);
}

static void cross_entropy_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t N = c->shape[0][0], C = c->shape[0][1], kept = 0;
    double total = 0;
    for (int64_t n = 0; n < N; n++) {
        if (c->ints[n] == c->ip[0]) continue;
        const double *x = in[0] + n * C;
        double mx = -INFINITY, s = 0;
        for (int64_t k = 0; k < C; k++) mx = fmax(mx, x[k]);
        for (int64_t k = 0; k < C; k++) s += exp(x[k] - mx);
        total += mx + log(s) - x[c->ints[n]];
        kept++;
    }
    out[0] = kept ? total / (double)kept : NAN;
}

static ampc_tensor *cross_entropy_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *t, const ot_case *c) {
    return ampc_cross_entropy(ctx, in[0], t, c->ip[0]);
}

static const ot_op cross_entropy_op = {"cross_entropy",   5,   cross_entropy_make, cross_entropy_run, scalar_shape,
                                       cross_entropy_ref, NULL};

/* ---- mse_loss: in0 = x, in1 = target ---- */

static void mse_make(ot_case *c, int v, uint64_t *r) {
    switch (v) {
    case 0:
        ot_input(c, 0, SHAPE(1));
        ot_input(c, 1, SHAPE(1));
        break;
    case 1:
        ot_input(c, 0, SHAPE(7, ot_rand_int(r, 9, 15)));
        ot_input(c, 1, c->ndim[0], c->shape[0]);
        break;
    case 2:
        ot_input(c, 0, SHAPE(3, 5, 33));
        ot_input(c, 1, SHAPE(3, 5, 33));
        c->strided[0] = c->strided[1] = true;
        break;
    default:
        ot_input(c, 0, SHAPE(2, 67));
        ot_input(c, 1, SHAPE(2, 67));
        c->no_grad[1] = true;
        break;
    }
    c->K = ot_numel(c->ndim[0], c->shape[0]);
    snprintf(c->label, sizeof c->label, "v%d n%lld", v, (long long)c->K);
}

static void mse_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t n = ot_numel(c->ndim[0], c->shape[0]);
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += (in[0][k] - in[1][k]) * (in[0][k] - in[1][k]);
    out[0] = s / (double)n;
}

static ampc_tensor *mse_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i, (void)c;
    return ampc_mse_loss(ctx, in[0], in[1]);
}

static const ot_op mse_loss_op = {"mse_loss", 4, mse_make, mse_run, scalar_shape, mse_ref, NULL};

/* ---- dropout: in0 = x; dp[0] = p, ip[0] = training. The reference regenerates the mask from the
 * context RNG state recorded just before the call, by the documented rule: element i is kept iff
 * u_i >= p, u_i = (word >> 8) * 2^-24 for word i%4 of block counter + i/4. ---- */

static ampc_rng g_dropout_rng;

static void dropout_make(ot_case *c, int v, uint64_t *r) {
    static const double ps[5] = {0.5, 0.3, 0.1, 0.0, 0.5};
    switch (v) {
    case 0: ot_input(c, 0, SHAPE(1)); break;
    case 1: ot_input(c, 0, SHAPE(7, ot_rand_int(r, 9, 15))); break;
    case 2:
        ot_input(c, 0, SHAPE(3, 5, 33));
        c->strided[0] = true;
        break;
    case 3: ot_input(c, 0, SHAPE(1031)); break;
    default: ot_input(c, 0, SHAPE(4, 9)); break;
    }
    c->dp[0] = ps[v % 5];
    c->ip[0] = v != 4; /* the last variant runs in eval mode: identity */
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d p %.1f training %d", v, c->dp[0], c->ip[0]);
}

static void dropout_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t n = ot_numel(c->ndim[0], c->shape[0]);
    double p = c->dp[0];
    for (int64_t i = 0; i < n; i++) {
        if (!c->ip[0]) {
            out[i] = in[0][i];
            continue;
        }
        uint32_t w[4];
        ampc_rng_block(g_dropout_rng.seed, g_dropout_rng.stream, g_dropout_rng.counter + (uint64_t)i / 4, w);
        double u = (double)(w[i % 4] >> 8) * 0x1p-24;
        out[i] = u >= p ? in[0][i] / (1 - p) : 0.0;
    }
}

static ampc_tensor *dropout_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    g_dropout_rng = *ampc_ctx_rng(ctx);
    return ampc_dropout(ctx, in[0], c->dp[0], c->ip[0]);
}

static const ot_op dropout_op = {"dropout", 5, dropout_make, dropout_run, same_shape, dropout_ref, NULL};

/* ---- positional_encoding: in0 = x (..., T, D) ---- */

static void pe_make(ot_case *c, int v, uint64_t *r) {
    switch (v) {
    case 0: ot_input(c, 0, SHAPE(1, 1)); break;
    case 1: ot_input(c, 0, SHAPE(7, ot_rand_int(r, 9, 15) | 1)); break; /* odd D */
    case 2:
        ot_input(c, 0, SHAPE(2, 5, 34));
        c->strided[0] = true;
        break;
    default: ot_input(c, 0, SHAPE(2, 2, 5, 66)); break;
    }
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d", v);
}

static void pe_ref(const ot_case *c, const double *const *in, double *out) {
    int nd = c->ndim[0];
    int64_t T = c->shape[0][nd - 2], D = c->shape[0][nd - 1], n = ot_numel(nd, c->shape[0]);
    for (int64_t k = 0; k < n; k++) {
        int64_t t = k / D % T, j = k % D, i = j / 2;
        double angle = (double)t / pow(10000.0, 2.0 * (double)i / (double)D);
        out[k] = in[0][k] + (j % 2 == 0 ? sin(angle) : cos(angle));
    }
}

static ampc_tensor *pe_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i, (void)c;
    return ampc_positional_encoding(ctx, in[0]);
}

static const ot_op positional_encoding_op = {"positional_encoding", 4, pe_make, pe_run, same_shape, pe_ref, NULL};

const ot_op *const ot_ops_nn[] = {&softmax_op,   &log_softmax_op,         &layer_norm_op,
                                  &embedding_op, &cross_entropy_op,       &mse_loss_op,
                                  &dropout_op,   &positional_encoding_op, NULL};
