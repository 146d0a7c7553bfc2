/* test_kernels_conv.c: every entry of the kernel registry in the conv-family slots (im2col per dtype,
 * col2im, max pooling forward and backward) but ref's against its cell's ref entry, over window
 * geometries around a 16-lane vector (output widths 1, 7, 14, 15, 16, 17, 28, 33; odd planes; kernels 1
 * to 5, one wider than 16 x 16 and one 65 wide; strides 1-3; padding 0 up to half the window; 1 to 40
 * channels, so that C*KH*KW runs from 1 past 256 columns), with the row or plane range split in two calls
 * as the ops split it over threads (at a point inside an output row and inside an image), and guard bytes
 * past every output. A new entry of these slots is picked up here without edits; a slot that has only its
 * ref entry runs that against itself, which still checks the range split and the guards. Every slot is
 * bit-identical to ref (kernels.h fixes the order of col2im's and max pooling backward's sums):
 *   im2col, max pooling forward: copies and comparisons (NaN wins as in ref, the first maximum wins ties,
 *     -0 against +0 too, the argmax with it);
 *   col2im, max pooling backward: the sums in ref's order, over values with -0, infinities and NaN; where
 *     two NaNs meet in a sum the result may carry either one's payload (C leaves the operand order of a
 *     commutative addition to the compiler), so a NaN matches any NaN. */
#include "kernel_check.h"

typedef struct geom_case {
    int64_t N, C, H, W, KH, KW, sh, sw, ph, pw;
} geom_case;

/* N, C, H, W, KH, KW, sh, sw, ph, pw */
static const geom_case CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},   {2, 3, 5, 7, 3, 3, 1, 1, 1, 1},     {1, 2, 8, 8, 2, 2, 2, 2, 0, 0},
    {2, 1, 9, 6, 3, 2, 2, 1, 1, 0},   {1, 3, 17, 17, 5, 5, 3, 3, 2, 2},   {1, 16, 15, 16, 3, 3, 1, 1, 1, 1},
    {3, 1, 33, 31, 4, 3, 2, 3, 2, 1}, {2, 1, 28, 28, 3, 3, 1, 1, 1, 1},   {2, 32, 14, 14, 3, 3, 1, 1, 1, 1},
    {2, 3, 28, 28, 2, 2, 2, 2, 0, 0}, {3, 5, 14, 14, 2, 2, 2, 2, 0, 0},   {1, 2, 4, 17, 3, 3, 1, 1, 0, 0},
    {1, 2, 3, 18, 3, 3, 1, 1, 0, 0},  {1, 3, 5, 17, 1, 1, 1, 1, 0, 0},    {2, 40, 6, 5, 1, 1, 1, 1, 0, 0},
    {1, 2, 9, 40, 3, 3, 2, 2, 1, 1},  {1, 3, 7, 67, 3, 3, 2, 2, 1, 1},    {2, 2, 35, 34, 2, 2, 2, 2, 0, 0},
    {1, 2, 7, 33, 3, 3, 2, 2, 0, 1},  {1, 2, 18, 18, 17, 17, 1, 1, 8, 8}, {1, 29, 6, 9, 3, 3, 1, 1, 1, 1},
    {2, 1, 3, 70, 1, 65, 1, 1, 0, 0},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static ampci_conv_geom geom_of(const geom_case *c) {
    ampci_conv_geom g = {c->N, c->C, c->H, c->W, c->KH, c->KW, 0, 0, c->sh, c->sw, c->ph, c->pw};
    g.OH = (c->H + 2 * c->ph - c->KH) / c->sh + 1;
    g.OW = (c->W + 2 * c->pw - c->KW) / c->sw + 1;
    return g;
}

/* The entries of a slot under test: kc_fast's, or the ref ones where the slot has nothing else. */
static kc_list under_test(ampci_slot slot) {
    kc_list l = kc_fast(slot, KC_ANY);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n && l.n == 0; i++)
        if (all[i]->slot == slot) {
            for (size_t j = i; j < n; j++)
                if (all[j]->slot == slot && all[j]->level == AMPC_ISA_REF) l.e[l.n++] = all[j];
            printf("  note: %s has only ref entries: they run against themselves\n", ampci_slot_name(slot));
        }
    return l;
}

/* n random bytes plus 64 guard bytes of 0xa5. */
static unsigned char *bytes_rand(size_t n, uint64_t seed) {
    unsigned char *p = malloc(n + 64);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(tu_rand(&seed) >> 56);
    memset(p + n, 0xa5, 64);
    return p;
}

static void test_im2col(void **state) {
    (void)state;
    kc_list l = under_test(AMPCI_SLOT_IM2COL);
    for (int e = 0; e < l.n; e++)
        for (size_t c = 0; c < NCASES; c++) {
            ampci_conv_geom g = geom_of(&CASES[c]);
            size_t es = ampc_dtype_size(l.e[e]->dtype);
            int64_t rows = g.N * g.OH * g.OW, ckk = g.C * g.KH * g.KW;
            size_t xb = (size_t)(g.N * g.C * g.H * g.W) * es, cb = (size_t)(rows * ckk) * es;
            unsigned char *x = bytes_rand(xb, 1 + c), *got = bytes_rand(cb, 2), *want = bytes_rand(cb, 2);
            kc_ref(l.e[e])->fn.IM2COL(want, x, &g, 0, rows);
            l.e[e]->fn.IM2COL(got, x, &g, 0, rows / 3);
            l.e[e]->fn.IM2COL(got, x, &g, rows / 3, rows);
            kc_check_bits(got, want, cb + 64, l.e[e]->name, (int64_t)c);
            free(x), free(got), free(want);
        }
}

/* n values, mostly normal, with -0 (0 + -0 must give +0 as in ref), infinities and a NaN sprinkled in. */
static void grad_input(float *g, int64_t n, uint64_t seed) {
    kc_fill_normal(g, n, 0.0f, 1.0f, seed);
    for (int64_t i = 0; i < n; i++)
        if (i % 53 == 7) g[i] = -0.0f;
        else if (i % 211 == 100) g[i] = i % 2 ? INFINITY : -INFINITY;
        else if (i % 401 == 300) g[i] = NAN;
}

/* The bits of got (n floats) are ref's, NaN for NaN with any payload; the guard untouched. */
static void check_sum_bits(const float *got, const float *want, int64_t n, const char *what, int64_t c) {
    for (int64_t i = 0; i < n; i++)
        if (tu_bits(got[i]) != tu_bits(want[i]) && !(isnan(got[i]) && isnan(want[i])))
            FAILF("%s (case %lld): [%lld] is 0x%08x, ref 0x%08x", what, (long long)c, (long long)i, tu_bits(got[i]),
                  tu_bits(want[i]));
    kc_check_bits(got + n, want + n, KC_GUARD * sizeof *got, what, c);
}

static void test_col2im(void **state) {
    (void)state;
    kc_list l = under_test(AMPCI_SLOT_COL2IM);
    for (int e = 0; e < l.n; e++)
        for (size_t c = 0; c < NCASES; c++) {
            ampci_conv_geom g = geom_of(&CASES[c]);
            int64_t ncol = g.N * g.OH * g.OW * g.C * g.KH * g.KW, nx = g.N * g.C * g.H * g.W, planes = g.N * g.C;
            float *gcol = kc_fbuf(ncol), *got = kc_fbuf(nx), *want = kc_fbuf(nx);
            grad_input(gcol, ncol, 10 + c);
            kc_ref(l.e[e])->fn.COL2IM(want, gcol, &g, 0, planes);
            l.e[e]->fn.COL2IM(got, gcol, &g, 0, planes / 3);
            l.e[e]->fn.COL2IM(got, gcol, &g, planes / 3, planes);
            check_sum_bits(got, want, nx, l.e[e]->name, (int64_t)c);
            free(gcol), free(got), free(want);
        }
}

/* x (n) with ties (values on a 0.5 grid, so +0 and -0 meet too), -inf, and NaNs of two payloads (the
 * last NaN of a window wins). */
static void pool_input(float *x, int64_t n, uint64_t seed) {
    kc_fill_normal(x, n, 0.0f, 2.0f, seed);
    for (int64_t i = 0; i < n; i++) x[i] = i % 37 == 36 ? NAN : i % 41 == 40 ? -INFINITY : roundf(2 * x[i]) / 2;
    for (int64_t i = 73; i < n; i += 113) x[i] = -NAN;
}

static void test_maxpool(void **state) {
    (void)state;
    kc_list fw = under_test(AMPCI_SLOT_MAXPOOL), bw = under_test(AMPCI_SLOT_MAXPOOL_BW);
    for (size_t c = 0; c < NCASES; c++) {
        ampci_conv_geom g = geom_of(&CASES[c]);
        int64_t planes = g.N * g.C, nx = planes * g.H * g.W, ny = planes * g.OH * g.OW;
        float *x = kc_fbuf(nx), *y = kc_fbuf(ny), *yr = kc_fbuf(ny), *gy = kc_fbuf(ny);
        float *gx = kc_fbuf(nx), *gxr = kc_fbuf(nx);
        int32_t *arg = (int32_t *)kc_fbuf(ny), *argr = (int32_t *)kc_fbuf(ny);
        pool_input(x, nx, 20 + c);
        grad_input(gy, ny, 30 + c);
        const struct ampc_kernels *R = ampci_kernels(AMPC_ISA_REF);
        R->maxpool(yr, argr, x, &g, 0, planes);
        for (int e = 0; e < fw.n; e++) {
            fw.e[e]->fn.MAXPOOL(y, arg, x, &g, 0, planes / 2), fw.e[e]->fn.MAXPOOL(y, arg, x, &g, planes / 2, planes);
            kc_check_bits(y, yr, (size_t)(ny + KC_GUARD) * 4, kc_named(fw.e[e], "y"), (int64_t)c);
            kc_check_bits(arg, argr, (size_t)(ny + KC_GUARD) * 4, kc_named(fw.e[e], "argmax"), (int64_t)c);
        }
        R->maxpool_bw(gxr, gy, argr, &g, 0, planes);
        for (int e = 0; e < bw.n; e++) {
            bw.e[e]->fn.MAXPOOL_BW(gx, gy, argr, &g, 0, planes / 2);
            bw.e[e]->fn.MAXPOOL_BW(gx, gy, argr, &g, planes / 2, planes);
            check_sum_bits(gx, gxr, nx, bw.e[e]->name, (int64_t)c);
        }
        free(x), free(y), free(yr), free(gy), free(gx), free(gxr), free(arg), free(argr);
    }
}

int main(void) {
    for (int slot = AMPCI_SLOT_IM2COL; slot <= AMPCI_SLOT_MAXPOOL_BW; slot++) kc_note_unusable((ampci_slot)slot);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_im2col), cmocka_unit_test(test_col2im),
                                       cmocka_unit_test(test_maxpool)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
