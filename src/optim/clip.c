/* clip.c: whole-optimizer gradient checks: the global L2 norm with torch.nn.utils.clip_grad_norm_'s
 * clipping rule, and the finiteness check that names the first offending parameter. One device operation
 * over the list of gradients (the sums of squares; the clipping) or one per gradient (the index of its
 * first non-finite value) writes into a small device array, one entry per parameter; the host reads the
 * whole array once, at a named synchronisation point (AMPC_SYNC_CLIP_NORM, AMPC_SYNC_FOUND_INF), and
 * sums the squares in parameter order, so the norm has the same bits whatever the thread count. The
 * clipping itself (each gradient times coef) stays on the device. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

/* The owned part of gradient g of parameter pp (the whole of it unless sharded): a device address. */
static void *owned(const ampci_param *pp, const ampc_tensor *g) {
    return ampci_dev_ptr(g) + (size_t)pp->lo * ampc_dtype_size(g->dtype);
}

/* ss = the sum over parameters with gradients, in parameter order, of their owned sums of squares. */
static ampc_status sum_of_squares(ampc_optim *opt, double *ss) {
    ampc_ctx *ctx = opt->ctx;
    *ss = 0;
    double *dev = ampci_step_alloc(ctx, (size_t)(opt->n ? opt->n : 1) * sizeof *dev, "gradient sums of squares");
    double *host = malloc((size_t)(opt->n ? opt->n : 1) * sizeof *host);
    ampc_status s = dev && host ? AMPC_OK
                    : dev       ? ampci_fail(AMPC_STATUS_OOM, "ampc_clip_grad_norm: out of memory")
                                : ampc_last_status();
    ampci_grad_list list = {0};
    if (s == AMPC_OK && (s = ampci_optim_grad_list(opt, &list, false)) == AMPC_OK) {
        s = AMPCI_DEV(ctx, grad_sumsq, .list = list, .out = dev);
        ampci_optim_grad_list_free(&list);
    }
    if (s == AMPC_OK) {
        ampci_sync_read(ctx, AMPC_SYNC_CLIP_NORM, host, dev, (size_t)opt->n * sizeof *host);
        for (int i = 0; i < opt->n; i++)
            if (opt->params[i].p->grad) *ss += host[i];
    }
    free(host);
    if (dev) ampci_step_free(ctx, dev);
    return s;
}

static ampc_status clip(ampc_optim *opt, double max_norm, double *norm);

ampc_status ampc_clip_grad_norm(ampc_optim *opt, double max_norm, double *norm) {
    static const char fn[] = "ampc_clip_grad_norm";
    if (!opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: optimizer is NULL", fn);
    if (!(max_norm > 0)) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: max_norm %g; expected > 0", fn, max_norm);
    int was = ampci_phase_enter(opt->ctx, AMPCI_PHASE_OPTIMIZER);
    ampc_status st = clip(opt, max_norm, norm);
    ampci_phase_leave(opt->ctx, was);
    return st;
}

static ampc_status clip(ampc_optim *opt, double max_norm, double *norm) {
    ampc_status st = ampci_optim_sync_grads(opt);
    double ss;
    if (st != AMPC_OK || (st = sum_of_squares(opt, &ss)) != AMPC_OK) return st;
    if (opt->dist.sharded && (st = ampci_optim_reduce(opt, &ss, 1, AMPCI_REDUCE_SUM)) != AMPC_OK) return st;
    double total = sqrt(ss);
    if (norm) *norm = total;
    if (!isfinite(total)) return AMPC_OK; /* reported to the caller; a scaler step skips such gradients */
    double coef = max_norm / (total + 1e-6);
    if (coef >= 1.0) return AMPC_OK;
    /* multiply by coef, in each gradient's dtype: the unscale kernel with a finite factor does exactly that */
    ampci_grad_list list;
    if ((st = ampci_optim_grad_list(opt, &list, true)) != AMPC_OK) return st;
    st = AMPCI_DEV(opt->ctx, grad_unscale, .list = list, .factor = (float)coef, .flag = NULL);
    ampci_optim_grad_list_free(&list);
    return st;
}

bool ampc_optim_grads_finite(const ampc_optim *opt, const char **first_bad) {
    if (first_bad) *first_bad = NULL;
    if (!opt) return true;
    ampc_optim *o = (ampc_optim *)opt; /* the reduction is waited for, nothing else changes */
    ampc_ctx *ctx = o->ctx;
    double bad = (double)opt->n; /* the first parameter with a non-finite gradient, or n; -1: failure */
    const char *why = "(data-parallel reduction failed)";
    size_t bytes = (size_t)(opt->n ? opt->n : 1) * sizeof(int64_t);
    int64_t *dev = NULL, *host = NULL; /* per parameter: its first non-finite element, or -1 */
    if (ampci_optim_sync_grads(o) != AMPC_OK) bad = -1;
    else if (!(dev = ampci_step_alloc(ctx, bytes, "gradient checks")) || !(host = malloc(bytes)))
        bad = -1, why = "(out of memory for the check)";
    if (bad == opt->n) {
        ampci_dev_memset(ctx, dev, 0xff, (size_t)opt->n * sizeof *dev); /* -1: no gradient, nothing found */
        for (int i = 0; bad == opt->n && i < opt->n; i++) {
            const ampci_param *pp = &opt->params[i];
            const ampc_tensor *g = pp->p->grad;
            if (g && AMPCI_DEV(ctx, first_nonfinite, .p = owned(pp, g), .dt = g->dtype, .n = pp->hi - pp->lo,
                               .index = dev + i) != AMPC_OK)
                bad = -1, why = "(the device check failed)";
        }
    }
    if (bad == opt->n) {
        ampci_sync_read(ctx, AMPC_SYNC_FOUND_INF, host, dev, (size_t)opt->n * sizeof *host);
        for (int i = 0; bad == opt->n && i < opt->n; i++)
            if (host[i] >= 0) bad = i;
    }
    free(host);
    if (dev) ampci_step_free(ctx, dev);
    /* every process must decide alike: the smallest index any of them found (a failure counts as bad) */
    if (ampci_optim_reduce(o, &bad, 1, AMPCI_REDUCE_MIN) != AMPC_OK) bad = -1, why = "(data-parallel reduction failed)";
    if (bad == opt->n) return true;
    if (first_bad) *first_bad = bad >= 0 ? opt->params[(int)bad].p->name : why;
    return false;
}
