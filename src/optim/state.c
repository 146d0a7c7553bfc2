/* state.c: the optimizer's state as named entries, for checkpoints: in parameter order, master.NAME (the
 * F32 master, when separate), optim.NAME.exp_avg / exp_avg_sq (AdamW) or momentum_buffer (SGD with
 * momentum), and optim.NAME.step, PyTorch's names. Saving and restoring walk the same list, so the two
 * can never disagree about what a checkpoint holds. The F32 entries are tensors over the optimizer's
 * device blocks (master_t, m_t, v_t), so whoever reads or writes them goes through the tensor floor;
 * only the step count is host memory. */
#include "optim.h"

#include <stdio.h>

typedef struct slot {
    const char *suffix; /* "exp_avg", ... */
    ampc_tensor *t;
} slot;

/* The F32 state tensors of parameter pp in PyTorch's names. */
static int state_slots(const ampc_optim *opt, const ampci_param *pp, slot out[2]) {
    if (opt->cfg.kind == AMPC_OPTIM_ADAMW) {
        out[0] = (slot){"exp_avg", pp->m_t}, out[1] = (slot){"exp_avg_sq", pp->v_t};
        return 2;
    }
    if (pp->m_t) return out[0] = (slot){"momentum_buffer", pp->m_t}, 1;
    return 0;
}

ampc_status ampci_optim_each_state(ampc_optim *opt, ampci_state_fn fn, void *arg) {
    char name[320];
    for (int i = 0; i < opt->n; i++) {
        ampci_param *pp = &opt->params[i];
        const char *pn = pp->p->name;
        if (!pn[0]) /* state is stored under the parameter's name */
            return ampci_fail(AMPC_STATUS_INVALID_ARG,
                              "checkpoint: parameter %d of the optimizer has no name; name it "
                              "with ampc_tensor_set_name",
                              i);
        int nd = pp->p->ndim;
        const int64_t *shape = pp->p->shape;
        ampc_status s = AMPC_OK;
        if (pp->master && !pp->master_forced) {
            snprintf(name, sizeof name, "master.%s", pn);
            s = fn(arg, name, pp->master_t, AMPC_DTYPE_F32, nd, shape, NULL);
        }
        slot sl[2];
        for (int k = 0, ns = state_slots(opt, pp, sl); k < ns && s == AMPC_OK; k++) {
            snprintf(name, sizeof name, "optim.%s.%s", pn, sl[k].suffix);
            s = fn(arg, name, sl[k].t, AMPC_DTYPE_F32, nd, shape, NULL);
        }
        snprintf(name, sizeof name, "optim.%s.step", pn);
        if (s == AMPC_OK) s = fn(arg, name, NULL, AMPC_DTYPE_I64, 0, NULL, &pp->steps);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

const ampc_optim_params *ampci_optim_config(const ampc_optim *opt) { return &opt->cfg; }

void ampci_optim_restore_counters(ampc_optim *opt, double lr, int64_t steps) {
    opt->lr = lr;
    opt->steps = steps;
}
