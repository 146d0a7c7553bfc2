/* grad_scaler.c: dynamic loss scaling, PyTorch's torch.amp.GradScaler to the bit, on top of an optimizer:
 * the scale is an FP32 value; unscale multiplies every gradient by the FP32 rounding of the reciprocal
 * computed in double and records non-finite values per tensor; step skips an optimizer whose gradients
 * were non-finite at unscale time; update applies `_amp_update_scale_` (backoff and tracker reset on
 * overflow; growth when the clean-step tracker reaches the interval and the grown value is finite). Opt-in
 * extras: min/max scale (Megatron/DeepSpeed/Apex clamps) and hysteresis (Megatron-LM: back off only at
 * the n-th overflow since the last growth). With hysteresis 0/1 and no min/max the rule is PyTorch's.
 * Unscaling is one device operation per gradient that writes the gradient's non-finite flag into a device
 * array of one int32 per parameter; the host reads that array once per unscale call, the one host
 * synchronisation point of the scaler (AMPC_SYNC_FOUND_INF), to decide step or skip and to name the first
 * bad tensor. Because the flags live in device memory, a device could instead consume them itself, as
 * PyTorch's _amp_foreach_non_finite_check_and_unscale_ feeds a found_inf tensor to the optimizer's skip
 * and to _amp_update_scale_: the scale rule below (scale_rule) is a pure function of a small plain struct
 * for that reason, so a device kernel could run it unchanged. */
#include "optim.h"

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

/* What the scale rule reads and writes: plain values only (no pointers), so a device could hold it. */
typedef struct scale_state {
    float scale;
    int64_t growth_tracker, hysteresis_tracker;
    ampc_grad_scaler_params cfg; /* checked, defaults applied */
} scale_state;

struct ampc_grad_scaler {
    ampc_ctx *ctx;
    scale_state sc;
    int64_t steps, skipped;
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

ampc_grad_scaler_params ampc_grad_scaler_defaults(void) {
    return (ampc_grad_scaler_params){.init = AMPC_PARAMS_INIT,
                                     .init_scale = 65536,
                                     .growth_factor = 2,
                                     .backoff_factor = 0.5,
                                     .growth_interval = 2000,
                                     .enabled = true};
}

ampc_status ampc_grad_scaler_new(ampc_ctx *ctx, const ampc_grad_scaler_params *params, ampc_grad_scaler **out) {
    static const char fn[] = "ampc_grad_scaler_new";
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
    *out = NULL;
    ampc_grad_scaler_params p = params ? *params : ampc_grad_scaler_defaults();
    if (ampci_check_params_init(fn, p.init, "ampc_grad_scaler_defaults") != AMPC_OK) return ampc_last_status();
    ampc_status s = check_config(fn, &p);
    if (s != AMPC_OK) return s;
    ampc_grad_scaler *gs = calloc(1, sizeof *gs);
    if (!gs) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    gs->ctx = ctx, gs->sc.cfg = p;
    gs->sc.scale = clamp_scale(&p, p.init_scale);
    gs->sc.hysteresis_tracker = p.hysteresis;
    *out = gs;
    return AMPC_OK;
}

void ampc_grad_scaler_free(ampc_grad_scaler *gs) {
    if (!gs) return;
    free(gs->states);
    free(gs);
}

bool ampc_grad_scaler_enabled(const ampc_grad_scaler *gs) { return gs && gs->sc.cfg.enabled; }
double ampc_grad_scaler_get_scale(const ampc_grad_scaler *gs) { return gs && gs->sc.cfg.enabled ? gs->sc.scale : 1.0; }

ampc_tensor *ampc_grad_scaler_scale(ampc_grad_scaler *gs, const ampc_tensor *loss) {
    static const char fn[] = "ampc_grad_scaler_scale";
    if (!gs) return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!loss) return ampci_null_input(fn, "loss");
    if (!gs->sc.cfg.enabled) return (ampc_tensor *)loss;
    /* PyTorch multiplies by a 0-dim FP32 tensor: a 0-dim low-precision loss promotes to FP32, a loss with
     * dims keeps its dtype */
    const ampc_tensor *l = loss;
    if (loss->ndim == 0 && loss->dtype != AMPC_DTYPE_F32 && !(l = ampc_tensor_cast(loss, AMPC_DTYPE_F32))) return NULL;
    return ampc_mul_scalar(gs->ctx, l, (double)gs->sc.scale);
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

/* Multiplies every gradient's owned part by fl(1 / scale) on the device, its non-finite flag into
 * flags[i] (one int32 per parameter; 0 for parameters without a gradient). */
static ampc_status unscale_on_device(ampc_grad_scaler *gs, ampc_optim *opt, int32_t *flags) {
    float inv = (float)(1.0 / (double)gs->sc.scale); /* the reciprocal in double, as PyTorch */
    ampci_grad_list list;
    ampc_status s = ampci_optim_grad_list(opt, &list, true);
    if (s != AMPC_OK) return s;
    s = AMPCI_DEV(gs->ctx, grad_unscale, .list = list, .factor = inv, .flag = flags);
    ampci_optim_grad_list_free(&list);
    return s;
}

/* Unscales opt's gradients (this process's part of them) into st; the caller has checked the stage. The
 * flags come back to the host in one read: found-inf, the first bad tensor and the bad count. */
static ampc_status unscale_checked(ampc_grad_scaler *gs, ampc_optim *opt, opt_state *st);

/* Unscales opt's gradients into st's found-inf record (the optimizer phase of the profile). */
static ampc_status unscale_into(ampc_grad_scaler *gs, ampc_optim *opt, opt_state *st) {
    int was = ampci_phase_enter(opt->ctx, AMPCI_PHASE_OPTIMIZER);
    ampc_status s = unscale_checked(gs, opt, st);
    ampci_phase_leave(opt->ctx, was);
    return s;
}

static ampc_status unscale_checked(ampc_grad_scaler *gs, ampc_optim *opt, opt_state *st) {
    ampc_status s = ampci_optim_sync_grads(opt);
    if (s != AMPC_OK) return s;
    size_t bytes = (size_t)(opt->n ? opt->n : 1) * sizeof(int32_t);
    int32_t *dev = ampci_step_alloc(gs->ctx, bytes, "GradScaler found-inf flags"), *host = malloc(bytes);
    s = dev && host ? unscale_on_device(gs, opt, dev)
        : dev       ? ampci_fail(AMPC_STATUS_OOM, "ampc_grad_scaler: out of memory for the found-inf flags")
                    : ampc_last_status();
    int first = opt->n;
    if (s == AMPC_OK) {
        ampci_sync_read(gs->ctx, AMPC_SYNC_FOUND_INF, host, dev, (size_t)opt->n * sizeof *host);
        for (int i = 0; i < opt->n; i++) {
            if (!host[i]) continue;
            if (!st->found_inf) snprintf(st->first_bad, sizeof st->first_bad, "%s", opt->params[i].p->name), first = i;
            st->found_inf = true;
            st->bad_tensors++;
        }
    }
    free(host);
    if (dev) ampci_step_free(gs->ctx, dev);
    if (s != AMPC_OK) return s;
    st->st = UNSCALED;
    return agree(opt, st, first);
}

ampc_status ampc_grad_scaler_unscale(ampc_grad_scaler *gs, ampc_optim *opt) {
    static const char fn[] = "ampc_grad_scaler_unscale";
    if (!gs || !opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler and optimizer must not be NULL", fn);
    if (!gs->sc.cfg.enabled) return AMPC_OK;
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
    if (!gs->sc.cfg.enabled) {
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

/* _amp_update_scale_ plus the opt-in hysteresis and clamps: the state after a step that found_inf or not.
 * Factors are doubles, products rounded to FP32. Pure (no pointers, no context): a device kernel could
 * apply it to a state kept in device memory with a found-inf flag it computed itself. */
static scale_state scale_rule(scale_state s, bool found_inf) {
    const ampc_grad_scaler_params *p = &s.cfg;
    if (found_inf) {
        s.growth_tracker = 0;
        if (p->hysteresis > 1 && --s.hysteresis_tracker > 0) return s; /* delay the cut (Megatron) */
        double v = (double)s.scale * p->backoff_factor;
        if (p->min_scale && v < p->min_scale) v = p->min_scale;
        s.scale = (float)v;
        return s;
    }
    int64_t successful = s.growth_tracker + 1;
    if (successful >= p->growth_interval) { /* PyTorch tests ==; >= only differs for a tracker past the interval */
        float grown = (float)((double)s.scale * p->growth_factor);
        if (p->max_scale && grown > p->max_scale) grown = (float)p->max_scale;
        if (isfinite(grown)) s.scale = grown; /* never grows to inf */
        s.growth_tracker = 0;
        s.hysteresis_tracker = p->hysteresis;
    } else {
        s.growth_tracker = successful;
    }
    return s;
}

static void finish_iteration(ampc_grad_scaler *gs) {
    gs->nstates = 0; /* every optimizer back to READY */
    gs->steps++;
}

ampc_status ampc_grad_scaler_update(ampc_grad_scaler *gs) {
    static const char fn[] = "ampc_grad_scaler_update";
    if (!gs) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!gs->sc.cfg.enabled) return AMPC_OK;
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
    gs->sc = scale_rule(gs->sc, found);
    finish_iteration(gs);
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_update_to(ampc_grad_scaler *gs, double new_scale) {
    static const char fn[] = "ampc_grad_scaler_update_to";
    if (!gs) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scaler is NULL", fn);
    if (!gs->sc.cfg.enabled) return AMPC_OK;
    if (!(new_scale > 0 && isfinite((float)new_scale)))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: scale %g; expected a finite FP32 value > 0", fn, new_scale);
    gs->sc.scale = (float)new_scale; /* the growth tracker is not touched, as in PyTorch */
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
    *out = (ampc_grad_scaler_state){gs->sc.scale, gs->sc.growth_tracker, gs->sc.hysteresis_tracker,
                                    gs->steps,    gs->skipped,           gs->sc.cfg};
    return AMPC_OK;
}

ampc_status ampc_grad_scaler_state_load(ampc_grad_scaler *gs, const ampc_grad_scaler_state *state) {
    static const char fn[] = "ampc_grad_scaler_state_load";
    if (!gs || !state) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: NULL argument", fn);
    if (!gs->sc.cfg.enabled) return AMPC_OK; /* as PyTorch: a disabled scaler ignores state */
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
    gs->sc.cfg = cfg;
    gs->sc.scale = (float)state->scale;
    gs->sc.growth_tracker = state->growth_tracker;
    gs->sc.hysteresis_tracker = state->hysteresis_tracker;
    gs->steps = state->steps;
    gs->skipped = state->skipped_steps;
    gs->nstates = 0;
    return AMPC_OK;
}
