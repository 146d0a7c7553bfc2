/* device_guard.c: the guard device's memory, a test device that proves the device seam on any CPU. Its
 * memory is one large reservation of the context's address space that stays PROT_NONE except while the
 * device's own code runs (its kernels, its copies and fills), so any host code that reads or writes tensor
 * memory behind the device's back faults at once instead of silently working on the CPU and failing on
 * a GPU. Allocation is first fit over a sorted free list kept in host memory (the device memory itself is
 * never touched to manage it, as on a real device). */
#include "core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_RESERVE ((size_t)64 << 30) /* address space reserved per context; untouched pages cost nothing */

typedef struct free_range {
    struct free_range *next;
    size_t off, bytes;
} free_range;

typedef struct guard_region {
    unsigned char *base;
    size_t top;     /* bytes of the reservation handed out so far (the bump point) */
    size_t exposed; /* bytes from base that the current enter made readable (0 outside) */
    int depth;      /* nesting of enter */
    free_range *free;
    pthread_mutex_t lock;
} guard_region;

static size_t page_size(void) {
    static size_t page;
    if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

static size_t pages_of(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

static guard_region *region_of(ampc_ctx *ctx) {
    guard_region *r = ctx->dev_mem.state;
    if (r) return r;
    r = calloc(1, sizeof *r);
    if (!r) return NULL;
    void *base = mmap(NULL, GUARD_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        free(r);
        return NULL;
    }
    r->base = base;
    pthread_mutex_init(&r->lock, NULL);
    ctx->dev_mem.state = r;
    return r;
}

static void protect(guard_region *r, size_t bytes, int prot) {
    if (bytes && mprotect(r->base, pages_of(bytes), prot) != 0) ampci_assert_fail("guard mprotect", __FILE__, __LINE__);
}

static void guard_enter(ampc_ctx *ctx) {
    guard_region *r = ctx->dev_mem.state;
    if (!r || r->depth++ > 0) return;
    r->exposed = r->top;
    protect(r, r->exposed, PROT_READ | PROT_WRITE);
}

static void guard_leave(ampc_ctx *ctx) {
    guard_region *r = ctx->dev_mem.state;
    if (!r || --r->depth > 0) return;
    protect(r, r->exposed > r->top ? r->exposed : r->top, PROT_NONE);
    r->exposed = 0;
}

static void *guard_alloc(ampc_ctx *ctx, size_t bytes) {
    guard_region *r = region_of(ctx);
    if (!r) return NULL;
    pthread_mutex_lock(&r->lock);
    void *p = NULL;
    for (free_range **at = &r->free; *at; at = &(*at)->next) {
        free_range *f = *at;
        if (f->bytes < bytes) continue;
        p = r->base + f->off;
        f->off += bytes, f->bytes -= bytes;
        if (!f->bytes) *at = f->next, free(f);
        break;
    }
    if (!p && r->top + bytes <= GUARD_RESERVE) {
        p = r->base + r->top;
        r->top += bytes;
        /* inside an enter, new memory is readable like the rest of what the device's code may touch */
        if (r->depth > 0 && r->top > r->exposed) protect(r, r->exposed = r->top, PROT_READ | PROT_WRITE);
    }
    pthread_mutex_unlock(&r->lock);
    return p;
}

static void guard_free(ampc_ctx *ctx, void *p, size_t bytes) {
    guard_region *r = ctx->dev_mem.state;
    size_t off = (size_t)((unsigned char *)p - r->base);
    pthread_mutex_lock(&r->lock);
    free_range **at = &r->free, *prev = NULL;
    while (*at && (*at)->off < off) prev = *at, at = &(*at)->next;
    free_range *next = *at;
    if (prev && prev->off + prev->bytes == off) { /* merge with the range below */
        prev->bytes += bytes;
        if (next && prev->off + prev->bytes == next->off)
            prev->bytes += next->bytes, prev->next = next->next, free(next);
    } else if (next && off + bytes == next->off) { /* with the range above */
        next->off = off, next->bytes += bytes;
    } else {
        free_range *f = malloc(sizeof *f);
        if (f) *f = (free_range){next, off, bytes}, *at = f; /* out of host memory: the range is lost, no harm */
    }
    pthread_mutex_unlock(&r->lock);
}

static void guard_memset(ampc_ctx *ctx, void *p, int v, size_t bytes) {
    guard_enter(ctx);
    memset(p, v, bytes);
    guard_leave(ctx);
}

static void guard_copy(ampc_ctx *ctx, void *dst, const void *src, size_t bytes) {
    guard_enter(ctx);
    memcpy(dst, src, bytes);
    guard_leave(ctx);
}

static void guard_discard(ampc_ctx *ctx, void *p, size_t bytes) { (void)ctx, ampci_discard_pages(p, bytes); }

static void guard_release(ampc_ctx *ctx) {
    guard_region *r = ctx->dev_mem.state;
    if (!r) return;
    munmap(r->base, GUARD_RESERVE);
    while (r->free) {
        free_range *n = r->free->next;
        free(r->free);
        r->free = n;
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
    ctx->dev_mem.state = NULL;
}

const ampci_buft ampci_guard_buft = {
    .name = "guard",
    .is_host = false,
    .alloc = guard_alloc,
    .free = guard_free,
    .memset = guard_memset,
    .copy_in = guard_copy,
    .copy_out = guard_copy,
    .copy = guard_copy,
    .discard = guard_discard,
    .enter = guard_enter,
    .leave = guard_leave,
    .release = guard_release,
};
