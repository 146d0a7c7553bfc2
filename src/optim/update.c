/* update.c: one optimizer update of one parameter (of the elements this process owns: all of them unless
 * sharded). The host works out the step's scalars (learning rate with the group's scale, weight decay,
 * AdamW's bias corrections in double, the stochastic-rounding stream and counter) and hands everything
 * to one device operation by value (optim_update, kernels/dev_optim.h): the fused pass that reads the
 * gradient as F32, updates the F32 weights and state and writes a 16-bit parameter back, to nearest or
 * stochastically for BF16 parameters without masters when asked. */
#include "optim.h"

#include <math.h>

/* The Philox stream of stochastic rounding for parameter k: far from dropout's and the data's. */
#define SR_STREAM 0x5352000000000000ull

ampc_status ampci_optim_update(ampc_optim *opt, ampci_param *pp) {
    const ampci_group *gr = &opt->groups[pp->group];
    const ampc_optim_params *c = &opt->cfg;
    double lr = opt->lr * gr->lr_scale, wd = gr->no_weight_decay ? 0.0 : c->weight_decay;
    ampc_tensor *p = pp->p, *g = p->grad;
    if (g->ndim != p->ndim || ampc_tensor_numel(g) != pp->n || !ampc_tensor_is_contiguous(g)) {
        char a[128], b[128];
        return ampci_fail(AMPC_STATUS_SHAPE, "ampc_optim_step: gradient %s does not match parameter %s '%s'",
                          ampc_tensor_describe(g, a, sizeof a), ampc_tensor_describe(p, b, sizeof b), p->name);
    }
    bool adam = c->kind == AMPC_OPTIM_ADAMW, first = pp->steps == 0;
    int64_t t = ++pp->steps;
    ampci_adamw_args adamw = {0};
    ampci_sgd_args sgd = {0};
    if (adam) {
        double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        adamw = (ampci_adamw_args){(float)(1.0 - lr * wd), (float)c->beta1,   (float)c->beta2,
                                   (float)c->eps,          (float)(lr / bc1), (float)sqrt(bc2)};
    } else {
        sgd = (ampci_sgd_args){(float)lr, (float)wd, (float)c->momentum, (float)c->dampening, c->nesterov, first};
    }
    /* element e of step t draws from block (t - 1) * ceil(n / 4) + e / 4 of the parameter's own stream */
    ampci_sr_args sr = {0};
    if (c->stochastic_rounding && p->dtype == AMPC_DTYPE_BF16 && !pp->master)
        sr = (ampci_sr_args){true, ampc_ctx_rng(opt->ctx)->seed, SR_STREAM + (uint64_t)(pp - opt->params),
                             (uint64_t)(t - 1) * (uint64_t)((pp->n + 3) / 4)};
    ampc_status s = AMPCI_DEV(opt->ctx, optim_update, .param = p->storage->absent ? NULL : ampci_dev_ptr(p),
                              .param_dt = p->dtype, .grad = ampci_dev_ptr(g), .grad_dt = g->dtype, .master = pp->master,
                              .m = pp->m, .v = pp->v, .lo = pp->lo, .hi = pp->hi, .adam = adam, .sgd = sgd,
                              .adamw = adamw, .sr = sr);
    p->storage->version++; /* an in-place write: saved-tensor checks and the cast cache see it */
    return s;
}
