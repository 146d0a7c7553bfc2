/* ddp.c: the reducer. Attaching an optimizer broadcasts rank 0's parameters and state, checks them by a
 * checksum, lays the parameters into buckets (in the order backward finishes them; the first
 * one small, as DDP's, so communication starts early) and installs two hooks: the autograd grad-ready
 * hook, which packs a bucket (pre-divided, in the reduce dtype) and starts its non-blocking reduction
 * the moment its last gradient is final, and the optimizer's dist calls, which wait for the reductions
 * before anything reads a gradient, agree on decisions, and (sharded) all-gather updated parameters.
 * Sharded (ZeRO-1), each bucket is reduce-scattered and rank r owns the r-th of its N equal slices.
 * MPI works on host memory: a view bucket (F32 gradients reduced in F32: the gradients' own device memory)
 * reaches it through its host map, held while the reduction is in flight (the bucket itself on the CPU);
 * other buckets are host staging buffers packed from, and unpacked into, the gradients' host maps. */
#include "dist.h"

#include "../amp/amp.h"
#include "../autograd/autograd.h"
#include "../kernels/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_BUCKET_BYTES (1 << 20) /* DDP's _DEFAULT_FIRST_BUCKET_BYTES */
#define CHUNK 2048

/* ---- packing: gradient (any dtype) * factor -> reduce dtype, and back ---- */

/* dst (dt_dst) = src (dt_src) * f, n elements, through F32 (f a power of two keeps it exact). F32 to F32
 * (the common case: F32 gradients, F32 reduction) in one pass, or a copy when f is 1. */
static void scale_convert(void *dst, ampc_dtype ddt, const void *src, ampc_dtype sdt, int64_t n, float f) {
    if (ddt == AMPC_DTYPE_F32 && sdt == AMPC_DTYPE_F32) {
        if (f == 1.0f) memcpy(dst, src, (size_t)n * sizeof(float));
        else
            for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = ((const float *)src)[i] * f;
        return;
    }
    float tmp[CHUNK];
    size_t ds = ampc_dtype_size(ddt), ss = ampc_dtype_size(sdt);
    for (int64_t i = 0; i < n; i += CHUNK) {
        size_t m = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        ampc_convert(tmp, AMPC_DTYPE_F32, (const char *)src + (size_t)i * ss, sdt, m);
        if (f != 1.0f)
            for (size_t k = 0; k < m; k++) tmp[k] *= f;
        ampc_convert((char *)dst + (size_t)i * ds, ddt, tmp, AMPC_DTYPE_F32, m);
    }
}

/* x[0..n) *= f in place, on the device (F32; the unscale kernel, f a power of two keeps it exact). */
static ampc_status scale_in_place(const ampc_dist *d, float *x, int64_t n, float f) {
    if (f == 1.0f || n <= 0) return AMPC_OK;
    ampci_grad_list one = {.g = (void *const[]){x}, .dt = (const ampc_dtype[]){AMPC_DTYPE_F32}, .n = &n, .count = 1};
    return AMPCI_DEV(d->opt->ctx, grad_unscale, .list = one, .factor = f, .flag = NULL);
}

static ampc_status pack(ampc_dist *d, ampci_bucket *b) {
    ampc_optim *opt = d->opt;
    ampc_ctx *ctx = opt->ctx;
    ampc_dtype rd = d->tp.reduce_dtype;
    size_t rs = ampc_dtype_size(rd);
    ampc_status s = AMPC_OK;
    if (b->buf_t) { /* the gradients are the bucket: pre-divide in place, zero the absent ones */
        for (int k = 0; k < b->count && s == AMPC_OK; k++) {
            const ampci_param *pp = &opt->params[b->param[k]];
            float *x = (float *)b->buf + b->offset[k];
            if (pp->p->grad) s = scale_in_place(d, x, pp->n, (float)d->pre);
            else ampci_dev_memset(ctx, x, 0, (size_t)pp->n * sizeof *x);
        }
        return s; /* the padding was zeroed once and nothing writes it */
    }
    for (int k = 0; k < b->count; k++) { /* absent gradients count as zeros; host staging (b->buf) */
        const ampci_param *pp = &opt->params[b->param[k]];
        const ampc_tensor *g = pp->p->grad;
        char *dst = (char *)b->buf + (size_t)b->offset[k] * rs;
        if (!g) {
            memset(dst, 0, (size_t)pp->n * rs);
            continue;
        }
        ampci_host_mapping m;
        const void *src = ampci_tensor_host_map(g, AMPCI_MAP_READ, AMPC_SYNC_COMM, "gradient reduction", &m);
        if (!src) return ampc_last_status();
        scale_convert(dst, rd, src, g->dtype, pp->n, (float)d->pre);
        ampci_host_unmap(&m);
    }
    int64_t used = b->offset[b->count - 1] + opt->params[b->param[b->count - 1]].n; /* the padding too */
    memset((char *)b->buf + (size_t)used * rs, 0, (size_t)(b->elems - used) * rs);
    return AMPC_OK;
}

/* The reduced values back into the gradients: everything (all-reduce) or the owned slice (sharded). */
static ampc_status unpack(ampc_dist *d, ampci_bucket *b) {
    ampc_optim *opt = d->opt;
    ampc_dtype rd = d->tp.reduce_dtype;
    size_t rs = ampc_dtype_size(rd);
    int64_t slice = b->elems / d->size, base = d->tp.shard ? (int64_t)d->rank * slice : 0;
    if (b->buf_t) { /* the reduced values are the gradients: the owned slice back in place, post-divided */
        float *x = b->buf;
        /* reduce-scatter left it at the start; base = rank * slice, so the two ranges never overlap */
        if (base) ampci_dev_copy(opt->ctx, x + base, x, (size_t)slice * sizeof *x);
        ampc_status s = scale_in_place(d, x + base, d->tp.shard ? slice : b->elems, (float)d->post);
        if (s != AMPC_OK) return s;
        for (int k = 0; k < b->count; k++) {
            ampc_tensor *p = opt->params[b->param[k]].p;
            if (!d->had_grad[b->param[k]]) continue;
            p->grad = p->grad_slot;
            p->grad->storage->version++;
        }
        return AMPC_OK;
    }
    for (int k = 0; k < b->count; k++) {
        ampci_param *pp = &opt->params[b->param[k]];
        ampc_tensor *p = pp->p;
        if (!d->had_grad[b->param[k]]) continue; /* no rank had one */
        if (!p->grad) p->grad = p->grad_slot;    /* reduced from other ranks' contributions */
        ampc_tensor *g = p->grad;
        size_t gs = ampc_dtype_size(g->dtype);
        int64_t lo = d->tp.shard ? pp->lo : 0, hi = d->tp.shard ? pp->hi : pp->n;
        if (hi > lo) { /* host staging into the gradient's host map (write only: every value is written) */
            ampci_host_mapping m;
            void *dst = ampci_host_map(g->ctx, ampci_dev_ptr(g) + (size_t)lo * gs, (size_t)(hi - lo) * gs,
                                       AMPCI_MAP_WRITE, AMPC_SYNC_COMM, "gradient reduction", &m);
            if (!dst) return ampc_last_status();
            scale_convert(dst, g->dtype, (char *)b->buf + (size_t)(b->offset[k] + lo - base) * rs, rd, hi - lo,
                          (float)d->post);
            ampci_host_unmap(&m);
        }
        g->storage->version++;
    }
    return AMPC_OK;
}

/* ---- launching and waiting ---- */

/* The bucket's values for MPI: a view bucket (device memory) through its host map, held while the
 * reduction is in flight (the bucket itself on the CPU; elsewhere a copy, written back by settle()); a
 * staging bucket is host memory already. */
static void *bucket_host(ampc_dist *d, ampci_bucket *b) {
    if (!b->buf_t) return b->buf;
    return ampci_host_map(d->opt->ctx, b->buf, (size_t)b->elems * sizeof(float), AMPCI_MAP_READ | AMPCI_MAP_WRITE,
                          AMPC_SYNC_COMM, "gradient reduction", &b->map);
}

/* A reduction is over (waited for, or refused): the view bucket's host map ends (not while MPI may still
 * write there: a wait that failed leaves it). */
static void settle(ampci_bucket *b) {
    if (b->buf_t && b->req == MPI_REQUEST_NULL) ampci_host_unmap(&b->map);
}

static ampc_status launch(ampc_dist *d, ampci_bucket *b) {
    ampc_status s = pack(d, b);
    void *buf = s == AMPC_OK ? bucket_host(d, b) : NULL;
    if (!buf) return s == AMPC_OK ? ampc_last_status() : s;
    MPI_Datatype t = ampci_dist_type(d, d->tp.reduce_dtype);
    MPI_Op op = ampci_dist_sum(d, d->tp.reduce_dtype);
    int err = d->tp.shard
                  ? MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)(b->elems / d->size), t, op, d->comm, &b->req)
                  : MPI_Iallreduce(MPI_IN_PLACE, buf, (int)b->elems, t, op, d->comm, &b->req);
    if (err != MPI_SUCCESS) {
        if (b->buf_t) ampci_host_unmap(&b->map); /* nothing was started */
        return ampci_dist_mpi_fail(d, err, "gradient reduction");
    }
    b->launched = true;
    b->t_launch = ampci_dist_now();
    return AMPC_OK;
}

/* A new backward: every bucket waits for all its gradients again. */
static void backward_begins(ampc_dist *d) {
    for (int i = 0; i < d->nbuckets; i++) d->buckets[i].pending = d->buckets[i].count, d->buckets[i].launched = false;
    d->in_backward = true;
    d->failed = AMPC_OK; /* a refused step is forgotten once a new backward starts */
}

static int param_index(const ampc_dist *d, const ampc_tensor *t, int hint) {
    const ampc_optim *opt = d->opt;
    for (int k = 0; k < opt->n; k++) { /* backward reports in reverse order: start at the hint, go down */
        int i = ((hint - k) % opt->n + opt->n) % opt->n;
        if (opt->params[i].p == t) return i;
    }
    return -1;
}

static void grad_ready(void *arg, ampc_tensor *leaf) {
    ampc_dist *d = arg;
    if (!d->opt) return;
    if (d->no_sync) { /* accumulation: the gradients add up here, the last backward reduces them */
        d->unsynced = true;
        if (d->in_backward && !d->failed) { /* into buckets already being reduced: the sums would be torn */
            d->failed = AMPC_STATUS_STATE;
            d->failed_why = "a backward under ampc_dist_set_sync(false) after one that reduced, before the step: "
                            "the backward with sync on must be the step's last";
        }
        return;
    }
    if (!d->in_backward) backward_begins(d);
    if (d->failed) return;
    if (!leaf) { /* a node ended: let MPI move the reductions in flight along */
        for (int i = 0; i < d->nbuckets; i++) {
            ampci_bucket *b = &d->buckets[i];
            if (!b->launched || b->req == MPI_REQUEST_NULL) continue;
            int done = 0;
            MPI_Test(&b->req, &done, MPI_STATUS_IGNORE);
            if (!done) break;
            b->t_done = ampci_dist_now();
        }
        return;
    }
    int i = param_index(d, leaf, d->hint);
    if (i < 0) return; /* a leaf of no concern to this optimizer */
    d->hint = i;
    ampci_bucket *b = &d->buckets[d->bucket_of[i]];
    if (b->launched || b->pending <= 0) {
        d->failed = AMPC_STATUS_STATE;
        d->failed_why = "a second backward reached a bucket already sent: one backward with sync on per step "
                        "(accumulate the others under ampc_dist_set_sync(false))";
        return;
    }
    if (--b->pending == 0) {
        ampc_status s = launch(d, b);
        if (s != AMPC_OK) d->failed = s, d->failed_why = "a reduction failed";
    }
}

/* After a refused backward: what was launched is waited for (its buffers are in use), nothing is
 * unpacked, and every later call refuses too, until a new backward begins. */
static ampc_status refuse(ampc_dist *d) {
    if (d->in_backward)
        for (int i = 0; i < d->nbuckets; i++) {
            if (d->buckets[i].req != MPI_REQUEST_NULL) ampci_dist_wait(d, &d->buckets[i].req, "gradient reduction");
            settle(&d->buckets[i]);
        }
    d->in_backward = false;
    return ampci_fail(d->failed,
                      "data parallel: the gradients of the last backward cannot be used (%s); zero them and "
                      "start the step again",
                      d->failed_why);
}

/* Which parameters have a gradient on any rank: those that have none anywhere stay without one (the
 * optimizer leaves them alone, as one process and DDP do). */
static ampc_status agree_presence(ampc_dist *d) {
    for (int i = 0; i < d->opt->n; i++) d->had_grad[i] = d->opt->params[i].p->grad != NULL;
    MPI_Request r;
    int err = MPI_Iallreduce(MPI_IN_PLACE, d->had_grad, d->opt->n, MPI_UNSIGNED_CHAR, MPI_MAX, d->comm, &r);
    return ampci_dist_complete(d, err, &r, "gradient presence");
}

ampc_status ampc_dist_set_sync(ampc_dist *d, bool sync) {
    if (!d) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_set_sync: the handle is NULL");
    d->no_sync = !sync;
    return AMPC_OK;
}

ampc_status ampc_dist_sync_grads(ampc_dist *d) {
    if (!d || !d->opt) return ampci_fail(AMPC_STATUS_STATE, "ampc_dist_sync_grads: no optimizer is attached");
    if (d->failed) return refuse(d);
    if (d->unsynced && !d->in_backward)
        return ampci_fail(AMPC_STATUS_STATE, "data parallel: the gradients were accumulated under "
                                             "ampc_dist_set_sync(false) and never reduced; run the last "
                                             "backward of the step with sync on");
    if (!d->in_backward) return AMPC_OK;
    double t0 = ampci_dist_now();
    ampc_status s = agree_presence(d);
    /* parameters no node of this backward read: their (absent) gradients count as zeros, in bucket order
     * as every rank launches them */
    for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++)
        if (!d->buckets[i].launched) s = launch(d, &d->buckets[i]);
    for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++) {
        ampci_bucket *b = &d->buckets[i];
        if (b->req != MPI_REQUEST_NULL) s = ampci_dist_wait(d, &b->req, "gradient reduction");
        if (s != AMPC_OK) break;
        if (b->t_done == 0) b->t_done = ampci_dist_now();
        d->stats.comm_seconds += b->t_done - b->t_launch;
        b->t_done = 0;
    }
    d->stats.exposed_seconds += ampci_dist_now() - t0; /* waiting only: unpacking is work either way */
    for (int i = 0; i < d->nbuckets; i++) settle(&d->buckets[i]);
    for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++) s = unpack(d, &d->buckets[i]);
    d->in_backward = false;
    if (s != AMPC_OK) return s;
    d->unsynced = false;
    d->stats.steps++;
    return AMPC_OK;
}

/* ---- the optimizer's dist calls ---- */

static ampc_status sync_cb(void *arg) { return ampc_dist_sync_grads(arg); }

static ampc_status reduce_cb(void *arg, double *v, int n, ampci_reduce_op op) {
    ampc_dist *d = arg;
    if (d->no_agreement && op != AMPCI_REDUCE_SUM) return AMPC_OK; /* the mutation test: ranks decide alone */
    return ampc_dist_allreduce(d, v, n, AMPC_DTYPE_F64,
                               op == AMPCI_REDUCE_MAX   ? AMPC_DIST_MAX
                               : op == AMPCI_REDUCE_MIN ? AMPC_DIST_MIN
                                                        : AMPC_DIST_SUM);
}

/* Sharded: the owned slice of every parameter goes to every rank, in the parameters' dtype. */
static ampc_status gather_cb(void *arg) {
    ampc_dist *d = arg;
    ampc_optim *opt = d->opt;
    ampc_status s = AMPC_OK;
    for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++) {
        ampci_bucket *b = &d->buckets[i];
        ampc_dtype pdt = opt->params[b->param[0]].p->dtype;
        size_t ps = ampc_dtype_size(pdt);
        for (int k = 0; k < b->count; k++) { /* the own slices into the host staging buffer */
            const ampci_param *pp = &opt->params[b->param[k]];
            ampci_sync_read(opt->ctx, AMPC_SYNC_COMM, (char *)b->pbuf + (size_t)(b->offset[k] + pp->lo) * ps,
                            ampci_dev_ptr(pp->p) + (size_t)pp->lo * ps, (size_t)(pp->hi - pp->lo) * ps);
        }
        int err = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->pbuf, (int)(b->elems / d->size),
                                 ampci_dist_type(d, pdt), d->comm, &b->req);
        s = err != MPI_SUCCESS ? ampci_dist_mpi_fail(d, err, "parameter all-gather") : AMPC_OK;
    }
    for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++) {
        ampci_bucket *b = &d->buckets[i];
        if ((s = ampci_dist_wait(d, &b->req, "parameter all-gather")) != AMPC_OK) break;
        size_t ps = ampc_dtype_size(opt->params[b->param[0]].p->dtype);
        for (int k = 0; k < b->count; k++) {
            ampc_tensor *p = opt->params[b->param[k]].p;
            ampci_dev_copy_in(opt->ctx, ampci_dev_ptr(p), (const char *)b->pbuf + (size_t)b->offset[k] * ps,
                              (size_t)ampc_tensor_numel(p) * ps);
            p->storage->version++; /* the weight-cast cache must see the new values */
        }
    }
    return s;
}

static ampc_status after_step_cb(void *arg) {
    ampc_dist *d = arg;
    return d->tp.shard == AMPC_DIST_SHARD_FULL ? ampci_dist_full_after_step(d) : gather_cb(d);
}

static void detach_cb(void *arg) { ampci_dist_detach(arg); }

ampc_status ampc_dist_unshard(ampc_dist *d) {
    if (!d) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_unshard: d is NULL");
    return d->opt && d->units ? ampci_dist_full_gather_all(d) : AMPC_OK;
}

/* ---- attaching ---- */

static void free_buckets(ampc_dist *d) {
    for (int i = 0; i < d->nbuckets; i++) {
        ampci_bucket *b = &d->buckets[i];
        free(b->param), free(b->offset), free(b->pbuf);
        if (b->buf_t) ampc_tensor_free(b->buf_t); /* the gradient slots keep its storage alive */
        else free(b->buf);
    }
    free(d->buckets), free(d->bucket_of), free(d->had_grad);
    d->buckets = NULL, d->bucket_of = NULL, d->had_grad = NULL, d->nbuckets = 0;
}

/* FP8 delayed scaling: the largest amax of every rank (TransformerEngine's reduce_amax), so the ranks
 * compute the same scales; a failure is reported by the next synchronisation, as the hook's are. */
static void amax_cb(void *arg, float *amax, int n) {
    ampc_dist *d = arg;
    ampc_status s = ampc_dist_allreduce(d, amax, n, AMPC_DTYPE_F32, AMPC_DIST_MAX);
    if (s != AMPC_OK && d->failed == AMPC_OK) d->failed = s, d->failed_why = "the FP8 amax reduction failed";
}

void ampci_dist_detach(ampc_dist *d) {
    if (!d || !d->opt) return;
    ampci_dist_full_detach(d);
    ampci_optim_set_dist(d->opt, NULL);
    ampci_fp8_off_amax(d->opt->ctx, amax_cb, d);
    ampci_autograd_off_grad_ready(d->opt->ctx, grad_ready, d);
    free_buckets(d);
    d->opt = NULL;
}

/* Bucket number d->nbuckets: parameters idx[0..count), laid out in that order, padded to a multiple of
 * the world size (the slices of a reduce-scatter are equal). */
static ampc_status add_bucket(ampc_dist *d, const int *idx, int count) {
    ampc_optim *opt = d->opt;
    size_t rs = ampc_dtype_size(d->tp.reduce_dtype), ps = ampc_dtype_size(opt->params[idx[0]].p->dtype);
    ampci_bucket *b = &d->buckets[d->nbuckets];
    *b = (ampci_bucket){.count = count, .req = MPI_REQUEST_NULL};
    b->param = malloc((size_t)count * sizeof *b->param);
    b->offset = malloc((size_t)count * sizeof *b->offset);
    if (!b->param || !b->offset) return ampci_fail(AMPC_STATUS_OOM, "ampc_dist_attach: out of memory");
    int64_t at = 0;
    for (int k = 0; k < count; k++) {
        b->param[k] = idx[k], b->offset[k] = at, at += opt->params[idx[k]].n;
        d->bucket_of[idx[k]] = d->nbuckets;
    }
    b->elems = (at + d->size - 1) / d->size * d->size;
    if (b->elems / d->size > (1 << 30))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_attach: parameter '%s' is too large for one reduction",
                          opt->params[idx[0]].p->name);
    bool gather = d->tp.shard == AMPC_DIST_SHARD_OPTIMIZER; /* FULL gathers into the unit's own storage */
    bool view = d->tp.reduce_dtype == AMPC_DTYPE_F32;
    for (int k = 0; k < count; k++) view &= opt->params[idx[k]].p->grad_slot->dtype == AMPC_DTYPE_F32;
    if (view && (b->buf_t = ampc_tensor_new(opt->ctx, AMPC_DTYPE_F32, 1, &b->elems)))
        b->buf = ampci_dev_ptr(b->buf_t); /* made zero, the padding included */
    else if (!view) b->buf = malloc((size_t)b->elems * rs);
    b->pbuf = gather ? malloc((size_t)b->elems * ps) : NULL;
    d->nbuckets++; /* counted now, so that free_buckets frees what was made */
    if (!b->buf || (gather && !b->pbuf))
        return ampci_fail(AMPC_STATUS_OOM, "ampc_dist_attach: out of memory for a bucket of %lld elements",
                          (long long)b->elems);
    for (int k = 0; view && k < count; k++) { /* the gradient slots move into the bucket */
        ampc_tensor *p = opt->params[idx[k]].p, *old = p->grad_slot;
        ampc_tensor *slot = ampci_tensor_owned_view(b->buf_t, b->offset[k], p->ndim, p->shape);
        if (!slot) return ampc_last_status();
        if (p->grad == old) /* a gradient already there moves along */
            ampci_dev_copy(opt->ctx, ampci_dev_ptr(slot), ampci_dev_ptr(old),
                           (size_t)ampc_tensor_numel(p) * sizeof(float)),
                p->grad = slot;
        p->grad_slot = slot;
        ampc_tensor_free(old);
    }
    d->stats.bytes_reduced += b->elems * (int64_t)rs;
    if (d->tp.shard) d->stats.bytes_gathered += b->elems * (int64_t)ps;
    return AMPC_OK;
}

/* Do parameters i and j (consecutive) share a bucket? Not across a dtype change (a bucket is all-gathered
 * in one dtype), nor, for shard FULL, across units. */
static bool same_bucket(const ampc_dist *d, int i, int j) {
    const ampc_tensor *a = d->opt->params[i].p, *b = d->opt->params[j].p;
    if (a->dtype != b->dtype) return false;
    if (d->tp.shard != AMPC_DIST_SHARD_FULL) return true;
    size_t ka = ampci_dist_unit_key(a->name), kb = ampci_dist_unit_key(b->name);
    return ka == kb && strncmp(a->name, b->name, ka) == 0;
}

/* The order backward finishes gradients in, as well as it can be known before a backward ran: parameters
 * that share a storage (a model's parameter block: declaration order, which is forward order) by
 * descending offset, the others in reverse optimizer order. The optimizer's own order is no guide: a
 * model adds its weights and its no-decay parameters as two groups. */
static const ampc_optim *g_sort_opt; /* qsort has no context argument; attach runs on one thread */
static int backward_first(const void *x, const void *y) {
    int i = *(const int *)x, j = *(const int *)y;
    const ampc_tensor *a = g_sort_opt->params[i].p, *b = g_sort_opt->params[j].p;
    if (a->storage == b->storage && a->offset != b->offset) return a->offset < b->offset ? 1 : -1;
    return (i < j) - (i > j);
}

/* Buckets in backward order, closed at the byte cap (the first at 1 MiB, so communication starts early;
 * shard FULL: one bucket per unit whatever its size) and wherever same_bucket says. */
static ampc_status make_buckets(ampc_dist *d) {
    ampc_optim *opt = d->opt;
    size_t rs = ampc_dtype_size(d->tp.reduce_dtype);
    int *order = malloc((size_t)opt->n * sizeof *order);
    d->buckets = calloc((size_t)opt->n, sizeof *d->buckets);
    d->bucket_of = calloc((size_t)opt->n, sizeof *d->bucket_of);
    d->had_grad = calloc((size_t)opt->n, 1);
    if (!order || !d->buckets || !d->bucket_of || !d->had_grad) {
        free(order);
        return ampci_fail(AMPC_STATUS_OOM, "ampc_dist_attach: out of memory");
    }
    for (int i = 0; i < opt->n; i++) order[i] = i;
    g_sort_opt = opt;
    qsort(order, (size_t)opt->n, sizeof *order, backward_first);
    int64_t cap = d->tp.bucket_bytes < FIRST_BUCKET_BYTES ? d->tp.bucket_bytes : FIRST_BUCKET_BYTES;
    ampc_status s = AMPC_OK;
    for (int at = 0; at < opt->n && s == AMPC_OK;) {
        int count = 1;
        int64_t bytes = opt->params[order[at]].n * (int64_t)rs;
        while (at + count < opt->n && same_bucket(d, order[at], order[at + count]) &&
               (d->tp.shard == AMPC_DIST_SHARD_FULL || bytes + opt->params[order[at + count]].n * (int64_t)rs <= cap))
            bytes += opt->params[order[at + count++]].n * (int64_t)rs;
        s = add_bucket(d, order + at, count);
        at += count;
        cap = d->tp.bucket_bytes;
    }
    free(order);
    d->stats.buckets = d->nbuckets;
    /* gradient blocks whose every slot moved into a bucket: their memory goes (the optimizer keeps the
     * handle, which frees nothing more) */
    for (int g = 0; g < opt->ngroups && s == AMPC_OK; g++) {
        ampc_tensor *blk = opt->groups[g].grad_block[AMPC_DTYPE_F32];
        if (blk && blk->storage->refs == 1 && blk->storage->data) {
            ampci_dev_free(opt->ctx, blk->storage->data, blk->storage->bytes);
            blk->storage->data = NULL;
        }
    }
    return s;
}

void ampci_dist_ranges(const ampc_dist *d, int rank, int64_t *lo, int64_t *hi) {
    const ampc_optim *opt = d->opt;
    for (int i = 0; i < d->nbuckets; i++) {
        const ampci_bucket *b = &d->buckets[i];
        int64_t slice = b->elems / d->size, a = (int64_t)rank * slice, e = a + slice;
        for (int k = 0; k < b->count; k++) {
            int64_t o = b->offset[k], n = opt->params[b->param[k]].n;
            int64_t l = a > o ? a - o : 0, h = e < o + n ? e - o : n;
            lo[b->param[k]] = l < h ? l : 0, hi[b->param[k]] = l < h ? h : 0;
        }
    }
}

/* FNV-1a over 8-byte words (then the tail bytes): a checksum, not a hash table's hash. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    size_t i = 0;
    for (uint64_t w; i + 8 <= n; i += 8) memcpy(&w, c + i, 8), h = (h ^ w) * 0x100000001b3ull;
    for (; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* Rank 0's parameters, masters and moments everywhere (a resumed run restored the same file on every rank,
 * a fresh one drew the same seed: this makes sure), then the checksum every rank must agree on. */
static ampc_status broadcast_state(ampc_dist *d) {
    ampc_optim *opt = d->opt;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < opt->n; i++) {
        ampci_param *pp = &opt->params[i];
        void *bufs[4] = {ampci_dev_ptr(pp->p), pp->master, pp->m, pp->v};
        ampc_dtype dts[4] = {pp->p->dtype, AMPC_DTYPE_F32, AMPC_DTYPE_F32, AMPC_DTYPE_F32};
        for (int k = 0; k < 4; k++) {
            if (!bufs[k]) continue;
            size_t bytes = (size_t)pp->n * ampc_dtype_size(dts[k]);
            ampci_host_mapping m; /* MPI works on host memory: the buffer itself on the CPU */
            void *host = ampci_host_map(opt->ctx, bufs[k], bytes, AMPCI_MAP_READ | AMPCI_MAP_WRITE, AMPC_SYNC_COMM,
                                        "ampc_dist_attach", &m);
            ampc_status s = host ? ampc_dist_broadcast(d, host, pp->n, dts[k], 0) : ampc_last_status();
            if (s == AMPC_OK) h = fnv(h, host, bytes);
            ampci_host_unmap(&m);
            if (s != AMPC_OK) return s;
        }
        pp->p->storage->version++;
    }
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)}; /* min and -max in one reduction */
    ampc_status s = ampc_dist_allreduce(d, v, 2, AMPC_DTYPE_I64, AMPC_DIST_MIN);
    if (s != AMPC_OK) return s;
    if (v[0] != -v[1])
        return ampci_fail(AMPC_STATUS_DIST,
                          "ampc_dist_attach: the parameters differ between ranks after the "
                          "broadcast from rank 0 (checksums %016llx .. %016llx)",
                          (unsigned long long)v[0], (unsigned long long)-v[1]);
    d->checksum = h;
    return AMPC_OK;
}

/* FSDP's gradient_predivide_factor: the largest power of two f with N % f == 0 and f <= N / f. */
static int predivide_factor(int n) {
    int f = 1;
    while (n % f == 0 && n / f > f) f *= 2;
    return f;
}

static ampc_status check_attach(ampc_dist *d, ampc_optim *opt, const ampc_dist_train_params *tp) {
    static const char fn[] = "ampc_dist_attach";
    if (!d || !opt) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: d and opt must not be NULL", fn);
    if (d->opt || opt->dist.sync_grads)
        return ampci_fail(AMPC_STATUS_STATE, "%s: %s", fn,
                          d->opt ? "this handle already has an optimizer" : "the optimizer is already attached");
    if (tp->reduce_dtype != AMPC_DTYPE_F32 && tp->reduce_dtype != AMPC_DTYPE_BF16 && tp->reduce_dtype != AMPC_DTYPE_F16)
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: reduce_dtype %s; expected F32, BF16 or F16", fn,
                          ampc_dtype_name(tp->reduce_dtype));
    if ((unsigned)tp->shard > AMPC_DIST_SHARD_FULL || tp->bucket_bytes < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: shard %d, bucket_bytes %lld", fn, (int)tp->shard,
                          (long long)tp->bucket_bytes);
    if (opt->n == 0) return ampci_fail(AMPC_STATUS_STATE, "%s: the optimizer has no parameters yet", fn);
    return AMPC_OK;
}

ampc_status ampc_dist_attach(ampc_dist *d, ampc_optim *opt, const ampc_dist_train_params *params) {
    ampc_dist_train_params tp = params ? *params : (ampc_dist_train_params){0};
    ampc_status s = check_attach(d, opt, &tp);
    if (s != AMPC_OK) return s;
    if (tp.bucket_bytes == 0) tp.bucket_bytes = 25 << 20;
    d->opt = opt, d->tp = tp, d->stats = (ampc_dist_stats){0};
    if (d->weight == 0) d->weight = 1;
    int f = predivide_factor(d->size);
    d->pre = d->weight / f, d->post = (double)f / d->size;
    if ((s = broadcast_state(d)) == AMPC_OK) s = make_buckets(d);
    if (s == AMPC_OK && tp.shard) {
        int64_t *lo = malloc((size_t)opt->n * sizeof *lo), *hi = malloc((size_t)opt->n * sizeof *hi);
        if (!lo || !hi) s = ampci_fail(AMPC_STATUS_OOM, "ampc_dist_attach: out of memory");
        else
            ampci_dist_ranges(d, d->rank, lo, hi),
                s = ampci_optim_set_ranges(opt, lo, hi, tp.shard == AMPC_DIST_SHARD_FULL);
        free(lo), free(hi);
    }
    if (s == AMPC_OK && tp.shard == AMPC_DIST_SHARD_FULL) s = ampci_dist_full_attach(d);
    if (s != AMPC_OK) {
        free_buckets(d);
        d->opt = NULL;
        return s;
    }
    ampci_optim_set_dist(opt, &(ampci_optim_dist){.arg = d,
                                                  .sync_grads = sync_cb,
                                                  .reduce = reduce_cb,
                                                  .after_step = tp.shard ? after_step_cb : NULL,
                                                  .detach = detach_cb,
                                                  .sharded = tp.shard != AMPC_DIST_SHARD_NONE});
    s = ampci_autograd_on_grad_ready(opt->ctx, grad_ready, d);
    return s == AMPC_OK ? ampci_fp8_on_amax(opt->ctx, amax_cb, d) : s;
}

ampc_status ampc_dist_set_grad_weight(ampc_dist *d, double w) {
    if (!d || !(w > 0) || !isfinite(w))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_set_grad_weight: weight %g; expected > 0", w);
    d->weight = w;
    if (d->opt) d->pre = w / predivide_factor(d->size);
    return AMPC_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ampc_status ampc_dist_time_reduction(ampc_dist *d, int reps, double *seconds) {
    if (!d || !d->opt || reps < 1 || reps > 100 || !seconds)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_dist_time_reduction: an attached handle, 1 <= reps <= 100 "
                          "and seconds are needed (reps %d)",
                          reps);
    ampc_status s = ampc_dist_sync_grads(d);
    double t[100];
    for (int r = 0; r < reps && s == AMPC_OK; r++) {
        if ((s = ampc_dist_barrier(d)) != AMPC_OK) break;
        double t0 = ampci_dist_now();
        for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++) s = launch(d, &d->buckets[i]);
        for (int i = 0; i < d->nbuckets && s == AMPC_OK; i++)
            s = ampci_dist_wait(d, &d->buckets[i].req, "gradient reduction");
        for (int i = 0; i < d->nbuckets; i++) settle(&d->buckets[i]);
        t[r] = ampci_dist_now() - t0;
    }
    if (s != AMPC_OK) return s;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *seconds = t[reps / 2];
    return AMPC_OK;
}

ampc_status ampc_dist_get_stats(const ampc_dist *d, ampc_dist_stats *out) {
    if (!d || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_get_stats: d and out must not be NULL");
    *out = d->stats;
    return AMPC_OK;
}

void ampc_dist_reset_stats(ampc_dist *d) {
    if (!d) return;
    d->stats.steps = 0, d->stats.comm_seconds = d->stats.exposed_seconds = 0;
}
