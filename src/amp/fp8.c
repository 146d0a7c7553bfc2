/* fp8.c: FP8 regions and the per-parameter scaling state of TransformerEngine's recipes. Each parameter an
 * FP8 op meets gets a scale and an amax history for its op's input, itself and its output gradient (host
 * memory: the scales decide on the host, and checkpoints hold them). Quantising a tensor is the device's
 * quant8 operation: x * scale cast to E4M3 or E5M2 (saturating, counted), handed back as q / scale in BF16
 * (a step buffer on the device), exact because the scales are powers of two, so the GEMMs that follow
 * compute what an FP8 GEMM computes; the host reads the tensor's amax and saturation count in one
 * synchronisation (AMPC_SYNC_FP8_AMAX) and raises the history's current row. Delayed scales update at
 * every step end (ampc_fp8_delayed_update, TE's roll); current scaling reads each tensor's own amax first
 * (one more synchronisation: its scale is needed before the cast). */
#include "amp.h"

#include "../kernels/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_HISTORY 1024
#define E4M3_MAX 448.0
#define E5M2_MAX 57344.0

struct ampci_fp8 {
    int depth;
    ampc_fp8_recipe recipe;
    ampci_fp8_meta *meta;
    int n, cap;
    float *amax;        /* cap x AMPCI_FP8_ROLES: the step's amaxes for the amax event (grown with meta) */
    uint64_t saturated; /* this step */
};

/* The index of parameter w's state in f (NULL: none yet), or -1. */
static int meta_index(const struct ampci_fp8 *f, const ampc_tensor *w) {
    for (int i = 0; f && i < f->n; i++)
        if (f->meta[i].w == w) return i;
    return -1;
}

/* A freed parameter's state goes with it: a new one made at the same address starts fresh. */
static void forget(void *arg, const ampc_tensor *t) {
    ampc_ctx *ctx = arg;
    struct ampci_fp8 *f = ctx->fp8;
    int i = meta_index(f, t);
    if (i < 0) return;
    free(f->meta[i].history);
    f->meta[i] = f->meta[--f->n]; /* order does not matter: lookups are by parameter */
}

static struct ampci_fp8 *fp8_state(ampc_ctx *ctx) {
    if (ctx->fp8) return ctx->fp8;
    if (!(ctx->fp8 = calloc(1, sizeof *ctx->fp8))) {
        ampci_fail(AMPC_STATUS_OOM, "ampc_fp8_begin: out of memory for the FP8 state");
    } else if (ampci_tensor_on_free(ctx, forget, ctx) != AMPC_OK) { /* the state is keyed by parameters */
        free(ctx->fp8);
        ctx->fp8 = NULL;
    }
    return ctx->fp8;
}

void ampci_fp8_release(ampc_ctx *ctx) {
    struct ampci_fp8 *f = ctx->fp8;
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->meta[i].history);
    free(f->meta);
    free(f->amax);
    free(f);
    ctx->fp8 = NULL;
    ampci_tensor_off_free(ctx, forget, ctx);
}

/* ---- regions and the recipe ---- */

const char *ampci_fp8_recipe_problem(ampc_fp8_recipe *r) {
    if (r->amax_history_len == 0) r->amax_history_len = DEFAULT_HISTORY;
    return (unsigned)r->format > AMPC_FP8_E4M3                      ? "format is not an ampc_fp8_format"
           : (unsigned)r->scaling > AMPC_FP8_CURRENT                ? "scaling is not an ampc_fp8_scaling"
           : (unsigned)r->amax_compute > AMPC_FP8_AMAX_MOST_RECENT  ? "amax_compute is not valid"
           : r->amax_history_len < 1 || r->amax_history_len > 65536 ? "amax_history_len must be in 1..65536"
           : r->margin < -64 || r->margin > 64                      ? "margin must be in -64..64"
                                                                    : NULL;
}

static ampc_status check_recipe(const char *fn, ampc_fp8_recipe *r) {
    const char *bad = ampci_fp8_recipe_problem(r);
    return bad ? ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s (history %d, margin %d)", fn, bad, r->amax_history_len,
                            r->margin)
               : AMPC_OK;
}

static bool same_recipe(const ampc_fp8_recipe *a, const ampc_fp8_recipe *b) {
    return a->format == b->format && a->scaling == b->scaling && a->amax_history_len == b->amax_history_len &&
           a->amax_compute == b->amax_compute && a->margin == b->margin;
}

void ampci_fp8_describe(const ampc_fp8_recipe *r, char *buf, size_t size) {
    snprintf(buf, size, "%s, %s scaling, history %d, amax %s, margin %d",
             r->format == AMPC_FP8_HYBRID ? "hybrid" : "e4m3", r->scaling == AMPC_FP8_DELAYED ? "delayed" : "current",
             r->amax_history_len, r->amax_compute == AMPC_FP8_AMAX_MAX ? "max" : "most-recent", r->margin);
}

bool ampci_fp8_compatible(const ampc_ctx *ctx, const ampc_fp8_recipe *r) {
    return !ctx->fp8 || ctx->fp8->n == 0 || same_recipe(&ctx->fp8->recipe, r);
}

/* The recipe becomes the context's; with states made under another one it is refused. */
static ampc_status adopt(struct ampci_fp8 *f, const ampc_fp8_recipe *r, const char *fn) {
    if (f->n > 0 && !same_recipe(&f->recipe, r)) {
        char was[96], now[96];
        ampci_fp8_describe(&f->recipe, was, sizeof was), ampci_fp8_describe(r, now, sizeof now);
        return ampci_fail(AMPC_STATUS_STATE,
                          "%s: the FP8 state of %d parameters was made under the recipe %s; this one is %s (one "
                          "recipe per context)",
                          fn, f->n, was, now);
    }
    f->recipe = *r;
    return AMPC_OK;
}

ampc_status ampc_fp8_begin(ampc_ctx *ctx, const ampc_fp8_recipe *recipe) {
    static const char fn[] = "ampc_fp8_begin";
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn);
    ampc_fp8_recipe r = recipe ? *recipe : (ampc_fp8_recipe){0};
    ampc_status s = check_recipe(fn, &r);
    struct ampci_fp8 *f = s == AMPC_OK ? fp8_state(ctx) : NULL;
    if (!f) return s == AMPC_OK ? AMPC_STATUS_OOM : s;
    if ((s = adopt(f, &r, fn)) != AMPC_OK) return s;
    f->depth++;
    return AMPC_OK;
}

ampc_status ampc_fp8_end(ampc_ctx *ctx) {
    if (!ctx || !ctx->fp8 || ctx->fp8->depth == 0)
        return ampci_fail(AMPC_STATUS_STATE, "ampc_fp8_end: no FP8 region is open");
    ctx->fp8->depth--;
    return AMPC_OK;
}

bool ampc_fp8_enabled(const ampc_ctx *ctx) { return ctx && ctx->fp8 && ctx->fp8->depth > 0; }
const ampc_fp8_recipe *ampci_fp8_recipe(const ampc_ctx *ctx) { return ctx->fp8 ? &ctx->fp8->recipe : NULL; }
int ampci_fp8_history_len(const ampc_ctx *ctx) { return ctx->fp8 ? ctx->fp8->recipe.amax_history_len : 0; }
const ampci_fp8_meta *ampci_fp8_meta_at(const ampc_ctx *ctx, int i) {
    return ctx->fp8 && i >= 0 && i < ctx->fp8->n ? &ctx->fp8->meta[i] : NULL;
}

/* ---- per-parameter state ---- */

static ampci_fp8_meta *meta_new(struct ampci_fp8 *f, const ampc_tensor *w) {
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 64;
        ampci_fp8_meta *m = realloc(f->meta, (size_t)cap * sizeof *m);
        if (!m) return NULL;
        f->meta = m;
        float *a = realloc(f->amax, (size_t)cap * AMPCI_FP8_ROLES * sizeof *a);
        if (!a) return NULL;
        f->amax = a, f->cap = cap;
    }
    float *h = calloc((size_t)AMPCI_FP8_ROLES * (size_t)f->recipe.amax_history_len, sizeof *h);
    if (!h) return NULL;
    ampci_fp8_meta *m = &f->meta[f->n++];
    *m = (ampci_fp8_meta){.w = w, .scale = {1, 1, 1}, .history = h};
    snprintf(m->name, sizeof m->name, "%s", w->name);
    return m;
}

const ampci_fp8_meta *ampci_fp8_meta_find(const ampc_ctx *ctx, const ampc_tensor *w) {
    int i = meta_index(ctx->fp8, w);
    return i < 0 ? NULL : &ctx->fp8->meta[i];
}

ampci_fp8_meta *ampci_fp8_meta_for(ampc_ctx *ctx, const ampc_tensor *w) {
    struct ampci_fp8 *f = ctx->fp8;
    int i = meta_index(f, w);
    if (i >= 0) return &f->meta[i];
    ampci_fp8_meta *m = f ? meta_new(f, w) : NULL;
    if (!m) ampci_fail(AMPC_STATUS_OOM, "FP8: out of memory for the state of '%s'", w->name);
    return m;
}

ampc_status ampci_fp8_restore(ampc_ctx *ctx, const ampc_fp8_recipe *recipe, const ampc_tensor *w, const float *scale,
                              const float *history, int len) {
    static const char fn[] = "ampc_checkpoint_restore";
    ampc_fp8_recipe r = *recipe;
    ampc_status s = check_recipe(fn, &r);
    struct ampci_fp8 *f = s == AMPC_OK ? fp8_state(ctx) : NULL;
    if (!f) return s == AMPC_OK ? AMPC_STATUS_OOM : s;
    if ((s = adopt(f, &r, fn)) != AMPC_OK) return s;
    if (len != r.amax_history_len)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: FP8 history of '%s' has %d rows; the recipe says %d", fn, w->name,
                          len, r.amax_history_len);
    ampci_fp8_meta *m = ampci_fp8_meta_for(ctx, w);
    if (!m) return ampc_last_status();
    memcpy(m->scale, scale, sizeof m->scale);
    memcpy(m->history, history, (size_t)AMPCI_FP8_ROLES * (size_t)len * sizeof *history);
    return AMPC_OK;
}

/* ---- quantising ---- */

static bool e5m2_role(const struct ampci_fp8 *f, int role) { return role == 2 && f->recipe.format == AMPC_FP8_HYBRID; }

/* One pass of the device's quant8 over t's values (dst NULL: the amax only) and its report, read by the host
 * in one synchronisation (amax and saturation count together). False with the error recorded. */
static bool quant_pass(ampc_ctx *ctx, const ampc_tensor *t, float scale, int fmt, uint16_t *dst,
                       ampci_quant8_result *res, const char *op) {
    ampci_quant8_result *r = ampci_step_alloc(ctx, sizeof *r, op);
    if (!r || AMPCI_DEV(ctx, quant8, .x = ampci_dev_ptr(t), .x_dt = t->dtype, .n = ampci_numel(t), .scale = scale,
                        .fmt = fmt, .dst = dst, .res = r) != AMPC_OK)
        return false;
    ampci_sync_read(ctx, AMPC_SYNC_FP8_AMAX, res, r, sizeof *res);
    return true;
}

ampc_tensor *ampci_fp8_quantize(ampc_ctx *ctx, ampci_fp8_meta *m, int role, const ampc_tensor *t, const char *op) {
    struct ampci_fp8 *f = ctx->fp8;
    int64_t n = ampci_numel(t);
    void *data = ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(uint16_t), op);
    ampc_tensor *out = data ? ampci_tensor_wrap(op, ctx, AMPC_DTYPE_BF16, t->ndim, t->shape, data) : NULL;
    if (!out) return NULL;
    bool e5 = e5m2_role(f, role);
    int fmt = e5 ? AMPCI_QUANT8_E5M2 : AMPCI_QUANT8_E4M3;
    ampci_quant8_result r;
    if (f->recipe.scaling == AMPC_FP8_CURRENT) { /* the tensor's own amax first: the scale depends on it */
        if (!quant_pass(ctx, t, 1.0f, fmt, NULL, &r, op)) return NULL;
        m->scale[role] = (float)ampc_fp8_current_scale(r.amax, e5 ? E5M2_MAX : E4M3_MAX, f->recipe.margin);
    }
    if (!quant_pass(ctx, t, m->scale[role], fmt, (uint16_t *)ampci_dev_ptr(out), &r, op)) return NULL;
    f->saturated += r.sat;
    float *row0 = &m->history[(size_t)role * (size_t)f->recipe.amax_history_len];
    if (role == 2 || ampc_grad_enabled(ctx)) { /* evaluation leaves the history alone */
        if (r.amax > *row0) *row0 = r.amax;
        m->touched = true;
    }
    return out;
}

/* ---- step end, statistics ---- */

ampc_status ampci_fp8_on_amax(ampc_ctx *ctx, ampci_fp8_amax_fn *fn, void *arg) {
    return ampci_listeners_add(&ctx->fp8_amax, "FP8 amax listener", (void (*)(void))fn, arg);
}
bool ampci_fp8_off_amax(ampc_ctx *ctx, ampci_fp8_amax_fn *fn, void *arg) {
    return ampci_listeners_remove(&ctx->fp8_amax, (void (*)(void))fn, arg);
}

/* The amax event: row 0 of every state's roles out to the listeners and back. */
static void fire_amax(ampc_ctx *ctx, struct ampci_fp8 *f, int len) {
    int n = f->n * AMPCI_FP8_ROLES;
    for (int i = 0; i < f->n; i++)
        for (int r = 0; r < AMPCI_FP8_ROLES; r++)
            f->amax[i * AMPCI_FP8_ROLES + r] = f->meta[i].history[(size_t)r * (size_t)len];
    for (int k = 0; k < ctx->fp8_amax.n; k++)
        ((ampci_fp8_amax_fn *)ctx->fp8_amax.at[k].fn)(ctx->fp8_amax.at[k].arg, f->amax, n);
    for (int i = 0; i < f->n; i++)
        for (int r = 0; r < AMPCI_FP8_ROLES; r++)
            f->meta[i].history[(size_t)r * (size_t)len] = f->amax[i * AMPCI_FP8_ROLES + r];
}

void ampci_fp8_step_end(ampc_ctx *ctx) {
    struct ampci_fp8 *f = ctx->fp8;
    if (!f) return;
    f->saturated = 0;
    if (f->recipe.scaling != AMPC_FP8_DELAYED) return;
    int len = f->recipe.amax_history_len;
    bool touched = false;
    for (int i = 0; i < f->n; i++) touched |= f->meta[i].touched;
    if (touched && ctx->fp8_amax.n) fire_amax(ctx, f, len);
    for (int i = 0; i < f->n; i++) {
        ampci_fp8_meta *m = &f->meta[i];
        if (!m->touched) continue;
        m->touched = false;
        for (int r = 0; r < AMPCI_FP8_ROLES; r++)
            ampc_fp8_delayed_update(m->history + (size_t)r * (size_t)len, len, f->recipe.amax_compute,
                                    e5m2_role(f, r) ? E5M2_MAX : E4M3_MAX, f->recipe.margin, &m->scale[r], NULL);
    }
}

ampc_status ampc_fp8_get_stats(const ampc_ctx *ctx, ampc_fp8_stats *out) {
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_fp8_get_stats: ctx and out must not be NULL");
    const struct ampci_fp8 *f = ctx->fp8;
    *out = (ampc_fp8_stats){0};
    for (int i = 0; f && i < f->n; i++)
        for (int r = 0; r < AMPCI_FP8_ROLES; r++) {
            double s = f->meta[i].scale[r];
            out->min_scale = out->tensors == 0 || s < out->min_scale ? s : out->min_scale;
            out->max_scale = out->tensors == 0 || s > out->max_scale ? s : out->max_scale;
            out->tensors++;
        }
    out->saturated = f ? f->saturated : 0;
    return AMPC_OK;
}
