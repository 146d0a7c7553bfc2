/* context.c: core's part of the context: the allocator, the log callback, the RNG, the thread pool and
 * the step counter, with their accessors. The other floors' state is set up by the context assembly
 * (src/ctx.c), which calls ampci_ctx_core_new/_free/_step_end around it. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *default_alloc(void *user, size_t size, size_t align) {
    (void)user;
    return aligned_alloc(align, (size + align - 1) / align * align);
}

static void default_free(void *user, void *ptr, size_t size) {
    (void)user, (void)size;
    free(ptr);
}

static void default_log(void *user, ampc_log_level level, const char *message) {
    (void)user;
    if (level >= AMPC_LOG_WARN)
        fprintf(stderr, "ampc: %s: %s\n", level == AMPC_LOG_WARN ? "warning" : "error", message);
}

void ampci_log(const ampc_ctx *ctx, ampc_log_level level, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx && ctx->log) ctx->log(ctx->log_user, level, buf);
    else default_log(NULL, level, buf);
}

ampc_status ampci_ctx_core_new(const ampc_ctx_params *p, ampc_ctx **out) {
    if (p->threads < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_new: threads = %d; expected 0 (all CPUs) or more",
                          p->threads);
    if ((unsigned)p->isa >= AMPC_ISA_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_new: isa = %d; expected an ampc_isa value", (int)p->isa);
    if (p->allocator && (!p->allocator->alloc || !p->allocator->free))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_new: a custom allocator needs both alloc and free");
    ampc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ampci_fail(AMPC_STATUS_OOM, "ampc_ctx_new: out of memory");
    ctx->alloc = p->allocator ? *p->allocator : (ampc_allocator){default_alloc, default_free, NULL};
    ctx->log = p->log ? p->log : default_log;
    ctx->log_user = p->log ? p->log_user : NULL;
    ctx->arena.initial = p->arena_initial_bytes;
    ctx->rng = ampc_rng_make(p->seed, 0);
    ctx->step_id = 1;
    const ampc_cpu_info *cpu = ampc_cpu();
    if (!cpu->isa_env_valid)
        ampci_log(ctx, AMPC_LOG_WARN, "AMPC_ISA='%s' ignored: expected ref, avx2, avx512 or amx", cpu->isa_env);
    ampc_status s = ampci_devmem_open(ctx, p->device);
    if (s == AMPC_OK) s = ampci_pool_new(p->threads ? p->threads : ampci_online_cpus(), &ctx->pool);
    if (s != AMPC_OK) {
        free(ctx);
        return s;
    }
    *out = ctx;
    return AMPC_OK;
}

void ampci_ctx_core_free(ampc_ctx *ctx) {
    ampci_arena_release(ctx);
    ampci_heap_release(ctx);
    if (ctx->dev_mem.buft->release) ctx->dev_mem.buft->release(ctx);
    ampci_pool_free(ctx->pool);
    free(ctx);
}

void ampci_ctx_core_step_end(ampc_ctx *ctx) {
    ampci_arena_reset(ctx);
    ampci_heap_reset(ctx);
    ctx->step_id++;
}

ampc_isa ampc_ctx_isa(const ampc_ctx *ctx) { return ctx ? ctx->isa : AMPC_ISA_AUTO; }

ampc_status ampc_ctx_set_threads(ampc_ctx *ctx, int n) {
    if (!ctx || n < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_ctx_set_threads: threads = %d; expected 0 (all CPUs) or more%s", n,
                          ctx ? "" : " (and ctx must not be NULL)");
    int want = n ? n : ampci_online_cpus();
    if (want == ampci_pool_threads(ctx->pool)) return AMPC_OK;
    ampci_pool *np;
    ampc_status s = ampci_pool_new(want, &np);
    if (s != AMPC_OK) return s;
    ampci_pool_free(ctx->pool);
    ctx->pool = np;
    return AMPC_OK;
}

int ampc_ctx_threads(const ampc_ctx *ctx) { return ctx ? ampci_pool_threads(ctx->pool) : 1; }

ampc_rng *ampc_ctx_rng(ampc_ctx *ctx) { return ctx ? &ctx->rng : NULL; }

uint64_t ampc_ctx_step(const ampc_ctx *ctx) { return ctx ? ctx->step_id - 1 : 0; }
