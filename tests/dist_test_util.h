/* dist_test_util.h: what the MPI test programs test_dist.c and test_dist_train.c share (dist_test_util.c,
 * linked into both): a fresh ampc_dist handle per test, agreement helpers that make every rank fail together,
 * deterministic values, replicas of one small MLP, and the program's main: it runs the cases whose names
 * contain one of the arguments; rank 0 prints cmocka's log, other ranks theirs only when some rank failed;
 * every rank exits non-zero when any rank had a failure. */
#ifndef AMPC_DIST_TEST_UTIL_H
#define AMPC_DIST_TEST_UTIL_H

#include "test_util.h"

#include <stdlib.h>

enum { IN = 32, H0 = 64, H1 = 32, CLS = 8 };
enum { NP = IN * H0 + H0 + H0 * H1 + H1 + H1 * CLS + CLS }; /* the MLP's parameter count */
#define LR 1e-2
#define F32 AMPC_DTYPE_F32
#define F16 AMPC_DTYPE_F16
#define BF16 AMPC_DTYPE_BF16

extern ampc_dist *g_d; /* a fresh handle per test (setup), so a failed test leaves nothing attached */
extern int g_rank, g_size;

int dist_test_setup(void **state);
int dist_test_teardown(void **state);
/* A case with a fresh g_d. */
#define DIST_TEST(f) cmocka_unit_test_setup_teardown(f, dist_test_setup, dist_test_teardown)

/* ---- agreement helpers: every rank calls them, so all ranks fail together (nobody waits for a dead one) */

int64_t reduce_i64(int64_t v, ampc_dist_op op);
bool all_true(bool b);
/* Fails on every rank unless ok holds on every rank; the ranks where it does not print why. */
#define AGREE(ok, ...)                                                                                                 \
    do {                                                                                                               \
        bool ok_ = (ok);                                                                                               \
        if (!all_true(ok_)) {                                                                                          \
            if (!ok_) print_error("rank %d: ", g_rank), print_error(__VA_ARGS__), print_error("\n");                   \
            FAILF("rank %d: '%s' does not hold on every rank", g_rank, #ok);                                           \
        }                                                                                                              \
    } while (0)

uint64_t fnv(const void *p, size_t n);
/* The same bytes on every rank. */
bool same_everywhere(const void *p, size_t n);
/* Deterministic values in [-1, 1): the same on every rank for the same (i, salt). */
float val(uint32_t i, uint32_t salt);

/* ---- replicas of one small MLP ---- */

typedef struct replica {
    ampc_ctx *ctx;
    ampc_model *m;
    ampc_optim *opt;
} replica;

/* The MLP (parameters of dtype pdt, the same seed everywhere) and its AdamW, in a context of its own. */
replica rep_new(ampc_dtype pdt);
void rep_free(replica *r);
void rep_attach(replica *r, ampc_dtype rd, ampc_dist_shard shard, int64_t bucket);
/* Every parameter (grads: its gradient, zeros where absent) as F32, in model order. */
void read_all(const ampc_model *m, bool grads, float *out);

/* ---- the program ---- */

/* Runs the cases of `all` whose names contain one of the arguments (all without arguments) as cmocka group
 * `name`; returns the exit status, non-zero on every rank when any rank had a failure. Call it before anything
 * prints: it holds the log of ranks > 0 from the start. */
int dist_test_main(const char *name, const struct CMUnitTest *all, size_t n, int argc, char **argv);

#endif
