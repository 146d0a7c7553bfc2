/* clip.c: whole-optimizer gradient checks: the global L2 norm (sums of squares in double, parameters in
 * order) with torch.nn.utils.clip_grad_norm_'s clipping rule, and the finiteness check that names the
 * first offending parameter. */
#include "optim.h"

#include "../kernels/kernels.h"

#include <math.h>

ampc_status ampc_clip_grad_norm(ampc_optim *opt, double max_norm, double *norm) {
    static const char fn[] = "ampc_clip_grad_norm";
    if (!opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: optimizer is NULL", fn);
    if (!(max_norm > 0)) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: max_norm %g; expected > 0", fn, max_norm);
    const struct ampc_kernels *k = opt->ctx->kernels;
    double ss = 0;
    for (int i = 0; i < opt->n; i++) {
        const ampc_tensor *g = opt->params[i].p->grad;
        if (g) ss += k->sumsq[g->dtype](ampc_tensor_data(g), ampc_tensor_numel(g));
    }
    double total = sqrt(ss);
    if (norm) *norm = total;
    if (!isfinite(total)) return AMPC_OK; /* reported to the caller; a scaler step skips such gradients */
    double coef = max_norm / (total + 1e-6);
    if (coef >= 1.0) return AMPC_OK;
    for (int i = 0; i < opt->n; i++) {
        ampc_tensor *g = opt->params[i].p->grad;
        if (!g) continue;
        /* multiply by coef, in the gradient's dtype: the unscale kernel with a finite factor does exactly that */
        k->unscale[g->dtype](ampc_tensor_data(g), ampc_tensor_numel(g), (float)coef);
        g->storage->version++;
    }
    return AMPC_OK;
}

bool ampc_optim_grads_finite(const ampc_optim *opt, const char **first_bad) {
    if (first_bad) *first_bad = NULL;
    for (int i = 0; opt && i < opt->n; i++) {
        const ampc_tensor *g = opt->params[i].p->grad;
        if (g && ampci_tensor_first_nonfinite(g) >= 0) {
            if (first_bad) *first_bad = opt->params[i].p->name;
            return false;
        }
    }
    return true;
}
