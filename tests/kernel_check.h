/* kernel_check.h: what the kernel tests share to reach kernels through the registry instead of naming
 * them: the entries of a slot (or one cell) outside the ref folder that this CPU runs (each is compared
 * with its cell's ref entry, the oracle), notes for those it cannot run, and the guarded buffers and bit
 * comparisons of the elementwise tests. A new entry of a slot is picked up by every test of that slot.
 * Everything is static inline: one copy per test program, no unused-function warnings. */
#ifndef AMPC_TEST_KERNEL_CHECK_H
#define AMPC_TEST_KERNEL_CHECK_H

#include "test_util.h"

#include "kernels/kernels.h"

#include <stdlib.h>

#define KC_ANY (-1) /* every cell of a slot */
#define KC_MAX 32

typedef struct kc_list {
    const ampci_kernel *e[KC_MAX];
    int n;
} kc_list;

/* The entries of `slot` (of cell key `key`, or KC_ANY) outside the ref folder that this CPU runs, in
 * registry order. */
static inline kc_list kc_fast(ampci_slot slot, int key) {
    kc_list l = {.n = 0};
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *e = all[i];
        if (e->slot != slot || (key != KC_ANY && ampci_kernel_key(e) != key) || e->level == AMPC_ISA_REF) continue;
        if (!ampci_kernel_usable(e)) continue;
        if (l.n == KC_MAX) { /* never silently untested */
            fprintf(stderr, "kernel_check.h: more than %d entries, %s not tested\n", KC_MAX, e->name);
            abort();
        }
        l.e[l.n++] = e;
    }
    return l;
}

/* A note for each entry of `slot` this CPU cannot run (so a skipped kernel shows in the test log). */
static inline void kc_note_unusable(ampci_slot slot) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->slot == slot && !ampci_kernel_usable(all[i]))
            printf("  note: %s is not run: this CPU lacks its level or features\n", all[i]->name);
}

/* The ref entry of e's cell. */
static inline const ampci_kernel *kc_ref(const ampci_kernel *e) {
    const ampci_kernel *r = ampci_kernel_ref(e);
    assert_non_null(r);
    return r;
}

/* "name (what)" in a static buffer, for failure messages. */
static inline const char *kc_named(const ampci_kernel *e, const char *what) {
    static char buf[96];
    snprintf(buf, sizeof buf, what[0] ? "%s (%s)" : "%s", e->name, what);
    return buf;
}

/* ---- guarded buffers and bit comparisons ---- */

#define KC_GUARD 16
#define KC_SENTINEL 0x7fbadbadu /* a NaN pattern no kernel produces */

/* n floats plus KC_GUARD sentinel floats after them. */
static inline float *kc_fbuf(int64_t n) {
    float *p = malloc((size_t)(n + KC_GUARD) * sizeof *p);
    uint32_t s = KC_SENTINEL;
    for (int64_t i = 0; i < n + KC_GUARD; i++) memcpy(&p[i], &s, 4);
    return p;
}

static inline void kc_fill_interesting(float *x, int64_t n, uint64_t seed) {
    tu_fill_interesting((uint32_t *)x, (size_t)n, seed);
}

/* uniform in [lo, hi) */
static inline void kc_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((tu_rand(&s) >> 40) * 0x1p-24);
}

/* approximately normal (sum of 4 uniforms), mean mu, deviation sd */
static inline void kc_fill_normal(float *x, int64_t n, float mu, float sd, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; i++) {
        double t = 0;
        for (int k = 0; k < 4; k++) t += (double)(tu_rand(&s) >> 11) * 0x1p-53 - 0.5;
        x[i] = mu + sd * (float)(t * 1.7320508);
    }
}

static inline void kc_check_bits(const void *got, const void *ref, size_t bytes, const char *what, int64_t n) {
    if (memcmp(got, ref, bytes) == 0) return;
    const uint32_t *g = got, *r = ref;
    size_t i = 0;
    while (i + 1 < bytes / 4 && g[i] == r[i]) i++;
    FAILF("%s (n %lld): word %zu is 0x%08x, ref 0x%08x", what, (long long)n, i, g[i], r[i]);
}

#endif
