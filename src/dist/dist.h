/* dist.h: the data-parallel floor's internals. comm.c wraps MPI (a duplicated communicator, every
 * collective non-blocking underneath and waited for with a deadline, 16-bit sums through F32, the
 * division rule); ddp.c is the reducer (buckets filled by the autograd grad-ready hook, launched as they
 * complete, waited for before the optimizer reads gradients) and the ZeRO-1 ownership; state.c gathers a
 * sharded optimizer for checkpoints. Only these files include mpi.h. */
#ifndef AMPC_DIST_H
#define AMPC_DIST_H

#include "../optim/optim.h"

#include <mpi.h>

typedef struct ampci_bucket {
    int *param; /* the optimizer's indices of its parameters, in bucket order */
    int count;
    int64_t elems;      /* their elements, padded to a multiple of N */
    int64_t *offset;    /* element offset of each parameter within the bucket (count entries) */
    int pending;        /* gradients not final yet this backward */
    void *buf;          /* elems values of the reduce dtype (sharded: the owned slice reduced into buf): host
                           staging memory, or device memory for a view bucket */
    ampc_tensor *buf_t; /* view buckets: buf as a tensor, whose views are the parameters' gradient slots
                           (PyTorch DDP's gradient_as_bucket_view: no packing copy, no unpacking copy) */
    void *pbuf;         /* sharded: elems values of the parameters' dtype, for the all-gather (host memory) */
    MPI_Request req;
    ampci_host_mapping map; /* a view bucket's host map while its reduction is in flight (MPI's buffer) */
    bool launched;
    double t_launch, t_done; /* t_done: when a test in the backward saw it complete (0: not yet) */
} ampci_bucket;

/* Shard FULL: a unit is what FSDP2's fully_shard wraps, the parameters of one numbered module
 * ("blocks.3.*"; every other run of parameters is a root unit, never released); its parameters live in
 * one storage laid out as its bucket, present only while the unit is in use. */
typedef struct ampci_unit {
    int bucket;        /* the unit's bucket (FULL: one per unit) */
    ampci_storage *st; /* its parameters' storage: absent between uses */
    bool root;
    bool filling; /* an all-gather into it is in flight (req): a prefetch, or a gather being waited for */
    MPI_Request req;
    ampci_host_mapping map; /* while filling: the storage's host map MPI writes into */
} ampci_unit;

struct ampc_dist {
    MPI_Comm comm;
    int rank, size;
    int local_size; /* ranks on this machine */
    bool finalize;  /* this handle initialised MPI */
    double timeout;
    MPI_Datatype bf16, f16;
    MPI_Op sum_bf16, sum_f16;
    /* the attached optimizer (ddp.c) */
    ampc_optim *opt;
    ampc_dist_train_params tp;
    double weight, pre, post; /* grad weight; factors before and after the sum */
    ampci_bucket *buckets;
    int nbuckets;
    int *bucket_of;     /* parameter -> bucket */
    bool in_backward;   /* buckets launched since the last sync */
    bool no_sync;       /* ampc_dist_set_sync(d, false): backwards accumulate locally, nothing is launched */
    bool unsynced;      /* a backward ran under no_sync and no backward with sync has reduced it yet */
    int hint;           /* the parameter the hook found last (backward goes down the list) */
    ampc_status failed; /* an error inside the hook, reported by the next sync */
    const char *failed_why; /* what it was, for that report */
    uint64_t checksum;  /* of the parameters and state after the attach broadcast */
    ampc_dist_stats stats;
    bool no_agreement;       /* test hook AMPC_TEST_DIST_NO_AGREEMENT: MIN/MAX reductions are not shared */
    unsigned char *had_grad; /* per parameter: a gradient on this rank (then, reduced: on any rank) */
    ampci_unit *units;       /* shard FULL (full.c), one per bucket */
    int resident;            /* the non-root unit whose parameters are gathered now, or -1 */
};

/* ---- comm.c ---- */
/* The MPI datatype of dt (16-bit: the handle's 2-byte types). */
AMPCI_HIDDEN MPI_Datatype ampci_dist_type(const ampc_dist *d, ampc_dtype dt);
/* The sum op for dt (16-bit: the handle's F32-accumulating ops). */
AMPCI_HIDDEN MPI_Op ampci_dist_sum(const ampc_dist *d, ampc_dtype dt);
/* Waits for req until the deadline; AMPC_STATUS_DIST naming `what` on error or timeout. */
AMPCI_HIDDEN ampc_status ampci_dist_wait(ampc_dist *d, MPI_Request *req, const char *what);
/* The end of a non-blocking call that returned err: its failure, or its completion waited for. */
AMPCI_HIDDEN ampc_status ampci_dist_complete(ampc_dist *d, int err, MPI_Request *req, const char *what);
/* AMPC_STATUS_DIST for an MPI error code of `what`. */
AMPCI_HIDDEN ampc_status ampci_dist_mpi_fail(const ampc_dist *d, int err, const char *what);
/* Seconds on MPI's clock. */
AMPCI_HIDDEN double ampci_dist_now(void);

/* ---- ddp.c ---- */
/* Removes the optimizer's hooks and buckets (the optimizer or the handle is being freed). */
AMPCI_HIDDEN void ampci_dist_detach(ampc_dist *d);

/* ---- full.c ---- */
/* The unit key of a parameter name: the length of its prefix up to the first all-digit component
 * ("blocks.3" of "blocks.3.attn.qkv.weight"), 0 for root parameters. */
AMPCI_HIDDEN size_t ampci_dist_unit_key(const char *name);
/* Shard FULL after the buckets and ranges are made: one storage per unit, masters forced, non-root units
 * released, the hooks installed. */
AMPCI_HIDDEN ampc_status ampci_dist_full_attach(ampc_dist *d);
/* After the optimizer step: root units gathered again from the masters, the others released. */
AMPCI_HIDDEN ampc_status ampci_dist_full_after_step(ampc_dist *d);
/* Every unit gathered (until the next step); release_after: then the non-root ones released again. */
AMPCI_HIDDEN ampc_status ampci_dist_full_gather_all(ampc_dist *d);
AMPCI_HIDDEN void ampci_dist_full_release_all(ampc_dist *d);
/* Detaching: every unit gathered for good, the hooks removed. */
AMPCI_HIDDEN void ampci_dist_full_detach(ampc_dist *d);

/* ---- state.c ---- */
/* The owned range of every parameter for ownership by slices of each bucket (rank r of N). */
AMPCI_HIDDEN void ampci_dist_ranges(const ampc_dist *d, int rank, int64_t *lo, int64_t *hi);

#endif
