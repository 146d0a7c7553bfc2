/* device.c: the devices a context can run on and their memory. The device list (cpu, the test device
 * guard, and NVIDIA GPUs once CUDA is built in), the parsing of "cpu" / "cuda:1", device queries, the
 * context's device memory through its buffer type (accounted per device), the host synchronisation
 * points that read device memory for the host, and the listener lists the floors use for their events. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the CPU's buffer type: host memory through the context's allocator ---- */

static void *cpu_alloc(ampc_ctx *ctx, size_t bytes) { return ampci_alloc(ctx, bytes, "device memory"); }
static void cpu_free(ampc_ctx *ctx, void *p, size_t bytes) { ampci_free(ctx, p, bytes); }
/* Large fills and copies (the step's zeroed gradients and buffers; a gradient handed on whole, as a
 * residual add's backward does) are cut into pieces over the context's threads: one thread alone waited on
 * the others' idle spin for most of a small batch's memset time. */
#define MEM_PIECE ((size_t)256 << 10)
typedef struct mem_job {
    unsigned char *dst;
    const unsigned char *src; /* NULL: a fill with v */
    int v;
    size_t bytes;
} mem_job;

static void mem_piece(void *arg, int64_t b, int64_t e, int64_t chunk) {
    const mem_job *j = arg;
    (void)chunk;
    size_t lo = (size_t)b * MEM_PIECE, hi = (size_t)e * MEM_PIECE < j->bytes ? (size_t)e * MEM_PIECE : j->bytes;
    if (j->src) memcpy(j->dst + lo, j->src + lo, hi - lo);
    else memset(j->dst + lo, j->v, hi - lo);
}

static void cpu_mem(ampc_ctx *ctx, const mem_job *j) {
    if (j->bytes < 4 * MEM_PIECE) {
        if (j->src) memcpy(j->dst, j->src, j->bytes);
        else memset(j->dst, j->v, j->bytes);
        return;
    }
    ampc_parallel_for(ctx, (int64_t)((j->bytes + MEM_PIECE - 1) / MEM_PIECE), 1, mem_piece, (void *)j);
}
static void cpu_memset(ampc_ctx *ctx, void *p, int v, size_t bytes) { cpu_mem(ctx, &(mem_job){p, NULL, v, bytes}); }
static void cpu_copy(ampc_ctx *ctx, void *dst, const void *src, size_t bytes) {
    cpu_mem(ctx, &(mem_job){dst, src, 0, bytes});
}
static void cpu_discard(ampc_ctx *ctx, void *p, size_t bytes) { (void)ctx, ampci_discard_pages(p, bytes); }

static const ampci_buft cpu_buft = {
    .name = "cpu",
    .is_host = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset = cpu_memset,
    .copy_in = cpu_copy,
    .copy_out = cpu_copy,
    .copy = cpu_copy,
    .discard = cpu_discard,
};

/* ---- the device list ---- */

static const char *const kind_names[AMPC_DEVICE_KIND_COUNT] = {"cpu", "cuda", "guard"};

const char *ampc_device_kind_name(ampc_device_kind kind) {
    return (unsigned)kind < AMPC_DEVICE_KIND_COUNT ? kind_names[kind] : "?";
}

int ampc_device_count(ampc_device_kind kind) {
    switch (kind) {
    case AMPC_DEVICE_CPU:
    case AMPC_DEVICE_GUARD: return 1;
    default: return 0; /* CUDA: not in this build */
    }
}

const char *ampc_device_name(ampc_device d, char *buf, size_t size) {
    if (!buf || !size) return buf;
    if (d.kind == AMPC_DEVICE_CUDA) snprintf(buf, size, "cuda:%d", d.index);
    else snprintf(buf, size, "%s", ampc_device_kind_name(d.kind));
    return buf;
}

static bool kind_built(ampc_device_kind kind) { return kind == AMPC_DEVICE_CPU || kind == AMPC_DEVICE_GUARD; }

ampc_status ampc_device_get_info(ampc_device d, ampc_device_info *out) {
    static const char fn[] = "ampc_device_get_info";
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if ((unsigned)d.kind >= AMPC_DEVICE_KIND_COUNT || d.index < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: device kind %d, index %d; expected a kind of ampc_device_kind "
                          "and an index >= 0",
                          fn, (int)d.kind, d.index);
    out->device = d;
    ampc_device_name(d, out->name, sizeof out->name);
    out->built = kind_built(d.kind);
    out->present = out->built && d.index < ampc_device_count(d.kind);
    if (d.kind != AMPC_DEVICE_CUDA) {
        const ampc_cpu_info *cpu = ampc_cpu();
        snprintf(out->description, sizeof out->description, d.kind == AMPC_DEVICE_GUARD ? "%s, protected memory" : "%s",
                 cpu->brand[0] ? cpu->brand : cpu->vendor);
        out->host_memory = d.kind == AMPC_DEVICE_CPU;
        out->units = cpu->online_cpus;
        long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        out->total_memory = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
        out->free_memory = avail > 0 && page > 0 ? (size_t)avail * (size_t)page : 0;
    }
    if (out->present) return AMPC_OK;
    return ampci_fail(AMPC_STATUS_UNSUPPORTED, "%s: device %s is %s", fn, out->name,
                      out->built ? "not present on this machine" : "not built into this library");
}

/* The accepted spellings, for messages. */
#define DEVICE_FORMS "cpu, cuda, cuda:N or guard"

ampc_status ampc_device_parse(const char *text, ampc_device *out) {
    static const char fn[] = "ampc_device_parse";
    if (!text || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: text and out must not be NULL", fn);
    ampc_device d = {AMPC_DEVICE_KIND_COUNT, 0};
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    for (int k = 0; k < AMPC_DEVICE_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == len && strncmp(text, kind_names[k], len) == 0) d.kind = (ampc_device_kind)k;
    if (d.kind == AMPC_DEVICE_KIND_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "unknown device '%.40s'; expected " DEVICE_FORMS, text);
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (d.kind != AMPC_DEVICE_CUDA || !colon[1] || *end || v < 0 || v > 1024)
            return ampci_fail(AMPC_STATUS_INVALID_ARG, "device '%.40s': %s; expected " DEVICE_FORMS, text,
                              d.kind != AMPC_DEVICE_CUDA ? "only cuda takes an index"
                                                         : "the index is not a number 0..1024");
        d.index = (int)v;
    }
    if (!kind_built(d.kind))
        return ampci_fail(AMPC_STATUS_UNSUPPORTED,
                          "device '%.40s': this build of ampc has no %s support; rebuild with -DAMPC_CUDA=ON on a "
                          "machine with the CUDA toolkit",
                          text, kind_names[d.kind]);
    int n = ampc_device_count(d.kind);
    if (d.index >= n)
        return ampci_fail(AMPC_STATUS_UNSUPPORTED, "device '%.40s': index %d, but %d %s device%s present", text,
                          d.index, n, kind_names[d.kind], n == 1 ? " is" : "s are");
    *out = d;
    return AMPC_OK;
}

/* ---- the context's device memory ---- */

ampc_status ampci_devmem_open(ampc_ctx *ctx, ampc_device d) {
    ampc_device_info info;
    if (ampc_device_get_info(d, &info) != AMPC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ampc_last_error());
        return ampci_fail(ampc_last_status(), "ampc_ctx_new: %s", why);
    }
    ctx->dev_mem.device = d;
    ctx->dev_mem.buft = d.kind == AMPC_DEVICE_GUARD ? &ampci_guard_buft : &cpu_buft;
    return AMPC_OK;
}

ampc_device ampc_ctx_device(const ampc_ctx *ctx) { return ctx ? ctx->dev_mem.device : (ampc_device){0}; }

void *ampci_dev_alloc(ampc_ctx *ctx, size_t bytes, const char *what) {
    ampci_devmem *m = &ctx->dev_mem;
    if (m->buft->is_host) return ampci_alloc(ctx, bytes, what); /* counted as host memory */
    size_t padded = (bytes + AMPCI_ALIGN - 1) / AMPCI_ALIGN * AMPCI_ALIGN;
    if (padded < bytes)
        return ampci_fail_null(AMPC_STATUS_OOM, "%s: %zu bytes is more than can be addressed", what, bytes);
    void *p = m->buft->alloc(ctx, padded ? padded : AMPCI_ALIGN);
    if (!p) {
        char name[32];
        return ampci_fail_null(AMPC_STATUS_OOM, "%s: out of %s memory allocating %zu bytes", what,
                               ampc_device_name(m->device, name, sizeof name), bytes);
    }
    size_t live = atomic_fetch_add(&m->live, padded) + padded, peak = atomic_load(&m->peak);
    while (live > peak && !atomic_compare_exchange_weak(&m->peak, &peak, live)) {}
    return p;
}

void ampci_dev_free(ampc_ctx *ctx, void *p, size_t bytes) {
    ampci_devmem *m = &ctx->dev_mem;
    if (!p) return;
    if (m->buft->is_host) {
        ampci_free(ctx, p, bytes);
        return;
    }
    size_t padded = (bytes + AMPCI_ALIGN - 1) / AMPCI_ALIGN * AMPCI_ALIGN;
    m->buft->free(ctx, p, padded ? padded : AMPCI_ALIGN);
    atomic_fetch_sub(&m->live, padded);
}

/* The buffer type's raw fills and copies, each a row of the profile when it is on. */
void ampci_dev_memset(ampc_ctx *ctx, void *dev, int value, size_t bytes) {
    if (!bytes) return;
    ampci_prof_mark m;
    ampci_prof_enter(ctx, &m);
    ctx->dev_mem.buft->memset(ctx, dev, value, bytes);
    ampci_prof_leave(ctx, "memset", &m);
}
void ampci_dev_copy_in(ampc_ctx *ctx, void *dev, const void *host, size_t bytes) {
    if (!bytes) return;
    ampci_prof_mark m;
    ampci_prof_enter(ctx, &m);
    ctx->dev_mem.buft->copy_in(ctx, dev, host, bytes);
    ampci_prof_leave(ctx, "copy_in", &m);
}
void ampci_dev_copy_out(ampc_ctx *ctx, void *host, const void *dev, size_t bytes) {
    if (!bytes) return;
    ampci_prof_mark m;
    ampci_prof_enter(ctx, &m);
    ctx->dev_mem.buft->copy_out(ctx, host, dev, bytes);
    ampci_prof_leave(ctx, "copy_out", &m);
}

void ampci_dev_copy(ampc_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    ampci_prof_mark m;
    ampci_prof_enter(ctx, &m);
    ctx->dev_mem.buft->copy(ctx, dst, src, bytes);
    ampci_prof_leave(ctx, "copy", &m);
}

/* ---- memory given back for a while (src/dist: shard FULL) ---- */

void ampci_dev_discard(ampc_ctx *ctx, void *dev, size_t bytes) {
    if (bytes) ctx->dev_mem.buft->discard(ctx, dev, bytes);
}

void ampci_dev_account(ampc_ctx *ctx, size_t bytes, bool add) {
    ampci_devmem *m = &ctx->dev_mem;
    if (m->buft->is_host) {
        ampci_account(ctx, bytes, add);
        return;
    }
    size_t padded = (bytes + AMPCI_ALIGN - 1) / AMPCI_ALIGN * AMPCI_ALIGN;
    if (!add) {
        atomic_fetch_sub(&m->live, padded);
        return;
    }
    size_t live = atomic_fetch_add(&m->live, padded) + padded, peak = atomic_load(&m->peak);
    while (live > peak && !atomic_compare_exchange_weak(&m->peak, &peak, live)) {}
}

/* ---- host synchronisation points ---- */

static const char *const sync_names[AMPC_SYNC_POINT_COUNT] = {"found_inf", "clip_norm", "fp8_amax", "anomaly",
                                                              "stats",     "index",     "read",     "comm"};

const char *ampc_sync_point_name(ampc_sync_point p) {
    return (unsigned)p < AMPC_SYNC_POINT_COUNT ? sync_names[p] : "?";
}

void ampci_sync_count(ampc_ctx *ctx, ampc_sync_point point) { ctx->syncs[point]++; }

void ampci_sync_read(ampc_ctx *ctx, ampc_sync_point point, void *host, const void *dev, size_t bytes) {
    ctx->syncs[point]++;
    ampci_dev_copy_out(ctx, host, dev, bytes);
}

ampc_status ampc_ctx_sync_counts(const ampc_ctx *ctx, uint64_t *out) {
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_sync_counts: ctx and out must not be NULL");
    memcpy(out, ctx->syncs, sizeof ctx->syncs);
    return AMPC_OK;
}

/* ---- matrix-product FLOPs ---- */

void ampci_matmul_flops_add(ampc_ctx *ctx, uint64_t flops) { ctx->matmul_flops += flops; }

uint64_t ampc_ctx_matmul_flops(const ampc_ctx *ctx) { return ctx ? ctx->matmul_flops : 0; }

/* ---- listener lists ---- */

ampc_status ampci_listeners_add(ampci_listeners *l, const char *what, void (*fn)(void), void *arg) {
    if (!fn) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: the listener function is NULL", what);
    for (int i = 0; i < l->n; i++)
        if (l->at[i].fn == fn && l->at[i].arg == arg)
            return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: this listener is already subscribed", what);
    if (l->n == AMPCI_LISTENERS_MAX)
        return ampci_fail(AMPC_STATUS_STATE, "%s: %d listeners already subscribed (the most a context takes)", what,
                          AMPCI_LISTENERS_MAX);
    l->at[l->n].fn = fn, l->at[l->n].arg = arg, l->n++;
    return AMPC_OK;
}

bool ampci_listeners_remove(ampci_listeners *l, void (*fn)(void), void *arg) {
    for (int i = 0; i < l->n; i++)
        if (l->at[i].fn == fn && l->at[i].arg == arg) {
            memmove(&l->at[i], &l->at[i + 1], (size_t)(l->n - i - 1) * sizeof l->at[0]);
            l->n--;
            return true;
        }
    return false;
}
