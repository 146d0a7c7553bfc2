/* stats_advice.c: the doctor's judgement on range statistics. Forward values must fit a 16-bit format as
 * they are (overflow or more than 0.1% flushing to zero is unsafe: keep them in FP32); gradients may be
 * shifted by a power-of-two loss scale, found per binade from the histogram (scaling by 2^k moves every
 * value exactly k binades); FP8 formats are judged with a per-tensor power-of-two scale from the amax, as
 * delayed-scaling recipes do, asking that 99.9% of non-zero values stay representable (subnormals
 * count: E4M3's normal range is only 15 binades wide, and FP8 recipes live with its subnormals). A
 * gradient whose count rule no single scale meets is still judged scalable when the values left below
 * the normal range carry under 0.1% of its magnitude (estimated per binade): gradients that are zero in
 * exact arithmetic (the key bias of attention: softmax ignores a constant added to every key) arrive as
 * rounding noise of 1e-14, and FP16 flushing them loses nothing. */
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COVERAGE 0.999
#define K_MIN (-64)
#define K_MAX 128

static const char *const verdict_names[AMPC_VERDICT_COUNT] = {"safe", "needs scaling", "unsafe", "kept fp32"};
const char *ampc_stats_verdict_name(ampc_stats_verdict v) {
    return (unsigned)v < AMPC_VERDICT_COUNT ? verdict_names[v] : "?";
}

/* What the judgement needs of one format. */
typedef struct fmt_facts {
    int emin;        /* exponent of the smallest normal binade */
    int esub;        /* exponent of the smallest subnormal */
    double overflow; /* the smallest |x| that overflows */
    double max;
    bool fp8;
} fmt_facts;

static fmt_facts facts(const ampc_stats *st, ampc_format fmt) {
    ampc_format_info info;
    ampc_format_get_info(fmt, &info);
    uint32_t bits = st->thr[3 * ampci_stats_format_index(fmt) + 2];
    float ov;
    memcpy(&ov, &bits, sizeof ov);
    return (fmt_facts){info.emin, (int)lround(log2(info.min_subnormal)), ov, info.max_finite,
                       fmt == AMPC_FORMAT_FP8_E4M3 || fmt == AMPC_FORMAT_FP8_E5M2};
}

/* Of the non-zero finite values of hist, the fraction whose binade scaled by 2^k is at or above 2^floor.
 * F32 subnormals (bin 0 less the zeros) count as below. */
static double fraction_at(const uint64_t *hist, uint64_t zeros, int floor_exp, int k) {
    uint64_t nz = hist[0] - zeros, above = 0;
    for (int b = 1; b < 255; b++) {
        nz += hist[b];
        if (b - 127 + k >= floor_exp) above += hist[b];
    }
    return nz ? (double)above / (double)nz : 1.0;
}

static bool overflows_at(double amax, const fmt_facts *f, int k) { return ldexp(amax, k) >= f->overflow; }

/* Of the magnitude (sum of |x|, estimated as 1.5 x 2^e per value of binade e), the fraction in binades
 * that scaled by 2^k fall below 2^floor. */
static double mass_below(const uint64_t *hist, int floor_exp, int k) {
    double all = 0, below = 0;
    for (int b = 1; b < 255; b++) {
        double m = (double)hist[b] * ldexp(1.5, b - 127);
        all += m;
        if (b - 127 + k < floor_exp) below += m;
    }
    return all > 0 ? below / all : 0;
}

/* The feasible scales [lo, hi]: lo the smallest k keeping > COVERAGE at or above 2^floor, hi the largest k
 * without overflow. lo > hi: none. */
static void feasible(const uint64_t *hist, uint64_t zeros, double amax, const fmt_facts *f, int floor_exp, int *lo,
                     int *hi) {
    *lo = K_MAX + 1, *hi = K_MIN - 1;
    for (int k = K_MIN; k <= K_MAX; k++)
        if (fraction_at(hist, zeros, floor_exp, k) > COVERAGE) {
            *lo = k;
            break;
        }
    for (int k = K_MAX; k >= K_MIN; k--)
        if (!overflows_at(amax, f, k)) {
            *hi = k;
            break;
        }
}

/* FP8: the per-tensor scale 2^k0 that puts amax just under the format's max. */
static void advise_fp8(const ampc_stats_entry *e, const fmt_facts *f, ampc_stats_advice *out) {
    double at1 = fraction_at(e->hist, e->zeros, f->esub, 0);
    if (!overflows_at(e->amax, f, 0) && at1 > COVERAGE) {
        *out = (ampc_stats_advice){AMPC_VERDICT_SAFE, 0, at1, ""};
        snprintf(out->why, sizeof out->why, "amax %.3g fits, %.2f%% representable unscaled", e->amax, 100 * at1);
        return;
    }
    int k0 = e->amax > 0 ? (int)floor(log2(f->max / e->amax)) : 0;
    double at = fraction_at(e->hist, e->zeros, f->esub, k0);
    bool noise = at <= COVERAGE && mass_below(e->hist, f->esub, k0) < 1 - COVERAGE; /* as for FP16 gradients */
    out->scale_log2 = k0, out->normal_fraction = at;
    out->verdict = at > COVERAGE || noise ? AMPC_VERDICT_NEEDS_SCALING : AMPC_VERDICT_UNSAFE;
    snprintf(out->why, sizeof out->why, "per-tensor scale 2^%d (amax %.3g): %.2f%% representable%s", k0, e->amax,
             100 * at,
             at > COVERAGE ? ""
             : noise       ? "; the rest is rounding noise (< 0.1% of the magnitude)"
                           : ", range wider than the format's");
}

static void advise_forward(const ampc_stats *st, const ampc_stats_entry *e, int i, ampc_format fmt, const fmt_facts *f,
                           ampc_stats_advice *out) {
    const ampc_stats_range *r = &e->range[fmt];
    uint64_t nz = e->count - e->zeros - e->nonfinite;
    *out = (ampc_stats_advice){AMPC_VERDICT_SAFE, 0, fraction_at(e->hist, e->zeros, f->emin, 0), ""};
    if (r->overflow) {
        out->verdict = AMPC_VERDICT_UNSAFE;
        snprintf(out->why, sizeof out->why, "%llu values overflow: amax %.4g > %.6g", (unsigned long long)r->overflow,
                 e->amax, f->max);
        return;
    }
    for (int k = 0; k < st->site[i]->ncast; k++) {
        const ampc_stats_entry *p = &st->site[st->site[i]->cast_inputs[k]]->e;
        if (!p->range[fmt].overflow) continue;
        out->verdict = AMPC_VERDICT_UNSAFE;
        snprintf(out->why, sizeof out->why, "its input from %s%s%s (amax %.4g) overflows when cast down", p->module,
                 p->module[0] ? " " : "", p->op, p->amax);
        return;
    }
    double flushed = nz ? (double)r->underflow / (double)nz : 0;
    if (flushed > 1 - COVERAGE) {
        out->verdict = AMPC_VERDICT_UNSAFE;
        snprintf(out->why, sizeof out->why, "%.2f%% of non-zero values flush to zero (smallest %.3g)", 100 * flushed,
                 e->min_nonzero);
        return;
    }
    snprintf(out->why, sizeof out->why, "amax %.4g fits; %.3f%% subnormal, %.3f%% flush", e->amax,
             nz ? 100.0 * (double)r->subnormal / (double)nz : 0.0, 100 * flushed);
}

static void advise_grad(const ampc_stats_entry *e, const fmt_facts *f, ampc_stats_advice *out) {
    int lo, hi;
    feasible(e->hist, e->zeros, e->amax, f, f->emin, &lo, &hi);
    double at1 = fraction_at(e->hist, e->zeros, f->emin, 0);
    if (lo <= 0 && hi >= 0) {
        *out = (ampc_stats_advice){AMPC_VERDICT_SAFE, 0, at1, ""};
        snprintf(out->why, sizeof out->why, "%.2f%% normal unscaled, amax %.3g", 100 * at1, e->amax);
    } else if (lo <= hi) {
        int k = lo > 0 ? lo : hi;
        *out = (ampc_stats_advice){AMPC_VERDICT_NEEDS_SCALING, k, fraction_at(e->hist, e->zeros, f->emin, k), ""};
        snprintf(out->why, sizeof out->why, "%.2f%% normal unscaled; scale 2^%d keeps %.2f%% normal, amax %.3g",
                 100 * at1, k, 100 * out->normal_fraction, e->amax);
    } else if (mass_below(e->hist, f->emin, hi) < 1 - COVERAGE) {
        double at = fraction_at(e->hist, e->zeros, f->emin, hi);
        *out = (ampc_stats_advice){AMPC_VERDICT_NEEDS_SCALING, hi, at, ""};
        snprintf(out->why, sizeof out->why,
                 "scale 2^%d keeps %.2f%% normal; the rest carries %.2g%% of the magnitude (rounding noise)", hi,
                 100 * at, 100 * mass_below(e->hist, f->emin, hi));
    } else {
        *out = (ampc_stats_advice){AMPC_VERDICT_UNSAFE, hi, fraction_at(e->hist, e->zeros, f->emin, hi), ""};
        snprintf(out->why, sizeof out->why,
                 "no single scale fits: 99.9%% normal needs 2^%d, amax %.3g overflows above 2^%d", lo, e->amax, hi);
    }
}

ampc_status ampc_stats_advise(const ampc_stats *st, int i, ampc_format fmt, ampc_stats_advice *out) {
    static const char fn[] = "ampc_stats_advise";
    if (!st || !out || i < 0 || i >= st->n)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: site %d of %d (or a NULL argument)", fn, i, st ? st->n : 0);
    if (ampci_stats_format_index(fmt) < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: format %d; expected BF16, FP16, FP8-E4M3 or FP8-E5M2", fn,
                          (int)fmt);
    const ampc_stats_entry *e = &st->site[i]->e;
    fmt_facts f = facts(st, fmt);
    if (!e->lowered) {
        *out = (ampc_stats_advice){AMPC_VERDICT_KEPT_FP32, 0, 1, "stays F32 under autocast (its op's policy)"};
        return AMPC_OK;
    }
    if (e->count == e->zeros + e->nonfinite) {
        *out = (ampc_stats_advice){AMPC_VERDICT_SAFE, 0, 1, "no non-zero finite values"};
        return AMPC_OK;
    }
    if (f.fp8) advise_fp8(e, &f, out);
    else if (e->role == AMPC_STATS_OUTPUT) advise_forward(st, e, i, fmt, &f, out);
    else advise_grad(e, &f, out);
    return AMPC_OK;
}

/* ---- the loss scale and the recommendation ---- */

/* The loss scale over the lowered gradient sites for which skip[i] is false (skip may be NULL). */
static void scale_over(const ampc_stats *st, ampc_format fmt, double coverage, const bool *skip, int *k_out,
                       double *frac) {
    uint64_t hist[AMPC_STATS_BINS] = {0}, zeros = 0;
    double amax = 0;
    for (int i = 0; i < st->n; i++) {
        const ampc_stats_entry *e = &st->site[i]->e;
        if (e->role == AMPC_STATS_OUTPUT || !e->lowered || (skip && skip[i])) continue;
        for (int b = 0; b < AMPC_STATS_BINS; b++) hist[b] += e->hist[b];
        zeros += e->zeros;
        if (e->amax > amax) amax = e->amax;
    }
    fmt_facts f = facts(st, fmt);
    int k = K_MIN - 1;
    for (int j = 0; j <= K_MAX && k < K_MIN; j++)
        if (fraction_at(hist, zeros, f.emin, j) > coverage && !overflows_at(amax, &f, j)) k = j;
    if (k < K_MIN) /* none: the largest without overflow */
        for (k = K_MAX; k > K_MIN && overflows_at(amax, &f, k); k--) {}
    *k_out = k;
    *frac = fraction_at(hist, zeros, f.emin, k);
}

ampc_status ampc_stats_loss_scale(const ampc_stats *st, ampc_format fmt, double coverage, int *scale_log2,
                                  double *normal_fraction) {
    if (!st || !scale_log2 || ampci_stats_format_index(fmt) < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_stats_loss_scale: st and scale_log2 must not be NULL; format BF16, FP16, FP8-E4M3 "
                          "or FP8-E5M2");
    double frac;
    scale_over(st, fmt, coverage > 0 ? coverage : COVERAGE, NULL, scale_log2, &frac);
    if (normal_fraction) *normal_fraction = frac;
    return AMPC_OK;
}

/* Appends item to the comma-separated list unless it is there. */
static void list_add(char *list, size_t size, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, item, n)) return;
        p += len + (p[len] == ',');
    }
    size_t used = strlen(list);
    snprintf(list + used, size - used, "%s%s", used ? "," : "", item);
}

/* Every module with a site whose generalised path is g is unsafe (unsafe[i] per site). */
static bool all_unsafe(const ampc_stats *st, const bool *unsafe_module, const char *g) {
    char a[256];
    for (int i = 0; i < st->n; i++) {
        ampc_scope_pattern(st->site[i]->module, "*", a, sizeof a);
        if (!strcmp(a, g) && !unsafe_module[i]) return false;
    }
    return true;
}

ampc_status ampc_stats_recommend(const ampc_stats *st, ampc_format fmt, ampc_stats_recommendation *out) {
    static const char fn[] = "ampc_stats_recommend";
    if (!st || !out || (fmt != AMPC_FORMAT_FP16 && fmt != AMPC_FORMAT_BF16))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: st and out must not be NULL, and the format FP16 or BF16", fn);
    memset(out, 0, sizeof *out);
    bool *unsafe = calloc((size_t)st->n + 1, sizeof *unsafe), *in_module = calloc((size_t)st->n + 1, 1);
    if (!unsafe || !in_module) {
        free(unsafe), free(in_module);
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    }
    for (int i = 0; i < st->n; i++) {
        ampc_stats_advice a;
        ampc_stats_advise(st, i, fmt, &a);
        unsafe[i] = a.verdict == AMPC_VERDICT_UNSAFE;
        out->unsafe_sites += unsafe[i];
    }
    /* a module is unsafe when one of its sites is: mark every site of it */
    for (int i = 0; i < st->n; i++)
        for (int j = 0; !in_module[i] && j < st->n; j++)
            in_module[i] = unsafe[j] && st->site[j]->module[0] && !strcmp(st->site[i]->module, st->site[j]->module);
    for (int i = 0; i < st->n; i++) {
        if (!unsafe[i]) continue;
        const ampci_site *s = st->site[i];
        if (!s->module[0]) {
            list_add(out->fp32_ops, sizeof out->fp32_ops, s->op);
            continue;
        }
        char g[256];
        ampc_scope_pattern(s->module, "*", g, sizeof g);
        list_add(out->fp32_modules, sizeof out->fp32_modules,
                 strcmp(g, s->module) && all_unsafe(st, in_module, g) ? g : s->module);
    }
    scale_over(st, fmt, COVERAGE, in_module, &out->scale_log2, &out->normal_fraction);
    free(unsafe), free(in_module);
    return AMPC_OK;
}
