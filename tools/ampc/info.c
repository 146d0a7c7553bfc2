/* info.c: `ampc info`, the answer to "which precisions does this machine really support?", the CPU
 * counterpart of a GPU vendor's per-card FP16/BF16 table. It shows each CPU feature twice (what CPUID
 * reports, and what is usable: OS-enabled per XCR0 and, for AMX, permission granted), the AMX
 * permission result, the kernel level ampc chose, the kernel in every slot with the other candidates the
 * registry holds for it, how the kernels were chosen (measured, from the cache, or by the fixed rule: the
 * choice and the runner-up with their times per size class), and a support grid of F32/F16/BF16 against
 * GEMM, conversion and elementwise work saying whether the work runs natively (and with which
 * instruction) or emulated (and how): for GEMMs what the chosen kernel does, for the rest what the usable
 * features allow. */
#include "cli.h"
#include "info_devices.h"
#include "json.h"
#include "run.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc info [--device DEV] [--json]\n\n"
               "The devices this build and machine offer (cpu, cuda:N, the guard test device), and what the\n"
               "CPU offers mixed-precision training: CPU features as reported by CPUID and as\n"
               "usable (enabled by the OS in XCR0; for AMX, tile permission granted), the AMX permission,\n"
               "the kernel level ampc runs (AMPC_ISA can lower it), the kernel chosen in every slot and the\n"
               "other candidates this CPU runs, how they were chosen (timed once per CPU and cached, with the\n"
               "runner-up; AMPC_KERNEL_CHOICE=rule for the fixed rule, AMPC_KERNEL_CACHE=off|refresh), and a\n"
               "table of F32/F16/BF16 support per operation family: native (with the instruction) or emulated\n"
               "(and how).\n\n");
}

/* ---- the support grid ---- */

typedef enum { ST_NATIVE, ST_CAPABLE, ST_EMULATED, ST_NA } cell_status;
static const char *const status_names[] = {"native", "native-capable", "emulated", "n/a"};

typedef struct cell {
    cell_status status;
    const char *feature; /* the usable feature that decides it, or NULL */
    const char *how;     /* the instruction (native) or the method (emulated) */
    const char *note;    /* one sentence for the notes, or NULL */
} cell;

enum { ROW_F32, ROW_F16, ROW_BF16, NROWS };
enum { OP_GEMM, OP_CVT, OP_ELEM, NOPS };
static const char *const row_names[NROWS] = {"F32", "F16", "BF16"};
static const char *const op_names[NOPS] = {"GEMM", "conversion", "elementwise"};
static const char *const op_keys[NOPS] = {"gemm", "conversion", "elementwise"};

static bool has(ampc_cpu_feature f) { return ampc_cpu_has(f); }

/* The kernel chosen for a GEMM slot ("gemm_f16") at the process's level, and its ISA suffix ("amx_bf16x3"). */
static const char *chosen_gemm(const char *slot, const char **isa) {
    const char *name = "";
    for (int i = 0; ampc_kernel_slot_name(i); i++)
        if (strcmp(ampc_kernel_slot_name(i), slot) == 0) name = ampc_kernel_slot_impl(i);
    const char *sep = strstr(name, "__");
    *isa = sep ? sep + 2 : "";
    return name;
}

/* The GEMM cell describes the kernel that runs, not what the CPU could do: the FP16 GEMM on an AMX Xeon is
 * three exact BF16 tile passes although the CPU also has vfmadd231ph (which would accumulate in FP16). */
static cell gemm_cell(const char *slot, const char *widen) {
    const char *isa;
    chosen_gemm(slot, &isa);
    bool f32 = strcmp(slot, "gemm_f32") == 0;
    if (strcmp(isa, "amx") == 0)
        return (cell){ST_NATIVE, "amx_bf16", "tdpbf16ps", "BF16 tile products accumulated in FP32 (AMX)."};
    if (strcmp(isa, "amx_bf16x3") == 0)
        return (cell){ST_EMULATED, "amx_bf16", "3 exact BF16 tile passes",
                      "Each FP16 operand splits exactly into BF16 hi + lo; hi*hi + hi*lo + lo*hi run on the AMX "
                      "BF16 tiles (tdpbf16ps) with FP32 accumulation: each product within 2^-16 of exact."};
    if (strcmp(isa, "avx512bf16") == 0)
        return (cell){ST_NATIVE, "avx512_bf16", "vdpbf16ps", "Pairs of BF16 products accumulated in FP32."};
    if (strcmp(isa, "avx512") == 0)
        return f32 ? (cell){ST_NATIVE, "avx512f", "vfmadd231ps zmm", "16 FP32 FMAs per instruction."}
                   : (cell){ST_EMULATED, NULL, "widen to F32, vfmadd231ps", widen};
    return (cell){f32 ? ST_NATIVE : ST_EMULATED, NULL, "portable C", "The reference kernel (no vector unit used)."};
}

static cell cvt_f16(void) {
    if (has(AMPC_CPU_AVX512F)) return (cell){ST_NATIVE, "avx512f", "vcvtps2ph/vcvtph2ps", NULL};
    if (has(AMPC_CPU_F16C)) return (cell){ST_NATIVE, "f16c", "vcvtps2ph/vcvtph2ps", NULL};
    return (cell){ST_EMULATED, NULL, "integer RNE", "FP16 conversion in portable C (round to nearest even)."};
}

static cell cvt_bf16(void) {
    if (has(AMPC_CPU_AVX512_BF16))
        return (cell){ST_NATIVE, "avx512_bf16", "vcvtneps2bf16",
                      "F32->BF16 in one instruction; BF16->F32 is an exact shift."};
    return (cell){ST_EMULATED, NULL, "integer RNE", "F32->BF16 rounds with integer adds; BF16->F32 is an exact shift."};
}

static cell elem_f32(void) {
    if (has(AMPC_CPU_AVX512F)) return (cell){ST_NATIVE, "avx512f", "vmulps zmm", NULL};
    if (has(AMPC_CPU_AVX)) return (cell){ST_NATIVE, "avx", "vmulps ymm", NULL};
    return (cell){ST_NATIVE, "sse4_2", "mulps xmm", NULL};
}

static cell elem_low(bool f16) {
    if (f16 && has(AMPC_CPU_AVX512_FP16))
        return (cell){ST_CAPABLE, "avx512_fp16", "vmulph",
                      "The CPU has FP16 arithmetic, but ampc computes elementwise work in F32."};
    return (cell){ST_EMULATED, NULL, "computed in F32", "Widened to F32, computed, rounded once on store."};
}

static void build_grid(cell g[NROWS][NOPS]) {
    g[ROW_F32][OP_GEMM] = gemm_cell("gemm_f32", NULL);
    g[ROW_F32][OP_CVT] = (cell){ST_NA, NULL, "the hub", "F16 and BF16 convert to and from F32."};
    g[ROW_F32][OP_ELEM] = elem_f32();
    g[ROW_F16][OP_GEMM] = gemm_cell(
        "gemm_f16",
        has(AMPC_CPU_AVX512_FP16)
            ? "Operands widen exactly (vcvtph2ps), then FP32 FMA. The CPU's vfmadd231ph would accumulate in FP16."
            : "No FP16 dot product: operands widen exactly (vcvtph2ps), then FP32 FMA.");
    g[ROW_F16][OP_CVT] = cvt_f16();
    g[ROW_F16][OP_ELEM] = elem_low(true);
    g[ROW_BF16][OP_GEMM] = gemm_cell("gemm_bf16", "No BF16 dot product used: BF16 widens exactly (a shift), then "
                                                  "FP32 FMA.");
    g[ROW_BF16][OP_CVT] = cvt_bf16();
    g[ROW_BF16][OP_ELEM] = elem_low(false);
}

static void cell_text(const cell *c, char *buf, size_t size) {
    snprintf(buf, size, "%s (%s)", status_names[c->status], c->how);
}

/* ---- facts gathered once ---- */

typedef struct info {
    const ampc_cpu_info *cpu;
    int online_cpus;
    cell grid[NROWS][NOPS];
} info;

static const char *const xcr0_names[64] = {
    [0] = "x87",      [1] = "SSE",  [2] = "AVX",       [5] = "opmask",    [6] = "ZMM_Hi256",
    [7] = "Hi16_ZMM", [9] = "PKRU", [17] = "XTILECFG", [18] = "XTILEDATA"};

static void xcr0_text(uint64_t x, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int b = 0; b < 64 && used < size; b++) {
        if (!(x >> b & 1)) continue;
        int w = xcr0_names[b] ? snprintf(buf + used, size - used, "%s%s", used ? " " : "", xcr0_names[b])
                              : snprintf(buf + used, size - used, "%sbit%d", used ? " " : "", b);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static const char *amx_key(ampc_amx_permission p) {
    switch (p) {
    case AMPC_AMX_GRANTED: return "granted";
    case AMPC_AMX_DENIED: return "denied";
    case AMPC_AMX_OS_DISABLED: return "os_disabled";
    default: return "not_present";
    }
}

static void amx_text(const ampc_cpu_info *cpu, char *buf, size_t size) {
    switch (cpu->amx_permission) {
    case AMPC_AMX_GRANTED: snprintf(buf, size, "granted (arch_prctl ARCH_REQ_XCOMP_PERM)"); break;
    case AMPC_AMX_DENIED: snprintf(buf, size, "denied: %s", strerror(cpu->amx_errno)); break;
    case AMPC_AMX_OS_DISABLED: snprintf(buf, size, "OS disabled (XCR0 lacks XTILECFG/XTILEDATA)"); break;
    default: snprintf(buf, size, "not present (CPUID reports no AMX)"); break;
    }
}

/* Why a feature CPUID reports is not usable. */
static const char *unusable_reason(const ampc_cpu_info *cpu, int f) {
    if (!cpu->cpuid[f] || cpu->os_enabled[f]) return "";
    if (f >= AMPC_CPU_AMX_TILE)
        return cpu->amx_permission == AMPC_AMX_DENIED ? "AMX permission denied" : "OS does not save tile state";
    return "OS does not save its registers (XCR0)";
}

static ampc_status gather(info *in) {
    memset(in, 0, sizeof *in);
    in->cpu = ampc_cpu();
    in->online_cpus = in->cpu->online_cpus;
    build_grid(in->grid);
    return AMPC_OK;
}

/* The conversion pairs of the tensor float dtypes, in the order the bench prints them. */
static const ampc_dtype cvt_pairs[][2] = {
    /* {src, dst} */
    {AMPC_DTYPE_F32, AMPC_DTYPE_F16},  {AMPC_DTYPE_F32, AMPC_DTYPE_BF16}, {AMPC_DTYPE_F16, AMPC_DTYPE_F32},
    {AMPC_DTYPE_F16, AMPC_DTYPE_BF16}, {AMPC_DTYPE_BF16, AMPC_DTYPE_F32}, {AMPC_DTYPE_BF16, AMPC_DTYPE_F16},
};
#define NPAIRS (sizeof cvt_pairs / sizeof cvt_pairs[0])

static const char *cvt_kernel(size_t i) { return ampc_convert_kernel_name(cvt_pairs[i][1], cvt_pairs[i][0]); }

/* ---- the registry: candidates besides the chosen kernel ---- */

/* The slot of the kernel called `name` (NULL if none is: "generic", "memcpy", "-"). */
static const char *slot_of(const char *name) {
    ampc_kernel_desc d;
    for (int i = 0; ampc_kernel_describe(i, &d); i++)
        if (strcmp(d.name, name) == 0) return d.slot;
    return NULL;
}

/* Calls fn(d, arg) for every kernel dispatch could choose for `slot` at the chosen level on this CPU,
 * best first (the registry lists them lowest level first). */
static void each_candidate(const char *slot, void (*fn)(const ampc_kernel_desc *, void *), void *arg) {
    int n = 0;
    ampc_kernel_desc d;
    while (ampc_kernel_describe(n, &d)) n++;
    for (int i = n - 1; slot && i >= 0; i--)
        if (ampc_kernel_describe(i, &d) && d.candidate && d.usable && d.level <= ampc_cpu()->chosen &&
            strcmp(d.slot, slot) == 0)
            fn(&d, arg);
}

typedef struct tags {
    char *buf;
    size_t size;
    const char *shown;
} tags;

/* Appends the ISA tag of a candidate other than the one shown ("avx512bf16" of
 * "ampc_k_gemm_bf16f32__avx512bf16"). */
static void add_tag(const ampc_kernel_desc *d, void *arg) {
    tags *t = arg;
    const char *tag = strstr(d->name, "__");
    size_t len = strlen(t->buf);
    if (strcmp(d->name, t->shown) != 0 && tag) snprintf(t->buf + len, t->size - len, "%s%s", len ? ", " : "", tag + 2);
}

static const char *other_candidates(const char *slot, const char *shown, char *buf, size_t size) {
    buf[0] = '\0';
    each_candidate(slot, add_tag, &(tags){buf, size, shown});
    return buf;
}

/* ---- how the kernels were chosen ---- */

/* The slot's kernel differs between size classes. */
static bool by_size(const char *slot) {
    ampc_kernel_choice c, first = {0};
    for (int i = 0; ampc_kernel_get_choice(i, &c); i++) {
        if (strcmp(c.slot, slot) != 0) continue;
        if (!first.slot) first = c;
        else if (strcmp(c.kernel, first.kernel) != 0) return true;
    }
    return false;
}

static void time_text(double s, char *buf, size_t size) {
    if (s <= 0) snprintf(buf, size, "-");
    else if (s < 1e-3) snprintf(buf, size, "%.1f us", s * 1e6);
    else snprintf(buf, size, "%.2f ms", s * 1e3);
}

static void choice_text(const ampc_kernel_tuning *t, char *buf, size_t size) {
    if (!strcmp(t->mode, "rule")) snprintf(buf, size, "the fixed rule (AMPC_KERNEL_CHOICE=rule)");
    else if (!strcmp(t->source, "rule")) snprintf(buf, size, "the fixed rule");
    else if (!strcmp(t->source, "cache"))
        snprintf(buf, size, "measured, read from the cache %s (the measurement took %.2f s)", t->cache_file,
                 t->seconds);
    else
        snprintf(buf, size, "measured by this process in %.2f s%s%s", t->seconds,
                 t->cache_written ? ", cached in " : "", t->cache_written ? t->cache_file : "");
}

static void print_choices(void) {
    ampc_kernel_tuning t;
    ampc_kernel_get_tuning(&t);
    char text[1024], a[32], b[32];
    choice_text(&t, text, sizeof text);
    printf("kernel choice   %s\n", text);
    if (t.note[0]) printf("                %s\n", t.note);
    if (!strcmp(t.source, "rule")) return;
    printf("\nmeasured choices (slot, size class: the kernel chosen and its time, the runner-up and its time;\n"
           "times per call, summed over the class's shapes; \"-\": none, the F32 GEMM runs)\n");
    ampc_kernel_choice c;
    for (int i = 0; ampc_kernel_get_choice(i, &c); i++) {
        time_text(c.seconds, a, sizeof a), time_text(c.runner_up_seconds, b, sizeof b);
        printf("  %-19s %-6s  %-36s %9s   %-36s %9s\n", c.slot, c.size_class, c.kernel, a,
               c.runner_up ? c.runner_up : "", c.runner_up ? b : "");
    }
}

/* ---- the verdict: one line per low precision ---- */

static void verdict(const info *in, int row, char *buf, size_t size) {
    const cell *g = &in->grid[row][OP_GEMM];
    if (strcmp(g->how, "3 exact BF16 tile passes") == 0)
        snprintf(buf, size,
                 "matrix multiply on the AMX BF16 tiles, three exact passes (FP32 accumulate): saves "
                 "memory and bandwidth, and compute wherever three tile passes beat FP32 FMAs");
    else if (g->status == ST_NATIVE)
        snprintf(buf, size, "native matrix multiply (%s, FP32 accumulate): saves compute, memory and bandwidth",
                 g->how);
    else
        snprintf(buf, size,
                 "no native matrix multiply: its math runs in F32, so it saves memory and bandwidth, "
                 "not compute");
}

/* ---- human output ---- */

static void print_cpu(const info *in, ampc_device dev) {
    char x[256];
    xcr0_text(in->cpu->xcr0, x, sizeof x);
    printf("ampc %s\n", ampc_version());
    if (ampc_dist_available()) printf("data parallel   MPI (%s): mpirun -np N ampc train ...\n\n", ampc_dist_library());
    else
        printf("data parallel   not in this build (configured with -DAMPC_MPI=OFF, or MPI was not found: "
               "install libopenmpi-dev and reconfigure)\n\n");
    info_print_devices(dev);
    printf("\nCPU\n");
    printf("  vendor        %s\n", in->cpu->vendor);
    printf("  brand         %s\n", in->cpu->brand[0] ? in->cpu->brand : "(none reported)");
    printf("  online CPUs   %d\n", in->online_cpus);
    printf("  XCR0          0x%016llx (%s)\n", (unsigned long long)in->cpu->xcr0, x[0] ? x : "not readable");
}

static void print_features(const info *in) {
    printf("\n%-14s %-6s %-6s\n", "feature", "CPUID", "usable");
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++) {
        const char *why = unusable_reason(in->cpu, f);
        const char *name = ampc_cpu_feature_name((ampc_cpu_feature)f);
        if (*why) printf("  %-12s %-6s %-6s %s\n", name, in->cpu->cpuid[f] ? "yes" : "no", "no", why);
        else printf("  %-12s %-6s %s\n", name, in->cpu->cpuid[f] ? "yes" : "no", in->cpu->os_enabled[f] ? "yes" : "no");
    }
}

static void print_levels(const info *in) {
    char amx[160];
    amx_text(in->cpu, amx, sizeof amx);
    printf("\nAMX permission  %s\n", amx);
    char env[48];
    if (in->cpu->isa_env[0]) snprintf(env, sizeof env, "AMPC_ISA=%s", in->cpu->isa_env);
    else snprintf(env, sizeof env, "AMPC_ISA unset");
    printf("kernel level    best %s; %s; chosen %s\n", ampc_isa_name(in->cpu->best), env,
           ampc_isa_name(in->cpu->chosen));
    char other[128];
    printf("\nconversion kernels (ampc_convert; then the other candidates this CPU runs)\n");
    for (size_t i = 0; i < NPAIRS; i++) {
        other_candidates(slot_of(cvt_kernel(i)), cvt_kernel(i), other, sizeof other);
        printf("  %-4s -> %-4s  %-*s%s\n", ampc_dtype_name(cvt_pairs[i][0]), ampc_dtype_name(cvt_pairs[i][1]),
               other[0] ? 35 : 0, cvt_kernel(i), other);
    }
    printf("\ncompute kernels (slot, the kernel chosen, the other candidates this CPU runs; *: on large\n"
           "products, another kernel on smaller ones, see the measured choices)\n");
    for (int i = 0; ampc_kernel_slot_name(i); i++) {
        const char *slot = ampc_kernel_slot_name(i), *impl = ampc_kernel_slot_impl(i);
        other_candidates(slot, impl, other, sizeof other);
        char shown[80];
        snprintf(shown, sizeof shown, "%s%s", impl, by_size(slot) ? " *" : "");
        printf("  %-18s %-*s%s\n", slot, other[0] ? 37 : 0, shown, other);
    }
    printf("\n");
    print_choices();
}

static void print_grid(const info *in) {
    char t[96];
    int w[NOPS];
    for (int o = 0; o < NOPS; o++) {
        w[o] = (int)strlen(op_names[o]);
        for (int r = 0; r < NROWS; r++) {
            cell_text(&in->grid[r][o], t, sizeof t);
            if ((int)strlen(t) > w[o]) w[o] = (int)strlen(t);
        }
    }
    printf("\nprecision support on this CPU (GEMM: the kernel chosen; the rest: the usable features)\n");
    printf("  %-5s", "");
    for (int o = 0; o < NOPS; o++) printf("  %-*s", o + 1 < NOPS ? w[o] : 0, op_names[o]);
    printf("\n");
    for (int r = 0; r < NROWS; r++) {
        printf("  %-5s", row_names[r]);
        for (int o = 0; o < NOPS; o++) {
            cell_text(&in->grid[r][o], t, sizeof t);
            printf("  %-*s", o + 1 < NOPS ? w[o] : 0, t); /* no trailing blanks */
        }
        printf("\n");
    }
}

/* A cell's note, once per column: rows sharing the same note are named together ("F16, BF16"). */
static void print_note(const info *in, int row, int op) {
    const char *note = in->grid[row][op].note;
    for (int r = 0; r < row; r++)
        if (note && in->grid[r][op].note && strcmp(in->grid[r][op].note, note) == 0) return;
    if (!note) return;
    char rows[32] = "";
    for (int r = row; r < NROWS; r++)
        if (in->grid[r][op].note && strcmp(in->grid[r][op].note, note) == 0)
            snprintf(rows + strlen(rows), sizeof rows - strlen(rows), "%s%s", rows[0] ? ", " : "", row_names[r]);
    printf("  %-11s %-10s  %s\n", op_names[op], rows, note);
}

static void print_notes(const info *in) {
    printf("\nnotes\n");
    for (int o = 0; o < NOPS; o++)
        for (int r = 0; r < NROWS; r++) print_note(in, r, o);
    if (in->cpu->chosen < in->cpu->best)
        printf("  AMPC_ISA caps ampc at %s: instructions of higher levels are not used by ampc.\n",
               ampc_isa_name(in->cpu->chosen));
    char v[256];
    printf("\nin short\n");
    verdict(in, ROW_BF16, v, sizeof v);
    printf("  BF16  %s.\n", v);
    verdict(in, ROW_F16, v, sizeof v);
    printf("  F16   %s.\n", v);
}

static void print_human(const info *in, ampc_device dev) {
    print_cpu(in, dev);
    print_features(in);
    print_levels(in);
    print_grid(in);
    print_notes(in);
}

/* ---- JSON output ---- */

static void json_cpu(json_writer *w, const info *in) {
    char x[256], hex[24];
    xcr0_text(in->cpu->xcr0, x, sizeof x);
    snprintf(hex, sizeof hex, "0x%016llx", (unsigned long long)in->cpu->xcr0);
    json_key(w, "cpu");
    json_obj_begin(w);
    json_kstr(w, "vendor", in->cpu->vendor);
    json_kstr(w, "brand", in->cpu->brand);
    json_kint(w, "online_cpus", in->online_cpus);
    json_kstr(w, "xcr0", hex);
    json_kstr(w, "xcr0_components", x);
    json_obj_end(w);
}

static void json_features(json_writer *w, const info *in) {
    json_key(w, "features");
    json_obj_begin(w);
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++) {
        const char *why = unusable_reason(in->cpu, f);
        json_key(w, ampc_cpu_feature_name((ampc_cpu_feature)f));
        json_obj_begin(w);
        json_kbool(w, "cpuid", in->cpu->cpuid[f]);
        json_kbool(w, "usable", in->cpu->os_enabled[f]);
        json_kstr(w, "unusable_reason", *why ? why : NULL);
        json_obj_end(w);
    }
    json_obj_end(w);
}

static void json_name(const ampc_kernel_desc *d, void *w) { json_str(w, d->name); }

/* "candidates": what dispatch could choose for the slot here, best first, the chosen one included. */
static void json_candidates(json_writer *w, const char *slot) {
    json_key(w, "candidates");
    json_arr_begin(w);
    each_candidate(slot, json_name, w);
    json_arr_end(w);
}

/* "kernels": every kernel compiled in, chosen or not, usable here or not. */
static void json_registry(json_writer *w) {
    ampc_kernel_desc d;
    json_key(w, "kernels");
    json_arr_begin(w);
    for (int i = 0; ampc_kernel_describe(i, &d); i++) {
        json_obj_begin(w);
        json_kstr(w, "name", d.name);
        json_kstr(w, "slot", d.slot);
        json_kstr(w, "level", ampc_isa_name(d.level));
        json_key(w, "needs");
        json_arr_begin(w);
        for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++)
            if (d.needs >> f & 1u) json_str(w, ampc_cpu_feature_name((ampc_cpu_feature)f));
        json_arr_end(w);
        json_kbool(w, "usable", d.usable);
        json_kbool(w, "candidate", d.candidate);
        json_kbool(w, "chosen", d.chosen);
        json_obj_end(w);
    }
    json_arr_end(w);
}

static void json_num_or_null(json_writer *w, const char *key, double v) {
    if (v > 0) json_knum(w, key, v);
    else json_knull(w, key);
}

/* "kernel_choice": how the kernels were chosen, and per slot with a choice and size class the kernel and
 * the runner-up with their times. */
static void json_choices(json_writer *w) {
    ampc_kernel_tuning t;
    ampc_kernel_get_tuning(&t);
    const char *env = getenv("AMPC_KERNEL_CHOICE"), *cache = getenv("AMPC_KERNEL_CACHE");
    json_key(w, "kernel_choice");
    json_obj_begin(w);
    json_kstr(w, "mode", t.mode);
    json_kstr(w, "source", t.source);
    json_kstr(w, "ampc_kernel_choice_env", env);
    json_kstr(w, "ampc_kernel_cache_env", cache);
    json_kstr(w, "cache_file", t.cache_file[0] ? t.cache_file : NULL);
    json_kbool(w, "cache_written", t.cache_written);
    json_kstr(w, "note", t.note[0] ? t.note : NULL);
    json_num_or_null(w, "measure_seconds", t.seconds);
    json_key(w, "choices");
    json_arr_begin(w);
    ampc_kernel_choice c;
    for (int i = 0; ampc_kernel_get_choice(i, &c); i++) {
        json_obj_begin(w);
        json_kstr(w, "slot", c.slot);
        json_kstr(w, "size_class", c.size_class);
        json_kstr(w, "kernel", c.kernel);
        json_num_or_null(w, "seconds", c.seconds);
        json_kstr(w, "runner_up", c.runner_up);
        json_num_or_null(w, "runner_up_seconds", c.runner_up ? c.runner_up_seconds : 0);
        json_obj_end(w);
    }
    json_arr_end(w);
    json_obj_end(w);
}

static void json_levels(json_writer *w, const info *in) {
    char amx[160];
    amx_text(in->cpu, amx, sizeof amx);
    json_key(w, "amx_permission");
    json_obj_begin(w);
    json_kstr(w, "state", amx_key(in->cpu->amx_permission));
    json_kstr(w, "text", amx);
    if (in->cpu->amx_permission == AMPC_AMX_DENIED) json_kint(w, "errno", in->cpu->amx_errno);
    else json_knull(w, "errno");
    json_obj_end(w);
    json_key(w, "kernel_level");
    json_obj_begin(w);
    json_kstr(w, "best", ampc_isa_name(in->cpu->best));
    json_kstr(w, "ampc_isa_env", in->cpu->isa_env[0] ? in->cpu->isa_env : NULL);
    json_kstr(w, "chosen", ampc_isa_name(in->cpu->chosen));
    json_obj_end(w);
    json_key(w, "conversion_kernels");
    json_arr_begin(w);
    for (size_t i = 0; i < NPAIRS; i++) {
        json_obj_begin(w);
        json_kstr(w, "src", ampc_dtype_name(cvt_pairs[i][0]));
        json_kstr(w, "dst", ampc_dtype_name(cvt_pairs[i][1]));
        json_kstr(w, "kernel", cvt_kernel(i));
        json_candidates(w, slot_of(cvt_kernel(i)));
        json_obj_end(w);
    }
    json_arr_end(w);
    json_key(w, "compute_kernels");
    json_arr_begin(w);
    for (int i = 0; ampc_kernel_slot_name(i); i++) {
        json_obj_begin(w);
        json_kstr(w, "slot", ampc_kernel_slot_name(i));
        const char *impl = ampc_kernel_slot_impl(i);
        json_kstr(w, "kernel", impl[0] == '-' ? NULL : impl);
        json_candidates(w, ampc_kernel_slot_name(i));
        json_obj_end(w);
    }
    json_arr_end(w);
    json_choices(w);
    json_registry(w);
}

static void json_cell(json_writer *w, const cell *c) {
    json_obj_begin(w);
    json_kstr(w, "status", status_names[c->status]);
    json_kstr(w, "feature", c->feature);
    bool native = c->status == ST_NATIVE || c->status == ST_CAPABLE;
    json_kstr(w, "instruction", native ? c->how : NULL);                 /* what the CPU executes natively */
    json_kstr(w, "emulation", c->status == ST_EMULATED ? c->how : NULL); /* how ampc gets by without it */
    json_kstr(w, "note", c->note);
    json_obj_end(w);
}

static void json_support(json_writer *w, const info *in) {
    char v[256];
    json_key(w, "support");
    json_obj_begin(w);
    for (int r = 0; r < NROWS; r++) {
        json_key(w, row_names[r]);
        json_obj_begin(w);
        for (int o = 0; o < NOPS; o++) {
            json_key(w, op_keys[o]);
            json_cell(w, &in->grid[r][o]);
        }
        if (r != ROW_F32) {
            verdict(in, r, v, sizeof v);
            json_kstr(w, "summary", v);
        }
        json_obj_end(w);
    }
    json_obj_end(w);
}

static void print_json(const info *in, ampc_device dev) {
    json_writer w;
    json_init(&w, stdout, true);
    json_obj_begin(&w);
    json_kstr(&w, "ampc_version", ampc_version());
    json_kstr(&w, "mpi", ampc_dist_available() ? ampc_dist_library() : NULL);
    info_json_devices(&w, dev);
    json_cpu(&w, in);
    json_features(&w, in);
    json_levels(&w, in);
    json_support(&w, in);
    json_obj_end(&w);
    json_finish(&w);
}

int cmd_info(int argc, char **argv) {
    const char *prog = "ampc info";
    bool json = false;
    ampc_device dev = {AMPC_DEVICE_CPU, 0};
    const cli_opt opts[] = {
        CLI_OPT(.name = "device", .kind = CLI_CUSTOM, .out = &dev, .parse = run_parse_device, .metavar = "DEV",
                .accepts = "cpu, cuda, cuda:N or guard", .defval = "cpu", .help = "the device to mark"),
        CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &json, .help = "print one JSON object instead of tables"),
    };
    cli_parse_out po = {0};
    int rc = cli_parse_or_exit(prog, usage, opts, 2, argc, argv, 0, NULL, &po);
    if (rc >= 0) return rc;
    info in;
    ampc_status s = gather(&in);
    if (s != AMPC_OK) return cli_fail_lib(prog, s);
    if (json) print_json(&in, dev);
    else print_human(&in, dev);
    return CLI_EXIT_OK;
}
