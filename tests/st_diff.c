/* st_diff [--all] [--l2] [--ignore GLOB:BEGIN:END]... TOL A.safetensors B.safetensors: compares the tensors
 * of two safetensors files (ampc checkpoints) by value, for tests/dist_train.sh. Prints one line per
 * tensor: its name, the largest absolute difference, the largest difference relative to the tensor's
 * scale,
 *     rel = max_i |a_i - b_i| / max_i max(|a_i|, |b_i|)
 * (0 when both are all zeros; a per-element ratio says nothing where a value happens to be near zero),
 * and the relative 2-norm of the difference, l2 = |a - b| / |b|. Exits 1 when some tensor's rel (with
 * --l2: its l2) exceeds TOL (TOL 0: the values must be equal; -0 and +0 are equal, NaN equals NaN),
 * when a tensor is missing from either file or differs in dtype or shape; 2 on a usage or read error.
 * By default the model's tensors are compared: every tensor but the optimizer state ("optim.*") and the
 * separate F32 master weights ("master.*"); --all compares every tensor. --ignore leaves the elements
 * [BEGIN, END) (flat, row-major) of the tensors whose names match GLOB (fnmatch) out of the comparison
 * (for values that are rounding noise by construction; the caller says why). Dtypes: F32, F64, F16,
 * BF16, I32, I64 (the integers as doubles: exact below 2^53). */
#include "ampc.h"

#include <fnmatch.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double f16_to_double(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return s ? -v : v;
}

static double bf16_to_double(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of t as a double; false for a dtype not handled. */
static bool value(const ampc_st_tensor *t, int64_t i, double *out) {
    const unsigned char *p = (const unsigned char *)t->data;
    const char *d = t->dtype_name;
    if (!strcmp(d, "F32")) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        *out = f;
    } else if (!strcmp(d, "F64")) {
        memcpy(out, p + 8 * i, 8);
    } else if (!strcmp(d, "F16") || !strcmp(d, "BF16")) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        *out = d[0] == 'F' ? f16_to_double(h) : bf16_to_double(h);
    } else if (!strcmp(d, "I32")) {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        *out = v;
    } else if (!strcmp(d, "I64")) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        *out = (double)v;
    } else {
        return false;
    }
    return true;
}

static bool selected(const char *name, bool all) {
    return all || (strncmp(name, "optim.", 6) != 0 && strncmp(name, "master.", 7) != 0);
}

#define MAX_IGNORE 16
static struct {
    char glob[256];
    int64_t begin, end;
} g_ignore[MAX_IGNORE];
static int g_nignore;

static bool parse_ignore(const char *spec) {
    const char *c2 = strrchr(spec, ':');
    if (!c2 || g_nignore == MAX_IGNORE) return false;
    const char *c1 = c2 - 1;
    while (c1 > spec && *c1 != ':') c1--;
    if (c1 <= spec || (size_t)(c1 - spec) >= sizeof g_ignore[0].glob) return false;
    char *e1, *e2;
    long long b = strtoll(c1 + 1, &e1, 10), e = strtoll(c2 + 1, &e2, 10);
    if (e1 != c2 || *e2 || c2 == c1 + 1 || !c2[1] || b < 0 || e < b) return false;
    memcpy(g_ignore[g_nignore].glob, spec, (size_t)(c1 - spec));
    g_ignore[g_nignore].glob[c1 - spec] = '\0';
    g_ignore[g_nignore].begin = b, g_ignore[g_nignore].end = e;
    g_nignore++;
    return true;
}

/* Element k of the tensor name is left out (--ignore). */
static bool ignored(const char *name, int64_t k) {
    for (int i = 0; i < g_nignore; i++)
        if (k >= g_ignore[i].begin && k < g_ignore[i].end && fnmatch(g_ignore[i].glob, name, 0) == 0) return true;
    return false;
}

/* The ignored ranges of the tensor name, as text for its line ("" when none). */
static void ignored_text(const char *name, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < g_nignore && n < size; i++)
        if (fnmatch(g_ignore[i].glob, name, 0) == 0)
            n += (size_t)snprintf(buf + n, size - n, " (ignoring [%lld, %lld))", (long long)g_ignore[i].begin,
                                  (long long)g_ignore[i].end);
}

static bool same_shape(const ampc_st_tensor *a, const ampc_st_tensor *b) {
    if (a->ndim != b->ndim || strcmp(a->dtype_name, b->dtype_name) != 0) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

int main(int argc, char **argv) {
    bool all = false, use_l2 = false, usage = false;
    while (argc > 1 && !strncmp(argv[1], "--", 2)) {
        if (!strcmp(argv[1], "--all")) all = true;
        else if (!strcmp(argv[1], "--l2")) use_l2 = true;
        else if (!strcmp(argv[1], "--ignore") && argc > 2 && parse_ignore(argv[2])) argc--, argv++;
        else usage = true;
        argc--, argv++;
    }
    char *end = NULL;
    double tol = argc == 4 ? strtod(argv[1], &end) : NAN;
    if (usage || argc != 4 || !end || *end || !(tol >= 0)) {
        fprintf(stderr, "usage: st_diff [--all] [--l2] [--ignore GLOB:BEGIN:END]... TOL A.safetensors B.safetensors\n");
        return 2;
    }
    ampc_safetensors *a = NULL, *b = NULL;
    if (ampc_safetensors_read(argv[2], &a) != AMPC_OK || ampc_safetensors_read(argv[3], &b) != AMPC_OK) {
        fprintf(stderr, "st_diff: %s\n", ampc_last_error());
        ampc_safetensors_free(a);
        return 2;
    }
    int bad = 0, compared = 0;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < ampc_safetensors_count(a); i++) {
        const ampc_st_tensor *ta = ampc_safetensors_tensor(a, i);
        if (!selected(ta->name, all)) continue;
        const ampc_st_tensor *tb = ampc_safetensors_find(b, ta->name);
        if (!tb) {
            printf("%s: only in %s\n", ta->name, argv[2]);
            bad++;
            continue;
        }
        if (!same_shape(ta, tb)) {
            printf("%s: dtype or shape differs\n", ta->name);
            bad++;
            continue;
        }
        double max_abs = 0, scale = 0, sd = 0, sb = 0;
        bool ok = true, nan_mismatch = false;
        for (int64_t k = 0; k < ta->numel && ok; k++) {
            double x, y;
            ok = value(ta, k, &x) && value(tb, k, &y);
            if (!ok) break;
            if (ignored(ta->name, k)) continue;
            if (isnan(x) || isnan(y)) {
                nan_mismatch |= !(isnan(x) && isnan(y));
                continue;
            }
            double d = x == y ? 0 : fabs(x - y); /* inf == inf: 0 */
            if (isnan(d)) d = INFINITY;
            if (d > max_abs) max_abs = d;
            sd += d * d, sb += y * y;
            if (fabs(x) > scale) scale = fabs(x);
            if (fabs(y) > scale) scale = fabs(y);
        }
        if (!ok) {
            printf("%s: dtype %s not handled\n", ta->name, ta->dtype_name);
            bad++;
            continue;
        }
        bool inf_diff = nan_mismatch || isinf(max_abs);
        double rel = inf_diff ? INFINITY : max_abs == 0 ? 0 : max_abs / scale;
        double l2 = inf_diff ? INFINITY : sd == 0 ? 0 : sb > 0 ? sqrt(sd / sb) : INFINITY;
        double metric = use_l2 ? l2 : rel;
        bool over = tol == 0 ? metric != 0 : !(metric <= tol);
        char ign[256];
        ignored_text(ta->name, ign, sizeof ign);
        printf("%-40s %-4s max_abs %.3e rel %.3e l2 %.3e%s%s%s\n", ta->name, ta->dtype_name, max_abs, rel, l2, ign,
               nan_mismatch ? " (NaN in one file only)" : "", over ? "  > TOL" : "");
        bad += over;
        compared++;
        if (metric >= worst) worst = metric, worst_name = ta->name;
    }
    for (int i = 0; i < ampc_safetensors_count(b); i++) {
        const ampc_st_tensor *tb = ampc_safetensors_tensor(b, i);
        if (selected(tb->name, all) && !ampc_safetensors_find(a, tb->name)) {
            printf("%s: only in %s\n", tb->name, argv[3]);
            bad++;
        }
    }
    printf("st_diff: %d tensors, largest %s %.3e (%s), tolerance %.3e: %s\n", compared, use_l2 ? "l2" : "rel", worst,
           worst_name, tol, bad || !compared ? "DIFFERENT" : "within");
    ampc_safetensors_free(a);
    ampc_safetensors_free(b);
    return bad || !compared ? 1 : 0;
}
