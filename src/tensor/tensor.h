/* tensor.h: the tensor struct and the helpers the tensor files share. A tensor is a strided window
 * (dtype, shape, element strides, element offset) on a storage; views share the storage and with it the
 * version counter. Owned storage is reference-counted (the owning tensor plus every arena view of it);
 * arena storage dies with the step and needs no count. */
#ifndef AMPC_TENSOR_H
#define AMPC_TENSOR_H

#include "../kernels/device.h"

typedef struct ampci_storage {
    ampc_ctx *ctx;
    const ampci_buft *buft; /* the memory data lives in: its context's device's (core.h) */
    unsigned char *data;    /* a device address: dereference only through the device (kernels/device.h) */
    size_t bytes;
    int refs; /* owned storage only */
    bool arena;
    uint64_t version;
    /* step storage only: recorded nodes whose backward reads it (autograd), and whether the code that
     * made it is done with it (ampci_tensor_release): both false/zero, the data goes back early */
    int saves;
    bool released;
    /* a sharded parameter between uses (src/dist, shard FULL): the pages are discarded; only after the
     * context's parameter hook gathered it may it be read */
    bool absent;
} ampci_storage;

struct ampci_node;

struct ampc_tensor {
    ampc_ctx *ctx;
    ampci_storage *storage;
    ampc_dtype dtype;
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t stride[AMPC_MAX_DIMS]; /* in elements */
    int64_t offset;                /* in elements, into storage->data */
    bool owned;
    /* autograd (src/autograd): a leaf that requires grad has node == NULL and collects `grad`; an op
     * output that requires grad has the node that made it */
    bool requires_grad;
    struct ampci_node *node;
    ampc_tensor *grad;
    ampc_tensor *grad_slot; /* storage an optimizer gave for grad (a view of its block), or NULL */
    const void *last_use;   /* leaves: the oldest tape node of the current backward that reads it (its
                               gradient is final once that node's backward ran: src/autograd/tape.c) */
    uint64_t graph_step;    /* owned tensors: the step whose tape references them (0: none) */
    /* range statistics (src/amp/stats.c), while attached: the site that summarised the op output this
     * tensor is (or views), plus one (0: none), and whether it would be 16-bit under autocast */
    int32_t stats_site;
    bool stats_low;
    char name[64];
    /* AMPCI_TENSOR_LIVE while the handle may be used; else released_step says why not (tensor_live.c) */
    uint32_t live;
    uint64_t released_step; /* the step whose end released it, or AMPCI_TENSOR_FREED */
};
#define AMPCI_TENSOR_LIVE 0x4c495645u
#define AMPCI_TENSOR_FREED UINT64_MAX

/* ---- stale handles (tensor_live.c) ---- */
/* A header for an arena tensor, from the context's pool (the caller fills it in and marks it live). */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_header(ampc_ctx *ctx, const char *fn);
/* Step end: the step's arena headers are marked released; the pool turns to its other half. */
AMPCI_HIDDEN void ampci_tensor_step_end(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_tensor_headers_free(ampc_ctx *ctx);
/* A freed owned tensor's header: kept, marked, for a while before its memory goes back (tensor_live.c). */
AMPCI_HIDDEN void ampci_tensor_retire(ampc_ctx *ctx, ampc_tensor *t);
/* AMPC_OK for a live tensor; else the error for `fn`'s argument `what`: NULL, freed, or released by the
 * step end of step N (the public entry points that read a tensor call it). */
AMPCI_HIDDEN ampc_status ampci_tensor_usable(const char *fn, const char *what, const ampc_tensor *t);

/* Validates (ndim, shape) for `fn` and returns the element count, or -1 with the error recorded. */
AMPCI_HIDDEN int64_t ampci_shape_numel(const char *fn, int ndim, const int64_t *shape);
/* "[2, 3]" into buf. */
AMPCI_HIDDEN const char *ampci_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);
/* Row-major strides for shape. */
AMPCI_HIDDEN void ampci_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
/* A fresh arena tensor with zero-filled contiguous storage; NULL on failure. */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_arena(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim,
                                             const int64_t *shape);
/* The same, its storage left unfilled: for a result that the caller writes whole before anything reads it
 * (zeroing it first was a serial pass over every copied activation). */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_arena_empty(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim,
                                                   const int64_t *shape);
/* An arena view header on t's storage, shape and strides to be set by the caller. */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_view_of(const char *fn, const ampc_tensor *t);
/* Normalises a possibly negative dim index for `fn`; -1 with the error recorded when out of range. */
AMPCI_HIDDEN int ampci_wrap_dim(const char *fn, const ampc_tensor *t, int dim);
/* The non-differentiable primitives behind the public shape ops (src/ops/shape.c records them). */
AMPCI_HIDDEN ampc_tensor *ampci_reshape(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape);
AMPCI_HIDDEN ampc_tensor *ampci_view(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape);
AMPCI_HIDDEN ampc_tensor *ampci_transpose(const char *fn, const ampc_tensor *t, int dim0, int dim1);
AMPCI_HIDDEN ampc_tensor *ampci_permute(const char *fn, const ampc_tensor *t, const int *perm);
AMPCI_HIDDEN ampc_tensor *ampci_slice(const char *fn, const ampc_tensor *t, int dim, int64_t start, int64_t end,
                                      int64_t step);
/* A contiguous arena copy of t in dtype. */
AMPCI_HIDDEN ampc_tensor *ampci_copy_as(const char *fn, const ampc_tensor *t, ampc_dtype dtype);
/* An owned, contiguous view of `numel(shape)` elements of base's storage starting `offset` elements into
 * base's data; it keeps the storage alive until freed. */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_owned_view(const ampc_tensor *base, int64_t offset, int ndim,
                                                  const int64_t *shape);
/* An arena tensor over existing arena memory `data` (no copy), contiguous. */
AMPCI_HIDDEN ampc_tensor *ampci_tensor_wrap(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim,
                                            const int64_t *shape, void *data);

/* ---- the tensor floor's events ----
 * absent: a storage marked absent (a sharded parameter between uses, its pages given back) is about to
 * be read; a listener makes it present (gathers it) and returns AMPC_OK, or fails. freed: an owned tensor
 * is being freed (state keyed by it must go). Several listeners may subscribe; they run in the order they
 * were added. */
typedef ampc_status ampci_absent_fn(void *arg, ampci_storage *st);
typedef void ampci_freed_fn(void *arg, const ampc_tensor *t);
AMPCI_HIDDEN ampc_status ampci_tensor_on_absent(ampc_ctx *ctx, ampci_absent_fn *fn, void *arg);
AMPCI_HIDDEN bool ampci_tensor_off_absent(ampc_ctx *ctx, ampci_absent_fn *fn, void *arg);
AMPCI_HIDDEN ampc_status ampci_tensor_on_free(ampc_ctx *ctx, ampci_freed_fn *fn, void *arg);
AMPCI_HIDDEN bool ampci_tensor_off_free(ampc_ctx *ctx, ampci_freed_fn *fn, void *arg);
/* t's storage is present: AMPC_OK at once unless it is absent, else the absent listeners run until it is
 * (STATE with a message naming t when none is subscribed or none made it present). */
AMPCI_HIDDEN ampc_status ampci_tensor_present(const ampc_tensor *t);

/* The caller (model code) will not touch t or any view of its storage again: its step buffer is given
 * back as soon as no recorded backward needs it (now, or when the last node saving it has run). For
 * intermediates only: never for a tensor handed to the user. Owned tensors are left alone. */
AMPCI_HIDDEN void ampci_tensor_release(const ampc_tensor *t);
/* A saving node is done with s (its backward ran): releases s if its maker already let it go. */
AMPCI_HIDDEN void ampci_storage_unsave(ampci_storage *s);

/* Index of the first inf or NaN of a contiguous tensor, or -1: a host synchronisation point. */
AMPCI_HIDDEN int64_t ampci_tensor_first_nonfinite(const ampc_tensor *t, ampc_sync_point point);

/* Copies t's elements (any strides) in row-major order into dst (device memory, dst_dtype), converting. */
AMPCI_HIDDEN ampc_status ampci_tensor_gather(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype);
/* Writes numel row-major elements of src (device memory, src_dtype) into t (any strides), converting. */
AMPCI_HIDDEN ampc_status ampci_tensor_scatter(ampc_tensor *t, const void *src, ampc_dtype src_dtype);

/* t's elements as the device's operations take them. */
AMPCI_HIDDEN ampci_strided ampci_tensor_strided(const ampc_tensor *t);

/* The address of t's first element in its device's memory. Code above the kernels floor may compute
 * with it and hand it to the device's operations, never dereference it (on a GPU it is not a host
 * address; the guard device faults). */
static inline unsigned char *ampci_dev_ptr(const ampc_tensor *t) {
    return t->storage->data + (size_t)t->offset * ampc_dtype_size(t->dtype);
}

/* ---- host mapping: the one way host code reads or writes tensor memory itself ----
 * ampci_host_map gives host memory holding the `bytes` bytes at device address dev: on a device whose
 * memory is host memory (the CPU) the address itself, elsewhere a host copy (read from the device when
 * the map reads, a synchronisation point counted under `point`, and written back by ampci_host_unmap when
 * it writes). For the code that must see values on the host: checkpoints, MPI staging, data batches. */
#define AMPCI_MAP_READ 1u
#define AMPCI_MAP_WRITE 2u
typedef struct ampci_host_mapping {
    ampc_ctx *ctx;
    void *host, *dev;
    size_t bytes;
    unsigned mode;
    bool copy; /* host is a copy (freed by unmap) */
} ampci_host_mapping;
/* host (NULL with the error recorded, naming `what`, when the copy cannot be allocated). */
AMPCI_HIDDEN void *ampci_host_map(ampc_ctx *ctx, void *dev, size_t bytes, unsigned mode, ampc_sync_point point,
                                  const char *what, ampci_host_mapping *m);
/* The contiguous tensor t's elements (numel x dtype size bytes) mapped as above. */
AMPCI_HIDDEN void *ampci_tensor_host_map(const ampc_tensor *t, unsigned mode, ampc_sync_point point, const char *what,
                                         ampci_host_mapping *m);
/* Ends a map: a writing copy goes back to the device; the copy is freed. Accepts a map whose host is NULL. */
AMPCI_HIDDEN void ampci_host_unmap(ampci_host_mapping *m);

static inline int64_t ampci_numel(const ampc_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

#endif
