/* cpu.c: the process-wide CPU probe. A feature counts only when CPUID reports it AND the OS saves its
 * register state (XGETBV: XCR0 bits for YMM, ZMM, tiles), and for AMX only after Linux granted the tile
 * data permission (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without it the first tile
 * instruction raises SIGILL. The chosen kernel level is the best one usable, lowered (never raised) by
 * the environment variable AMPC_ISA=ref|avx2|avx512|amx. This probe is the only global state of ampc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define AMPCI_X86 1
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

#define XCR0_YMM (1u << 1 | 1u << 2)                      /* SSE + AVX state */
#define XCR0_ZMM (XCR0_YMM | 1u << 5 | 1u << 6 | 1u << 7) /* + opmask, ZMM_Hi256, Hi16_ZMM */
#define XCR0_TILE (1u << 17 | 1u << 18)                   /* XTILECFG + XTILEDATA */

static const char *const feature_names[AMPC_CPU_FEATURE_COUNT] = {
    [AMPC_CPU_SSE42] = "sse4_2",
    [AMPC_CPU_AVX] = "avx",
    [AMPC_CPU_AVX2] = "avx2",
    [AMPC_CPU_FMA] = "fma",
    [AMPC_CPU_F16C] = "f16c",
    [AMPC_CPU_AVX512F] = "avx512f",
    [AMPC_CPU_AVX512BW] = "avx512bw",
    [AMPC_CPU_AVX512VL] = "avx512vl",
    [AMPC_CPU_AVX512DQ] = "avx512dq",
    [AMPC_CPU_AVX512_BF16] = "avx512_bf16",
    [AMPC_CPU_AVX512_FP16] = "avx512_fp16",
    [AMPC_CPU_AVX512_VNNI] = "avx512_vnni",
    [AMPC_CPU_AMX_TILE] = "amx_tile",
    [AMPC_CPU_AMX_BF16] = "amx_bf16",
    [AMPC_CPU_AMX_INT8] = "amx_int8",
    [AMPC_CPU_AMX_FP16] = "amx_fp16",
};

static const char *const isa_names[AMPC_ISA_COUNT] = {"auto", "ref", "avx2", "avx512", "amx"};

const char *ampc_cpu_feature_name(ampc_cpu_feature f) {
    return (unsigned)f < AMPC_CPU_FEATURE_COUNT ? feature_names[f] : "?";
}

const char *ampc_isa_name(ampc_isa isa) { return (unsigned)isa < AMPC_ISA_COUNT ? isa_names[isa] : "?"; }

static int find_isa(const char *name) {
    for (int i = 0; i < AMPC_ISA_COUNT; i++)
        if (strcasecmp(name, isa_names[i]) == 0) return i;
    return -1;
}

ampc_status ampc_isa_parse(const char *name, ampc_isa *out) {
    if (!name || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_isa_parse: name and out must not be NULL");
    int i = find_isa(name);
    if (i >= 0) {
        *out = (ampc_isa)i;
        return AMPC_OK;
    }
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "unknown kernel level '%s': expected auto, ref, avx2, avx512 or amx",
                      name);
}

#ifdef AMPCI_X86
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) r[0] = r[1] = r[2] = r[3] = 0;
}

static void read_strings(ampc_cpu_info *ci) {
    unsigned r[4];
    cpuid(0, 0, r);
    memcpy(ci->vendor, &r[1], 4);
    memcpy(ci->vendor + 4, &r[3], 4);
    memcpy(ci->vendor + 8, &r[2], 4);
    ci->vendor[12] = '\0';
    unsigned maxext = __get_cpuid_max(0x80000000u, NULL);
    if (maxext < 0x80000004u) return;
    for (unsigned i = 0; i < 3; i++) {
        cpuid(0x80000002u + i, 0, r);
        memcpy(ci->brand + 16 * i, r, 16);
    }
    ci->brand[48] = '\0';
    char *s = ci->brand; /* brand strings are space-padded on both sides */
    while (*s == ' ') s++;
    memmove(ci->brand, s, strlen(s) + 1);
    for (size_t n = strlen(ci->brand); n && ci->brand[n - 1] == ' ';) ci->brand[--n] = '\0';
}

static void read_features(ampc_cpu_info *ci, bool *osxsave) {
    unsigned r1[4], r7[4], r71[4];
    unsigned maxleaf = __get_cpuid_max(0, NULL);
    cpuid(1, 0, r1);
    cpuid(7, 0, r7); /* zeros when leaf 7 is beyond the maximum */
    r71[0] = 0;
    if (maxleaf >= 7 && r7[0] >= 1) cpuid(7, 1, r71); /* r7[0]: highest leaf-7 subleaf */
    bool *f = ci->cpuid;
    f[AMPC_CPU_SSE42] = r1[2] >> 20 & 1;
    f[AMPC_CPU_FMA] = r1[2] >> 12 & 1;
    f[AMPC_CPU_AVX] = r1[2] >> 28 & 1;
    f[AMPC_CPU_F16C] = r1[2] >> 29 & 1;
    f[AMPC_CPU_AVX2] = r7[1] >> 5 & 1;
    f[AMPC_CPU_AVX512F] = r7[1] >> 16 & 1;
    f[AMPC_CPU_AVX512DQ] = r7[1] >> 17 & 1;
    f[AMPC_CPU_AVX512BW] = r7[1] >> 30 & 1;
    f[AMPC_CPU_AVX512VL] = r7[1] >> 31 & 1;
    f[AMPC_CPU_AVX512_VNNI] = r7[2] >> 11 & 1;
    f[AMPC_CPU_AMX_BF16] = r7[3] >> 22 & 1;
    f[AMPC_CPU_AVX512_FP16] = r7[3] >> 23 & 1;
    f[AMPC_CPU_AMX_TILE] = r7[3] >> 24 & 1;
    f[AMPC_CPU_AMX_INT8] = r7[3] >> 25 & 1;
    f[AMPC_CPU_AVX512_BF16] = r71[0] >> 5 & 1;
    f[AMPC_CPU_AMX_FP16] = r71[0] >> 21 & 1;
    *osxsave = r1[2] >> 27 & 1;
}
#endif

/* Asks Linux for the AMX tile data permission (needed once per process, before any tile instruction). */
static void request_amx(ampc_cpu_info *ci) {
    ci->amx_permission = AMPC_AMX_DENIED;
#if defined(__linux__) && defined(SYS_arch_prctl)
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) {
        unsigned long bits = 0;
        if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) == 0 && (bits >> XFEATURE_XTILEDATA & 1)) {
            ci->amx_permission = AMPC_AMX_GRANTED;
            return;
        }
    }
    ci->amx_errno = errno;
#else
    ci->amx_errno = ENOSYS;
#endif
}

static void decide_os_support(ampc_cpu_info *ci, bool osxsave) {
    uint64_t x = ci->xcr0;
    bool ymm = osxsave && (x & XCR0_YMM) == XCR0_YMM;
    bool zmm = osxsave && (x & XCR0_ZMM) == XCR0_ZMM;
    bool tiles_saved = osxsave && (x & XCR0_TILE) == XCR0_TILE;
    bool any_amx = ci->cpuid[AMPC_CPU_AMX_TILE];
    if (!any_amx) ci->amx_permission = AMPC_AMX_NOT_PRESENT;
    else if (!tiles_saved) ci->amx_permission = AMPC_AMX_OS_DISABLED;
    else request_amx(ci);
    bool tiles = tiles_saved && ci->amx_permission == AMPC_AMX_GRANTED;
    for (int i = 0; i < AMPC_CPU_FEATURE_COUNT; i++) {
        bool ok;
        if (i == AMPC_CPU_SSE42) ok = true;
        else if (i >= AMPC_CPU_AMX_TILE) ok = tiles;
        else if (i >= AMPC_CPU_AVX512F) ok = zmm;
        else ok = ymm;
        ci->os_enabled[i] = ci->cpuid[i] && ok;
    }
}

static bool usable(const ampc_cpu_info *ci, ampc_cpu_feature f) { return ci->os_enabled[f]; }

static ampc_isa best_level(const ampc_cpu_info *ci) {
    ampc_isa isa = AMPC_ISA_REF;
    if (usable(ci, AMPC_CPU_AVX2) && usable(ci, AMPC_CPU_FMA) && usable(ci, AMPC_CPU_F16C)) isa = AMPC_ISA_AVX2;
    if (isa == AMPC_ISA_AVX2 && usable(ci, AMPC_CPU_AVX512F) && usable(ci, AMPC_CPU_AVX512BW) &&
        usable(ci, AMPC_CPU_AVX512VL) && usable(ci, AMPC_CPU_AVX512DQ))
        isa = AMPC_ISA_AVX512;
    if (isa == AMPC_ISA_AVX512 && usable(ci, AMPC_CPU_AMX_TILE) && usable(ci, AMPC_CPU_AMX_BF16)) isa = AMPC_ISA_AMX;
    return isa;
}

static void apply_env_cap(ampc_cpu_info *ci) {
    const char *env = getenv("AMPC_ISA");
    ci->chosen = ci->best;
    ci->isa_env_valid = true;
    if (!env || !*env) return;
    snprintf(ci->isa_env, sizeof ci->isa_env, "%s", env);
    int cap = find_isa(env);
    if (cap < 0) {
        ci->isa_env_valid = false; /* reported by `ampc info` and ampc_ctx_new's log; not fatal here */
        return;
    }
    if (cap != AMPC_ISA_AUTO && (ampc_isa)cap < ci->chosen) ci->chosen = (ampc_isa)cap;
}

static ampc_cpu_info g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void probe(void) {
    ampc_cpu_info *ci = &g_cpu;
    memset(ci, 0, sizeof *ci);
#ifdef AMPCI_X86
    bool osxsave = false;
    read_strings(ci);
    read_features(ci, &osxsave);
    ci->xcr0 = osxsave ? xgetbv0() : 0;
    decide_os_support(ci, osxsave);
#else
    snprintf(ci->vendor, sizeof ci->vendor, "unknown");
#endif
    ci->best = best_level(ci);
    ci->online_cpus = ampci_online_cpus();
    apply_env_cap(ci);
}

const ampc_cpu_info *ampc_cpu(void) {
    pthread_once(&g_cpu_once, probe);
    return &g_cpu;
}

bool ampc_cpu_has(ampc_cpu_feature f) { return (unsigned)f < AMPC_CPU_FEATURE_COUNT && ampc_cpu()->os_enabled[f]; }
