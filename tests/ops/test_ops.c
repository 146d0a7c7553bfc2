/* test_ops.c: the op-test driver. For every op of every family, every dtype (F32, F16, BF16) and every
 * variant of the op's cases: draw inputs, round them to the dtype, run ampc's op, compare the output with
 * the op's double-precision reference on the same rounded inputs, then backpropagate a random gradient R
 * (rounded to the output dtype) and compare each input's gradient with central finite differences of
 * the double reference, d/dx sum(R * f(x)). Set AMPC_OPS_FILTER=name to run the ops whose name contains
 * it; AMPC_OPS_VERBOSE=1 prints every case's error/tolerance ratio.
 *
 * The tolerance table (the only thresholds of this driver). Errors are normwise: |y - y_ref|_2 / |y_ref|_2.
 * u(dt) is the unit roundoff 2^-p of the dtype (p precision bits): F32 2^-24, F16 2^-11, BF16 2^-8.
 *   forward:   2 u(out) + (C_F32 + 2 sqrt(K)) u(F32)
 *   backward:  4 u(in)  + (C_F32 + 2 sqrt(K)) u(F32) + E_FD
 * - 2 u(out): the result is rounded once to its dtype (relative RMS <= u), with a factor 2 of margin.
 * - 4 u(in): a gradient is computed from inputs, saved activations and R that are themselves dtype values
 *   (the saved output of exp, tanh, softmax... differs from the exact one by up to u) and rounded once.
 * - C_F32 = 16 roundings of F32 arithmetic per element (libm's float functions are within about 1 ulp =
 *   2u); 2 sqrt(K) u for a K-term F32 reduction (random-walk growth; reductions that run in double only
 *   do better). K is the op's longest reduction, declared by its case.
 * - E_FD = 1e-7: central differences in double with h = 1e-5 |x|: truncation ~h^2, roundoff ~2^-53/h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "op_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_F32 16.0
#define E_FD 1e-7
#define FD_STEP 1e-5

static double unit_roundoff(ampc_dtype dt) {
    return dt == AMPC_DTYPE_BF16 ? 0x1p-8 : dt == AMPC_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
}

static double tol_forward(ampc_dtype out, int64_t K) {
    return 2 * unit_roundoff(out) + (C_F32 + 2 * sqrt((double)(K > 1 ? K : 1))) * 0x1p-24;
}

static double tol_backward(ampc_dtype in, int64_t K) {
    return 4 * unit_roundoff(in) + (C_F32 + 2 * sqrt((double)(K > 1 ? K : 1))) * 0x1p-24 + E_FD;
}

/* ---- helpers shared with the case files ---- */

static uint64_t next(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

int64_t ot_rand_int(uint64_t *r, int64_t lo, int64_t hi) { return lo + (int64_t)(next(r) % (uint64_t)(hi - lo + 1)); }

int64_t ot_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

void ot_input(ot_case *c, int i, int ndim, const int64_t *shape) {
    if (i + 1 > c->nin) c->nin = i + 1;
    c->ndim[i] = ndim;
    for (int d = 0; d < ndim; d++) c->shape[i][d] = shape[d];
}

static double uniform01(uint64_t *r) { return (double)(next(r) >> 11) * 0x1p-53; }

static double draw(uint64_t *r, ot_dist d) {
    double u1 = uniform01(r) + 0x1p-54, u2 = uniform01(r);
    double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
    switch (d) {
    case OT_POSITIVE: return 0.5 + 1.5 * u2;
    case OT_AWAY_FROM_0:
    case OT_DISTINCT: return z >= 0 ? z + 0.05 : z - 0.05;
    case OT_SMALL: return 0.1 * z;
    default: return z;
    }
}

/* v rounded to dt (through F32), as double */
static double round_to(ampc_dtype dt, double v) {
    float f = (float)v, back;
    uint16_t h;
    if (dt == AMPC_DTYPE_F32) return f;
    ampc_convert(&h, dt, &f, AMPC_DTYPE_F32, 1);
    ampc_convert(&back, AMPC_DTYPE_F32, &h, dt, 1);
    return back;
}

static double rel_l2(const double *got, const double *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = got[i] - want[i];
        if (isnan(got[i]) != isnan(want[i])) return INFINITY;
        if (isnan(want[i])) continue;
        num += d * d, den += want[i] * want[i];
    }
    if (den == 0) return sqrt(num) > 1e-30 ? INFINITY : 0.0;
    return sqrt(num / den);
}

/* ---- one case ---- */

typedef struct run {
    const ot_op *op;
    ot_case c;
    ampc_dtype dt;
    double *in[OT_MAX_IN]; /* rounded inputs */
    int64_t n_in[OT_MAX_IN];
    int out_ndim;
    int64_t out_shape[4], n_out;
    double *ref, *R;
    double worst; /* largest error / tolerance */
} run;

static ampc_ctx *g_ctx;
static bool g_verbose;

static void report(run *r, const char *what, double err, double tol) {
    double ratio = err / tol;
    if (ratio > r->worst) r->worst = ratio;
    if (g_verbose || !(err <= tol))
        print_message("  %-22s %-5s %-40s %-10s err %.3g tol %.3g (%.2f)\n", r->op->name, ampc_dtype_name(r->dt),
                      r->c.label, what, err, tol, ratio);
    if (!(err <= tol))
        fail_msg("%s %s [%s] %s: error %.3g exceeds tolerance %.3g", r->op->name, ampc_dtype_name(r->dt), r->c.label,
                 what, err, tol);
}

static ampc_tensor *make_input(run *r, int i, ampc_tensor **leaf) {
    int64_t n = r->n_in[i];
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t k = 0; k < n; k++) f[k] = (float)r->in[i][k];
    *leaf = ampc_tensor_from_buffer(g_ctx, r->dt, r->c.ndim[i], r->c.shape[i], f, AMPC_DTYPE_F32);
    free(f);
    if (!*leaf) return NULL;
    if (!r->c.no_grad[i] && ampc_tensor_set_requires_grad(*leaf, true) != AMPC_OK) return NULL;
    if (!r->c.strided[i]) return *leaf;
    /* same values, transposed layout: the gradient also crosses transpose and contiguous */
    return ampc_tensor_transpose(ampc_tensor_contiguous(ampc_tensor_transpose(*leaf, -1, -2)), -1, -2);
}

static double loss_of(run *r, double *out) {
    r->op->ref(&r->c, (const double *const *)r->in, out);
    double s = 0;
    for (int64_t k = 0; k < r->n_out; k++) s += r->R[k] * out[k];
    return s;
}

static void check_gradient(run *r, int i, ampc_tensor *leaf) {
    int64_t n = r->n_in[i];
    ampc_tensor *g = ampc_tensor_grad(leaf);
    if (!g) {
        fail_msg("%s %s [%s]: input %d received no gradient", r->op->name, ampc_dtype_name(r->dt), r->c.label, i);
        return;
    }
    double *got = malloc((size_t)n * sizeof *got), *fd = malloc((size_t)n * sizeof *fd);
    double *scratch = malloc((size_t)(r->n_out ? r->n_out : 1) * sizeof *scratch);
    assert_int_equal(ampc_tensor_copy_to(g, got, AMPC_DTYPE_F64), AMPC_OK);
    assert_int_equal(ampc_tensor_dtype(g), r->dt);
    for (int64_t k = 0; k < n; k++) {
        double x = r->in[i][k], h = FD_STEP * (fabs(x) > 1 ? fabs(x) : 1);
        r->in[i][k] = x + h;
        double lp = loss_of(r, scratch);
        r->in[i][k] = x - h;
        double lm = loss_of(r, scratch);
        r->in[i][k] = x;
        fd[k] = (lp - lm) / (2 * h);
    }
    char what[32];
    snprintf(what, sizeof what, "grad in%d", i);
    report(r, what, rel_l2(got, fd, n), tol_backward(r->dt, r->c.K));
    free(got), free(fd), free(scratch);
}

static void run_case(run *r, uint64_t seed) {
    uint64_t rs = seed;
    ampc_tensor *leaf[OT_MAX_IN] = {0}, *in[OT_MAX_IN] = {0}, *ints = NULL;
    for (int i = 0; i < r->c.nin; i++) {
        r->n_in[i] = ot_numel(r->c.ndim[i], r->c.shape[i]);
        r->in[i] = malloc((size_t)(r->n_in[i] ? r->n_in[i] : 1) * sizeof(double));
        for (int64_t k = 0; k < r->n_in[i]; k++) {
            bool dup;
            do {
                r->in[i][k] = round_to(r->dt, draw(&rs, r->c.dist[i]));
                dup = false;
                for (int64_t m = 0; r->c.dist[i] == OT_DISTINCT && m < k && !dup; m++) dup = r->in[i][m] == r->in[i][k];
            } while (dup);
        }
        in[i] = make_input(r, i, &leaf[i]);
        if (!in[i]) fail_msg("%s: making input %d failed: %s", r->op->name, i, ampc_last_error());
    }
    if (r->c.int_ndim) {
        int64_t n = ot_numel(r->c.int_ndim, r->c.int_shape);
        r->c.ints = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
        for (int64_t k = 0; k < n; k++) r->c.ints[k] = ot_rand_int(&rs, r->c.int_lo, r->c.int_hi);
        ints = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, r->c.int_ndim, r->c.int_shape, r->c.ints, AMPC_DTYPE_I64);
    }
    ampc_tensor *out = r->op->run(g_ctx, in, ints, &r->c);
    if (!out)
        fail_msg("%s %s [%s]: the op failed: %s", r->op->name, ampc_dtype_name(r->dt), r->c.label, ampc_last_error());
    r->op->out_shape(&r->c, &r->out_ndim, r->out_shape);
    r->n_out = ot_numel(r->out_ndim, r->out_shape);
    assert_int_equal(ampc_tensor_ndim(out), r->out_ndim);
    for (int d = 0; d < r->out_ndim; d++) assert_int_equal(ampc_tensor_dim(out, d), r->out_shape[d]);
    ampc_dtype want_dt = r->op->out_dtype ? r->op->out_dtype(&r->c, r->dt) : r->dt;
    if (ampc_tensor_dtype(out) != want_dt)
        fail_msg("%s %s: output dtype %s, expected %s", r->op->name, ampc_dtype_name(r->dt),
                 ampc_dtype_name(ampc_tensor_dtype(out)), ampc_dtype_name(want_dt));
    r->ref = malloc((size_t)(r->n_out ? r->n_out : 1) * sizeof(double));
    double *got = malloc((size_t)(r->n_out ? r->n_out : 1) * sizeof(double));
    r->op->ref(&r->c, (const double *const *)r->in, r->ref);
    assert_int_equal(ampc_tensor_copy_to(out, got, AMPC_DTYPE_F64), AMPC_OK);
    report(r, "forward", rel_l2(got, r->ref, r->n_out), tol_forward(want_dt, r->c.K));

    bool any_grad = false;
    for (int i = 0; i < r->c.nin; i++) any_grad |= !r->c.no_grad[i];
    if (any_grad) {
        r->R = malloc((size_t)(r->n_out ? r->n_out : 1) * sizeof(double));
        float *rf = malloc((size_t)(r->n_out ? r->n_out : 1) * sizeof(float));
        for (int64_t k = 0; k < r->n_out; k++) rf[k] = (float)(r->R[k] = round_to(want_dt, draw(&rs, OT_NORMAL)));
        ampc_tensor *gr = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, r->out_ndim, r->out_shape, rf, AMPC_DTYPE_F32);
        if (ampc_backward_with(g_ctx, out, gr) != AMPC_OK)
            fail_msg("%s %s [%s]: backward failed: %s", r->op->name, ampc_dtype_name(r->dt), r->c.label,
                     ampc_last_error());
        for (int i = 0; i < r->c.nin; i++)
            if (!r->c.no_grad[i]) check_gradient(r, i, leaf[i]);
        free(rf), free(r->R);
    }
    free(got), free(r->ref), free(r->c.ints);
    for (int i = 0; i < r->c.nin; i++) free(r->in[i]);
    ampc_ctx_step_end(g_ctx);
}

static void test_op(void **state) {
    const ot_op *op = *state;
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    double worst = 0;
    for (int d = 0; d < 3; d++)
        for (int v = 0; v < op->variants; v++) {
            run r = {.op = op, .dt = dts[d]};
            uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(v + 1) + (uint64_t)d * 7919 + strlen(op->name),
                     rs = seed | 1;
            op->make(&r.c, v, &rs);
            run_case(&r, seed ^ 0xabcdef);
            if (r.worst > worst) worst = r.worst;
        }
    print_message("  %-22s worst error/tolerance %.3f over %d variants x 3 dtypes\n", op->name, worst, op->variants);
}

static int setup(void **state) {
    (void)state;
    ampc_ctx_step_end(g_ctx);
    return 0;
}

int main(void) {
    /* AMPC_TEST_DEVICE=guard runs every case on the guard device: any host access to tensor memory that
     * bypasses the device faults, and the results must meet the same tolerances */
    ampc_device dev = {0};
    const char *dev_name = getenv("AMPC_TEST_DEVICE");
    if (dev_name && ampc_device_parse(dev_name, &dev) != AMPC_OK) {
        fprintf(stderr, "test_ops: AMPC_TEST_DEVICE: %s\n", ampc_last_error());
        return 1;
    }
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 2, .device = dev}, &g_ctx) != AMPC_OK) return 1;
    g_verbose = getenv("AMPC_OPS_VERBOSE") != NULL;
    const char *filter = getenv("AMPC_OPS_FILTER");
    const ot_op *const *families[] = {ot_ops_basic, ot_ops_nn, ot_ops_conv};
    struct CMUnitTest tests[128];
    size_t n = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const ot_op *const *op = families[f]; *op; op++) {
            if (filter && !strstr((*op)->name, filter)) continue;
            if (n == sizeof tests / sizeof tests[0]) return 1;
            tests[n++] = (struct CMUnitTest){(*op)->name, test_op, setup, NULL, (void *)*op};
        }
    int rc = _cmocka_run_group_tests("ops", tests, n, NULL, NULL);
    ampc_ctx_free(g_ctx);
    return rc;
}
