/* stats.c: range statistics, the numerics doctor's eyes. While an ampc_stats object is attached, the op
 * epilogue hands every op output here and autograd every output gradient and parameter contribution
 * (its grad-seen listener); each is summarised into its site (module path, op, role) by the device's range
 * operation (one synchronisation per tensor reads its counts back): a binade histogram and counts against
 * each format's thresholds, found once through the format's own conversion code. Sites also learn whether
 * their values would be 16-bit under autocast (simulated from the policies when the run is FP32) and which
 * F32 producers they would cast down. Detached, the ops pay one pointer test. */
#include "stats.h"

#include "../autograd/autograd.h"
#include "../kernels/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const ampc_format ampci_stats_formats[AMPCI_STATS_NFMT] = {AMPC_FORMAT_BF16, AMPC_FORMAT_FP16, AMPC_FORMAT_FP8_E4M3,
                                                           AMPC_FORMAT_FP8_E5M2};

int ampci_stats_format_index(ampc_format fmt) {
    for (int j = 0; j < AMPCI_STATS_NFMT; j++)
        if (ampci_stats_formats[j] == fmt) return j;
    return -1;
}

static const char *const role_names[AMPC_STATS_ROLE_COUNT] = {"out", "grad", "param_grad"};
const char *ampc_stats_role_name(ampc_stats_role r) {
    return (unsigned)r < AMPC_STATS_ROLE_COUNT ? role_names[r] : "?";
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- thresholds: the first |x| bit pattern where the format's rounding changes class ---- */

static double round_trip(ampc_format fmt, uint32_t bits) {
    float x;
    memcpy(&x, &bits, sizeof x);
    return ampc_format_to_f64(fmt, ampc_format_from_f64(fmt, (double)x));
}

/* The smallest bits in [0, 0x7F800000] for which pred holds (pred is monotone in |x|). */
static uint32_t first_bits(ampc_format fmt, int kind, double min_normal) {
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        double r = fabs(round_trip(fmt, mid));
        bool ok = kind == 0 ? r != 0 : kind == 1 ? r >= min_normal : !isfinite(r);
        if (ok) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static void thresholds(uint32_t *thr) {
    for (int j = 0; j < AMPCI_STATS_NFMT; j++) {
        ampc_format_info info;
        ampc_format_get_info(ampci_stats_formats[j], &info);
        for (int k = 0; k < 3; k++) thr[3 * j + k] = first_bits(ampci_stats_formats[j], k, info.min_normal);
    }
}

/* ---- the object ---- */

ampc_status ampc_stats_new(ampc_stats **out) {
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_stats_new: out is NULL");
    ampc_stats *st = calloc(1, sizeof *st);
    if (!st) return ampci_fail(AMPC_STATUS_OOM, "ampc_stats_new: out of memory");
    thresholds(st->thr);
    *out = st;
    return AMPC_OK;
}

void ampc_stats_reset(ampc_stats *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->site[i]->cast_inputs), free(st->site[i]);
    free(st->site), free(st->index);
    st->site = NULL, st->index = NULL;
    st->n = st->cap = 0, st->index_size = 0;
    st->seconds = 0, st->steps = 0;
}

void ampc_stats_free(ampc_stats *st) {
    if (!st) return;
    if (st->ctx) ampc_stats_attach(st->ctx, NULL);
    ampc_stats_reset(st);
    free(st);
}

static void grad_hook(void *arg, const ampci_node *n, const ampc_tensor *t, const ampc_tensor *g);

ampc_status ampc_stats_attach(ampc_ctx *ctx, ampc_stats *st) {
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_stats_attach: ctx is NULL");
    if (st && st->ctx && st->ctx != ctx)
        return ampci_fail(AMPC_STATUS_STATE, "ampc_stats_attach: the statistics are attached to another context");
    if (st && !ctx->stats && ampci_autograd_on_grad_seen(ctx, grad_hook, ctx) != AMPC_OK) return ampc_last_status();
    if (!st) ampci_autograd_off_grad_seen(ctx, grad_hook, ctx);
    if (ctx->stats) ctx->stats->ctx = NULL;
    ctx->stats = st;
    if (st) st->ctx = ctx;
    return AMPC_OK;
}

int ampc_stats_count(const ampc_stats *st) { return st ? st->n : 0; }
const ampc_stats_entry *ampc_stats_get(const ampc_stats *st, int i) {
    return st && i >= 0 && i < st->n ? &st->site[i]->e : NULL;
}
double ampc_stats_seconds(const ampc_stats *st) { return st ? st->seconds : 0; }
int64_t ampc_stats_steps(const ampc_stats *st) { return st ? st->steps : 0; }

int ampc_stats_cast_inputs(const ampc_stats *st, int i, int *out, int max) {
    if (!st || i < 0 || i >= st->n) return 0;
    const ampci_site *s = st->site[i];
    for (int k = 0; out && k < s->ncast && k < max; k++) out[k] = s->cast_inputs[k];
    return s->ncast;
}

void ampci_stats_step_end(ampc_ctx *ctx) {
    if (ctx->stats) ctx->stats->steps++;
}

/* ---- sites ---- */

static uint64_t hash_key(const char *module, const char *op, ampc_stats_role role, const char *param) {
    uint64_t h = 1469598103934665603ull;
    const char *parts[3] = {module, op, param};
    for (int p = 0; p < 3; p++) {
        for (const char *c = parts[p]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h = (h ^ 0x1fu) * 1099511628211ull;
    }
    return (h ^ (uint64_t)role) * 1099511628211ull;
}

static bool same_key(const ampci_site *s, const char *module, const char *op, ampc_stats_role role, const char *param) {
    return s->e.role == role && !strcmp(s->module, module) && !strcmp(s->op, op) && !strcmp(s->param, param);
}

static bool index_grow(ampc_stats *st) {
    size_t size = st->index_size ? st->index_size * 2 : 256;
    int *idx = calloc(size, sizeof *idx);
    if (!idx) return false;
    for (int i = 0; i < st->n; i++) {
        const ampci_site *s = st->site[i];
        size_t h = (size_t)hash_key(s->module, s->op, s->e.role, s->param) & (size - 1);
        while (idx[h]) h = (h + 1) & (size - 1);
        idx[h] = i + 1;
    }
    free(st->index);
    st->index = idx, st->index_size = size;
    return true;
}

static int site_new(ampc_stats *st, const char *module, const char *op, ampc_stats_role role, const char *param) {
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 64;
        ampci_site **n = realloc(st->site, (size_t)cap * sizeof *n);
        if (!n) return -1;
        st->site = n, st->cap = cap;
    }
    ampci_site *s = calloc(1, sizeof *s);
    if (!s) return -1;
    snprintf(s->module, sizeof s->module, "%s", module);
    snprintf(s->op, sizeof s->op, "%s", op);
    snprintf(s->param, sizeof s->param, "%s", param);
    s->e.module = s->module, s->e.op = s->op, s->e.param = s->param, s->e.role = role;
    st->site[st->n] = s;
    return st->n++;
}

/* The site of (module, op, role, param), made on first sight; -1 on OOM (the values go unrecorded). */
static int site_find(ampc_stats *st, const char *module, const char *op, ampc_stats_role role, const char *param) {
    if ((size_t)(st->n + 1) * 2 > st->index_size && !index_grow(st)) return -1;
    size_t mask = st->index_size - 1, h = (size_t)hash_key(module, op, role, param) & mask;
    for (; st->index[h]; h = (h + 1) & mask)
        if (same_key(st->site[st->index[h] - 1], module, op, role, param)) return st->index[h] - 1;
    int id = site_new(st, module, op, role, param);
    if (id >= 0) st->index[h] = id + 1;
    return id;
}

/* ---- summarising one tensor ---- */

/* The site's per-format counts from its raw threshold counts. */
static void site_ranges(ampci_site *s) {
    ampc_stats_entry *e = &s->e;
    uint64_t nonzero = e->count - e->zeros;
    for (int j = 0; j < AMPCI_STATS_NFMT; j++) {
        const uint64_t *g = &s->ge[3 * j];
        e->range[ampci_stats_formats[j]] = (ampc_stats_range){
            .overflow = g[2] - e->nonfinite, .underflow = nonzero - g[0], .subnormal = g[0] - g[1]};
    }
}

/* Adds acc (one tensor's counts) into the site. */
static void site_add(ampci_site *s, const ampci_range_acc *acc, int64_t n) {
    ampc_stats_entry *e = &s->e;
    uint32_t amax = 0, amin = 0x7f800000u;
    if (e->count > e->zeros + e->nonfinite) { /* earlier values: fold them in */
        float f = (float)e->amax, g = (float)e->min_nonzero;
        memcpy(&amax, &f, sizeof f), memcpy(&amin, &g, sizeof g);
    }
    for (int b = 0; b < AMPC_STATS_BINS; b++) e->hist[b] += acc->hist[b];
    for (int k = 0; k < 3 * AMPCI_STATS_NFMT; k++) s->ge[k] += acc->ge[k];
    e->zeros += acc->zeros;
    e->nonfinite += acc->hist[255];
    if (acc->amax_bits > amax) amax = acc->amax_bits;
    if (acc->min_bits < amin) amin = acc->min_bits;
    float f;
    memcpy(&f, &amax, sizeof f), e->amax = f;
    memcpy(&f, &amin, sizeof f), e->min_nonzero = amin < 0x7f800000u ? f : 0;
    e->count += (uint64_t)n, e->calls++;
    site_ranges(s);
}

/* The device's range operation over t (contiguous: an op output or a gradient) into a device block, read
 * back in one synchronisation (AMPC_SYNC_STATS) and added into the site. A failure (no memory) leaves the
 * values unrecorded, as the statistics never stop a run. */
static void summarise(ampc_ctx *ctx, ampci_site *s, const ampc_tensor *t) {
    ampc_stats *st = ctx->stats;
    int64_t n = ampci_numel(t);
    ampci_range_acc *dev = ampci_step_alloc(ctx, sizeof *dev, "range statistics"), acc;
    ampci_range_args a = {.x = ampci_dev_ptr(t), .x_dt = t->dtype, .n = n, .nthr = 3 * AMPCI_STATS_NFMT, .acc = dev};
    memcpy(a.thr, st->thr, sizeof st->thr); /* by value: the thresholds are host memory */
    if (!dev || ctx->dev->range(ctx, &a) != AMPC_OK) return;
    ampci_sync_read(ctx, AMPC_SYNC_STATS, &acc, dev, sizeof acc);
    ampci_step_free(ctx, dev);
    site_add(s, &acc, n);
}

/* ---- what the ops and autograd report ---- */

static void add_cast_input(ampci_site *s, int producer) {
    for (int k = 0; k < s->ncast; k++)
        if (s->cast_inputs[k] == producer) return;
    if (s->ncast == s->capcast) {
        int cap = s->capcast ? s->capcast * 2 : 4;
        int *p = realloc(s->cast_inputs, (size_t)cap * sizeof *p);
        if (!p) return;
        s->cast_inputs = p, s->capcast = cap;
    }
    s->cast_inputs[s->ncast++] = producer;
}

#define MAX_SIM_IN 64

/* Under real autocast a parameter reaches the op through autocast's cast node; its gradient leaves
 * through that node's backward. The node is marked as working for site id (negative), so the grad hook
 * files the parameter's gradient under the op that used it (the first, for a cached cast). */
static void claim_weight_cast(const ampc_tensor *t, int id) {
    ampci_node *n = t ? t->node : NULL;
    if (!n || n->stats_site || n->nin != 1 || !n->in[0] || n->in[0]->node || !n->in[0]->requires_grad) return;
    n->stats_site = -(id + 1);
}

void ampci_stats_output(ampc_ctx *ctx, ampci_op op, const char *name, ampc_tensor *out, const ampc_tensor *const *in,
                        int n, ampci_node *node) {
    ampc_stats *st = ctx->stats;
    double t0 = now();
    bool low_in[MAX_SIM_IN], is_float[MAX_SIM_IN], casts = false, low;
    int m = n < MAX_SIM_IN ? n : MAX_SIM_IN;
    for (int i = 0; i < m; i++) {
        is_float[i] = in[i] && ampc_dtype_is_float(in[i]->dtype);
        low_in[i] = is_float[i] && (in[i]->dtype != AMPC_DTYPE_F32 || in[i]->stats_low);
    }
    if (out->dtype == AMPC_DTYPE_F16 || out->dtype == AMPC_DTYPE_BF16) low = true;
    else if (ampci_autocast_active(ctx)) low = false; /* a real region decided: F32 stays F32 */
    else low = ampci_autocast_would_lower(ctx, op, low_in, is_float, m, &casts);
    int id = site_find(st, ctx->scope, name, AMPC_STATS_OUTPUT, "");
    if (id >= 0) {
        ampci_site *s = st->site[id];
        s->e.lowered |= low;
        s->casts |= casts;
        summarise(ctx, s, out);
        for (int i = 0; casts && i < m; i++)
            if (is_float[i] && !low_in[i] && in[i]->stats_site > 0 && in[i]->stats_site <= st->n)
                add_cast_input(s, in[i]->stats_site - 1);
    }
    out->stats_site = id + 1, out->stats_low = low;
    if (node) node->stats_site = id + 1;
    for (int i = 0; id >= 0 && i < m; i++) claim_weight_cast(in[i], id);
    st->seconds += now() - t0;
}

void ampci_stats_carry(ampc_tensor *out, const ampc_tensor *in) {
    out->stats_site = in->stats_site;
    out->stats_low = out->dtype == AMPC_DTYPE_F32 ? in->stats_low && in->dtype == AMPC_DTYPE_F32 : true;
}

static void grad_hook(void *arg, const ampci_node *n, const ampc_tensor *t, const ampc_tensor *g) {
    ampc_ctx *ctx = arg;
    ampc_stats *st = ctx->stats;
    int site = n->stats_site < 0 ? -n->stats_site : n->stats_site; /* negative: a weight cast (above) */
    if (!st || site == 0 || site > st->n || (n->stats_site < 0 && t == n->out)) return;
    double t0 = now();
    ampci_site *o = st->site[site - 1];
    int id;
    bool low;
    if (n->stats_site < 0) {
        id = site_find(st, o->module, o->op, AMPC_STATS_PARAM_GRAD, t->name[0] ? t->name : "(unnamed)");
        low = true; /* the cast's output, whose gradient this is, was 16-bit */
    } else if (t == n->out) {
        if (!o->grad) o->grad = site_find(st, o->module, o->op, AMPC_STATS_GRAD, "") + 1; /* sites never move */
        id = o->grad - 1;
        low = t->stats_low || g->dtype != AMPC_DTYPE_F32;
    } else {
        id = site_find(st, o->module, o->op, AMPC_STATS_PARAM_GRAD, t->name[0] ? t->name : "(unnamed)");
        low = o->casts || t->dtype != AMPC_DTYPE_F32;
    }
    if (id >= 0) {
        st->site[id]->e.lowered |= low;
        summarise(ctx, st->site[id], g);
    }
    st->seconds += now() - t0;
}

/* ---- counting without a context (tests, tools) ---- */

ampc_status ampc_stats_classify(ampc_format fmt, const void *x, ampc_dtype src_dtype, size_t n, ampc_stats_range *out) {
    static const char fn[] = "ampc_stats_classify";
    int j = ampci_stats_format_index(fmt);
    if (!out || (!x && n)) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: x and out must not be NULL", fn);
    if (j < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: format %d; expected BF16, FP16, FP8-E4M3 or FP8-E5M2", fn,
                          (int)fmt);
    if (src_dtype != AMPC_DTYPE_F32 && src_dtype != AMPC_DTYPE_F16 && src_dtype != AMPC_DTYPE_BF16)
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: values of dtype %s; expected F32, F16 or BF16", fn,
                          ampc_dtype_name(src_dtype));
    uint32_t thr[3 * AMPCI_STATS_NFMT];
    thresholds(thr);
    ampci_site s = {0};
    ampci_range_acc acc = {.min_bits = 0x7f800000u}; /* host values: counted here, on this thread */
    ampci_range_host(ampci_kernels(AMPC_ISA_AUTO), x, src_dtype, (int64_t)n, thr, 3 * AMPCI_STATS_NFMT, &acc);
    s.e.count = n, s.e.zeros = acc.zeros, s.e.nonfinite = acc.hist[255];
    memcpy(s.ge, acc.ge, sizeof s.ge);
    site_ranges(&s);
    *out = s.e.range[fmt];
    return AMPC_OK;
}
