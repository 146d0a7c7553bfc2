/* bench_peak.c: the compute peaks GEMM figures are measured against, taken on this machine at run time:
 * tight loops of one instruction with 16 (or 4 tile) independent
 * accumulators, run on T threads at once. FLOP: vfmadd231ps zmm = 32; vdpbf16ps zmm = 64; tdpbf16ps on
 * 16x16 F32 tiles with K = 32 BF16 = 16384. The vector loops are inline asm because with intrinsics gcc
 * merges the identical accumulator chains and the loop would measure one chain. */
#include "bench_peak.h"

#include "bench_util.h"
#include "core/core.h"

#include <immintrin.h>
#include <string.h>

#define ZMM_CLOBBERS                                                                                                   \
    "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12",         \
        "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "cc"
#define ZERO_ALL                                                                                                       \
    "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"                                                                             \
    "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"                                                                             \
    "vmovaps %%zmm16, %%zmm0\n\tvmovaps %%zmm16, %%zmm1\n\tvmovaps %%zmm16, %%zmm2\n\t"                                \
    "vmovaps %%zmm16, %%zmm3\n\tvmovaps %%zmm16, %%zmm4\n\tvmovaps %%zmm16, %%zmm5\n\t"                                \
    "vmovaps %%zmm16, %%zmm6\n\tvmovaps %%zmm16, %%zmm7\n\tvmovaps %%zmm16, %%zmm8\n\t"                                \
    "vmovaps %%zmm16, %%zmm9\n\tvmovaps %%zmm16, %%zmm10\n\tvmovaps %%zmm16, %%zmm11\n\t"                              \
    "vmovaps %%zmm16, %%zmm12\n\tvmovaps %%zmm16, %%zmm13\n\tvmovaps %%zmm16, %%zmm14\n\t"                             \
    "vmovaps %%zmm16, %%zmm15\n\t"
#define X16(insn)                                                                                                      \
    insn                                                                                                               \
        " %%zmm16, %%zmm17, %%zmm0\n\t" insn " %%zmm16, %%zmm17, %%zmm1\n\t" insn " %%zmm16, %%zmm17, %%zmm2\n\t" insn \
        " %%zmm16, %%zmm17, %%zmm3\n\t" insn " %%zmm16, %%zmm17, %%zmm4\n\t" insn " %%zmm16, %%zmm17, %%zmm5\n\t" insn \
        " %%zmm16, %%zmm17, %%zmm6\n\t" insn " %%zmm16, %%zmm17, %%zmm7\n\t" insn " %%zmm16, %%zmm17, %%zmm8\n\t" insn \
        " %%zmm16, %%zmm17, %%zmm9\n\t" insn " %%zmm16, %%zmm17, %%zmm10\n\t" insn                                     \
        " %%zmm16, %%zmm17, %%zmm11\n\t" insn " %%zmm16, %%zmm17, %%zmm12\n\t" insn                                    \
        " %%zmm16, %%zmm17, %%zmm13\n\t" insn " %%zmm16, %%zmm17, %%zmm14\n\t" insn " %%zmm16, %%zmm17, %%zmm15\n\t"

/* FLOP of `iters` iterations of each loop. */
__attribute__((target("avx512f"))) static double loop_fma32(long iters) {
    __asm__ volatile(ZERO_ALL ".p2align 5\n1:\n\t" X16("vfmadd231ps") "dec %0\n\tjnz 1b\n\t"
                     : "+r"(iters)
                     :
                     : ZMM_CLOBBERS);
    return 0;
}

__attribute__((target("avx512f,avx512bf16"))) static double loop_bf16dp(long iters) {
    __asm__ volatile(ZERO_ALL ".p2align 5\n1:\n\t" X16("vdpbf16ps") "dec %0\n\tjnz 1b\n\t"
                     : "+r"(iters)
                     :
                     : ZMM_CLOBBERS);
    return 0;
}

typedef struct tilecfg {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* Register-only: C0..C3 += A{4,5} x B{6,7}, 4 tile products per iteration. */
__attribute__((target("amx-tile,amx-bf16"))) static double loop_amx(long iters) {
    static __thread uint8_t buf[16 * 64] __attribute__((aligned(64)));
    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    memset(buf, 0, sizeof buf);
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    for (long i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, buf, 64);
    _tile_release();
    return 0;
}

typedef struct peak_job {
    double (*loop)(long iters);
    long iters;
} peak_job;

static void peak_chunk(void *arg, int64_t b, int64_t e, int64_t chunk) {
    (void)b, (void)e, (void)chunk;
    const peak_job *j = arg;
    j->loop(j->iters);
}

static void peak_run(void *arg) {
    void **a = arg;
    ampc_ctx *ctx = a[0];
    ampc_parallel_for(ctx, ampc_ctx_threads(ctx), 1, peak_chunk, a[1]);
}

/* GFLOP/s of `loop` on every thread of ctx at once (median of 5 runs of ~0.1 s). */
static double measure(ampc_ctx *ctx, double (*loop)(long), long iters, double flop_per_iter) {
    peak_job j = {loop, iters};
    void *arg[2] = {ctx, &j};
    bench_timing t = bench_time(peak_run, arg, &(bench_repeat){.min_runs = 5, .max_runs = 5});
    return flop_per_iter * (double)iters * ampc_ctx_threads(ctx) / t.median_s / 1e9;
}

ampc_status bench_peak_measure(int threads, bench_peaks *out) {
    memset(out, 0, sizeof *out);
    ampc_ctx *ctx;
    ampc_status s = ampc_ctx_new(&(ampc_ctx_params){.threads = threads}, &ctx);
    if (s != AMPC_OK) return s;
    const ampc_cpu_info *cpu = ampc_cpu();
    out->threads = ampc_ctx_threads(ctx);
    if (cpu->best >= AMPC_ISA_AVX512) out->fma32 = measure(ctx, loop_fma32, 1 << 21, 16 * 32);
    if (cpu->best >= AMPC_ISA_AVX512 && ampc_cpu_has(AMPC_CPU_AVX512_BF16))
        out->bf16dp = measure(ctx, loop_bf16dp, 1 << 21, 16 * 64);
    if (cpu->best >= AMPC_ISA_AMX) out->amx = measure(ctx, loop_amx, 1 << 17, 4 * 16384);
    ampc_ctx_free(ctx);
    return AMPC_OK;
}

double bench_peak_for(const bench_peaks *p, const char *kernel, const char **which) {
    /* the unit a kernel's name says it runs on: AMX tiles, vdpbf16ps, or F32 FMAs (widening kernels) */
    if (strstr(kernel, "__amx") && p->amx > 0) return *which = "amx", p->amx;
    if (strstr(kernel, "bf16f32__avx512bf16") || strstr(kernel, "bf16x1__avx512bf16"))
        if (p->bf16dp > 0) return *which = "bf16dp", p->bf16dp;
    return *which = "fma32", p->fma32;
}
