/* optim.h: the optimizer's internals, shared by the optimizer files and the GradScaler (which unscales
 * and checks the gradients of an optimizer's parameters); the floors above use the functions only. */
#ifndef AMPC_OPTIM_H
#define AMPC_OPTIM_H

#include "../tensor/tensor.h"

typedef struct ampci_param {
    ampc_tensor *p; /* the parameter (an owned leaf that requires grad) */
    int group;
    int64_t n;
    /* master, m and v are device addresses in the group's blocks: hand them to the device, never read
     * them on the host (the tensors over them are for inspection and checkpoints) */
    float *master;          /* its F32 master (NULL: none, p itself is updated) */
    ampc_tensor *master_t;  /* a tensor over master (NULL for a forced master) */
    float *m, *v;           /* optimizer state: SGD momentum in m; AdamW moments */
    ampc_tensor *m_t, *v_t; /* tensors over m and v (NULL where those are) */
    int64_t steps;          /* updates applied to this parameter (AdamW bias correction, SGD momentum init) */
    int64_t lo, hi;         /* the elements this process owns: [0, n) unless sharded (src/dist); master, m
                              and v hold elements [lo, hi) only (master[0] is element lo) */
    bool master_forced;     /* a master only because the parameter is sharded (src/dist, shard FULL): the
                              parameter's own values are the checkpoint's, so the state walk skips it */
} ampci_param;

/* Data parallelism, installed by src/dist (the floors below know it only through these calls). The
 * optimizer and the GradScaler call sync_grads before they read gradients, reduce for every decision
 * that must agree across processes (found-inf, the first bad tensor, gradient sums of squares), and
 * after_step once parameters were updated; detach when the optimizer is freed. */
typedef enum ampci_reduce_op { AMPCI_REDUCE_SUM = 0, AMPCI_REDUCE_MAX, AMPCI_REDUCE_MIN } ampci_reduce_op;
typedef struct ampci_optim_dist {
    void *arg;
    ampc_status (*sync_grads)(void *arg);
    ampc_status (*reduce)(void *arg, double *v, int n, ampci_reduce_op op);
    ampc_status (*after_step)(void *arg);
    void (*detach)(void *arg);
    bool sharded; /* each process checks and updates its own [lo, hi) of every parameter */
} ampci_optim_dist;

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
    ampci_optim_dist dist; /* all NULL: one process */
};

/* ---- data parallelism (optim.c) ---- */
/* Installs (or, with NULL, removes) the data-parallel calls. */
AMPCI_HIDDEN void ampci_optim_set_dist(ampc_optim *opt, const ampci_optim_dist *d);
/* Gives every parameter i the owned range [lo[i], hi[i]) (0 <= lo <= hi <= n): masters, first and second
 * moments are reallocated for the new ranges; what both ranges hold is kept, newly owned masters are
 * taken from the parameter and newly owned moments are zero. all_masters: every parameter gets an F32
 * master (forced where it had none: the sharded parameter of shard FULL, whose own storage comes and
 * goes); forced masters stay once made. */
AMPCI_HIDDEN ampc_status ampci_optim_set_ranges(ampc_optim *opt, const int64_t *lo, const int64_t *hi,
                                                bool all_masters);
/* The gradients are reduced (dist's sync_grads), or AMPC_OK without data parallelism. */
AMPCI_HIDDEN ampc_status ampci_optim_sync_grads(ampc_optim *opt);
/* v[0..n) combined across processes with op (unchanged without data parallelism). */
AMPCI_HIDDEN ampc_status ampci_optim_reduce(ampc_optim *opt, double *v, int n, ampci_reduce_op op);

/* ---- the state walk and counters for checkpoints (state.c) ---- */
/* One state entry: a tensor t (a master or a moment: device memory, read and written through the tensor
 * floor), or host memory `data` of dtype dt and shape (nd, shape) (the step count). */
typedef ampc_status (*ampci_state_fn)(void *arg, const char *name, ampc_tensor *t, ampc_dtype dt, int nd,
                                      const int64_t *shape, void *data);
/* Calls fn for every state entry of opt in parameter order (names in state.c); stops at the first
 * failure. Fails (INVALID_ARG) for an unnamed parameter: its state is stored under its name. */
AMPCI_HIDDEN ampc_status ampci_optim_each_state(ampc_optim *opt, ampci_state_fn fn, void *arg);
/* The configuration the optimizer runs with (defaults applied). */
AMPCI_HIDDEN const ampc_optim_params *ampci_optim_config(const ampc_optim *opt);
/* Sets the current learning rate and step count, as a checkpoint recorded them. */
AMPCI_HIDDEN void ampci_optim_restore_counters(ampc_optim *opt, double lr, int64_t steps);

/* The owned parts of opt's gradients as a device list (kernels/dev_optim.h), entry i for parameter i (0
 * elements where it has no gradient), in one malloc'ed block that ampci_optim_grad_list_free releases;
 * bump: each gradient's storage version is advanced (a pass that writes them). AMPC_STATUS_OOM recorded. */
AMPCI_HIDDEN ampc_status ampci_optim_grad_list(const ampc_optim *opt, ampci_grad_list *list, bool bump);
AMPCI_HIDDEN void ampci_optim_grad_list_free(ampci_grad_list *list);

/* Updates one parameter from its gradient (src/optim/update.c). */
AMPCI_HIDDEN ampc_status ampci_optim_update(ampc_optim *opt, ampci_param *pp);

#endif
