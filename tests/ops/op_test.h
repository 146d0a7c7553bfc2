/* op_test.h: the op-test driver's contract. An op family describes each op once (ot_op): how to make a
 * test case of a given variant (shapes from edge sizes: 1, odd, past any tile), how to run ampc's op,
 * and a reference in double. The driver (test_ops.c) runs every op x dtype x variant: inputs drawn in
 * F32 and rounded to the dtype; the forward against the double reference on the same rounded inputs;
 * every input gradient against central finite differences of the double reference. Errors are
 * normwise (relative L2) and compared with the one tolerance table in test_ops.c. */
#ifndef AMPC_OP_TEST_H
#define AMPC_OP_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "ampc.h"

#define OT_MAX_IN 4

typedef enum ot_dist {
    OT_NORMAL = 0,  /* N(0, 1) */
    OT_POSITIVE,    /* uniform [0.5, 2]: log, sqrt, divisors */
    OT_AWAY_FROM_0, /* N(0, 1) with |x| >= 0.05: relu's and max's kinks stay far from the FD step */
    OT_SMALL,       /* N(0, 0.1^2) */
    OT_DISTINCT,    /* as OT_AWAY_FROM_0, redrawn until no two elements are equal after rounding (max
                         and argmax ties would make finite differences split the gradient) */
} ot_dist;

typedef struct ot_case {
    int nin; /* float inputs */
    int ndim[OT_MAX_IN];
    int64_t shape[OT_MAX_IN][4];
    ot_dist dist[OT_MAX_IN];
    bool no_grad[OT_MAX_IN]; /* input gets no gradient check (and does not require grad) */
    bool strided[OT_MAX_IN]; /* pass the input as a non-contiguous (transposed-layout) view */
    /* one optional integer input (ids, class indices): values uniform in [int_lo, int_hi] */
    int int_ndim; /* 0: none */
    int64_t int_shape[4];
    int64_t int_lo, int_hi;
    int64_t *ints; /* filled by the driver */
    int ip[8];     /* op parameters */
    double dp[4];
    int64_t K;      /* longest reduction (sum) feeding one output, for the tolerance */
    char label[96]; /* printed with failures */
} ot_case;

typedef struct ot_op {
    const char *name;
    int variants;
    /* fills c for variant v; r is a seeded random source for free dims */
    void (*make)(ot_case *c, int v, uint64_t *r);
    /* ampc's op; ints is the integer input (NULL when the case has none) */
    ampc_tensor *(*run)(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *ints, const ot_case *c);
    /* the output shape, and the reference: out = f(in) in double */
    void (*out_shape)(const ot_case *c, int *ndim, int64_t *shape);
    void (*ref)(const ot_case *c, const double *const *in, double *out);
    /* expected output dtype from the input dtype (NULL: the same) */
    ampc_dtype (*out_dtype)(const ot_case *c, ampc_dtype in);
} ot_op;

/* Helpers for case makers and references. */
int64_t ot_rand_int(uint64_t *r, int64_t lo, int64_t hi); /* uniform in [lo, hi] */
int64_t ot_numel(int ndim, const int64_t *shape);
/* Sets input i of c to a shape. */
void ot_input(ot_case *c, int i, int ndim, const int64_t *shape);

/* Op families (one file each), NULL-terminated arrays. */
extern const ot_op *const ot_ops_basic[];
extern const ot_op *const ot_ops_nn[];
extern const ot_op *const ot_ops_conv[];

#endif
