/* optim.h: the optimizer's internals, shared by the optimizer files and the GradScaler (which unscales
 * and checks the gradients of an optimizer's parameters); the floors above use the functions only. */
#ifndef AMPC_OPTIM_H
#define AMPC_OPTIM_H

#include "../tensor/tensor.h"

typedef struct ampci_param {
    ampc_tensor *p; /* the parameter (an owned leaf that requires grad) */
    int group;
    int64_t n;
    float *master;         /* its F32 master (NULL: none, p itself is updated) */
    ampc_tensor *master_t; /* a tensor over master, for inspection and checkpoints */
    float *m, *v;          /* optimizer state: SGD momentum in m; AdamW moments */
    int64_t steps;         /* updates applied to this parameter (AdamW bias correction, SGD momentum init) */
} ampci_param;

typedef struct ampci_group {
    char name[64];
    double lr_scale;
    bool no_weight_decay;
    ampc_tensor *grad_block[AMPC_DTYPE_COUNT]; /* contiguous gradient storage per dtype */
    ampc_tensor *master_block, *m_block, *v_block;
} ampci_group;

struct ampc_optim {
    ampc_ctx *ctx;
    ampc_optim_params cfg;
    double lr;
    int64_t steps;
    ampci_param *params;
    int n, cap;
    ampci_group *groups;
    int ngroups, gcap;
};

/* ---- the state walk and counters for checkpoints (state.c) ---- */
/* One state entry: a tensor t (a master), or raw memory `data` of dtype dt and shape (nd, shape). */
typedef ampc_status (*ampci_state_fn)(void *arg, const char *name, ampc_tensor *t, ampc_dtype dt, int nd,
                                      const int64_t *shape, void *data);
/* Calls fn for every state entry of opt in parameter order (names in state.c); stops at the first
 * failure. Fails (INVALID_ARG) for an unnamed parameter: its state is stored under its name. */
AMPCI_HIDDEN ampc_status ampci_optim_each_state(ampc_optim *opt, ampci_state_fn fn, void *arg);
/* The configuration the optimizer runs with (defaults applied). */
AMPCI_HIDDEN const ampc_optim_params *ampci_optim_config(const ampc_optim *opt);
/* Sets the current learning rate and step count, as a checkpoint recorded them. */
AMPCI_HIDDEN void ampci_optim_restore_counters(ampc_optim *opt, double lr, int64_t steps);

/* Updates one parameter from its gradient (src/optim/update.c). */
AMPCI_HIDDEN ampc_status ampci_optim_update(ampc_optim *opt, ampci_param *pp);

#endif
