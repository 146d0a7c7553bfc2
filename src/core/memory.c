/* memory.c: accounted, 64-byte aligned allocation through the context's allocator, and the growable
 * step arena. The arena hands out memory by bumping a pointer; when a chunk is full it adds a bigger one
 * (never a size the user must guess), and at step end it frees everything at once, merging the chunks
 * into one of the step's high-water size so that the next step allocates nothing. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA_DEFAULT_INITIAL ((size_t)1 << 20)

static size_t round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

void *ampci_alloc(ampc_ctx *ctx, size_t size, const char *what) {
    size_t padded = round_up(size ? size : 1, AMPCI_ALIGN);
    if (padded < size)
        return ampci_fail_null(AMPC_STATUS_OOM, "%s: %zu bytes is more than can be addressed", what, size);
    void *p = ctx->alloc.alloc(ctx->alloc.user, padded, AMPCI_ALIGN);
    if (!p) return ampci_fail_null(AMPC_STATUS_OOM, "%s: out of memory allocating %zu bytes", what, size);
    size_t live = atomic_fetch_add(&ctx->live, padded) + padded;
    size_t peak = atomic_load(&ctx->peak);
    while (live > peak && !atomic_compare_exchange_weak(&ctx->peak, &peak, live)) {}
    atomic_fetch_add(&ctx->allocations, 1);
    return p;
}

void ampci_account(ampc_ctx *ctx, size_t size, bool add) {
    size_t padded = round_up(size ? size : 1, AMPCI_ALIGN);
    if (!add) {
        atomic_fetch_sub(&ctx->live, padded);
        return;
    }
    size_t live = atomic_fetch_add(&ctx->live, padded) + padded;
    size_t peak = atomic_load(&ctx->peak);
    while (live > peak && !atomic_compare_exchange_weak(&ctx->peak, &peak, live)) {}
}

void ampci_discard_pages(void *p, size_t size) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) & ~(page - 1),
              e = ((uintptr_t)p + size) & ~(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED); /* advice: failure only leaves the pages in place */
}

void ampci_free(ampc_ctx *ctx, void *p, size_t size) {
    if (!p) return;
    size_t padded = round_up(size ? size : 1, AMPCI_ALIGN);
    ctx->alloc.free(ctx->alloc.user, p, padded);
    atomic_fetch_sub(&ctx->live, padded);
}

ampc_status ampc_memory_stats(const ampc_ctx *ctx, ampc_memory_usage *out) {
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_memory_stats: ctx and out must not be NULL");
    ampc_ctx *c = (ampc_ctx *)ctx; /* atomics are read-only here */
    out->live_bytes = atomic_load(&c->live);
    out->peak_bytes = atomic_load(&c->peak);
    out->allocations = atomic_load(&c->allocations);
    out->arena_reserved = ctx->arena.reserved;
    out->arena_used = ctx->arena.used;
    out->arena_high_water = ctx->arena.high_water;
    out->heap_reserved = ctx->heap.reserved;
    out->heap_used = ctx->heap.used;
    out->heap_high_water = ctx->heap.high_water;
    bool host = ampci_dev_is_host(ctx);
    out->device_live_bytes = host ? out->live_bytes : atomic_load(&c->dev_mem.live);
    out->device_peak_bytes = host ? out->peak_bytes : atomic_load(&c->dev_mem.peak);
    return AMPC_OK;
}

void ampc_memory_reset_peak(ampc_ctx *ctx) {
    if (!ctx) return;
    atomic_store(&ctx->peak, atomic_load(&ctx->live));
    atomic_store(&ctx->dev_mem.peak, atomic_load(&ctx->dev_mem.live));
}

/* ---- arena ---- */

static ampci_arena_chunk *chunk_new(ampc_ctx *ctx, size_t size) {
    ampci_arena_chunk *c = ampci_alloc(ctx, sizeof *c + size, "step arena");
    if (!c) return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    c->base = (unsigned char *)c + round_up(sizeof *c, AMPCI_ALIGN);
    c->size -= (size_t)(c->base - (unsigned char *)c) - sizeof *c;
    ctx->arena.reserved += sizeof *c + size;
    return c;
}

static void chunk_free(ampc_ctx *ctx, ampci_arena_chunk *c) {
    size_t total = (size_t)(c->base - (unsigned char *)c) + c->size;
    ctx->arena.reserved -= total;
    ampci_free(ctx, c, total);
}

void *ampci_arena_alloc(ampc_ctx *ctx, size_t size, const char *what) {
    ampci_arena *a = &ctx->arena;
    size_t need = round_up(size ? size : 1, AMPCI_ALIGN);
    if (need < size) return ampci_fail_null(AMPC_STATUS_OOM, "%s: %zu bytes is too large", what, size);
    ampci_arena_chunk *c = a->chunks;
    if (!c || c->size - c->used < need) {
        /* Grow geometrically so a step needs O(log) chunks; the first chunk of a step is as large as the
         * whole of the previous step, so steady-state steps use one chunk and allocate nothing. */
        size_t want = a->initial ? a->initial : ARENA_DEFAULT_INITIAL;
        if (!c && a->next_chunk > want) want = a->next_chunk;
        if (c && c->size * 2 > want) want = c->size * 2;
        if (want < need + AMPCI_ALIGN) want = need + AMPCI_ALIGN;
        ampci_arena_chunk *n = chunk_new(ctx, want);
        if (!n)
            return ampci_fail_null(AMPC_STATUS_OOM, "%s: out of memory growing the step arena by %zu bytes", what,
                                   want);
        n->next = c;
        a->chunks = c = n;
    }
    void *p = c->base + c->used;
    c->used += need;
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

ampc_status ampci_arena_on_reset(ampc_ctx *ctx, void (*fn)(void *), void *arg) {
    ampci_arena_hook *h = ampci_arena_alloc(ctx, sizeof *h, "arena hook");
    if (!h) return AMPC_STATUS_OOM;
    h->fn = fn;
    h->arg = arg;
    h->next = ctx->arena.hooks;
    ctx->arena.hooks = h;
    return AMPC_OK;
}

static void run_hooks(ampc_ctx *ctx) {
    /* Hooks live in the arena themselves, so run them all before any chunk is touched. */
    for (ampci_arena_hook *h = ctx->arena.hooks; h; h = h->next) h->fn(h->arg);
    ctx->arena.hooks = NULL;
}

static void free_chunks(ampc_ctx *ctx) {
    while (ctx->arena.chunks) {
        ampci_arena_chunk *next = ctx->arena.chunks->next;
        chunk_free(ctx, ctx->arena.chunks);
        ctx->arena.chunks = next;
    }
}

void ampci_arena_reset(ampc_ctx *ctx) {
    ampci_arena *a = &ctx->arena;
    run_hooks(ctx);
    if (a->chunks && a->chunks->next) {
        /* Several chunks this step: drop them; the next step's first allocation takes one chunk that
         * holds the whole high-water mark (allocated then, so a failure is reported where it happens). */
        free_chunks(ctx);
        a->next_chunk = a->high_water + AMPCI_ALIGN;
    }
    if (a->chunks) a->chunks->used = 0;
    a->used = 0;
}

void ampci_arena_release(ampc_ctx *ctx) {
    run_hooks(ctx);
    free_chunks(ctx);
    ctx->arena.used = 0;
}
