/* optim.c: optimizers over named parameter groups. Adding a group gives every parameter of it gradient
 * storage in one contiguous block per dtype (the parameter's grad slot: backward writes there, zero_grad
 * only marks it absent), an F32 master copy where the master mode asks for one, and zeroed F32 state;
 * each of master, first and second moment is one contiguous block per group, so zeroing, clipping,
 * reduction and checkpoints are flat passes. The blocks live in the context's device memory: this file
 * computes addresses in them and fills them through the device (conversions, copies, fills), and the host
 * sees their values only through the tensors over them (master_t, m_t, v_t). */
#include "optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ampc_status ampc_optim_new(ampc_ctx *ctx, const ampc_optim_params *params, ampc_optim **out) {
    static const char fn[] = "ampc_optim_new";
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
    *out = NULL;
    ampc_optim_params p = params ? *params : (ampc_optim_params){0};
    if (p.lr == 0) p.lr = 1e-3;
    if (p.beta1 == 0) p.beta1 = 0.9;
    if (p.beta2 == 0) p.beta2 = 0.999;
    if (p.eps == 0) p.eps = 1e-8;
    const char *bad = (unsigned)p.kind > AMPC_OPTIM_ADAMW         ? "kind is not an ampc_optim_kind"
                      : !(p.lr > 0)                               ? "lr must be > 0"
                      : !(p.weight_decay >= 0)                    ? "weight_decay must be >= 0"
                      : !(p.momentum >= 0) || !(p.dampening >= 0) ? "momentum and dampening must be >= 0"
                      : p.nesterov && (p.momentum <= 0 || p.dampening != 0)
                          ? "nesterov needs momentum > 0 and dampening 0"
                      : !(p.beta1 >= 0 && p.beta1 < 1) || !(p.beta2 >= 0 && p.beta2 < 1) ? "betas must be in [0, 1)"
                      : !(p.eps > 0)                                                     ? "eps must be > 0"
                      : (unsigned)p.master > AMPC_MASTER_NONE ? "master is not an ampc_master_mode"
                      : p.stochastic_rounding && p.master != AMPC_MASTER_NONE
                          ? "stochastic_rounding needs master = AMPC_MASTER_NONE (F32 masters lose no update)"
                          : NULL;
    if (bad)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: %s (lr %g, weight_decay %g, momentum %g, dampening %g, betas %g %g, "
                          "eps %g)",
                          fn, bad, p.lr, p.weight_decay, p.momentum, p.dampening, p.beta1, p.beta2, p.eps);
    ampc_optim *o = calloc(1, sizeof *o);
    if (!o) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    o->ctx = ctx, o->cfg = p, o->lr = p.lr;
    *out = o;
    return AMPC_OK;
}

/* The tensors over a parameter's master and moments. */
static void free_views(ampci_param *pp) {
    ampc_tensor_free(pp->master_t), ampc_tensor_free(pp->m_t), ampc_tensor_free(pp->v_t);
    pp->master_t = pp->m_t = pp->v_t = NULL;
}

/* (Re)makes them for pp's range: shaped as the parameter when it owns all of it, else [hi - lo]. A
 * forced master (src/dist) has none: it is not state of the checkpoint's. */
static ampc_status make_views(ampc_optim *opt, ampci_param *pp) {
    const ampci_group *gr = &opt->groups[pp->group];
    bool whole = pp->lo == 0 && pp->hi == pp->n;
    int nd = whole ? pp->p->ndim : 1;
    const int64_t *shape = whole ? pp->p->shape : (int64_t[]){pp->hi - pp->lo};
    const ampc_tensor *blocks[3] = {pp->master_forced ? NULL : gr->master_block, gr->m_block, gr->v_block};
    const float *at[3] = {pp->master, pp->m, pp->v};
    ampc_tensor **views[3] = {&pp->master_t, &pp->m_t, &pp->v_t};
    free_views(pp);
    for (int k = 0; k < 3; k++) {
        if (!blocks[k] || !at[k]) continue;
        int64_t off = at[k] - (const float *)ampci_dev_ptr(blocks[k]); /* address arithmetic only */
        if (!(*views[k] = ampci_tensor_owned_view(blocks[k], off, nd, shape))) return ampc_last_status();
    }
    return AMPC_OK;
}

void ampc_optim_free(ampc_optim *opt) {
    if (!opt) return;
    if (opt->dist.detach) opt->dist.detach(opt->dist.arg);
    for (int i = 0; i < opt->n; i++) free_views(&opt->params[i]);
    for (int g = 0; g < opt->ngroups; g++) {
        ampci_group *gr = &opt->groups[g];
        for (int d = 0; d < AMPC_DTYPE_COUNT; d++) ampc_tensor_free(gr->grad_block[d]);
        ampc_tensor_free(gr->master_block);
        ampc_tensor_free(gr->m_block);
        ampc_tensor_free(gr->v_block);
    }
    free(opt->params);
    free(opt->groups);
    free(opt);
}

static bool check_param(ampc_optim *opt, const char *fn, const ampc_tensor *t, int i) {
    char b[128];
    const char *why = !t                              ? "is NULL"
                      : t->ctx != opt->ctx            ? "belongs to another context"
                      : t->node                       ? "is not a leaf (it was made by an op)"
                      : !t->requires_grad             ? "does not require grad"
                      : !t->owned                     ? "is an arena tensor (parameters must be owned: ampc_tensor_new)"
                      : !ampc_tensor_is_contiguous(t) ? "is not contiguous"
                      : t->dtype != AMPC_DTYPE_F32 && t->dtype != AMPC_DTYPE_F16 && t->dtype != AMPC_DTYPE_BF16
                          ? "is not F32, F16 or BF16"
                      : t->grad_slot ? "already belongs to an optimizer"
                      : opt->cfg.stochastic_rounding && t->dtype == AMPC_DTYPE_F16
                          ? "is F16: stochastic rounding rounds to BF16 (use BF16 parameters)"
                          : NULL;
    if (!why) return true;
    char name[80] = "";
    if (t && t->name[0]) snprintf(name, sizeof name, " '%s'", t->name);
    ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: parameter %d%s %s %s", fn, i, name,
               t ? ampc_tensor_describe(t, b, sizeof b) : "", why);
    return false;
}

static bool needs_master(const ampc_optim *opt, const ampc_tensor *t) {
    return opt->cfg.master == AMPC_MASTER_AUTO && t->dtype != AMPC_DTYPE_F32;
}

/* One owned F32 (or dtype) block of n elements, or NULL (with a block of 0 elements for n == 0). */
static ampc_tensor *block(ampc_ctx *ctx, ampc_dtype dt, int64_t n) {
    return ampc_tensor_new(ctx, dt, 1, (int64_t[]){n});
}

static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, (size_t)c * elem);
    if (!p) return false;
    *arr = p, *cap = c;
    return true;
}

/* Carves the group's blocks into per-parameter slots, masters and state. */
static ampc_status lay_out(ampc_optim *opt, ampci_group *gr, int first, int count) {
    int64_t per_dtype[AMPC_DTYPE_COUNT] = {0}, masters = 0, total = 0;
    for (int i = first; i < first + count; i++) {
        ampc_tensor *t = opt->params[i].p;
        per_dtype[t->dtype] += opt->params[i].n;
        masters += needs_master(opt, t) ? opt->params[i].n : 0;
        total += opt->params[i].n;
    }
    for (int d = 0; d < AMPC_DTYPE_COUNT; d++)
        if (per_dtype[d] && !(gr->grad_block[d] = block(opt->ctx, (ampc_dtype)d, per_dtype[d])))
            return ampc_last_status();
    if (masters && !(gr->master_block = block(opt->ctx, AMPC_DTYPE_F32, masters))) return ampc_last_status();
    bool adam = opt->cfg.kind == AMPC_OPTIM_ADAMW, sgd_state = opt->cfg.momentum > 0;
    if ((adam || sgd_state) && !(gr->m_block = block(opt->ctx, AMPC_DTYPE_F32, total))) return ampc_last_status();
    if (adam && !(gr->v_block = block(opt->ctx, AMPC_DTYPE_F32, total))) return ampc_last_status();
    int64_t at_dtype[AMPC_DTYPE_COUNT] = {0}, at_master = 0, at = 0;
    for (int i = first; i < first + count; i++) {
        ampci_param *pp = &opt->params[i];
        ampc_tensor *t = pp->p;
        ampc_tensor *slot = ampci_tensor_owned_view(gr->grad_block[t->dtype], at_dtype[t->dtype], t->ndim, t->shape);
        if (!slot) return ampc_last_status();
        t->grad_slot = slot;
        at_dtype[t->dtype] += pp->n;
        if (needs_master(opt, t)) {
            pp->master = (float *)ampci_dev_ptr(gr->master_block) + at_master;
            ampc_status s = ampci_tensor_gather(t, pp->master, AMPC_DTYPE_F32);
            if (s != AMPC_OK) return s;
            at_master += pp->n;
        }
        if (gr->m_block) pp->m = (float *)ampci_dev_ptr(gr->m_block) + at;
        if (gr->v_block) pp->v = (float *)ampci_dev_ptr(gr->v_block) + at;
        at += pp->n;
        pp->lo = 0, pp->hi = pp->n;
        ampc_status s = make_views(opt, pp);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

ampc_status ampc_optim_add_group(ampc_optim *opt, const char *name, ampc_tensor *const *params, int n,
                                 const ampc_param_group_params *group) {
    static const char fn[] = "ampc_optim_add_group";
    if (!opt || (!params && n > 0) || n < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: optimizer and params must not be NULL (n = %d)", fn, n);
    ampc_param_group_params gp = group ? *group : (ampc_param_group_params){0};
    if (gp.lr_scale == 0) gp.lr_scale = 1;
    if (!(gp.lr_scale > 0))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: lr_scale %g; expected > 0", fn, gp.lr_scale);
    for (int i = 0; i < n; i++) {
        if (!check_param(opt, fn, params[i], i)) return ampc_last_status();
        for (int j = 0; j < i; j++)
            if (params[j] == params[i])
                return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: parameter %d is listed twice (also at %d)", fn, i, j);
    }
    if (!grow((void **)&opt->params, &opt->cap, opt->n + n, sizeof *opt->params) ||
        !grow((void **)&opt->groups, &opt->gcap, opt->ngroups + 1, sizeof *opt->groups))
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    ampci_group *gr = &opt->groups[opt->ngroups];
    *gr = (ampci_group){.lr_scale = gp.lr_scale, .no_weight_decay = gp.no_weight_decay};
    snprintf(gr->name, sizeof gr->name, "%s", name ? name : "");
    for (int i = 0; i < n; i++)
        opt->params[opt->n + i] = (ampci_param){
            .p = params[i], .group = opt->ngroups, .n = ampc_tensor_numel(params[i])};
    ampc_status s = lay_out(opt, gr, opt->n, n);
    if (s != AMPC_OK) { /* undo: nothing of this group stays attached */
        for (int i = opt->n; i < opt->n + n; i++) {
            ampc_tensor_free(opt->params[i].p->grad_slot);
            opt->params[i].p->grad_slot = NULL;
            free_views(&opt->params[i]);
        }
        for (int d = 0; d < AMPC_DTYPE_COUNT; d++) ampc_tensor_free(gr->grad_block[d]);
        ampc_tensor_free(gr->master_block), ampc_tensor_free(gr->m_block), ampc_tensor_free(gr->v_block);
        return s;
    }
    opt->n += n;
    opt->ngroups++;
    return AMPC_OK;
}

static ampc_status optim_step(ampc_optim *opt) {
    ampc_status s = ampci_optim_sync_grads(opt);
    for (int i = 0; i < opt->n && s == AMPC_OK; i++)
        if (opt->params[i].p->grad) s = ampci_optim_update(opt, &opt->params[i]);
    if (s != AMPC_OK) return s;
    opt->steps++;
    return opt->dist.after_step ? opt->dist.after_step(opt->dist.arg) : AMPC_OK;
}

ampc_status ampc_optim_step(ampc_optim *opt) {
    if (!opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_optim_step: optimizer is NULL");
    int was = ampci_phase_enter(opt->ctx, AMPCI_PHASE_OPTIMIZER);
    ampc_status s = optim_step(opt);
    ampci_phase_leave(opt->ctx, was);
    return s;
}

/* ---- data parallelism ---- */

void ampci_optim_set_dist(ampc_optim *opt, const ampci_optim_dist *d) { opt->dist = d ? *d : (ampci_optim_dist){0}; }

ampc_status ampci_optim_sync_grads(ampc_optim *opt) {
    return opt->dist.sync_grads ? opt->dist.sync_grads(opt->dist.arg) : AMPC_OK;
}

ampc_status ampci_optim_reduce(ampc_optim *opt, double *v, int n, ampci_reduce_op op) {
    return opt->dist.reduce ? opt->dist.reduce(opt->dist.arg, v, n, op) : AMPC_OK;
}

/* One group's state blocks for new ranges, filled from the old ones where both own an element. */
static ampc_status regroup(ampc_optim *opt, int g, const int64_t *lo, const int64_t *hi, bool all_masters) {
    ampci_group *gr = &opt->groups[g];
    int64_t masters = 0, total = 0;
    bool any = false;
    for (int i = 0; i < opt->n; i++) {
        ampci_param *pp = &opt->params[i];
        if (pp->group != g) continue;
        bool want = pp->master || all_masters;
        masters += want ? hi[i] - lo[i] : 0;
        any |= want;
        total += hi[i] - lo[i];
    }
    ampc_tensor *mb = any ? block(opt->ctx, AMPC_DTYPE_F32, masters) : NULL;
    ampc_tensor *m = gr->m_block ? block(opt->ctx, AMPC_DTYPE_F32, total) : NULL;
    ampc_tensor *v = gr->v_block ? block(opt->ctx, AMPC_DTYPE_F32, total) : NULL;
    if ((any && !mb) || (gr->m_block && !m) || (gr->v_block && !v)) {
        ampc_tensor_free(mb), ampc_tensor_free(m), ampc_tensor_free(v);
        return ampc_last_status();
    }
    int64_t at_master = 0, at = 0;
    ampc_status s = AMPC_OK;
    for (int i = 0; i < opt->n && s == AMPC_OK; i++) {
        ampci_param *pp = &opt->params[i];
        if (pp->group != g) continue;
        int64_t a = lo[i] > pp->lo ? lo[i] : pp->lo, b = hi[i] < pp->hi ? hi[i] : pp->hi; /* kept: [a, b) */
        if (pp->master || all_masters) {
            if (!pp->master) pp->master_forced = true;
            float *dst = (float *)ampci_dev_ptr(mb) + at_master;
            /* newly owned masters come from the parameter (identical on every process) */
            s = AMPCI_DEV(opt->ctx, convert, .dst = dst, .dst_dt = AMPC_DTYPE_F32,
                          .src = ampci_dev_ptr(pp->p) + (size_t)lo[i] * ampc_dtype_size(pp->p->dtype),
                          .src_dt = pp->p->dtype, .n = hi[i] - lo[i]);
            if (a < b && pp->master)
                ampci_dev_copy(opt->ctx, dst + (a - lo[i]), pp->master + (a - pp->lo), (size_t)(b - a) * sizeof(float));
            pp->master = dst;
            at_master += hi[i] - lo[i];
        }
        float *olds[2] = {pp->m, pp->v}, **news[2] = {&pp->m, &pp->v};
        ampc_tensor *blocks[2] = {m, v};
        for (int k = 0; k < 2; k++) {
            if (!blocks[k]) continue;
            float *dst = (float *)ampci_dev_ptr(blocks[k]) + at; /* zeros: newly owned moments start there */
            if (a < b)
                ampci_dev_copy(opt->ctx, dst + (a - lo[i]), olds[k] + (a - pp->lo), (size_t)(b - a) * sizeof(float));
            *news[k] = dst;
        }
        at += hi[i] - lo[i];
    }
    ampc_tensor_free(gr->master_block), ampc_tensor_free(gr->m_block), ampc_tensor_free(gr->v_block);
    gr->master_block = mb, gr->m_block = m, gr->v_block = v;
    return s;
}

ampc_status ampci_optim_set_ranges(ampc_optim *opt, const int64_t *lo, const int64_t *hi, bool all_masters) {
    for (int i = 0; i < opt->n; i++)
        if (!(0 <= lo[i] && lo[i] <= hi[i] && hi[i] <= opt->params[i].n))
            return ampci_fail(AMPC_STATUS_INVALID_ARG,
                              "optimizer: owned range [%lld, %lld) of parameter %d is "
                              "outside [0, %lld]",
                              (long long)lo[i], (long long)hi[i], i, (long long)opt->params[i].n);
    for (int g = 0; g < opt->ngroups; g++) {
        ampc_status s = regroup(opt, g, lo, hi, all_masters);
        if (s != AMPC_OK) return s;
    }
    for (int i = 0; i < opt->n; i++) {
        ampci_param *pp = &opt->params[i];
        pp->lo = lo[i], pp->hi = hi[i];
        ampc_status s = make_views(opt, pp); /* the tensors over master and moments follow the range */
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

int64_t ampc_optim_state_bytes(const ampc_optim *opt) {
    int64_t b = 0;
    for (int g = 0; opt && g < opt->ngroups; g++) {
        const ampci_group *gr = &opt->groups[g];
        const ampc_tensor *blocks[3] = {gr->master_block, gr->m_block, gr->v_block};
        for (int k = 0; k < 3; k++) b += blocks[k] ? ampc_tensor_numel(blocks[k]) * 4 : 0;
    }
    return b;
}

ampc_status ampci_optim_grad_list(const ampc_optim *opt, ampci_grad_list *list, bool bump) {
    size_t n = (size_t)(opt->n ? opt->n : 1);
    void **g = malloc(n * (sizeof(void *) + sizeof(ampc_dtype) + sizeof(int64_t)));
    if (!g) return ampci_fail(AMPC_STATUS_OOM, "optimizer: out of memory for the list of %d gradients", opt->n);
    int64_t *count = (int64_t *)(g + n);
    ampc_dtype *dt = (ampc_dtype *)(count + n);
    for (int i = 0; i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        ampc_tensor *t = pp->p->grad;
        g[i] = t ? ampci_dev_ptr(t) + (size_t)pp->lo * ampc_dtype_size(t->dtype) : NULL;
        dt[i] = t ? t->dtype : AMPC_DTYPE_F32;
        count[i] = t ? pp->hi - pp->lo : 0;
        if (t && bump) t->storage->version++;
    }
    *list = (ampci_grad_list){.g = g, .dt = dt, .n = count, .count = opt->n};
    return AMPC_OK;
}

void ampci_optim_grad_list_free(ampci_grad_list *list) {
    free((void *)list->g);
    list->g = NULL;
}

void ampc_optim_zero_grad(ampc_optim *opt) {
    if (!opt) return;
    int was = ampci_phase_enter(opt->ctx, AMPCI_PHASE_OPTIMIZER);
    for (int i = 0; i < opt->n; i++) ampc_tensor_clear_grad(opt->params[i].p);
    ampci_phase_leave(opt->ctx, was);
}

ampc_status ampc_optim_set_lr(ampc_optim *opt, double lr) {
    if (!opt || !(lr >= 0))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_optim_set_lr: lr %g; expected >= 0%s", lr,
                          opt ? "" : " (optimizer is NULL)");
    opt->lr = lr;
    return AMPC_OK;
}

double ampc_optim_lr(const ampc_optim *opt) { return opt ? opt->lr : 0; }
int64_t ampc_optim_steps(const ampc_optim *opt) { return opt ? opt->steps : 0; }
int ampc_optim_num_params(const ampc_optim *opt) { return opt ? opt->n : 0; }
ampc_tensor *ampc_optim_param(const ampc_optim *opt, int i) {
    return opt && i >= 0 && i < opt->n ? opt->params[i].p : NULL;
}

const ampc_tensor *ampc_optim_master(const ampc_optim *opt, int i) {
    if (!opt || i < 0 || i >= opt->n) return NULL;
    return opt->params[i].master_t ? opt->params[i].master_t : opt->params[i].p;
}
