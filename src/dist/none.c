/* none.c: the data-parallel API in a build without MPI (-DAMPC_MPI=OFF, or no MPI found): one process,
 * rank 0 of 1; everything that would need another process says so. */
#include "../core/core.h"

#include <stdlib.h>

static ampc_status no_mpi(const char *fn) {
    return ampci_fail(AMPC_STATUS_UNSUPPORTED,
                      "%s: this build of ampc has no MPI (install libopenmpi-dev and rebuild, without "
                      "-DAMPC_MPI=OFF)",
                      fn);
}

bool ampc_dist_available(void) { return false; }
const char *ampc_dist_library(void) { return ""; }
ampc_status ampc_dist_new(const ampc_dist_params *params, ampc_dist **out) {
    (void)params;
    if (out) *out = NULL;
    return no_mpi("ampc_dist_new");
}
void ampc_dist_free(ampc_dist *d) { (void)d; }
ampc_status ampc_dist_set_timeout(ampc_dist *d, double timeout_s) {
    (void)d, (void)timeout_s;
    return no_mpi("ampc_dist_set_timeout");
}
int ampc_dist_rank(const ampc_dist *d) { return (void)d, 0; }
int ampc_dist_world_size(const ampc_dist *d) { return (void)d, 1; }
int ampc_dist_local_size(const ampc_dist *d) { return (void)d, 1; }
ampc_status ampc_dist_broadcast(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, int root) {
    (void)d, (void)buf, (void)n, (void)dt, (void)root;
    return no_mpi("ampc_dist_broadcast");
}
ampc_status ampc_dist_allreduce(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, ampc_dist_op op) {
    (void)d, (void)buf, (void)n, (void)dt, (void)op;
    return no_mpi("ampc_dist_allreduce");
}
ampc_status ampc_dist_barrier(ampc_dist *d) { return (void)d, no_mpi("ampc_dist_barrier"); }
ampc_status ampc_dist_agree(ampc_dist *d, ampc_status mine) { return (void)d, mine; }
void ampc_dist_abort(ampc_dist *d, int code) {
    (void)d;
    _Exit(code);
}
ampc_status ampc_dist_attach(ampc_dist *d, ampc_optim *opt, const ampc_dist_train_params *params) {
    (void)d, (void)opt, (void)params;
    return no_mpi("ampc_dist_attach");
}
ampc_status ampc_dist_set_grad_weight(ampc_dist *d, double weight) {
    (void)d, (void)weight;
    return no_mpi("ampc_dist_set_grad_weight");
}
ampc_status ampc_dist_sync_grads(ampc_dist *d) { return (void)d, no_mpi("ampc_dist_sync_grads"); }
ampc_status ampc_dist_set_sync(ampc_dist *d, bool sync) { return (void)d, (void)sync, no_mpi("ampc_dist_set_sync"); }
ampc_status ampc_dist_unshard(ampc_dist *d) { return (void)d, no_mpi("ampc_dist_unshard"); }
ampc_status ampc_dist_get_stats(const ampc_dist *d, ampc_dist_stats *out) {
    (void)d, (void)out;
    return no_mpi("ampc_dist_get_stats");
}
void ampc_dist_reset_stats(ampc_dist *d) { (void)d; }
ampc_status ampc_dist_time_reduction(ampc_dist *d, int reps, double *seconds) {
    (void)d, (void)reps, (void)seconds;
    return no_mpi("ampc_dist_time_reduction");
}
ampc_status ampc_dist_checkpoint_save(ampc_dist *d, const char *path, const ampc_checkpoint_state *state) {
    (void)d, (void)path, (void)state;
    return no_mpi("ampc_dist_checkpoint_save");
}
