/* test_kernels_optim.c: every entry of the kernel registry in the optimizer and loss-scaler slots (SGD,
 * AdamW, unscale, sum of squares) but ref's (today the avx512 folder's; a new entry of these slots is
 * picked up) against its cell's ref entry (the oracle), at the edge sizes of a 16-lane vector with guard
 * elements past every output that must stay untouched, and with NaN/inf/-0/subnormal inputs. All of it
 * is bit-identical (the project promises that AMPC_ISA never changes a run's optimizer arithmetic):
 *   SGD, AdamW  over three steps (momentum buffers and moments included);
 *   unscale     F32/F16/BF16, every FP16/BF16 pattern, and its found-inf result;
 *   sumsq       ref sums in the vector kernel's order (the grad norm, and so a clipped update, must not
 *               depend on the kernel level);
 *   colsum      a bias gradient's column sums in double, F32/F16/BF16 with specials and subnormals, at
 *               widths around the kernel's 16- and 64-column steps, added onto accumulators already
 *               holding values, with guard accumulators past the width untouched;
 *   range       the doctor's range statistics (integer counts, max and min bits): every field of the
 *               accumulator, at and one ulp around the library's thresholds, and accumulated over two
 *               calls as over one. */
#include "kernel_check.h"

static const struct ampc_kernels *R; /* the ref level's table: every cell holds its ref entry */
static const int64_t SIZES[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 47, 64, 100, 1000, 4099};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* ---- optimizer: bit-identical over several steps ---- */

/* weights, moments and gradients: normal values with specials mixed into the gradients */
static void optim_inputs(float *w, float *g, float *m, float *v, int64_t n, uint64_t seed) {
    kc_fill_normal(w, n, 0.0f, 1.0f, seed);
    kc_fill_normal(m, n, 0.0f, 0.1f, seed + 1);
    kc_fill_uniform(v, n, 0.0f, 0.01f, seed + 2);
    kc_fill_interesting(g, n, seed + 3);
    for (int64_t i = 0; i < n; i += 2) g[i] = 0.01f * (float)(i % 7) - 0.03f;
}

static void test_sgd(void **state) {
    (void)state;
    kc_list l = kc_fast(AMPCI_SLOT_SGD, KC_ANY);
    for (int e = 0; e < l.n; e++)
        for (size_t si = 0; si < NSIZES; si++)
            for (int combo = 0; combo < 16; combo++) {
                int64_t n = SIZES[si];
                float *wa = kc_fbuf(n), *wr = kc_fbuf(n), *g = kc_fbuf(n);
                float *ba = kc_fbuf(n), *br = kc_fbuf(n), *v = kc_fbuf(n);
                optim_inputs(wa, g, ba, v, n, 20 + (uint64_t)n);
                memcpy(wr, wa, (size_t)(n + KC_GUARD) * 4), memcpy(br, ba, (size_t)(n + KC_GUARD) * 4);
                ampci_sgd_args sa = {
                    0.1f, combo & 1 ? 0.01f : 0.0f, combo & 2 ? 0.9f : 0.0f, combo & 4 ? 0.1f : 0.0f, (combo & 8) != 0,
                    true};
                for (int step = 0; step < 3; step++, sa.first = false) {
                    l.e[e]->fn.SGD(wa, g, ba, n, &sa), R->sgd(wr, g, br, n, &sa);
                    kc_check_bits(wa, wr, (size_t)(n + KC_GUARD) * 4, kc_named(l.e[e], "w"), n);
                    kc_check_bits(ba, br, (size_t)(n + KC_GUARD) * 4, kc_named(l.e[e], "buf"), n);
                }
                free(wa), free(wr), free(g), free(ba), free(br), free(v);
            }
}

static void test_adamw(void **state) {
    (void)state;
    static const float beta1s[] = {0.9f, 0.3f, 0.5f}; /* lerp weight 1 - beta1 below, above, at 0.5 */
    kc_list l = kc_fast(AMPCI_SLOT_ADAMW, KC_ANY);
    for (int e = 0; e < l.n; e++)
        for (size_t si = 0; si < NSIZES; si++)
            for (size_t bi = 0; bi < sizeof beta1s / sizeof beta1s[0]; bi++) {
                int64_t n = SIZES[si];
                float *wa = kc_fbuf(n), *wr = kc_fbuf(n), *g = kc_fbuf(n), *ma = kc_fbuf(n), *mr = kc_fbuf(n);
                float *va = kc_fbuf(n), *vr = kc_fbuf(n);
                optim_inputs(wa, g, ma, va, n, 30 + (uint64_t)n);
                memcpy(wr, wa, (size_t)(n + KC_GUARD) * 4), memcpy(mr, ma, (size_t)(n + KC_GUARD) * 4);
                memcpy(vr, va, (size_t)(n + KC_GUARD) * 4);
                for (int t = 1; t <= 3; t++) {
                    double lr = 1e-3, b1 = beta1s[bi], b2 = 0.999;
                    ampci_adamw_args aa = {
                        (float)(1.0 - lr * 0.1),      (float)b1, (float)b2, 1e-8f, (float)(lr / (1.0 - pow(b1, t))),
                        (float)sqrt(1.0 - pow(b2, t))};
                    l.e[e]->fn.ADAMW(wa, g, ma, va, n, &aa), R->adamw(wr, g, mr, vr, n, &aa);
                    kc_check_bits(wa, wr, (size_t)(n + KC_GUARD) * 4, kc_named(l.e[e], "w"), n);
                    kc_check_bits(ma, mr, (size_t)(n + KC_GUARD) * 4, kc_named(l.e[e], "m"), n);
                    kc_check_bits(va, vr, (size_t)(n + KC_GUARD) * 4, kc_named(l.e[e], "v"), n);
                }
                free(wa), free(wr), free(g), free(ma), free(mr), free(va), free(vr);
            }
}

/* ---- unscale: every FP16/BF16 pattern, F32 specials; found-inf and the bits ---- */

static const float INVS[] = {1.0f, 0.5f, 0x1p-16f, 1.0f / 3.0f, 65536.0f, 3.0e-5f, 1e30f, 0.0f};
#define NINVS (sizeof INVS / sizeof INVS[0])

/* runs the ref kernel and every fast one of dtype dt on copies of src (plus 64 bytes that must stay as
 * they are); returns the found-inf flag, which they all give */
static bool unscale_case(ampc_dtype dt, const void *src, int64_t n, float inv) {
    size_t es = dt == AMPC_DTYPE_F32 ? 4 : 2, bytes = (size_t)n * es + 64;
    unsigned char *a = malloc(bytes), *r = malloc(bytes);
    memcpy(r, src, bytes);
    bool br = R->unscale[dt](r, n, inv);
    kc_list l = kc_fast(AMPCI_SLOT_UNSCALE, dt);
    for (int e = 0; e < l.n; e++) {
        memcpy(a, src, bytes);
        bool ba = l.e[e]->fn.UNSCALE(a, n, inv);
        if (ba != br) FAILF("%s n %lld inv %a: found-inf %d, ref %d", l.e[e]->name, (long long)n, inv, ba, br);
        kc_check_bits(a, r, bytes, l.e[e]->name, n);
    }
    free(a), free(r);
    return br;
}

static void test_unscale(void **state) {
    (void)state;
    enum { ALL16 = 65536 + 64 };
    uint16_t *h = malloc(ALL16 * 2);
    for (uint32_t i = 0; i < ALL16; i++) h[i] = (uint16_t)(i * 0x9e37u); /* a permutation: all 65536 */
    float *f = kc_fbuf(100000);
    kc_fill_interesting(f, 100000, 41);
    for (size_t k = 0; k < NINVS; k++) {
        unscale_case(AMPC_DTYPE_F16, h, 65536, INVS[k]), unscale_case(AMPC_DTYPE_BF16, h, 65536, INVS[k]);
        unscale_case(AMPC_DTYPE_F32, f, 100000, INVS[k]);
    }
    /* all finite, then one inf or NaN in the last lane of each tail */
    static const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00001u};
    static const uint16_t bad16[] = {0x7c00u, 0xfc01u, 0x7f80u, 0xff81u}; /* F16 inf, NaN; BF16 inf, NaN */
    for (size_t si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si];
        float *g = kc_fbuf(n + 64);
        uint16_t *g16 = malloc((size_t)(n + 64) * 2);
        kc_fill_normal(g, n + 64, 0.0f, 100.0f, 42);
        for (int64_t i = 0; i < n + 64; i++) g16[i] = (uint16_t)(tu_bits(g[i]) >> 16); /* finite BF16 */
        for (int64_t i = 0; i < n + 64; i++)                                           /* and finite as FP16 too */
            if ((g16[i] & 0x7c00u) == 0x7c00u) g16[i] ^= 0x4000u;
        for (size_t k = 0; k < 3; k++) {
            assert_false(unscale_case(AMPC_DTYPE_F32, g, n, INVS[k]));
            assert_false(unscale_case(AMPC_DTYPE_F16, g16, n, INVS[k]));
            assert_false(unscale_case(AMPC_DTYPE_BF16, g16, n, INVS[k]));
            if (n == 0) continue;
            float keep32 = g[n - 1];
            memcpy(&g[n - 1], &bad32[k], 4);
            assert_true(unscale_case(AMPC_DTYPE_F32, g, n, INVS[k]));
            g[n - 1] = keep32;
            uint16_t keep = g16[n - 1];
            for (int j = 0; j < 4; j++) {
                g16[n - 1] = bad16[j];
                assert_true(unscale_case(j < 2 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16, g16, n, INVS[k]));
            }
            g16[n - 1] = keep;
        }
        free(g), free(g16);
    }
    free(h), free(f);
}

/* ---- sums of squares ---- */

/* non-finite values give what ref gives */
static void sumsq_nonfinite(float *g, uint16_t *g16, int64_t n) {
    kc_list f32 = kc_fast(AMPCI_SLOT_SUMSQ, AMPC_DTYPE_F32), f16 = kc_fast(AMPCI_SLOT_SUMSQ, AMPC_DTYPE_F16);
    kc_list bf16 = kc_fast(AMPCI_SLOT_SUMSQ, AMPC_DTYPE_BF16);
    g[n - 1] = INFINITY;
    for (int e = 0; e < f32.n; e++) assert_true(f32.e[e]->fn.SUMSQ(g, n) == INFINITY);
    g[n / 2] = NAN;
    for (int e = 0; e < f32.n; e++) assert_true(isnan(f32.e[e]->fn.SUMSQ(g, n)));
    g16[n - 1] = 0x7c00u; /* F16 inf */
    for (int e = 0; e < f16.n; e++) assert_true(f16.e[e]->fn.SUMSQ(g16, n) == INFINITY);
    g16[n - 1] = 0xff81u; /* BF16 NaN */
    for (int e = 0; e < bf16.n; e++) assert_true(isnan(bf16.e[e]->fn.SUMSQ(g16, n)));
}

static void test_sumsq(void **state) {
    (void)state;
    static const int64_t ns[] = {0, 1, 15, 16, 17, 31, 32, 33, 63, 65, 1000, 100003};
    for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
        int64_t n = ns[si];
        float *g = kc_fbuf(n);
        uint16_t *g16 = malloc((size_t)(n + 1) * 2);
        kc_fill_normal(g, n, 0.0f, 3.0f, 50 + (uint64_t)n);
        for (int64_t i = 0; i < n; i++) g[i] *= (i % 5 == 0) ? 1e-3f : 1.0f, g16[i] = (uint16_t)(tu_bits(g[i]) >> 16);
        for (int dti = 0; dti < 3; dti++) {
            ampc_dtype dt = dti == 0 ? AMPC_DTYPE_F32 : dti == 1 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
            const void *p = dti == 0 ? (const void *)g : g16;
            kc_list l = kc_fast(AMPCI_SLOT_SUMSQ, dt);
            for (int e = 0; e < l.n; e++) {
                double a = l.e[e]->fn.SUMSQ(p, n), r = R->sumsq[dt](p, n);
                if (memcmp(&a, &r, sizeof a) != 0)
                    FAILF("%s n %lld: %.17g, ref %.17g", l.e[e]->name, (long long)n, a, r);
            }
        }
        if (n > 0) sumsq_nonfinite(g, g16, n);
        free(g), free(g16);
    }
}

/* ---- column sums ---- */

static void test_colsum(void **state) {
    (void)state;
    static const int64_t widths[] = {1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 200};
    static const int64_t rows_list[] = {0, 1, 3, 17, 256};
    enum { GUARD = 3 };
    const int64_t ld = 211; /* wider than every width: the kernels read only their w columns of a row */
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
        int64_t rows = rows_list[ri], n = rows * ld;
        float *g = kc_fbuf(n > 0 ? n : 1);
        uint16_t *h = malloc((size_t)(n > 0 ? n : 1) * 2), *b = malloc((size_t)(n > 0 ? n : 1) * 2);
        kc_fill_interesting(g, n, 90 + (uint64_t)rows);
        for (int64_t i = 0; i < n; i++) {
            b[i] = (uint16_t)(tu_bits(g[i]) >> 16);
            h[i] = (uint16_t)(i % 11 == 0   ? 0x0001u + (uint16_t)(i % 0x3ff) /* F16 subnormals */
                              : i % 13 == 0 ? 0xfc00u                         /* -inf */
                                            : ampc_f16_from_f32(g[i]));
        }
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            int64_t w = widths[wi];
            for (int dti = 0; dti < 3; dti++) {
                ampc_dtype dt = dti == 0 ? AMPC_DTYPE_F32 : dti == 1 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
                const void *p = dti == 0 ? (const void *)g : dti == 1 ? (const void *)h : (const void *)b;
                kc_list l = kc_fast(AMPCI_SLOT_COLSUM, dt);
                double ref[200 + GUARD], got[200 + GUARD];
                for (int64_t c = 0; c < w + GUARD; c++) ref[c] = c < w ? 0.25 * (double)c - 3.0 : 1234.5;
                R->colsum[dt](ref, p, ld, rows, w);
                for (int e = 0; e < l.n; e++) {
                    for (int64_t c = 0; c < w + GUARD; c++) got[c] = c < w ? 0.25 * (double)c - 3.0 : 1234.5;
                    l.e[e]->fn.COLSUM(got, p, ld, rows, w);
                    for (int64_t c = 0; c < w + GUARD; c++) /* bits, or NaN for NaN (C leaves payloads free) */
                        if (memcmp(&got[c], &ref[c], sizeof *got) != 0 && !(isnan(got[c]) && isnan(ref[c])))
                            FAILF("%s rows %lld w %lld dtype %s column %lld: %.17g, ref %.17g", l.e[e]->name,
                                  (long long)rows, (long long)w, ampc_dtype_name(dt), (long long)c, got[c], ref[c]);
                }
                if (rows > 0 && dti == 0) { /* the oracle itself: a plain double sum down column 0 */
                    double s = -3.0;
                    for (int64_t r = 0; r < rows; r++) s += (double)g[r * ld];
                    assert_true(memcmp(&s, &ref[0], sizeof s) == 0 || (isnan(s) && isnan(ref[0])));
                }
            }
        }
        free(g), free(h), free(b);
    }
}

/* ---- range statistics: every field equal to ref's ---- */

/* the library's 12 thresholds (src/amp/stats.c: three a format), then four more: 0 (every value counts,
 * padding lanes included), inf, the top pattern (NaNs only), and one in the subnormals */
static const uint32_t RANGE_THR[AMPCI_RANGE_MAX_THR] = {
    0x33000001, 0x387fc000, 0x477ff000, 0x00000001, 0x00800000, 0x7f7f8000, 0x3a800001, 0x3c800000,
    0x43e80001, 0x37000001, 0x38800000, 0x47700000, 0x00000000, 0x7f800000, 0x7fffffff, 0x00012345};

/* a special value: zeros of both signs, subnormals, +-inf, NaNs, +-FLT_MAX, or a threshold or one ulp
 * either side of it, of either sign */
static uint32_t range_special(uint64_t r) {
    static const uint32_t fixed[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                     0xffc00001, 0x7f800001, 0x7fffffff, 0x7f7fffff, 0xff7fffff};
    uint32_t sign = (uint32_t)(r >> 32) & 0x80000000u;
    switch (r % 4) {
    case 0: return fixed[(r >> 8) % (sizeof fixed / sizeof fixed[0])];
    case 1: return sign | (1u + (uint32_t)(r >> 8) % 0x007fffffu); /* subnormal */
    default: return sign | (RANGE_THR[(r >> 8) % 12] + (uint32_t)((r >> 16) % 3) - 1u);
    }
}

/* normal values of several scales (1e-30 to 1e30), every third or so replaced by a special one */
static void range_inputs(float *x, int64_t n, uint64_t seed) {
    static const float scales[] = {1.0f, 1e-3f, 3e-6f, 1e-30f, 1e4f, 1e30f, 6e-8f};
    kc_fill_normal(x, n, 0.0f, 1.0f, seed);
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = tu_rand(&s);
        x[i] *= scales[(i / 7) % (int64_t)(sizeof scales / sizeof scales[0])];
        if (r % 3 == 0) x[i] = tu_float(range_special(r >> 2));
    }
}

static ampci_range_acc range_acc0(void) { return (ampci_range_acc){.min_bits = 0x7f800000u}; }

static void range_check(const ampci_range_acc *a, const ampci_range_acc *r, const char *name, int64_t n, int nthr) {
    for (int b = 0; b < 256; b++)
        if (a->hist[b] != r->hist[b])
            FAILF("%s n %lld nthr %d: hist[%d] %llu, ref %llu", name, (long long)n, nthr, b,
                  (unsigned long long)a->hist[b], (unsigned long long)r->hist[b]);
    for (int j = 0; j < AMPCI_RANGE_MAX_THR; j++)
        if (a->ge[j] != r->ge[j])
            FAILF("%s n %lld nthr %d: ge[%d] %llu, ref %llu", name, (long long)n, nthr, j, (unsigned long long)a->ge[j],
                  (unsigned long long)r->ge[j]);
    if (a->zeros != r->zeros || a->amax_bits != r->amax_bits || a->min_bits != r->min_bits)
        FAILF("%s n %lld nthr %d: zeros %llu amax 0x%08x min 0x%08x, ref %llu 0x%08x 0x%08x", name, (long long)n, nthr,
              (unsigned long long)a->zeros, a->amax_bits, a->min_bits, (unsigned long long)r->zeros, r->amax_bits,
              r->min_bits);
    assert_memory_equal(a, r, sizeof *a); /* and nothing else (the struct has no padding) */
}

/* every fast kernel on x (n) against ref: in one call, and in two calls split at `cut`, onto one acc */
static void range_case(const float *x, int64_t n, int nthr, int64_t cut) {
    ampci_range_acc r = range_acc0();
    R->range(x, n, RANGE_THR, nthr, &r);
    kc_list l = kc_fast(AMPCI_SLOT_RANGE, KC_ANY);
    for (int e = 0; e < l.n; e++) {
        ampci_range_acc a = range_acc0(), b = range_acc0();
        l.e[e]->fn.RANGE(x, n, RANGE_THR, nthr, &a);
        range_check(&a, &r, l.e[e]->name, n, nthr);
        l.e[e]->fn.RANGE(x, cut, RANGE_THR, nthr, &b);
        l.e[e]->fn.RANGE(x + cut, n - cut, RANGE_THR, nthr, &b);
        range_check(&b, &r, kc_named(l.e[e], "two calls"), n, nthr);
    }
}

static void test_range(void **state) {
    (void)state;
    static const int64_t ns[] = {0, 1, 15, 16, 17, 31, 33, 255, 257, 511, 512, 513, 1000, 4099, 65537};
    static const int nthrs[] = {0, 5, 12, 16};
    for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
        int64_t n = ns[si];
        float *x = kc_fbuf(n);
        range_inputs(x, n, 60 + (uint64_t)n);
        for (size_t ti = 0; ti < sizeof nthrs / sizeof nthrs[0]; ti++) {
            range_case(x, n, nthrs[ti], n / 2);
            range_case(x, n, nthrs[ti], n - n / 3 - (n > 20 ? 7 : 0)); /* a cut off the 16-lane grid */
        }
        for (int64_t i = 0; i < n; i++) x[i] = (i & 1) ? -0.0f : 0.0f; /* all zeros: none finite non-zero */
        range_case(x, n, 16, n / 2);
        for (int64_t i = 0; i < n; i++) x[i] = tu_float(i % 3 ? 0x7fc00000u : 0xff800000u); /* no finite one */
        range_case(x, n, 16, n / 2);
        free(x);
    }
}

/* past the 32-bit counters' block (2^24 values) */
static void test_range_large(void **state) {
    (void)state;
    int64_t n = ((int64_t)1 << 24) + 4133;
    float *x = kc_fbuf(n);
    range_inputs(x, n, 61);
    range_case(x, n, 12, ((int64_t)1 << 24) - 5);
    free(x);
}

int main(void) {
    R = ampci_kernels(AMPC_ISA_REF);
    for (int slot = AMPCI_SLOT_SGD; slot <= AMPCI_SLOT_RANGE; slot++) kc_note_unusable((ampci_slot)slot);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sgd),        cmocka_unit_test(test_adamw),
                                       cmocka_unit_test(test_unscale),    cmocka_unit_test(test_sumsq),
                                       cmocka_unit_test(test_colsum),     cmocka_unit_test(test_range),
                                       cmocka_unit_test(test_range_large)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
