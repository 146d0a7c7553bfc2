/* grad_scaler.c: dynamic loss scaling, PyTorch's torch.amp.GradScaler to the bit, on top of an optimizer:
 * the scale is an FP32 value; unscale multiplies every gradient by the FP32 rounding of the reciprocal
 * computed in double and records non-finite values per tensor; step skips an optimizer whose gradients
 * were non-finite at unscale time; update applies `_amp_update_scale_` (backoff and tracker reset on
 * overflow; growth when the clean-step tracker reaches the interval and the grown value is finite). Opt-in
 * extras: min/max scale (Megatron/DeepSpeed/Apex clamps) and hysteresis (Megatron-LM: back off only at
 * the n-th overflow since the last growth). With hysteresis 0/1 and no min/max the rule is PyTorch's. */
#include "optim.h"

#include "../kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum stage { READY = 0, UNSCALED, STEPPED } stage;

typedef struct opt_state {
    const ampc_optim *opt;
    stage st;
    bool found_inf;
    int64_t bad_tensors;
    char first_bad[64];
} opt_state;

struct ampc_grad_scaler {
    ampc_ctx *ctx;
    ampc_grad_scaler_params cfg;
    float scale;
    int64_t growth_tracker, hysteresis_tracker, steps, skipped;
    opt_state *states;
    int nstates, cap;
    ampc_grad_scaler_overflow last;
};

static ampc_status check_config(const char *fn, ampc_grad_scaler_params *p) {
    if (p->init_scale == 0) p->init_scale = 65536.0;
    if (p->growth_factor == 0) p->growth_factor = 2.0;
    if (p->backoff_factor == 0) p->backoff_factor = 0.5;
    if (p->growth_interval == 0) p->growth_interval = 2000;
    if (p->hysteresis == 0) p->hysteresis = 1;
    const char *bad = !(p->init_scale > 0 && isfinite(p->init_scale))     ? "init_scale must be finite and > 0"
                      : !(p->growth_factor > 1)                           ? "growth_factor must be > 1"
                      : !(p->backoff_factor > 0 && p->backoff_factor < 1) ? "backoff_factor must be in (0, 1)"
                      : p->growth_interval < 1                            ? "growth_interval must be >= 1"
                      : !(p->min_scale >= 0) || !(p->max_scale >= 0)      ? "min_scale and max_scale must be >= 0"
                      : p->max_scale && p->min_scale > p->max_scale       ? "min_scale must not exceed max_scale"
                      : p->hysteresis < 1                                 ? "hysteresis must be >= 0"
                                                                          : NULL;
    if (!bad) return AMPC_OK;
    return ampci_fail(AMPC_STATUS_INVALID_ARG,
                      "%s: %s (init %g, growth %g, backoff %g, interval %lld, min %g, max %g, "
                      "hysteresis %d)",
                      fn, bad, p->init_scale, p->growth_factor, p->backoff_factor, (long long)p->growth_interval,
                      p->min_scale, p->max_scale, p->hysteresis);
}

/* The initial scale respects the optional clamps, as Apex's min(max_loss_scale, init_scale). */
static float clamp_scale(const ampc_grad_scaler_params *p, double s) {
    if (p->max_scale && s > p->max_scale) s = p->max_scale;
    if (p->min_scale && s < p->min_scale) s = p->min_scale;
    return (float)s;
}

ampc_status ampc_grad_scaler_new(ampc_ctx *ctx, const ampc_grad_scaler_params *params, ampc_grad_scaler **out) {
    static const char fn[] = "ampc_grad_scaler_new";
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
    *out = NULL;
    ampc_grad_scaler_params p = params ? *params : (ampc_grad_scaler_params){.enabled = true};
    ampc_status s = check_config(fn, &p);
    if (s != AMPC_OK) return s;
    ampc_grad_scaler *gs = calloc(1, sizeof *gs);
    if (!gs) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    gs->ctx = ctx, gs->cfg = p;
    gs->scale = clamp_scale(&p, p.init_scale);
    gs->hysteresis_tracker = p.hysteresis;
    *out = gs;
    return AMPC_OK;
}

void ampc_grad_scaler_free(ampc_grad_scaler *gs) {
    if (!gs) return;
    free(gs->states);
    free(gs);
}

bool ampc_grad_scaler_enabled(const ampc_grad_scaler *gs) { return gs && gs->cfg.enabled; }
double ampc_grad_scaler_get_scale(const ampc_grad_scaler *gs) { return gs && gs->cfg.enabled ? gs->scale : 1.0; }

ampc_tensor *ampc_grad_scaler_scale(ampc_grad_scaler *gs, const ampc_tensor *loss) {
    static const char fn[] = "ampc_grad_scaler_scale";
    if (!gs) return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!loss) return ampci_null_input(fn, "loss");
    if (!gs->cfg.enabled) return (ampc_tensor *)loss;
    /* PyTorch multiplies by a 0-dim FP32 tensor: a 0-dim low-precision loss promotes to FP32, a loss with
     * dims keeps its dtype */
    const ampc_tensor *l = loss;
    if (loss->ndim == 0 && loss->dtype != AMPC_DTYPE_F32 && !(l = ampc_tensor_cast(loss, AMPC_DTYPE_F32))) return NULL;
    return ampc_mul_scalar(gs->ctx, l, (double)gs->scale);
}

static opt_state *state_of(ampc_grad_scaler *gs, const ampc_optim *opt, bool create) {
    for (int i = 0; i < gs->nstates; i++)
        if (gs->states[i].opt == opt) return &gs->states[i];
    if (!create) return NULL;
    if (gs->nstates == gs->cap) {
        int cap = gs->cap ? gs->cap * 2 : 4;
        opt_state *n = realloc(gs->states, (size_t)cap * sizeof *n);
        if (!n) return ampci_fail_null(AMPC_STATUS_OOM, "ampc_grad_scaler: out of memory for optimizer state");
        gs->states = n, gs->cap = cap;
    }
    gs->states[gs->nstates] = (opt_state){.opt = opt, .st = READY};
    return &gs->states[gs->nstates++];
}

/* Data parallel: found_inf must be the same decision on every process (a sharded optimizer sees only its
 * own part of each gradient), so the first bad parameter is the smallest index any process found and
 * the bad-tensor count is the sum (the MAX agreement of ShardedGradScaler and DeepSpeed, in one call). */
static ampc_status agree(ampc_optim *opt, opt_state *st, int first) {
    if (!opt->dist.reduce) return AMPC_OK;
    double v[2] = {first, (double)st->bad_tensors};
    ampc_status s = ampci_optim_reduce(opt, &v[0], 1, AMPCI_REDUCE_MIN);
    if (s == AMPC_OK) s = ampci_optim_reduce(opt, &v[1], 1, AMPCI_REDUCE_SUM);
    if (s != AMPC_OK) return s;
    st->found_inf = v[0] < opt->n;
    st->bad_tensors = (int64_t)v[1];
    if (st->found_inf) snprintf(st->first_bad, sizeof st->first_bad, "%s", opt->params[(int)v[0]].p->name);
    return AMPC_OK;
}

/* Unscales opt's gradients (this process's part of them) into st; the caller has checked the stage. */
static ampc_status unscale_into(ampc_grad_scaler *gs, ampc_optim *opt, opt_state *st) {
    ampc_status s = ampci_optim_sync_grads(opt);
    if (s != AMPC_OK) return s;
    float inv = (float)(1.0 / (double)gs->scale); /* the reciprocal in double, as PyTorch */
    const struct ampc_kernels *k = gs->ctx->kernels;
    int first = opt->n;
    for (int i = 0; i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        ampc_tensor *p = pp->p, *g = p->grad;
        if (!g) continue;
        size_t es = ampc_dtype_size(g->dtype);
        bool bad = k->unscale[g->dtype]((unsigned char *)ampc_tensor_data(g) + (size_t)pp->lo * es, pp->hi - pp->lo,
                                        inv);
        g->storage->version++;
        if (!bad) continue;
        if (!st->found_inf) snprintf(st->first_bad, sizeof st->first_bad, "%s", p->name), first = i;
        st->found_inf = true;
        st->bad_tensors++;
    }
    st->st = UNSCALED;
    return agree(opt, st, first);
}

ampc_status ampc_grad_scaler_unscale(ampc_grad_scaler *gs, ampc_optim *opt) {
    static const char fn[] = "ampc_grad_scaler_unscale";
    if (!gs || !opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler and optimizer must not be NULL", fn);
    if (!gs->cfg.enabled) return AMPC_OK;
    opt_state *st = state_of(gs, opt, true);
    if (!st) return AMPC_STATUS_OOM;
    if (st->st == UNSCALED)
        return ampci_fail(AMPC_STATUS_STATE, "%s: already called for this optimizer since the last update()", fn);
    if (st->st == STEPPED)
        return ampci_fail(AMPC_STATUS_STATE, "%s: called after step() for this optimizer; call update() first", fn);
    return unscale_into(gs, opt, st);
}

ampc_status ampc_grad_scaler_step(ampc_grad_scaler *gs, ampc_optim *opt, bool *stepped) {
    static const char fn[] = "ampc_grad_scaler_step";
    if (stepped) *stepped = false;
    if (!gs || !opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler and optimizer must not be NULL", fn);
    if (!gs->cfg.enabled) {
        ampc_status s = ampc_optim_step(opt);
        if (stepped) *stepped = s == AMPC_OK;
        return s;
    }
    opt_state *st = state_of(gs, opt, true);
    if (!st) return AMPC_STATUS_OOM;
    if (st->st == STEPPED)
        return ampci_fail(AMPC_STATUS_STATE, "%s: already called for this optimizer since the last update()", fn);
    ampc_status us = st->st == READY ? unscale_into(gs, opt, st) : AMPC_OK;
    if (us != AMPC_OK) return us;
    st->st = STEPPED;
    if (st->found_inf) { /* decided at unscale time: gradients changed afterwards are not re-checked */
        gs->skipped++;
        return AMPC_OK;
    }
    ampc_status s = ampc_optim_step(opt);
    if (stepped) *stepped = s == AMPC_OK;
    return s;
}

/* _amp_update_scale_ plus the opt-in hysteresis and clamps. Factors are doubles, products rounded to FP32. */
static void apply_rule(ampc_grad_scaler *gs, bool found_inf) {
    const ampc_grad_scaler_params *p = &gs->cfg;
    if (found_inf) {
        gs->growth_tracker = 0;
        if (p->hysteresis > 1 && --gs->hysteresis_tracker > 0) return; /* delay the cut (Megatron) */
        double s = (double)gs->scale * p->backoff_factor;
        if (p->min_scale && s < p->min_scale) s = p->min_scale;
        gs->scale = (float)s;
        return;
    }
    int64_t successful = gs->growth_tracker + 1;
    if (successful >= p->growth_interval) { /* PyTorch tests ==; >= only differs for a tracker past the interval */
        float grown = (float)((double)gs->scale * p->growth_factor);
        if (p->max_scale && grown > p->max_scale) grown = (float)p->max_scale;
        if (isfinite(grown)) gs->scale = grown; /* never grows to inf */
        gs->growth_tracker = 0;
        gs->hysteresis_tracker = p->hysteresis;
    } else {
        gs->growth_tracker = successful;
    }
}

static void finish_iteration(ampc_grad_scaler *gs) {
    gs->nstates = 0; /* every optimizer back to READY */
    gs->steps++;
}

ampc_status ampc_grad_scaler_update(ampc_grad_scaler *gs) {
    static const char fn[] = "ampc_grad_scaler_update";
    if (!gs) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!gs->cfg.enabled) return AMPC_OK;
    bool any = false, found = false;
    ampc_grad_scaler_overflow ov = {.at_step = gs->steps};
    for (int i = 0; i < gs->nstates; i++) {
        const opt_state *st = &gs->states[i];
        if (st->st == READY) continue;
        any = true;
        if (st->found_inf && !found) snprintf(ov.first_tensor, sizeof ov.first_tensor, "%s", st->first_bad);
        found |= st->found_inf;
        ov.tensors += st->bad_tensors;
    }
    if (!any)
        return ampci_fail(AMPC_STATUS_STATE,
                          "%s: no inf checks were recorded since the last update; call unscale() or "
                          "step() for each optimizer first",
                          fn);
    ov.found_inf = found;
    if (found) gs->last = ov;
    apply_rule(gs, found);
    finish_iteration(gs);
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_update_to(ampc_grad_scaler *gs, double new_scale) {
    static const char fn[] = "ampc_grad_scaler_update_to";
    if (!gs) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!gs->cfg.enabled) return AMPC_OK;
    if (!(new_scale > 0 && isfinite((float)new_scale)))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scale %g; expected a finite FP32 value > 0", fn, new_scale);
    gs->scale = (float)new_scale; /* the growth tracker is not touched, as in PyTorch */
    finish_iteration(gs);
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_get_overflow(const ampc_grad_scaler *gs, ampc_grad_scaler_overflow *out) {
    if (!gs || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_grad_scaler_get_overflow: NULL argument");
    *out = gs->last;
    for (int i = 0; i < gs->nstates; i++) /* a pending (not yet updated) overflow is the newest */
        if (gs->states[i].found_inf) {
            *out = (ampc_grad_scaler_overflow){true, 0, "", gs->steps};
            for (int j = 0; j < gs->nstates; j++) out->tensors += gs->states[j].bad_tensors;
            snprintf(out->first_tensor, sizeof out->first_tensor, "%s", gs->states[i].first_bad);
            break;
        }
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_state_save(const ampc_grad_scaler *gs, ampc_grad_scaler_state *out) {
    if (!gs || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_grad_scaler_state_save: NULL argument");
    *out = (ampc_grad_scaler_state){gs->scale, gs->growth_tracker, gs->hysteresis_tracker,
                                    gs->steps, gs->skipped,        gs->cfg};
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_state_load(ampc_grad_scaler *gs, const ampc_grad_scaler_state *state) {
    static const char fn[] = "ampc_grad_scaler_state_load";
    if (!gs || !state) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: NULL argument", fn);
    if (!gs->cfg.enabled) return AMPC_OK; /* as PyTorch: a disabled scaler ignores state */
    if (!state->config.enabled)
        return ampci_fail(AMPC_STATUS_STATE, "%s: the state was saved from a disabled scaler", fn);
    ampc_grad_scaler_params cfg = state->config;
    ampc_status s = check_config(fn, &cfg);
    if (s != AMPC_OK) return s;
    if (!(state->scale > 0 && isfinite((float)state->scale)) || state->growth_tracker < 0 || state->steps < 0 ||
        state->skipped_steps < 0 || state->hysteresis_tracker < 0)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: state out of range (scale %g, growth tracker %lld, steps %lld, skipped "
                          "%lld)",
                          fn, state->scale, (long long)state->growth_tracker, (long long)state->steps,
                          (long long)state->skipped_steps);
    gs->cfg = cfg;
    gs->scale = (float)state->scale;
    gs->growth_tracker = state->growth_tracker;
    gs->hysteresis_tracker = state->hysteresis_tracker;
    gs->steps = state->steps;
    gs->skipped = state->skipped_steps;
    gs->nstates = 0;
    return AMPC_OK;
}
