/* step_heap.c: the large buffers of a step (tensor data, F32 scratch) with early release. The bump arena
 * can only free everything at step end, so a backward pass that keeps every gradient it ever made holds
 * about as much memory again as the forward. Buffers of AMPCI_HEAP_MIN bytes or more therefore come
 * from this heap instead: size classes (8 per power of two, so at most 12.5% slack) with free lists that
 * survive the step, so steady-state steps allocate nothing from the system. A buffer is released early
 * either explicitly (an op's dead F32 scratch) or by a sweep: buffers allocated while a sweep generation
 * is open are "transient" and die at the sweep unless referenced (the autograd walk references each
 * node's gradient until the node has run). Buffers made outside a generation live until step end.
 * On the CPU a block's header sits just before its data (one allocation); on a device whose memory the
 * host may not touch the header lives in host memory and a hash table finds it from the data address, and
 * every step allocation, however small, comes from here (the host arena keeps only host metadata). */
#include "core.h"

#include <string.h>

#define HEAP_MAGIC 0x68656170706d6121ull /* "!ampheap" */

typedef struct ampci_heap_block {
    uint64_t magic;
    struct ampci_heap_block *next_all; /* every block the heap holds */
    struct ampci_heap_block *next;     /* the free list, or the open generation's list */
    size_t bytes;                      /* usable bytes after the header */
    uint64_t gen_id;                   /* the generation whose list holds it; 0: none */
    int cls;
    int refs;
    bool live, transient;
    unsigned char *data; /* the buffer: just after the header on the CPU (with magic, this tells heap memory
                            from arena memory), device memory elsewhere */
} ampci_heap_block;

#define HEADER_BYTES ((sizeof(ampci_heap_block) + AMPCI_ALIGN - 1) / AMPCI_ALIGN * AMPCI_ALIGN)

static ampci_heap_block *header_of(void *p) { return (ampci_heap_block *)((unsigned char *)p - HEADER_BYTES); }
static void *data_of(ampci_heap_block *b) { return b->data; }
/* Bytes a block holds in the memory the heap counts: header and data on the CPU, the data on a device. */
static size_t footprint(const ampc_ctx *ctx, const ampci_heap_block *b) {
    return (ampci_dev_is_host(ctx) ? HEADER_BYTES : 0) + b->bytes;
}

/* ---- device blocks: data address -> header (open addressing, linear probing; blocks are never removed
 * before the heap is released, so there are no deletions) ---- */
static size_t slot_of(const void *p, size_t cap) {
    return (size_t)(((uintptr_t)p >> 6) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static ampci_heap_block *map_find(const ampc_ctx *ctx, const void *p) {
    const ampci_heap *h = &ctx->heap;
    if (!h->map_cap) return NULL;
    for (size_t i = slot_of(p, h->map_cap);; i = (i + 1) & (h->map_cap - 1)) {
        ampci_heap_block *b = h->map[i];
        if (!b || b->data == p) return b;
    }
}

static bool map_put(ampc_ctx *ctx, ampci_heap_block *b) {
    ampci_heap *h = &ctx->heap;
    if (2 * (h->map_n + 1) > h->map_cap) { /* keep the table at most half full */
        size_t cap = h->map_cap ? 2 * h->map_cap : 256;
        ampci_heap_block **m = ampci_alloc(ctx, cap * sizeof *m, "step heap table");
        if (!m) return false;
        memset(m, 0, cap * sizeof *m);
        for (size_t i = 0; i < h->map_cap; i++)
            if (h->map[i]) {
                size_t j = slot_of(h->map[i]->data, cap);
                while (m[j]) j = (j + 1) & (cap - 1);
                m[j] = h->map[i];
            }
        ampci_free(ctx, h->map, h->map_cap * sizeof *m);
        h->map = m, h->map_cap = cap;
    }
    size_t j = slot_of(b->data, h->map_cap);
    while (h->map[j]) j = (j + 1) & (h->map_cap - 1);
    h->map[j] = b;
    h->map_n++;
    return true;
}

/* The class of a request: 8 classes per power of two from AMPCI_HEAP_MIN up. *bytes is rounded up. */
static int size_class(size_t *bytes) {
    int e = 63 - __builtin_clzll((unsigned long long)*bytes); /* 2^e <= bytes < 2^(e+1) */
    size_t step = (size_t)1 << (e - 3);
    size_t sub = (*bytes + step - 1) / step; /* 8..16 */
    *bytes = sub * step;
    return e * 8 + (int)(sub - 8);
}

static ampci_heap_block *block_new(ampc_ctx *ctx, size_t bytes, int cls, const char *what) {
    bool host = ampci_dev_is_host(ctx);
    ampci_heap_block *b = ampci_alloc(ctx, host ? HEADER_BYTES + bytes : sizeof *b, what);
    if (!b) return NULL;
    *b = (ampci_heap_block){.magic = HEAP_MAGIC, .next_all = ctx->heap.all, .bytes = bytes, .cls = cls};
    b->data = host ? (unsigned char *)b + HEADER_BYTES : ampci_dev_alloc(ctx, bytes, what);
    if (!host && (!b->data || !map_put(ctx, b))) {
        ampci_dev_free(ctx, b->data, bytes);
        ampci_free(ctx, b, sizeof *b);
        return NULL;
    }
    ctx->heap.all = b;
    ctx->heap.reserved += footprint(ctx, b);
    return b;
}

void *ampci_step_alloc(ampc_ctx *ctx, size_t size, const char *what) {
    if (size < AMPCI_HEAP_MIN && ampci_dev_is_host(ctx)) return ampci_arena_alloc(ctx, size, what);
    size_t bytes = size < AMPCI_ALIGN ? AMPCI_ALIGN : size;
    int cls = size_class(&bytes);
    if (cls >= AMPCI_HEAP_CLASSES || bytes < size)
        return ampci_fail_null(AMPC_STATUS_OOM, "%s: %zu bytes is too large", what, size);
    /* Best fit among the free blocks up to twice the size: a larger free block serves before a new one
     * is made, so buffers of shifting sizes do not each keep their own. */
    ampci_heap_block *b = NULL;
    for (int c = cls; c <= cls + 8 && c < AMPCI_HEAP_CLASSES && !b; c++)
        if ((b = ctx->heap.free[c])) ctx->heap.free[c] = b->next;
    if (!b && !(b = block_new(ctx, bytes, cls, what))) return NULL;
    b->live = true;
    b->refs = 0;
    b->transient = ctx->heap.gen_open;
    b->next = NULL;
    b->gen_id = 0;
    if (b->transient) b->next = ctx->heap.gen, ctx->heap.gen = b, b->gen_id = ctx->heap.gen_id;
    ctx->heap.used += footprint(ctx, b);
    if (ctx->heap.used > ctx->heap.high_water) ctx->heap.high_water = ctx->heap.used;
    return data_of(b);
}

/* The heap block holding p (p = its data start), or NULL for arena and owned memory. */
static ampci_heap_block *block_of(const ampc_ctx *ctx, void *p) {
    if (!p || ((uintptr_t)p % AMPCI_ALIGN) != 0) return NULL;
    if (!ampci_dev_is_host(ctx)) return map_find(ctx, p);
    ampci_heap_block *b = header_of(p);
    return b->magic == HEAP_MAGIC && b->data == (unsigned char *)p ? b : NULL;
}

static void release(ampc_ctx *ctx, ampci_heap_block *b) {
    b->live = false;
    b->next = ctx->heap.free[b->cls];
    ctx->heap.free[b->cls] = b;
    ctx->heap.used -= footprint(ctx, b);
}

/* A block nobody needs any more: released now, or, inside an open generation, by its sweep (which owns
 * the generation's list, so the block joins it once). */
static void retire(ampc_ctx *ctx, ampci_heap_block *b) {
    if (!ctx->heap.gen_open) {
        release(ctx, b);
    } else if (b->gen_id != ctx->heap.gen_id) {
        b->gen_id = ctx->heap.gen_id;
        b->next = ctx->heap.gen;
        ctx->heap.gen = b;
    }
}

void ampci_step_free(ampc_ctx *ctx, void *p) {
    ampci_heap_block *b = block_of(ctx, p);
    if (b && b->live && b->refs == 0) retire(ctx, b);
}

void ampci_step_ref(ampc_ctx *ctx, void *p) {
    ampci_heap_block *b = block_of(ctx, p);
    if (b && b->live) b->refs++;
}

void ampci_step_unref(ampc_ctx *ctx, void *p) {
    ampci_heap_block *b = block_of(ctx, p);
    if (!b || !b->live || b->refs <= 0) return;
    /* only buffers made inside a generation die this way: forward buffers may still be held by the caller */
    if (--b->refs == 0 && b->transient) retire(ctx, b);
}

bool ampci_step_exclusive(const ampc_ctx *ctx, void *p) {
    ampci_heap_block *b = block_of(ctx, p);
    return b && b->live && b->transient && b->refs == 1;
}

void ampci_step_gen_begin(ampc_ctx *ctx) {
    AMPCI_ASSERT(!ctx->heap.gen_open);
    ctx->heap.gen_open = true;
    ctx->heap.gen = NULL;
    ctx->heap.gen_id++;
}

void ampci_step_gen_sweep(ampc_ctx *ctx) {
    ctx->heap.gen_open = false;
    ampci_heap_block *b = ctx->heap.gen;
    ctx->heap.gen = NULL;
    while (b) {
        ampci_heap_block *next = b->next;
        b->next = NULL;
        b->gen_id = 0;
        if (b->live && b->refs == 0) release(ctx, b);
        b = next;
    }
}

void ampci_heap_reset(ampc_ctx *ctx) {
    AMPCI_ASSERT(!ctx->heap.gen_open);
    memset(ctx->heap.free, 0, sizeof ctx->heap.free);
    for (ampci_heap_block *b = ctx->heap.all; b; b = b->next_all) {
        b->live = false;
        b->next = ctx->heap.free[b->cls];
        ctx->heap.free[b->cls] = b;
    }
    ctx->heap.used = 0;
}

void ampci_heap_release(ampc_ctx *ctx) {
    bool host = ampci_dev_is_host(ctx);
    ampci_heap_block *b = ctx->heap.all;
    while (b) {
        ampci_heap_block *next = b->next_all;
        if (!host) ampci_dev_free(ctx, b->data, b->bytes);
        ampci_free(ctx, b, host ? HEADER_BYTES + b->bytes : sizeof *b);
        b = next;
    }
    ampci_free(ctx, ctx->heap.map, ctx->heap.map_cap * sizeof *ctx->heap.map);
    memset(&ctx->heap, 0, sizeof ctx->heap);
}
