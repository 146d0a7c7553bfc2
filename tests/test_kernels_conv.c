/* test_kernels_conv.c: every entry of the kernel registry in the conv-family slots (im2col per dtype,
 * col2im, max pooling forward and backward) but ref's against its cell's ref entry, over window
 * geometries around a 16-lane vector (1x1, odd planes, strides 1-3, padding up to half the window, 16
 * channels), with the row or plane range split in two calls as the ops split it over threads, and guard
 * bytes past every output. A new entry of these slots is picked up here without edits; a slot that has
 * only its ref entry (all of them, today) runs that against itself, which still checks the range split
 * and the guards.
 *   im2col, max pooling forward: bit-identical (copies and comparisons; NaN wins as in ref, the first
 *     maximum wins ties, the argmax too).
 *   col2im, max pooling backward: sums of at most n = KH KW terms per element, in a fixed order that
 *     may differ from ref's: |got - ref| <= 2 gamma_n sum |terms| (the sum of |terms| is ref's kernel
 *     run on the absolute values). */
#include "kernel_check.h"

typedef struct geom_case {
    int64_t N, C, H, W, KH, KW, sh, sw, ph, pw;
} geom_case;

static const geom_case CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},   {2, 3, 5, 7, 3, 3, 1, 1, 1, 1},   {1, 2, 8, 8, 2, 2, 2, 2, 0, 0},
    {2, 1, 9, 6, 3, 2, 2, 1, 1, 0},   {1, 3, 17, 17, 5, 5, 3, 3, 2, 2}, {1, 16, 15, 16, 3, 3, 1, 1, 1, 1},
    {3, 1, 33, 31, 4, 3, 2, 3, 2, 1},
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

static double gamma_n(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

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

/* |got - want| <= 2 gamma_n mag elementwise over n floats; the guard untouched. */
static void check_sum(const float *got, const float *want, const float *mag, int64_t n, double terms,
                      const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)got[i] - want[i]) > 2 * gamma_n(terms) * mag[i])
            FAILF("%s: [%lld] = %a, ref %a", what, (long long)i, got[i], want[i]);
    kc_check_bits(got + n, want + n, KC_GUARD * sizeof *got, what, n);
}

static void test_col2im(void **state) {
    (void)state;
    kc_list l = under_test(AMPCI_SLOT_COL2IM);
    for (int e = 0; e < l.n; e++)
        for (size_t c = 0; c < NCASES; c++) {
            ampci_conv_geom g = geom_of(&CASES[c]);
            int64_t ncol = g.N * g.OH * g.OW * g.C * g.KH * g.KW, nx = g.N * g.C * g.H * g.W, planes = g.N * g.C;
            float *gcol = kc_fbuf(ncol), *acol = kc_fbuf(ncol), *got = kc_fbuf(nx), *want = kc_fbuf(nx);
            float *mag = kc_fbuf(nx);
            kc_fill_normal(gcol, ncol, 0.0f, 1.0f, 10 + c);
            for (int64_t i = 0; i < ncol; i++) acol[i] = fabsf(gcol[i]);
            const ampci_kernel *ref = kc_ref(l.e[e]);
            ref->fn.COL2IM(want, gcol, &g, 0, planes), ref->fn.COL2IM(mag, acol, &g, 0, planes);
            l.e[e]->fn.COL2IM(got, gcol, &g, 0, planes / 2);
            l.e[e]->fn.COL2IM(got, gcol, &g, planes / 2, planes);
            check_sum(got, want, mag, nx, (double)(g.KH * g.KW), l.e[e]->name);
            free(gcol), free(acol), free(got), free(want), free(mag);
        }
}

/* x (n) with ties (values on a 0.5 grid) and a NaN every 37 elements. */
static void pool_input(float *x, int64_t n, uint64_t seed) {
    kc_fill_normal(x, n, 0.0f, 2.0f, seed);
    for (int64_t i = 0; i < n; i++) x[i] = i % 37 == 36 ? NAN : roundf(2 * x[i]) / 2;
}

static void test_maxpool(void **state) {
    (void)state;
    kc_list fw = under_test(AMPCI_SLOT_MAXPOOL), bw = under_test(AMPCI_SLOT_MAXPOOL_BW);
    for (size_t c = 0; c < NCASES; c++) {
        ampci_conv_geom g = geom_of(&CASES[c]);
        int64_t planes = g.N * g.C, nx = planes * g.H * g.W, ny = planes * g.OH * g.OW;
        float *x = kc_fbuf(nx), *y = kc_fbuf(ny), *yr = kc_fbuf(ny), *gy = kc_fbuf(ny), *agy = kc_fbuf(ny);
        float *gx = kc_fbuf(nx), *gxr = kc_fbuf(nx), *mag = kc_fbuf(nx);
        int32_t *arg = (int32_t *)kc_fbuf(ny), *argr = (int32_t *)kc_fbuf(ny);
        pool_input(x, nx, 20 + c);
        kc_fill_normal(gy, ny, 0.0f, 1.0f, 30 + c);
        for (int64_t i = 0; i < ny; i++) agy[i] = fabsf(gy[i]);
        const struct ampc_kernels *R = ampci_kernels(AMPC_ISA_REF);
        R->maxpool(yr, argr, x, &g, 0, planes);
        for (int e = 0; e < fw.n; e++) {
            fw.e[e]->fn.MAXPOOL(y, arg, x, &g, 0, planes / 2), fw.e[e]->fn.MAXPOOL(y, arg, x, &g, planes / 2, planes);
            kc_check_bits(y, yr, (size_t)(ny + KC_GUARD) * 4, kc_named(fw.e[e], "y"), (int64_t)c);
            kc_check_bits(arg, argr, (size_t)(ny + KC_GUARD) * 4, kc_named(fw.e[e], "argmax"), (int64_t)c);
        }
        R->maxpool_bw(gxr, gy, argr, &g, 0, planes), R->maxpool_bw(mag, agy, argr, &g, 0, planes);
        for (int e = 0; e < bw.n; e++) {
            bw.e[e]->fn.MAXPOOL_BW(gx, gy, argr, &g, 0, planes / 2);
            bw.e[e]->fn.MAXPOOL_BW(gx, gy, argr, &g, planes / 2, planes);
            check_sum(gx, gxr, mag, nx, (double)(g.KH * g.KW), bw.e[e]->name);
        }
        free(x), free(y), free(yr), free(gy), free(agy), free(gx), free(gxr), free(mag), free(arg), free(argr);
    }
}

int main(void) {
    for (int slot = AMPCI_SLOT_IM2COL; slot <= AMPCI_SLOT_MAXPOOL_BW; slot++) kc_note_unusable((ampci_slot)slot);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_im2col), cmocka_unit_test(test_col2im),
                                       cmocka_unit_test(test_maxpool)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
