/* clip.c: whole-optimizer gradient checks: the global L2 norm (sums of squares in double, parameters in
 * order) with torch.nn.utils.clip_grad_norm_'s clipping rule, and the finiteness check that names the
 * first offending parameter. */
#include "optim.h"

#include "../kernels/kernels.h"
#include "../numerics/numerics.h"

#include <math.h>

/* The owned part of gradient g of parameter pp (the whole of it unless sharded). */
static void *owned(const ampci_param *pp, const ampc_tensor *g) {
    return (unsigned char *)ampc_tensor_data(g) + (size_t)pp->lo * ampc_dtype_size(g->dtype);
}

ampc_status ampc_clip_grad_norm(ampc_optim *opt, double max_norm, double *norm) {
    static const char fn[] = "ampc_clip_grad_norm";
    if (!opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: optimizer is NULL", fn);
    if (!(max_norm > 0)) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: max_norm %g; expected > 0", fn, max_norm);
    ampc_status st = ampci_optim_sync_grads(opt);
    if (st != AMPC_OK) return st;
    const struct ampc_kernels *k = opt->ctx->kernels;
    double ss = 0;
    for (int i = 0; i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        const ampc_tensor *g = pp->p->grad;
        if (g) ss += k->sumsq[g->dtype](owned(pp, g), pp->hi - pp->lo);
    }
    if (opt->dist.sharded && (st = ampci_optim_reduce(opt, &ss, 1, AMPCI_REDUCE_SUM)) != AMPC_OK) return st;
    double total = sqrt(ss);
    if (norm) *norm = total;
    if (!isfinite(total)) return AMPC_OK; /* reported to the caller; a scaler step skips such gradients */
    double coef = max_norm / (total + 1e-6);
    if (coef >= 1.0) return AMPC_OK;
    for (int i = 0; i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        ampc_tensor *g = pp->p->grad;
        if (!g) continue;
        /* multiply by coef, in the gradient's dtype: the unscale kernel with a finite factor does exactly that */
        k->unscale[g->dtype](owned(pp, g), pp->hi - pp->lo, (float)coef);
        g->storage->version++;
    }
    return AMPC_OK;
}

bool ampc_optim_grads_finite(const ampc_optim *opt, const char **first_bad) {
    if (first_bad) *first_bad = NULL;
    if (!opt) return true;
    ampc_optim *o = (ampc_optim *)opt; /* the reduction is waited for, nothing else changes */
    double bad = (double)opt->n;       /* the first parameter with a non-finite gradient, or n */
    if (ampci_optim_sync_grads(o) != AMPC_OK) bad = -1;
    for (int i = 0; bad == opt->n && i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        const ampc_tensor *g = pp->p->grad;
        if (!g) continue;
        if (ampci_first_nonfinite(g->dtype, owned(pp, g), pp->hi - pp->lo) >= 0) bad = i;
    }
    /* every process must decide alike: the smallest index any of them found (a failure counts as bad) */
    if (ampci_optim_reduce(o, &bad, 1, AMPCI_REDUCE_MIN) != AMPC_OK) bad = -1;
    if (bad == opt->n) return true;
    if (first_bad) *first_bad = bad >= 0 ? opt->params[(int)bad].p->name : "(data-parallel reduction failed)";
    return false;
}
