/* state.c: one checkpoint for a data-parallel run. Without sharding every rank holds the same state, so
 * rank 0 writes it. Sharded, rank 0 takes back the whole optimizer state for the save: it widens its own
 * ranges to whole parameters, receives every other rank's owned masters and moments (packed in parameter
 * order, each rank's ranges being a function of the bucket layout every rank knows), writes the file,
 * and shrinks back to its own ranges. The file is the one format of one process, with the world size. */
#include "dist.h"

#include <stdlib.h>

/* Owned floats of rank r: master (where the parameter has one), m and v, for every parameter. */
static int64_t packed_len(const ampc_optim *opt, const int64_t *lo, const int64_t *hi) {
    int64_t n = 0;
    for (int i = 0; i < opt->n; i++) {
        const ampci_param *pp = &opt->params[i];
        int64_t k = hi[i] - lo[i];
        n += (pp->master ? k : 0) + (pp->m ? k : 0) + (pp->v ? k : 0);
    }
    return n;
}

/* Copies between the packed form (host memory, for MPI) and the state (device memory); `to_packed` packs
 * this rank's own state (its pointers hold elements [lo, hi)) with one read per buffer, counted as
 * AMPC_SYNC_COMM, else unpacks into rank 0's whole state (pointers hold [0, n)). */
static void walk_pack(ampc_optim *opt, const int64_t *lo, const int64_t *hi, float *packed, bool to_packed) {
    for (int i = 0; i < opt->n; i++) {
        ampci_param *pp = &opt->params[i];
        int64_t k = hi[i] - lo[i];
        float *bufs[3] = {pp->master, pp->m, pp->v};
        for (int j = 0; j < 3; j++) {
            if (!bufs[j] || k == 0) continue; /* nothing owned: no copy (packed does not move) */
            if (to_packed) ampci_sync_read(opt->ctx, AMPC_SYNC_COMM, packed, bufs[j], (size_t)k * sizeof *packed);
            else ampci_dev_copy_in(opt->ctx, bufs[j] + lo[i], packed, (size_t)k * sizeof *packed);
            packed += k;
        }
    }
}

/* Rank 0 receives every other rank's state into its widened optimizer. */
static ampc_status gather_to_root(ampc_dist *d, int64_t *lo, int64_t *hi, int64_t *all_lo, int64_t *all_hi) {
    ampc_optim *opt = d->opt;
    ampc_status s = AMPC_OK;
    if (d->rank != 0) {
        int64_t n = packed_len(opt, lo, hi);
        float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
        if (!buf) return ampci_fail(AMPC_STATUS_OOM, "checkpoint: out of memory to send the optimizer state");
        walk_pack(opt, lo, hi, buf, true);
        MPI_Request r;
        int err = MPI_Isend(buf, (int)n, MPI_FLOAT, 0, 7, d->comm, &r);
        s = ampci_dist_complete(d, err, &r, "checkpoint state send");
        free(buf);
        return s;
    }
    for (int r = 1; r < d->size && s == AMPC_OK; r++) {
        ampci_dist_ranges(d, r, all_lo, all_hi);
        int64_t n = packed_len(opt, all_lo, all_hi);
        float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
        if (!buf) return ampci_fail(AMPC_STATUS_OOM, "checkpoint: out of memory to gather the optimizer state");
        MPI_Request q;
        int err = MPI_Irecv(buf, (int)n, MPI_FLOAT, r, 7, d->comm, &q);
        s = ampci_dist_complete(d, err, &q, "checkpoint state receive");
        if (s == AMPC_OK) walk_pack(opt, all_lo, all_hi, buf, false);
        free(buf);
    }
    return s;
}

static ampc_status save_sharded(ampc_dist *d, const char *path, const ampc_checkpoint_state *st) {
    ampc_optim *opt = d->opt;
    size_t sz = (size_t)opt->n * sizeof(int64_t);
    int64_t *lo = malloc(sz), *hi = malloc(sz), *all_lo = malloc(sz), *all_hi = malloc(sz);
    ampc_status s = lo && hi && all_lo && all_hi ? AMPC_OK : ampci_fail(AMPC_STATUS_OOM, "checkpoint: out of memory");
    if (s == AMPC_OK) {
        ampci_dist_ranges(d, d->rank, lo, hi);
        if (d->rank == 0) { /* whole parameters, own part kept, then everyone else's */
            for (int i = 0; i < opt->n; i++) all_lo[i] = 0, all_hi[i] = opt->params[i].n;
            s = ampci_optim_set_ranges(opt, all_lo, all_hi, false);
        }
    }
    s = ampc_dist_agree(d, s); /* rank 0 could not widen: nobody sends */
    if (s == AMPC_OK) s = gather_to_root(d, lo, hi, all_lo, all_hi);
    if (s == AMPC_OK && d->rank == 0) s = ampc_checkpoint_save(path, st);
    if (d->rank == 0 && lo && hi) { /* back to the own shard, whatever happened */
        ampc_status b = ampci_optim_set_ranges(opt, lo, hi, false);
        if (s == AMPC_OK) s = b;
    }
    free(lo), free(hi), free(all_lo), free(all_hi);
    return s;
}

ampc_status ampc_dist_checkpoint_save(ampc_dist *d, const char *path, const ampc_checkpoint_state *state) {
    if (!d || !path || !state)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_checkpoint_save: d, path and state must not be NULL");
    ampc_checkpoint_state st = *state;
    st.world_size = d->size;
    ampc_status s;
    if (d->opt && d->tp.shard && st.optim == d->opt) {
        s = ampc_dist_sync_grads(d); /* nothing may be in flight while the state moves */
        bool full = d->tp.shard == AMPC_DIST_SHARD_FULL;
        if (s == AMPC_OK && full) s = ampc_dist_agree(d, ampci_dist_full_gather_all(d)); /* the model's tensors */
        if (s == AMPC_OK) s = save_sharded(d, path, &st);
        if (full) ampci_dist_full_release_all(d);
    } else {
        s = d->rank == 0 ? ampc_checkpoint_save(path, &st) : AMPC_OK;
    }
    return ampc_dist_agree(d, s);
}
