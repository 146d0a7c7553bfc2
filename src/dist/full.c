/* full.c: shard FULL, FSDP2's parameter sharding on top of ZeRO-1. Every unit (a run of parameters of one
 * numbered module in the optimizer's order, or a run of root parameters) gets one storage laid out like its
 * bucket, so the unit's all-gather lands in place: each rank writes its slice (its F32 masters rounded to
 * the parameters' dtype on the device) and MPI_Iallgather fills in the others in the unit's host map (the
 * storage itself on the CPU; elsewhere a host copy, written back when the gather is waited for). Between
 * uses a non-root unit's pages are given back (the buffer type's discard, madvise DONTNEED on the CPU: the
 * addresses stay, so the raw pointers ops save for their backward stay valid) and its storage is marked
 * absent; the context's parameter hook, called by the op prologue and before a backward reads a saved
 * input, gathers the unit on first touch, starts the next unit's gather (the prefetch) and releases the
 * module gathered before, so forward and backward each hold about two modules whole at a time (FSDP2's
 * reshard after forward and after backward). Live and peak memory counts follow. */
#include "dist.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

size_t ampci_dist_unit_key(const char *name) {
    for (const char *c = name; *c;) {
        const char *end = strchr(c, '.');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        bool digits = len > 0;
        for (size_t i = 0; i < len; i++) digits &= isdigit((unsigned char)c[i]) != 0;
        if (digits) return (size_t)(c - name) + len;
        if (!end) break;
        c = end + 1;
    }
    return 0;
}

static ampc_ctx *ctx_of(const ampc_dist *d) { return d->opt->ctx; }

/* Starts unit u's all-gather: this rank's slice from its masters, the others' by MPI_Iallgather in place.
 * The storage stays absent (unreadable) until finish(). */
static ampc_status start(ampc_dist *d, int u) {
    ampc_ctx *ctx = ctx_of(d);
    ampci_unit *un = &d->units[u];
    const ampci_bucket *b = &d->buckets[un->bucket];
    ampci_storage *st = un->st;
    ampc_dtype dt = d->opt->params[b->param[0]].p->dtype;
    size_t ps = ampc_dtype_size(dt);
    ampci_dev_account(ctx, st->bytes, true);
    for (int k = 0; k < b->count; k++) { /* the own slice, rounded from the masters on the device */
        const ampci_param *pp = &d->opt->params[b->param[k]];
        ampc_status s = AMPCI_DEV(ctx, convert, .dst = st->data + (size_t)(b->offset[k] + pp->lo) * ps, .dst_dt = dt,
                                  .src = pp->master, .src_dt = AMPC_DTYPE_F32, .n = pp->hi - pp->lo);
        if (s != AMPC_OK) return s;
    }
    /* MPI fills the host map in place (the storage itself on the CPU); finish() ends the map */
    void *host = ampci_host_map(ctx, st->data, st->bytes, AMPCI_MAP_READ | AMPCI_MAP_WRITE, AMPC_SYNC_COMM,
                                "parameter all-gather", &un->map);
    if (!host) return ampc_last_status();
    int err = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host, (int)(b->elems / d->size),
                             ampci_dist_type(d, dt), d->comm, &un->req);
    if (err != MPI_SUCCESS) {
        ampci_host_unmap(&un->map);
        return ampci_dist_mpi_fail(d, err, "parameter all-gather");
    }
    un->filling = true;
    return AMPC_OK;
}

static ampc_status finish(ampc_dist *d, int u) {
    ampci_unit *un = &d->units[u];
    if (!un->filling) return AMPC_OK;
    un->filling = false;
    ampc_status s = ampci_dist_wait(d, &un->req, "parameter all-gather");
    ampci_host_unmap(&un->map); /* the gathered unit to the device */
    if (s == AMPC_OK) un->st->absent = false;
    return s;
}

static void release(ampc_dist *d, int u) {
    ampci_unit *un = &d->units[u];
    if (un->st->absent && !un->filling) return;
    if (un->filling) finish(d, u); /* MPI is still writing there */
    ampci_dev_discard(ctx_of(d), un->st->data, un->st->bytes);
    ampci_dev_account(ctx_of(d), un->st->bytes, false);
    un->st->absent = true;
}

/* Do units u and v hold parameters of the same module? (A module's parameters may sit in two runs of the
 * optimizer's order, so two units.) */
static bool same_module(const ampc_dist *d, int u, int v) {
    const char *a = d->opt->params[d->buckets[u].param[0]].p->name, *b = d->opt->params[d->buckets[v].param[0]].p->name;
    size_t ka = ampci_dist_unit_key(a);
    return ka == ampci_dist_unit_key(b) && strncmp(a, b, ka) == 0;
}

/* FSDP's prefetch: having gathered unit u for use, start the gather of the next unit of another module in
 * the direction the walk goes (units are in backward order: the forward goes down, the backward up), so
 * its all-gather runs under u's work. */
static ampc_status prefetch(ampc_dist *d, int u, int prev) {
    int dir = prev >= 0 && u > prev ? 1 : -1;
    for (int v = u + dir; v >= 0 && v < d->nbuckets; v += dir) {
        if (d->units[v].root || same_module(d, u, v)) continue;
        return d->units[v].st->absent && !d->units[v].filling ? start(d, v) : AMPC_OK;
    }
    return AMPC_OK;
}

/* Unit u whole; keep_others: do not release the module gathered before, nor prefetch (gather_all).
 * Gathering a unit of another module releases every unit of the resident one. */
static ampc_status gather(ampc_dist *d, int u, bool keep_others) {
    ampci_unit *un = &d->units[u];
    if (!un->st->absent) return AMPC_OK;
    int prev = d->resident;
    if (!keep_others && prev >= 0 && !same_module(d, prev, u))
        for (int v = 0; v < d->nbuckets; v++)
            if (!d->units[v].root && same_module(d, v, prev)) release(d, v);
    ampc_status s = un->filling ? AMPC_OK : start(d, u);
    if (s == AMPC_OK) s = finish(d, u);
    if (s != AMPC_OK || un->root || keep_others) return s;
    d->resident = u;
    return prefetch(d, u, prev);
}

static ampc_status param_hook(void *arg, ampci_storage *st) {
    ampc_dist *d = arg;
    for (int u = 0; u < d->nbuckets; u++)
        if (d->units[u].st == st) return gather(d, u, false);
    return AMPC_OK; /* not one of ours: the op reports the missing data */
}

/* A storage for unit u, laid out as its bucket, holding the parameters' current values. */
static ampc_status make_storage(ampc_dist *d, int u, ampci_storage **old) {
    ampc_ctx *ctx = ctx_of(d);
    const ampci_bucket *b = &d->buckets[u];
    ampc_tensor *p0 = d->opt->params[b->param[0]].p;
    size_t ps = ampc_dtype_size(p0->dtype);
    ampci_storage *st = ampci_alloc(ctx, sizeof *st, "shard full: a unit");
    unsigned char *data = st ? ampci_dev_alloc(ctx, (size_t)b->elems * ps, "shard full: a unit") : NULL;
    if (!data) {
        ampci_free(ctx, st, sizeof *st);
        return ampc_last_status();
    }
    ampci_dev_memset(ctx, data, 0, (size_t)b->elems * ps);
    *st = (ampci_storage){.ctx = ctx,
                          .buft = ctx->dev_mem.buft,
                          .data = data,
                          .bytes = (size_t)b->elems * ps,
                          .version = p0->storage->version};
    for (int k = 0; k < b->count; k++) {
        ampc_tensor *p = d->opt->params[b->param[k]].p;
        ampci_dev_copy(ctx, data + (size_t)b->offset[k] * ps, ampci_dev_ptr(p), (size_t)ampc_tensor_numel(p) * ps);
        *old = p->storage; /* the model's block: every parameter leaves it */
        p->storage->refs--;
        p->storage = st, p->offset = b->offset[k];
        st->refs++;
    }
    d->units[u] = (ampci_unit){
        .bucket = u, .st = st, .root = ampci_dist_unit_key(p0->name) == 0, .req = MPI_REQUEST_NULL};
    return AMPC_OK;
}

ampc_status ampci_dist_full_attach(ampc_dist *d) {
    ampc_ctx *ctx = ctx_of(d);
    if (!(d->units = calloc((size_t)d->nbuckets, sizeof *d->units)))
        return ampci_fail(AMPC_STATUS_OOM, "ampc_dist_attach: out of memory");
    d->resident = -1;
    ampci_storage *old = NULL;
    for (int u = 0; u < d->nbuckets; u++) {
        ampc_status s = make_storage(d, u, &old);
        if (s != AMPC_OK) return s;
    }
    if (old && old->refs == 1) { /* only the model's own handle is left on its block: its memory goes */
        ampci_dev_free(ctx, old->data, old->bytes);
        old->data = NULL;
    }
    for (int u = 0; u < d->nbuckets; u++)
        if (!d->units[u].root) release(d, u);
    return ampci_tensor_on_absent(ctx, param_hook, d);
}

ampc_status ampci_dist_full_after_step(ampc_dist *d) {
    ampc_status s = AMPC_OK;
    for (int u = 0; u < d->nbuckets; u++) {
        ampci_unit *un = &d->units[u];
        un->st->version++; /* new values: saved-tensor checks and the cast cache must see it */
        if (!un->root) {
            release(d, u);
            d->resident = -1;
        } else if (s == AMPC_OK) { /* root units stay whole: gathered again from the new masters */
            release(d, u);
            if ((s = start(d, u)) == AMPC_OK) s = finish(d, u);
        }
    }
    return s;
}

ampc_status ampci_dist_full_gather_all(ampc_dist *d) {
    ampc_status s = AMPC_OK;
    for (int u = 0; u < d->nbuckets && s == AMPC_OK; u++) s = gather(d, u, true);
    return s;
}

void ampci_dist_full_release_all(ampc_dist *d) {
    for (int u = 0; u < d->nbuckets; u++)
        if (!d->units[u].root) release(d, u);
    d->resident = -1;
}

void ampci_dist_full_detach(ampc_dist *d) {
    if (!d->units) return;
    ampc_ctx *ctx = ctx_of(d);
    if (ampci_dist_full_gather_all(d) != AMPC_OK) /* the parameters cannot be made whole: say so, once */
        ampci_log(ctx, AMPC_LOG_WARN, "ampc_dist: detaching a fully sharded optimizer: %s", ampc_last_error());
    ampci_tensor_off_absent(ctx, param_hook, d);
    free(d->units);
    d->units = NULL;
}
