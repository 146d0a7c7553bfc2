/* ampc.h: the one public header of libampc, automatic mixed-precision training in C.
 *
 * Conventions (docs/ARCHITECTURE.md has the whole picture):
 *  - Names are module first: ampc_<module>_<verb>[_<noun>]. Heap objects come in _new/_free pairs and
 *    every _free accepts NULL.
 *  - Reads are ampc_<module>_<noun> (ampc_optim_lr), writes ampc_<module>_set_<noun> (ampc_optim_set_lr).
 *    Where ampc_<module>_<noun> is already taken (C gives types and functions one name space, so
 *    ampc_model_config the type forbids ampc_model_config the function; ampc_grad_scaler_scale is the
 *    action that scales a loss), the read is ampc_<module>_get_<noun>: ampc_model_get_config,
 *    ampc_format_get_info, ampc_loader_get_cursor, ampc_grad_scaler_get_scale.
 *  - Renamed functions keep their old names for one release, as deprecated aliases (end of this file).
 *  - Lifecycle, I/O and configuration calls return ampc_status (AMPC_OK = 0, errors negative) and hand
 *    objects back through an out-parameter. Tensor-producing calls return a tensor or NULL.
 *  - After any failure ampc_last_error() (thread-local) names the function, the shapes and dtypes
 *    involved and what was expected, on one line (control characters in quoted user text read '?').
 *    A NULL tensor input gives a NULL output and keeps the message of
 *    the call that failed first, so a chain of calls is checked once at its end.
 *  - Parameter structs are zero-initialisable: a field left at 0 takes the documented default. The two
 *    whose zero would not be their defaults (ampc_autocast_params, ampc_grad_scaler_params: flags that
 *    are true by default) are made by their _defaults() functions instead, and a struct without their
 *    init mark is refused rather than read as "disabled".
 *  - FP16 and BF16 values are stored as uint16_t bit patterns; FP8 values as uint8_t.
 */
#ifndef AMPC_H
#define AMPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(AMPC_BUILDING_SHARED)
#define AMPC_API __attribute__((visibility("default")))
#else
#define AMPC_API
#endif

#define AMPC_VERSION_MAJOR 0
#define AMPC_VERSION_MINOR 2
#define AMPC_VERSION_PATCH 0

/* "0.2.0" (MAJOR.MINOR.PATCH): the version of the library actually linked (may differ from the macros
 * above when an application runs against another build). */
AMPC_API const char *ampc_version(void);

/* ------------------------------------------------------------------------------------------------
 * Status and errors
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_status {
    AMPC_OK = 0,
    AMPC_STATUS_INVALID_ARG = -1, /* a NULL pointer, a value out of its documented range */
    AMPC_STATUS_SHAPE = -2,       /* shapes that do not fit together */
    AMPC_STATUS_DTYPE = -3,       /* a dtype the call does not accept */
    AMPC_STATUS_OOM = -4,         /* the allocator returned NULL */
    AMPC_STATUS_IO = -5,          /* a file could not be read or written */
    AMPC_STATUS_FORMAT = -6,      /* a file or string is malformed */
    AMPC_STATUS_UNSUPPORTED = -7, /* this CPU, build or configuration cannot do it */
    AMPC_STATUS_STATE = -8,       /* the call is out of order (e.g. a second backward) */
    AMPC_STATUS_DIST = -9,        /* a collective failed or timed out: another rank died or disagreed */
} ampc_status;

/* Short fixed name of a status ("AMPC_STATUS_SHAPE"). Never NULL. */
AMPC_API const char *ampc_status_str(ampc_status s);

/* Thread-local message of the most recent failure on this thread, "" if none. Successful calls do not
 * clear it; ampc_clear_error() does. The pointer stays valid until the next failing call on the thread. */
AMPC_API const char *ampc_last_error(void);
/* Thread-local status of the most recent failure on this thread, AMPC_OK if none. */
AMPC_API ampc_status ampc_last_status(void);
AMPC_API void ampc_clear_error(void);

/* ------------------------------------------------------------------------------------------------
 * Data types and floating-point formats
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_dtype {
    AMPC_DTYPE_F32 = 0,
    AMPC_DTYPE_F16,  /* IEEE binary16, stored as uint16_t */
    AMPC_DTYPE_BF16, /* bfloat16 (upper half of binary32), stored as uint16_t */
    AMPC_DTYPE_F64,
    AMPC_DTYPE_I32,
    AMPC_DTYPE_I64,
    AMPC_DTYPE_U8,
    AMPC_DTYPE_COUNT
} ampc_dtype;

/* "F32", "F16", "BF16", "F64", "I32", "I64", "U8" (the safetensors spellings); "?" when out of range. */
AMPC_API const char *ampc_dtype_name(ampc_dtype dt);
/* Bytes per element; 0 when out of range. */
AMPC_API size_t ampc_dtype_size(ampc_dtype dt);
AMPC_API bool ampc_dtype_is_float(ampc_dtype dt);
/* Parses a name, case-insensitively, accepting "f32|fp32|float32", "f16|fp16|half|float16",
 * "bf16|bfloat16", "f64|fp64|float64", "i32|int32", "i64|int64", "u8|uint8". */
AMPC_API ampc_status ampc_dtype_parse(const char *name, ampc_dtype *out);

/* The formats `ampc formats` describes. Tensors exist for FP32/BF16/FP16; TF32 and FP8 are available as
 * scalar conversions. */
typedef enum ampc_format {
    AMPC_FORMAT_FP32 = 0,
    AMPC_FORMAT_TF32, /* FP32 range, 10 mantissa bits: what a TF32 tensor core multiplies */
    AMPC_FORMAT_BF16,
    AMPC_FORMAT_FP16,
    AMPC_FORMAT_FP8_E4M3, /* OCP E4M3 ("e4m3fn"): no infinities, S.1111.111 is NaN, max 448 */
    AMPC_FORMAT_FP8_E5M2, /* OCP E5M2: IEEE-like with infinities, max 57344 */
    AMPC_FORMAT_COUNT
} ampc_format;

/* Everything below is derived from (exponent_bits, mantissa_bits, bias, has_inf) by formula, then
 * re-derived independently through the format's conversion code; `verified` says both agreed. */
typedef struct ampc_format_info {
    const char *name; /* "FP32", "TF32", "BF16", "FP16", "FP8-E4M3", "FP8-E5M2" */
    int total_bits;   /* sign + exponent + mantissa (TF32: 19) */
    int exponent_bits;
    int mantissa_bits; /* stored fraction bits; precision is mantissa_bits + 1 */
    int bias;
    bool has_inf;   /* false for FP8-E4M3: overflow gives NaN there */
    int emin, emax; /* exponent of the smallest and the largest normal binade */
    double max_finite;
    double min_normal;
    double min_subnormal;
    double epsilon;              /* 2^-mantissa_bits: gap between 1 and the next value */
    double decimal_digits;       /* (mantissa_bits + 1) * log10(2) */
    double range_decades;        /* log10(max_finite / min_subnormal) */
    double normal_range_decades; /* log10(max_finite / min_normal) */
    uint32_t max_finite_bits;    /* bit pattern of +max_finite in the format's own encoding */
    bool verified;               /* conversion code reproduces every value above */
    char verify_note[160];       /* what disagreed, when !verified */
} ampc_format_info;

AMPC_API ampc_status ampc_format_get_info(ampc_format fmt, ampc_format_info *out);

/* Generic conversions for every format of the table, on the format's bit pattern (right-aligned in a
 * uint32_t; TF32 uses FP32's 32-bit layout with the low 13 mantissa bits zero). Round to nearest even
 * from the exact double value; overflow gives infinity (NaN for FP8-E4M3, as PyTorch and ml_dtypes do);
 * NaN keeps its sign and becomes quiet. */
AMPC_API uint32_t ampc_format_from_f64(ampc_format fmt, double x);
AMPC_API double ampc_format_to_f64(ampc_format fmt, uint32_t bits);

/* ------------------------------------------------------------------------------------------------
 * Scalar conversions. All are exact functions of the bits, independent of MXCSR (FTZ/DAZ) and ISA:
 *  - round to nearest, ties to even;
 *  - FP16 overflows to infinity from 65520 up (65519.99... still rounds to 65504);
 *  - subnormals are produced and read exactly (no flush to zero);
 *  - NaN stays NaN with its sign, made quiet, keeping the top payload bits (the bits x86's
 *    vcvtps2ph / vcvtneps2bf16 / vcvtph2ps produce).
 * ---------------------------------------------------------------------------------------------- */

AMPC_API uint16_t ampc_f16_from_f32(float x);
AMPC_API float ampc_f16_to_f32(uint16_t h);
AMPC_API uint16_t ampc_bf16_from_f32(float x);
AMPC_API float ampc_bf16_to_f32(uint16_t h);
/* FP32 rounded to TF32 precision (10 mantissa bits, RNE), still an FP32 value. */
AMPC_API float ampc_tf32_round(float x);
AMPC_API uint8_t ampc_fp8_e4m3_from_f32(float x);
AMPC_API float ampc_fp8_e4m3_to_f32(uint8_t v);
AMPC_API uint8_t ampc_fp8_e5m2_from_f32(float x);
AMPC_API float ampc_fp8_e5m2_to_f32(uint8_t v);

/* Row conversion of n contiguous elements between any two dtypes, using the fastest conversion path this
 * CPU offers (within AMPC_ISA). Float to float conversions round once, to nearest even, with the scalar
 * rules above, bit-identical on every path. Integer targets truncate toward zero and saturate; NaN gives 0.
 * dst and src must not overlap unless equal with equal dtypes. Single-threaded. */
AMPC_API ampc_status ampc_convert(void *dst, ampc_dtype dst_dtype, const void *src, ampc_dtype src_dtype, size_t n);

/* Name of the kernel ampc_convert runs for this dtype pair in this process ("ampc_k_cvt_f16f32__avx512"),
 * "memcpy" for equal dtypes, "generic" for pairs without a dedicated kernel, NULL for invalid dtypes. */
AMPC_API const char *ampc_convert_kernel_name(ampc_dtype dst_dtype, ampc_dtype src_dtype);
/* The compute kernels of the process's chosen level, slot by slot (for `ampc info`), i in [0, count):
 * the slot ("gemm_f32", "unary_exp", "softmax", "attention", ...) and the kernel in it
 * ("ampc_k_gemm_f32f32__avx512", or "-" for an optional slot this CPU leaves empty, such as the split F32
 * GEMMs; for a GEMM slot whose measured choice depends on the size, the large products' kernel:
 * ampc_kernel_get_choice lists each size class). NULL past the end. Every kernel compiled in, chosen or
 * not: ampc_kernel_describe. */
AMPC_API const char *ampc_kernel_slot_name(int i);
AMPC_API const char *ampc_kernel_slot_impl(int i);

/* ------------------------------------------------------------------------------------------------
 * CPU features and kernel levels
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_isa {
    AMPC_ISA_AUTO = 0, /* in parameters: the best level available (within AMPC_ISA) */
    AMPC_ISA_REF,      /* portable C: the complete path and the test oracle */
    AMPC_ISA_AVX2,     /* AVX2 + FMA + F16C */
    AMPC_ISA_AVX512,   /* AVX-512 F/BW/VL/DQ; BF16 and FP16 instructions used when present */
    AMPC_ISA_AMX,      /* the above plus AMX tiles (BF16), permission granted by the kernel */
    AMPC_ISA_COUNT
} ampc_isa;

typedef enum ampc_cpu_feature {
    AMPC_CPU_SSE42 = 0,
    AMPC_CPU_AVX,
    AMPC_CPU_AVX2,
    AMPC_CPU_FMA,
    AMPC_CPU_F16C,
    AMPC_CPU_AVX512F,
    AMPC_CPU_AVX512BW,
    AMPC_CPU_AVX512VL,
    AMPC_CPU_AVX512DQ,
    AMPC_CPU_AVX512_BF16,
    AMPC_CPU_AVX512_FP16,
    AMPC_CPU_AVX512_VNNI,
    AMPC_CPU_AMX_TILE,
    AMPC_CPU_AMX_BF16,
    AMPC_CPU_AMX_INT8,
    AMPC_CPU_AMX_FP16,
    AMPC_CPU_FEATURE_COUNT
} ampc_cpu_feature;

typedef enum ampc_amx_permission {
    AMPC_AMX_NOT_PRESENT = 0, /* CPUID has no AMX: nothing was asked */
    AMPC_AMX_GRANTED,         /* arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) succeeded */
    AMPC_AMX_DENIED,          /* the request failed; errno is in amx_errno */
    AMPC_AMX_OS_DISABLED,     /* XCR0 lacks the tile state bits: the OS does not save tiles */
} ampc_amx_permission;

typedef struct ampc_cpu_info {
    char vendor[16];                         /* "GenuineIntel", "AuthenticAMD" */
    char brand[64];                          /* CPUID brand string, trimmed */
    uint64_t xcr0;                           /* XGETBV(0): state components the OS saves */
    bool cpuid[AMPC_CPU_FEATURE_COUNT];      /* the CPU reports the feature */
    bool os_enabled[AMPC_CPU_FEATURE_COUNT]; /* ...and the OS saves its register state (for AMX, also
                                                 permission granted): only then may it be used */
    ampc_amx_permission amx_permission;
    int amx_errno;      /* errno of a denied request, else 0 */
    ampc_isa best;      /* highest level CPU + OS support */
    ampc_isa chosen;    /* best, lowered by AMPC_ISA when set */
    int online_cpus;    /* CPUs this process may run on (affinity mask) */
    char isa_env[32];   /* AMPC_ISA as found ("" if unset) */
    bool isa_env_valid; /* false: unknown value, ignored */
} ampc_cpu_info;

/* The process-wide probe (CPUID, XGETBV, the AMX permission request, AMPC_ISA), run once on first use.
 * Never NULL. */
AMPC_API const ampc_cpu_info *ampc_cpu(void);
AMPC_API bool ampc_cpu_has(ampc_cpu_feature f);                 /* cpuid && os_enabled */
AMPC_API const char *ampc_cpu_feature_name(ampc_cpu_feature f); /* "avx512_bf16", ... */
AMPC_API const char *ampc_isa_name(ampc_isa isa);               /* "auto", "ref", "avx2", ... */
/* "ref|avx2|avx512|amx" (and "auto") to an ampc_isa. */
AMPC_API ampc_status ampc_isa_parse(const char *name, ampc_isa *out);

/* Every kernel compiled into the library (for `ampc info`), i in [0, count): false past the end. A slot
 * (a row of ampc_kernel_slot_name, or a conversion's "convert_f32_to_bf16") may hold several kernels of
 * several levels; the process runs the one chosen for its level. */
typedef struct ampc_kernel_desc {
    const char *name; /* the kernel's function name: "ampc_k_gemm_bf16f32__amx" */
    const char *slot; /* the slot it can fill: "gemm_bf16", "unary_exp", "convert_f32_to_bf16", ... */
    ampc_isa level;   /* the lowest kernel level that may run it (an AMPC_ISA cap below excludes it) */
    uint32_t needs;   /* CPU features it needs beyond its level's: bit f for ampc_cpu_feature f */
    bool usable;      /* this CPU runs it */
    bool candidate;   /* dispatch may choose it (false: a reference kept for tests and benchmarks) */
    bool chosen;      /* it fills its slot at the process's chosen level (a GEMM slot: for some size class) */
} ampc_kernel_desc;
AMPC_API bool ampc_kernel_describe(int i, ampc_kernel_desc *out);

/* Kernels chosen by measurement. Where a slot has several candidates this CPU runs, the process times
 * them once, on one thread of a scratch context, on representative shapes (the GEMMs per size class of
 * M*N*K: small below 2^22, medium below 2^26, large; the default GPT's projection among the large ones),
 * in interleaved rounds with medians, and runs the fastest; the fixed rule's pick (the highest level, the
 * registry's order) stays unless another is more than 3% faster. The times are cached per CPU and library
 * build in $XDG_CACHE_HOME/ampc/ (else ~/.cache/ampc/; none when neither can be written), written
 * atomically under a lock, so later and concurrent processes choose alike without measuring.
 *   AMPC_KERNEL_CHOICE=measure (default) | rule   rule: the fixed rule, no measurement (reproducible
 *                                                 debugging; what ampc 0.2.0 and earlier ran)
 *   AMPC_KERNEL_CACHE=on (default) | off | refresh   off: measure in every process; refresh: measure
 *                                                 again and rewrite the file
 * An unknown value warns once on stderr and the default applies. Candidates of one slot compute the same
 * bits (conversions, optimizer, unscale, sums of squares) or agree within the slot's documented tolerance
 * (GEMM, attention, elementwise math); the choice never depends on the thread count. Checkpoints record
 * the kernels their context ran (metadata ampc.kernels) and ampc_checkpoint_restore runs them again, so
 * a resumed run continues bit for bit whatever this process measured. */
typedef struct ampc_kernel_tuning {
    const char *mode;       /* "measure" or "rule" (AMPC_KERNEL_CHOICE) */
    const char *source;     /* "measured" (by this process), "cache" (read from cache_file) or "rule" */
    const char *cache_file; /* the cache file, "" when there is none */
    const char *note;       /* why there is no cache file or it was not written, "" when all is well */
    bool cache_written;     /* this process wrote cache_file */
    double seconds;         /* what the measurement took (read from the cache: what it took then) */
    int choices;            /* rows of ampc_kernel_get_choice */
} ampc_kernel_tuning;
AMPC_API void ampc_kernel_get_tuning(ampc_kernel_tuning *out);

/* One slot with a choice at the process's kernel level, per size class, i in [0, choices): false past the
 * end. Times are seconds per call summed over the class's representative shapes, 0 when not measured
 * (AMPC_KERNEL_CHOICE=rule, or the candidate was far slower on a smaller shape and skipped). */
typedef struct ampc_kernel_choice {
    const char *slot;       /* "gemm_bf16", "unary_exp", "convert_f32_to_bf16", ... */
    const char *size_class; /* GEMM slots: "small", "medium", "large"; the others: "all" */
    const char *kernel;     /* the kernel run; "-": none (a split F32 slot where the F32 GEMM is faster) */
    double seconds;
    const char *runner_up; /* the next fastest ("-": none), NULL when there is none */
    double runner_up_seconds;
} ampc_kernel_choice;
AMPC_API bool ampc_kernel_get_choice(int i, ampc_kernel_choice *out);

/* ------------------------------------------------------------------------------------------------
 * Devices. A context runs on one device and every tensor of a context lives in that device's memory.
 *   cpu       the host CPU (the default): memory is host memory, ampc_tensor_data is a host pointer
 *   cuda[:N]  NVIDIA GPU N (when the library is built with CUDA; not yet in this release)
 *   guard     a test device: the CPU's kernels on host memory the host cannot touch (mprotect'd
 *             PROT_NONE outside the device's own calls), so any read or write of tensor memory that does
 *             not go through the device crashes at once. It gives the CPU's bits exactly; it is slow
 *             (two mprotect calls per device call) and meant for tests.
 * On a device whose memory is not host memory, ampc_tensor_data returns the device address: read and
 * write tensors with ampc_tensor_copy_to / ampc_tensor_copy_from (or ampc_tensor_copy between contexts),
 * as torch's .to(device) does.
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_device_kind {
    AMPC_DEVICE_CPU = 0,
    AMPC_DEVICE_CUDA,
    AMPC_DEVICE_GUARD,
    AMPC_DEVICE_KIND_COUNT
} ampc_device_kind;

/* A device: its kind and index among the devices of that kind (0 for cpu and guard). {0} is the CPU. */
typedef struct ampc_device {
    ampc_device_kind kind;
    int index;
} ampc_device;

/* "cpu", "cuda", "guard". */
AMPC_API const char *ampc_device_kind_name(ampc_device_kind kind);
/* Parses "cpu", "guard", "cuda" (= cuda:0) or "cuda:N". INVALID_ARG for text that names no device kind
 * or a malformed index; UNSUPPORTED for a kind this build lacks or an index past the devices present.
 * The message names the text and what is accepted. */
AMPC_API ampc_status ampc_device_parse(const char *text, ampc_device *out);
/* Devices of a kind present (and built): cpu 1, guard 1, cuda the GPUs the CUDA runtime sees (0 without
 * CUDA). */
AMPC_API int ampc_device_count(ampc_device_kind kind);
typedef struct ampc_device_info {
    ampc_device device;
    char name[32];         /* "cpu", "guard", "cuda:0" */
    char description[128]; /* the CPU's brand string, "NVIDIA H200", ... */
    bool built;            /* this build has the device kind */
    bool present;          /* and the device exists on this machine */
    bool host_memory;      /* the host may read and write its memory directly (the CPU only) */
    int units;             /* CPU: online CPUs; CUDA: multiprocessors */
    int capability_major;  /* CUDA compute capability; 0 elsewhere */
    int capability_minor;
    size_t total_memory; /* bytes; 0 where unknown */
    size_t free_memory;  /* bytes; 0 where unknown */
} ampc_device_info;
/* INVALID_ARG for a kind out of range or a negative index, UNSUPPORTED when the device is not built or
 * not present (out is still filled: built and present say which). */
AMPC_API ampc_status ampc_device_get_info(ampc_device device, ampc_device_info *out);
/* "cpu", "guard", "cuda:1" into buf (size >= 16); buf. */
AMPC_API const char *ampc_device_name(ampc_device device, char *buf, size_t size);

/* ------------------------------------------------------------------------------------------------
 * Context: allocator, threads, kernel table, RNG, step arena
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_ctx ampc_ctx;

typedef enum ampc_log_level { AMPC_LOG_DEBUG = 0, AMPC_LOG_INFO, AMPC_LOG_WARN, AMPC_LOG_ERROR } ampc_log_level;
typedef void (*ampc_log_fn)(void *user, ampc_log_level level, const char *message);

/* A replaceable allocator. alloc must return memory aligned to `align` (a power of two >= 64) or NULL. */
typedef struct ampc_allocator {
    void *(*alloc)(void *user, size_t size, size_t align);
    void (*free)(void *user, void *ptr, size_t size);
    void *user;
} ampc_allocator;

typedef struct ampc_ctx_params {
    uint64_t seed;                   /* RNG seed (0 is a seed like any other) */
    int threads;                     /* worker threads including the caller; 0 = online CPUs */
    ampc_isa isa;                    /* cap on the kernel level; AUTO = the process's chosen level */
    size_t arena_initial_bytes;      /* first step-arena chunk; 0 = 1 MiB. The arena grows as needed */
    const ampc_allocator *allocator; /* NULL = aligned_alloc/free */
    ampc_log_fn log;                 /* NULL = warnings and errors to stderr */
    void *log_user;
    ampc_device device; /* where tensors live and kernels run; {0} = the CPU. A device that is not built
                           or not present fails ampc_ctx_new with UNSUPPORTED */
} ampc_ctx_params;

/* params may be NULL (all defaults). */
AMPC_API ampc_status ampc_ctx_new(const ampc_ctx_params *params, ampc_ctx **out);
AMPC_API void ampc_ctx_free(ampc_ctx *ctx);
/* The kernel level this context runs. */
AMPC_API ampc_isa ampc_ctx_isa(const ampc_ctx *ctx);
/* The device the context runs on ({0}, the CPU, for NULL). */
AMPC_API ampc_device ampc_ctx_device(const ampc_ctx *ctx);
/* Threads used by parallel work (>= 1). n = 0 selects the number of online CPUs. */
AMPC_API ampc_status ampc_ctx_set_threads(ampc_ctx *ctx, int n);
AMPC_API int ampc_ctx_threads(const ampc_ctx *ctx);
/* Ends a training step: releases every arena tensor (op outputs, views, temporaries) at once. Owned
 * tensors survive. The arena and the step heap keep their memory for the next step, so a steady-state
 * step allocates nothing from the system. Called inside an open autocast region it warns once per
 * context through the log (the region goes on; its weight-cast cache is emptied). Gradient accumulation
 * may call it between micro-batches: see the GradScaler section. A handle to a released tensor kept into
 * the next step is refused by every call that reads it (AMPC_STATUS_STATE, naming the step end that
 * released it), as is a tensor after ampc_tensor_free (for the next 64 frees of the context); two step
 * ends on, a released header may serve a new tensor, so keep nothing from a step that is not owned
 * (ampc_tensor_new). */
AMPC_API void ampc_ctx_step_end(ampc_ctx *ctx);

typedef struct ampc_memory_usage {
    size_t live_bytes;       /* bytes currently allocated through the context's allocator */
    size_t peak_bytes;       /* maximum of live_bytes since creation or ampc_memory_reset_peak */
    size_t arena_reserved;   /* bytes held by the step arena (part of live_bytes) */
    size_t arena_used;       /* bytes handed out by the arena this step */
    size_t arena_high_water; /* largest arena_used seen in one step */
    /* The step heap: large step buffers (tensor data and scratch of 16 KiB or more) live there, in size
     * classes, so that a gradient the backward pass no longer needs is released at once instead of at
     * step end. Reserved bytes stay held (for reuse) across steps. */
    size_t heap_reserved;   /* bytes held by the step heap (part of live_bytes) */
    size_t heap_used;       /* bytes of it in use now */
    size_t heap_high_water; /* largest heap_used seen */
    uint64_t allocations;   /* allocator calls so far */
    /* The context's device memory (tensor data, scratch, parameters and optimizer state): on the CPU it
     * is host memory and these equal live_bytes and peak_bytes; on another device live_bytes and
     * peak_bytes count host memory only (tensor headers, the tape) and these the device's. */
    size_t device_live_bytes;
    size_t device_peak_bytes;
} ampc_memory_usage;

AMPC_API ampc_status ampc_memory_stats(const ampc_ctx *ctx, ampc_memory_usage *out);
AMPC_API void ampc_memory_reset_peak(ampc_ctx *ctx);

/* Host synchronisation points: every place where the host waits for a value computed on the device. On
 * the CPU they cost nothing, but they are counted alike, so `ampc bench step` can say how many times a
 * step would stop an accelerator, and why. */
typedef enum ampc_sync_point {
    AMPC_SYNC_FOUND_INF = 0, /* the GradScaler's overflow flags after unscaling (step or skip) */
    AMPC_SYNC_CLIP_NORM,     /* the global gradient norm (clipping) */
    AMPC_SYNC_FP8_AMAX,      /* an FP8 tensor's amax (current scaling, delayed scaling's history) */
    AMPC_SYNC_ANOMALY,       /* anomaly mode's finiteness check of an op output or a gradient */
    AMPC_SYNC_STATS,         /* range statistics of one tensor (ampc_stats, the doctor) */
    AMPC_SYNC_INDEX,         /* ids or class targets checked against their range (embedding, loss) */
    AMPC_SYNC_READ,          /* a tensor read on the host: ampc_tensor_copy_to (the logged loss), saves */
    AMPC_SYNC_COMM,          /* gradients or parameters staged in host memory for MPI */
    AMPC_SYNC_POINT_COUNT
} ampc_sync_point;
/* "found_inf", "clip_norm", "fp8_amax", "anomaly", "stats", "index", "read", "comm"; "?" out of range. */
AMPC_API const char *ampc_sync_point_name(ampc_sync_point point);
/* The times the context synchronised at each point since it was made: out[AMPC_SYNC_POINT_COUNT]. */
AMPC_API ampc_status ampc_ctx_sync_counts(const ampc_ctx *ctx, uint64_t *out);
/* The FLOPs of the matrix products the context's ops ran since it was made (0 for NULL), counted once
 * per op whose work succeeded, from its shapes (independent of the device and the kernel): a GEMM
 * (matmul, bmm, linear, and each of their backward GEMMs) 2 M N K per batch; conv2d 2 N O OH OW C KH KW,
 * and its backward that amount for each of the input and weight gradients wanted (none for the bias);
 * attention 2 BH P (D + Dv) with P the (query, key) pairs computed (Tq Tk; causal: those with key j <=
 * query i), and its backward twice that (the model-FLOP convention: a flash backward's recomputation of
 * the scores is not counted). Element-wise ops, reductions and optimizers count nothing. */
AMPC_API uint64_t ampc_ctx_matmul_flops(const ampc_ctx *ctx);

/* Profile of device calls: while on, every call the context makes to its device (a GEMM, an attention
 * forward, a layer norm backward, a fill, a conversion, the optimizer's update...) and every raw memset
 * and copy of device memory ("memset", "copy", "copy_in", "copy_out") is timed on the host, wall time
 * from its start to its return, and summed per (op kind, operation, phase). The phase is
 * "backward" for the calls ampc_backward makes, "optimizer" for the GradScaler's unscale, clipping,
 * zero_grad and ampc_optim_step, "forward" for all others; the op kind is the op the call works for (its
 * forward, or in backward the op whose backward runs: "linear", "gelu", ...), "optimizer", "autograd"
 * (the backward walk itself: gradients added into leaves) or "outside ops". regions counts the parallel
 * regions the call handed to the thread pool (each wakes the other threads and waits for them), which
 * shows where fork-join overhead lies. Off by default; on, it adds two clock reads per call. */
typedef struct ampc_profile_entry {
    const char *kind;  /* "linear", "scaled_dot_product_attention", "optimizer", ... */
    const char *op;    /* the device operation: "gemm", "attention_bw", "layer_norm", "fill", ... */
    const char *phase; /* "forward", "backward", "optimizer" */
    uint64_t calls, regions;
    double seconds;
} ampc_profile_entry;
/* Starts (or restarts, from zero) the profile of ctx's device calls. */
AMPC_API ampc_status ampc_ctx_profile_start(ampc_ctx *ctx);
/* Ends it; what was gathered is dropped. */
AMPC_API void ampc_ctx_profile_stop(ampc_ctx *ctx);
/* Writes up to max entries, in the order they were first seen, and returns how many there are in all
 * (call with out NULL to count; 0 when the profile is off). */
AMPC_API int ampc_ctx_profile_read(const ampc_ctx *ctx, ampc_profile_entry *out, int max);

/* ------------------------------------------------------------------------------------------------
 * Parallel for. [0, n) is cut into chunks of `grain` items (the last may be shorter); fn runs once per
 * chunk on some thread. The cut depends only on n and grain, never on the thread count or timing, so a
 * function that writes per-chunk results gives the same bits with any number of threads.
 * ---------------------------------------------------------------------------------------------- */

typedef void (*ampc_parallel_fn)(void *arg, int64_t begin, int64_t end, int64_t chunk);

AMPC_API void ampc_parallel_for(ampc_ctx *ctx, int64_t n, int64_t grain, ampc_parallel_fn fn, void *arg);
/* Number of chunks ampc_parallel_for(ctx, n, grain, ...) makes: ceil(n / grain) (0 when n <= 0). */
AMPC_API int64_t ampc_parallel_chunks(int64_t n, int64_t grain);

/* ------------------------------------------------------------------------------------------------
 * Counter-based random numbers (Philox4x32-10). A draw is a pure function of (seed, stream, counter):
 * element i of a fill uses counter + i/4 and word i%4, so results do not depend on threads or ISA.
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter; /* advanced by every draw; save it to resume the sequence */
} ampc_rng;

AMPC_API ampc_rng ampc_rng_make(uint64_t seed, uint64_t stream);
/* The 4 raw 32-bit words of block `counter`. */
AMPC_API void ampc_rng_block(uint64_t seed, uint64_t stream, uint64_t counter, uint32_t out[4]);
/* n floats uniform in [lo, hi): 24 random bits per value. Advances counter by ceil(n / 4). */
AMPC_API void ampc_rng_uniform(ampc_rng *rng, float *out, size_t n, float lo, float hi);
/* n floats from N(mean, std^2) by Box-Muller in double. Advances counter by ceil(n / 4). */
AMPC_API void ampc_rng_normal(ampc_rng *rng, float *out, size_t n, float mean, float std);
/* The context's generator (seeded from ampc_ctx_params.seed, stream 0). */
AMPC_API ampc_rng *ampc_ctx_rng(ampc_ctx *ctx);

/* ------------------------------------------------------------------------------------------------
 * Tensors: up to 4 dims, element strides, F32/F16/BF16 (and F64/I32/I64/U8) storage.
 *
 * Placement: ampc_tensor_new and ampc_tensor_detach_copy make OWNED tensors that live until
 * ampc_tensor_free. Every other call returns an ARENA tensor that lives until ampc_ctx_step_end; calling
 * ampc_tensor_free on one before the step ends is allowed and does nothing (after it, the pointer is
 * invalid like every arena tensor of that step). Freeing an owned tensor that the current step's tape
 * still uses is deferred to the step end, so a later backward stays valid. Views (reshape of a contiguous tensor, view,
 * transpose, permute, slice) share their base's storage and version counter; a view keeps that storage
 * alive even if the base is freed.
 *
 * Shapes are given as (ndim, shape) with 0 <= ndim <= AMPC_MAX_DIMS and every extent >= 0. A dim index
 * may be negative (-1 is the last dim).
 * ---------------------------------------------------------------------------------------------- */

#define AMPC_MAX_DIMS 4

typedef struct ampc_tensor ampc_tensor;

/* Owned, zero-filled. */
AMPC_API ampc_tensor *ampc_tensor_new(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape);
/* Releases an owned tensor (its storage once no view uses it). NULL and arena tensors: no-op. */
AMPC_API void ampc_tensor_free(ampc_tensor *t);

AMPC_API ampc_tensor *ampc_tensor_zeros(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape);
AMPC_API ampc_tensor *ampc_tensor_full(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double value);
/* Uniform in [lo, hi) and normal N(mean, std^2) from the context RNG, drawn in F32 then rounded to dtype
 * (integers: truncated). */
AMPC_API ampc_tensor *ampc_tensor_uniform(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double lo,
                                          double hi);
AMPC_API ampc_tensor *ampc_tensor_normal(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double mean,
                                         double std);
/* Copies prod(shape) row-major elements of data_dtype from data, converting to dtype. */
AMPC_API ampc_tensor *ampc_tensor_from_buffer(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape,
                                              const void *data, ampc_dtype data_dtype);

/* In-place fills (bump the version counter). Work on views too: only the viewed elements change. */
AMPC_API ampc_status ampc_tensor_fill(ampc_tensor *t, double value);
AMPC_API ampc_status ampc_tensor_fill_uniform(ampc_tensor *t, double lo, double hi);
AMPC_API ampc_status ampc_tensor_fill_normal(ampc_tensor *t, double mean, double std);
/* Writes numel row-major elements of host memory src (src_dtype) into t, converting: host to device on a
 * device context. */
AMPC_API ampc_status ampc_tensor_copy_from(ampc_tensor *t, const void *src, ampc_dtype src_dtype);
/* Reads t's elements in row-major order into host memory dst, converted to dst_dtype: device to host on a
 * device context (a host synchronisation point, AMPC_SYNC_READ). */
AMPC_API ampc_status ampc_tensor_copy_to(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype);
/* dst's elements = src's (row-major order, converted to dst's dtype), for tensors of any contexts and
 * devices (torch's dst.copy_(src)): the numbers of elements must agree. Bumps dst's version. */
AMPC_API ampc_status ampc_tensor_copy(ampc_tensor *dst, const ampc_tensor *src);

/* Shape changes, all differentiable (recorded on the tape when an input requires grad). reshape returns a
 * view when the strides allow it and a contiguous copy otherwise; one extent may be -1 (inferred). view
 * never copies and fails when a view is impossible. */
AMPC_API ampc_tensor *ampc_tensor_reshape(const ampc_tensor *t, int ndim, const int64_t *shape);
AMPC_API ampc_tensor *ampc_tensor_view(const ampc_tensor *t, int ndim, const int64_t *shape);
AMPC_API ampc_tensor *ampc_tensor_transpose(const ampc_tensor *t, int dim0, int dim1);
/* perm has ndim entries, a permutation of 0..ndim-1 (negative values allowed). */
AMPC_API ampc_tensor *ampc_tensor_permute(const ampc_tensor *t, const int *perm);
/* Elements start, start+step, ... < end along dim (0 <= start <= end <= extent after negative indices
 * are wrapped once; end is clamped to the extent as in Python; step >= 1). */
AMPC_API ampc_tensor *ampc_tensor_slice(const ampc_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* A row-major copy (a fresh arena tensor even when t is already contiguous). Differentiable. */
AMPC_API ampc_tensor *ampc_tensor_contiguous(const ampc_tensor *t);
/* A contiguous copy in dtype (also when dtype is t's own). Differentiable: the backward casts the gradient
 * back to t's dtype, so an F32 weight used through a BF16 copy receives an F32 gradient. */
AMPC_API ampc_tensor *ampc_tensor_cast(const ampc_tensor *t, ampc_dtype dtype);
/* An owned contiguous copy that survives ampc_ctx_step_end; it has no graph and does not require grad. */
AMPC_API ampc_tensor *ampc_tensor_detach_copy(const ampc_tensor *t);

/* Accessors. Out-of-range dims give 0 / -1; NULL tensors give 0 / NULL / false. */
AMPC_API ampc_dtype ampc_tensor_dtype(const ampc_tensor *t);
AMPC_API int ampc_tensor_ndim(const ampc_tensor *t);
AMPC_API int64_t ampc_tensor_dim(const ampc_tensor *t, int dim);
AMPC_API int64_t ampc_tensor_stride(const ampc_tensor *t, int dim); /* in elements */
AMPC_API int64_t ampc_tensor_numel(const ampc_tensor *t);
/* The address of the first element in the memory of t's device: a host pointer on the CPU, a device
 * address elsewhere (never dereference it there: use ampc_tensor_copy_to/_from). */
AMPC_API void *ampc_tensor_data(const ampc_tensor *t);
AMPC_API bool ampc_tensor_is_contiguous(const ampc_tensor *t);
AMPC_API bool ampc_tensor_is_owned(const ampc_tensor *t);
/* Shared by a tensor and all its views; bumped by every in-place write through the API. */
AMPC_API uint64_t ampc_tensor_version(const ampc_tensor *t);
AMPC_API void ampc_tensor_bump_version(ampc_tensor *t);
AMPC_API ampc_ctx *ampc_tensor_ctx(const ampc_tensor *t);
/* "[2, 3] F32" style description into buf (always NUL-terminated); returns buf. */
AMPC_API char *ampc_tensor_describe(const ampc_tensor *t, char *buf, size_t size);

/* ------------------------------------------------------------------------------------------------
 * Autograd. Ops on tensors that require grad are recorded on the context's tape; ampc_backward walks
 * it in reverse. Gradients have their tensor's dtype (as in PyTorch): an F32 leaf accumulates an F32
 * gradient, a BF16 activation's gradient is BF16. The tape and every activation are released by
 * ampc_ctx_step_end; leaf gradients of owned tensors survive it.
 * ---------------------------------------------------------------------------------------------- */

/* Marks a leaf (a tensor not produced by a recorded op) as requiring grad. Only float dtypes. */
AMPC_API ampc_status ampc_tensor_set_requires_grad(ampc_tensor *t, bool requires_grad);
AMPC_API bool ampc_tensor_requires_grad(const ampc_tensor *t);
/* The accumulated gradient of a leaf, or NULL when none has arrived (or after ampc_tensor_clear_grad).
 * Same shape and dtype as t; owned by t (freed with it). */
AMPC_API ampc_tensor *ampc_tensor_grad(const ampc_tensor *t);
/* Drops the gradient (set-to-none semantics: the next backward starts a fresh one). */
AMPC_API void ampc_tensor_clear_grad(ampc_tensor *t);
/* A name for error messages and overflow reports ("blocks.0.attn.qkv.weight"); copied. */
AMPC_API ampc_status ampc_tensor_set_name(ampc_tensor *t, const char *name);
AMPC_API const char *ampc_tensor_name(const ampc_tensor *t); /* "" when unnamed */
/* A view of t's data cut off from the graph (does not require grad). */
AMPC_API ampc_tensor *ampc_tensor_detach(const ampc_tensor *t);

/* Backpropagates from a scalar (numel 1) loss, seeding its gradient with 1. */
AMPC_API ampc_status ampc_backward(ampc_ctx *ctx, ampc_tensor *loss);
/* Backpropagates from any output with the given gradient (same shape; converted to out's dtype). */
AMPC_API ampc_status ampc_backward_with(ampc_ctx *ctx, ampc_tensor *out, const ampc_tensor *grad);
/* No-grad scopes (nestable): ops inside record nothing and their outputs do not require grad. */
AMPC_API void ampc_no_grad_begin(ampc_ctx *ctx);
AMPC_API void ampc_no_grad_end(ampc_ctx *ctx);
AMPC_API bool ampc_grad_enabled(const ampc_ctx *ctx);

/* ------------------------------------------------------------------------------------------------
 * Ops. Every op accepts F32, F16 and BF16 tensors (any strides) and returns an arena tensor, or NULL with
 * ampc_last_error() naming the op, the shapes and dtypes. Elementwise and reduction work is computed in
 * F32 and written in the output dtype; GEMM-like ops multiply in the input dtype and accumulate in F32.
 * Output dtypes follow PyTorch outside autocast: the inputs' dtype; binary elementwise ops promote
 * (F16 with BF16, or anything with F32, gives F32); GEMM-like ops require equal dtypes.
 * ---------------------------------------------------------------------------------------------- */

/* Elementwise with broadcasting (NumPy rules, right-aligned, up to 4 dims). */
AMPC_API ampc_tensor *ampc_add(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b);
AMPC_API ampc_tensor *ampc_sub(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b);
AMPC_API ampc_tensor *ampc_mul(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b);
AMPC_API ampc_tensor *ampc_div(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b);
/* x + s, x - s, x * s, x / s with a scalar s (the output keeps x's dtype). */
AMPC_API ampc_tensor *ampc_add_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s);
AMPC_API ampc_tensor *ampc_sub_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s);
AMPC_API ampc_tensor *ampc_mul_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s);
AMPC_API ampc_tensor *ampc_div_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s);
AMPC_API ampc_tensor *ampc_neg(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_exp(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_log(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_sqrt(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_tanh(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_sigmoid(ampc_ctx *ctx, const ampc_tensor *x);
AMPC_API ampc_tensor *ampc_relu(ampc_ctx *ctx, const ampc_tensor *x);
typedef enum ampc_gelu_form {
    AMPC_GELU_ERF = 0, /* x/2 (1 + erf(x/sqrt 2)), PyTorch's default */
    AMPC_GELU_TANH,    /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's */
} ampc_gelu_form;
AMPC_API ampc_tensor *ampc_gelu(ampc_ctx *ctx, const ampc_tensor *x, ampc_gelu_form form);

/* Matrix products. Flags transpose an operand's last two dims before the product. */
#define AMPC_TRANS_A 1u
#define AMPC_TRANS_B 2u
/* a: (..., M, K), b: (..., K, N) -> (..., M, N). 2-D x 2-D, or batched with up to 2 batch dims that
 * broadcast (a 2-D operand is shared by every batch). */
AMPC_API ampc_tensor *ampc_matmul(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, unsigned flags);
/* a: (B, M, K), b: (B, K, N) -> (B, M, N), equal batch sizes (PyTorch's bmm). */
AMPC_API ampc_tensor *ampc_bmm(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, unsigned flags);
/* y = x W^T + b. x: (..., in), w: (out, in), b: (out) or NULL -> (..., out). */
AMPC_API ampc_tensor *ampc_linear(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b);

/* Reductions over the listed dims (ndims = 0: all dims); keepdim keeps them with extent 1. */
AMPC_API ampc_tensor *ampc_sum(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim);
AMPC_API ampc_tensor *ampc_mean(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim);
AMPC_API ampc_tensor *ampc_softmax(ampc_ctx *ctx, const ampc_tensor *x, int dim);
AMPC_API ampc_tensor *ampc_log_softmax(ampc_ctx *ctx, const ampc_tensor *x, int dim);
/* Normalises over the last dim (D). w, b: (D) or NULL. */
AMPC_API ampc_tensor *ampc_layer_norm(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                                      double eps);

/* weight: (V, D); ids: I32 or I64, shape S with at most 3 dims, every id in [0, V) -> (S..., D). */
AMPC_API ampc_tensor *ampc_embedding(ampc_ctx *ctx, const ampc_tensor *weight, const ampc_tensor *ids);
/* logits: (N, C); targets: (N) I32/I64 class indices in [0, C) or ignore_index. Mean over the targets
 * that are not ignore_index (NaN when all are ignored, as in PyTorch). -> a 0-dim tensor. */
#define AMPC_IGNORE_INDEX (-100) /* PyTorch's default ignore_index */
AMPC_API ampc_tensor *ampc_cross_entropy(ampc_ctx *ctx, const ampc_tensor *logits, const ampc_tensor *targets,
                                         int64_t ignore_index);
#define AMPC_IGNORE_INDEX_DEFAULT (-100)
/* mean((x - target)^2) over all elements, shapes equal. -> a 0-dim tensor. */
AMPC_API ampc_tensor *ampc_mse_loss(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *target);
/* Zeroes each element with probability p, scales the rest by 1/(1-p). The mask comes from the context
 * RNG (one draw per element), so it is reproducible. training = false: identity. 0 <= p < 1. */
AMPC_API ampc_tensor *ampc_dropout(ampc_ctx *ctx, const ampc_tensor *x, double p, bool training);

/* Joins tensors of equal shape but along `dim`, equal dtypes. */
AMPC_API ampc_tensor *ampc_concat(ampc_ctx *ctx, const ampc_tensor *const *tensors, int n, int dim);

typedef struct ampc_conv2d_params {
    int stride_h, stride_w; /* 0 = 1 */
    int pad_h, pad_w;       /* zero padding */
} ampc_conv2d_params;
/* x: (N, C, H, W), w: (O, C, KH, KW), b: (O) or NULL -> (N, O, OH, OW). params may be NULL. */
AMPC_API ampc_tensor *ampc_conv2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                                  const ampc_conv2d_params *params);
typedef struct ampc_pool2d_params {
    int kernel_h, kernel_w; /* required, >= 1 */
    int stride_h, stride_w; /* 0 = the kernel size */
    int pad_h, pad_w;       /* implicit -inf padding, at most half the kernel */
} ampc_pool2d_params;
/* x: (N, C, H, W) -> (N, C, OH, OW). */
AMPC_API ampc_tensor *ampc_max_pool2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_pool2d_params *params);

/* Scaled dot-product attention softmax(q k^T / sqrt(D) [+ causal mask]) v. q: (B, H, Tq, D),
 * k: (B, H, Tk, D), v: (B, H, Tk, Dv) -> (B, H, Tq, Dv). causal masks key j > query i. */
AMPC_API ampc_tensor *ampc_attention(ampc_ctx *ctx, const ampc_tensor *q, const ampc_tensor *k, const ampc_tensor *v,
                                     bool causal);
/* x + PE, with the sinusoidal encoding of "Attention is all you need" (PE[t, 2i] = sin(t / 10000^(2i/D)),
 * PE[t, 2i+1] = cos(...)) over the last two dims of x: (..., T, D). PE is evaluated in double, rounded to
 * F32 and added in F32; one final rounding to x's dtype. */
AMPC_API ampc_tensor *ampc_positional_encoding(ampc_ctx *ctx, const ampc_tensor *x);

/* ------------------------------------------------------------------------------------------------
 * Autocast (PyTorch's torch.autocast): inside a region each op casts its floating inputs according to
 * its policy. F64 and integer tensors are never cast. Regions nest; an inner region with enabled =
 * false is an FP32 island (ops run in their inputs' dtypes). State is per context.
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_cast_policy {
    AMPC_CAST_NONE = 0,    /* run in the inputs' dtypes (ordinary promotion) */
    AMPC_CAST_LOWER,       /* cast every floating input to the region dtype (PyTorch lower_precision_fp) */
    AMPC_CAST_FP32,        /* cast every floating input to F32 */
    AMPC_CAST_FP32_OUTPUT, /* compute from the inputs upcast, F32 output (PyTorch fp32_set_opt_dtype) */
    AMPC_CAST_PROMOTE,     /* to the widest input: F32 if any input is F32, else the region dtype; the
                               other 16-bit dtype is an error, as in PyTorch */
    AMPC_CAST_BANNED,      /* the op fails inside an enabled region */
    AMPC_CAST_COUNT
} ampc_cast_policy;

/* The value of `init` in a parameter struct made by its _defaults() function. Structs whose zero would not
 * mean their defaults (a flag that is true by default, a dtype whose zero is F32) carry it, and the calls
 * that take them refuse one without it (AMPC_STATUS_INVALID_ARG, saying so): a struct written field by
 * field, {.dtype = AMPC_DTYPE_F16}, would otherwise run with enabled = false, silently. */
#define AMPC_PARAMS_INIT 0x414d5043u

typedef struct ampc_autocast_params {
    uint32_t init; /* AMPC_PARAMS_INIT: start from ampc_autocast_defaults() */
    /* AMPC_DTYPE_BF16 (the default, as PyTorch's CPU autocast) or AMPC_DTYPE_F16. F32 is refused while
     * enabled: PyTorch's autocast only warns and disables itself for it; an F32 region is enabled = false */
    ampc_dtype dtype;
    bool enabled;       /* true; false: an F32 island (torch.autocast(enabled=False)) */
    bool cache_enabled; /* true: cast each F32 leaf parameter once per outermost region */
} ampc_autocast_params;
/* BF16, enabled, cache enabled (torch.autocast("cpu")'s defaults), init set: change what you need. */
AMPC_API ampc_autocast_params ampc_autocast_defaults(void);

/* Enters a region (params NULL: ampc_autocast_defaults()). Fails for params not made by
 * ampc_autocast_defaults(), and for a dtype other than BF16 and F16 in an enabled region. */
AMPC_API ampc_status ampc_autocast_begin(ampc_ctx *ctx, const ampc_autocast_params *params);
/* Leaves the innermost region; leaving the outermost clears the weight-cast cache. */
AMPC_API ampc_status ampc_autocast_end(ampc_ctx *ctx);
/* The innermost region's state: enabled (false outside every region) and dtype. */
AMPC_API bool ampc_autocast_enabled(const ampc_ctx *ctx);
AMPC_API ampc_dtype ampc_autocast_dtype(const ampc_ctx *ctx);

typedef enum ampc_autocast_table {
    AMPC_AUTOCAST_TABLE_TUTORIAL = 0, /* the default: GEMM-like ops (linear, matmul, bmm, conv2d, attention)
                                          lower; softmax, log_softmax, layer_norm, cross_entropy, mse_loss,
                                          exp, log, sum, mean, positional_encoding FP32; add, concat promote */
    AMPC_AUTOCAST_TABLE_PYTORCH_CPU,  /* torch's AutocastCPU lists: GEMM-like lower; cross_entropy, mse_loss
                                          FP32; concat promote; softmax, layer_norm, sum... in input dtype */
    AMPC_AUTOCAST_TABLE_PYTORCH_CUDA, /* torch's CUDA lists (also torch_npu / torch_musa): GEMM-like lower;
                                          exp, log, layer_norm, mse_loss, cross_entropy FP32; softmax,
                                          log_softmax, sum FP32 output */
    AMPC_AUTOCAST_TABLE_COUNT
} ampc_autocast_table;

/* Replaces every op's policy by a built-in table. */
AMPC_API ampc_status ampc_autocast_load_table(ampc_ctx *ctx, ampc_autocast_table table);
/* Moves one op (by name: "softmax", "linear", ... as listed by ampc_autocast_op_name) to a policy. */
AMPC_API ampc_status ampc_autocast_set_policy(ampc_ctx *ctx, const char *op, ampc_cast_policy policy);
/* The policy of one op (by name), into *out. */
AMPC_API ampc_status ampc_autocast_policy(const ampc_ctx *ctx, const char *op, ampc_cast_policy *out);
/* The ops autocast knows, i in [0, count): names for tables, CLIs and error messages. NULL past the end. */
AMPC_API const char *ampc_autocast_op_name(int i);
AMPC_API const char *ampc_cast_policy_name(ampc_cast_policy p); /* "lower", "fp32", ... */

typedef struct ampc_autocast_stats {
    uint64_t casts;         /* tensors cast by autocast */
    uint64_t cache_hits;    /* weight casts served from the cache */
    uint64_t cache_entries; /* entries in the cache now */
} ampc_autocast_stats;
AMPC_API ampc_status ampc_autocast_get_stats(const ampc_ctx *ctx, ampc_autocast_stats *out);

/* The tutorials' TF32 switch, CPU edition (torch.set_float32_matmul_precision, and as a scoped override
 * like torch.backends.mudnn.flags). It governs F32 x F32 GEMMs (linear, matmul, bmm, conv2d) outside
 * autocast's lower-precision ops, and it is a permission, not an order: a level without a faster way
 * keeps F32 FMAs.
 *   HIGHEST  F32 products and sums (the default).
 *   HIGH     may split each operand exactly into BF16 parts, a = ahi + alo, and sum ahi*bhi + ahi*blo +
 *            alo*bhi in F32 (three BF16 passes on AMX): each product keeps 16 of F32's 24 significand
 *            bits, relative error per product <= about 2^-15 plus the dropped alo*blo (<= 2^-16); sums F32.
 *   MEDIUM   may also use one BF16 pass (ahi*bhi: operands rounded to BF16, 8 significand bits, relative
 *            error per product <= 2^-8, about TF32's 2^-11 x 8), F32 sums; used where faster (AVX512-BF16,
 *            AMX).
 * Values beyond BF16's largest finite (about 3.39e38) become infinite in the split modes. */
typedef enum ampc_fp32_precision {
    AMPC_FP32_HIGHEST = 0,
    AMPC_FP32_HIGH,
    AMPC_FP32_MEDIUM,
    AMPC_FP32_PRECISION_COUNT
} ampc_fp32_precision;

AMPC_API ampc_status ampc_ctx_set_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p);
AMPC_API ampc_fp32_precision ampc_ctx_fp32_matmul_precision(const ampc_ctx *ctx);
/* A scoped override (nestable, up to 8 deep): push sets the precision until the matching pop. */
AMPC_API ampc_status ampc_ctx_push_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p);
AMPC_API ampc_status ampc_ctx_pop_fp32_matmul_precision(ampc_ctx *ctx);
AMPC_API const char *ampc_fp32_precision_name(ampc_fp32_precision p); /* "highest", "high", "medium" */
AMPC_API ampc_status ampc_fp32_precision_parse(const char *name, ampc_fp32_precision *out);

/* ------------------------------------------------------------------------------------------------
 * Names for diagnostics: a scope path ("blocks.3.attn") that anomaly reports and overflow reports use.
 * ---------------------------------------------------------------------------------------------- */

AMPC_API ampc_status ampc_scope_push(ampc_ctx *ctx, const char *name);
AMPC_API void ampc_scope_pop(ampc_ctx *ctx);
AMPC_API const char *ampc_scope_path(const ampc_ctx *ctx); /* "" at top level */
/* path with every all-digit component replaced by `number`: ("blocks.3.attn", "*") -> "blocks.*.attn",
 * the glob of its numbered siblings. Truncated to size; returns the full length. */
AMPC_API size_t ampc_scope_pattern(const char *path, const char *number, char *out, size_t size);

/* Per-module precision (the Ascend recipe "layer norm in FP32, attention and feed-forward under BF16").
 * A rule maps a glob over module paths (fnmatch: '*' matches any run of characters, dots included; '?'
 * one character; [...] a set) to a compute dtype; it applies to every module whose path it matches,
 * and to everything inside that module:
 *   F32        an FP32 island: every op in the module runs in F32, its 16-bit float inputs cast up
 *              (activations coming from a BF16/F16 region, low-precision parameters);
 *   BF16, F16  an autocast region of that dtype (the op policies decide, as in any region).
 * The region opens when ampc_scope_push enters a matching module and closes at its ampc_scope_pop. Of
 * the rules matching a module and the rule in effect around it, the last added wins: with
 * "blocks.*=bf16,blocks.*.attn=fp32" all of blocks.N.attn (its qkv too) is FP32. Inside a module's FP32
 * island ampc_autocast_enabled is true and ampc_autocast_dtype F32. Rules belong to the context and
 * apply inside and outside autocast regions; add and clear them between forward passes (inside a
 * module, add fails with AMPC_STATUS_STATE and clear does nothing). */
AMPC_API ampc_status ampc_module_precision_add(ampc_ctx *ctx, const char *pattern, ampc_dtype dtype);
/* Adds the rules of "GLOB=DTYPE[,GLOB=DTYPE...]" (DTYPE: fp32|f32|bf16|fp16|f16...), all or none: a
 * malformed spec (an empty glob, a missing '=', an unknown dtype) fails naming the faulty rule. */
AMPC_API ampc_status ampc_module_precision_parse(ampc_ctx *ctx, const char *spec);
AMPC_API void ampc_module_precision_clear(ampc_ctx *ctx);
AMPC_API int ampc_module_precision_count(const ampc_ctx *ctx);
/* Rule i's glob and dtype (pattern stays valid until the rules change). */
AMPC_API ampc_status ampc_module_precision_rule(const ampc_ctx *ctx, int i, const char **pattern, ampc_dtype *dtype);
/* The rules in the spelling ampc_module_precision_parse reads ("blocks.*.attn=bf16,lm_head=fp32"; "" with
 * none), truncated to size; returns the full length. */
AMPC_API size_t ampc_module_precision_string(const ampc_ctx *ctx, char *buf, size_t size);

/* Anomaly mode (torch.autograd.set_detect_anomaly; the CPU answer to CUDA_LAUNCH_BLOCKING debugging):
 * every op's output, forward and backward, is checked; the first non-finite value fails the op (NULL) or
 * the backward (status), naming the op, the tensor and parameter names, the scope path and the step. Off
 * by default (it costs a pass over every output). */
AMPC_API void ampc_autograd_set_detect_anomaly(ampc_ctx *ctx, bool on);
AMPC_API bool ampc_autograd_detect_anomaly(const ampc_ctx *ctx);
/* The number of ampc_ctx_step_end calls so far. */
AMPC_API uint64_t ampc_ctx_step(const ampc_ctx *ctx);

/* True when every element is finite (no inf, no NaN). NULL: false. */
AMPC_API bool ampc_all_finite(const ampc_tensor *t);

/* ------------------------------------------------------------------------------------------------
 * Range statistics (the numerics doctor). While a statistics object is attached to a context, every op
 * output (forward), every gradient of an op output (backward, the sum that reaches the op) and every
 * gradient contribution an op hands to a parameter is summarised under a site: its module path (the
 * scope when the op ran), the op's autocast name and the role. Per site: element count, zeros,
 * non-finite values, largest |x| and smallest non-zero |x|, a log2|x| histogram with one bin per binade,
 * and for each 16- and 8-bit format what its round-to-nearest-even conversion would do to the values:
 * overflow (beyond the largest finite: infinity, or NaN for FP8-E4M3), underflow (a non-zero value that
 * becomes zero), subnormal (a non-zero result below the smallest normal). Thresholds come from the
 * conversion code itself, so 65504 is representable, 65520 overflows and 2^-25 flushes in FP16.
 * Counts accumulate over steps until reset. Detached (the default) the ops pay one pointer test.
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_stats ampc_stats;

typedef enum ampc_stats_role {
    AMPC_STATS_OUTPUT = 0, /* the op's output values (forward) */
    AMPC_STATS_GRAD,       /* the gradient of the op's output (backward) */
    AMPC_STATS_PARAM_GRAD, /* a gradient contribution the op's backward gave to parameter `param` */
    AMPC_STATS_ROLE_COUNT
} ampc_stats_role;
AMPC_API const char *ampc_stats_role_name(ampc_stats_role r); /* "out", "grad", "param_grad" */

/* Bin e (1..254) holds |x| in [2^(e-127), 2^(e-126)): the binade of exponent e - 127; bin 0 holds zeros
 * and F32 subnormals, bin 255 infinities and NaNs. */
#define AMPC_STATS_BINS 256

typedef struct ampc_stats_range {
    uint64_t overflow;  /* finite values the format cannot hold (they become inf, or NaN in E4M3) */
    uint64_t underflow; /* non-zero values that round to zero */
    uint64_t subnormal; /* non-zero values that round to a subnormal */
} ampc_stats_range;

typedef struct ampc_stats_entry {
    const char *module; /* module path ("blocks.3.attn.qkv"; "" outside every module) */
    const char *op;     /* autocast's op name ("linear"); shape ops and casts carry their input's site */
    ampc_stats_role role;
    const char *param; /* PARAM_GRAD: the parameter's name ("blocks.3.attn.qkv.weight"); else "" */
    /* Would these values be 16-bit under autocast with the context's policies, module rules and
     * --fp32-ops (an op that lowers its inputs, or one that keeps the dtype of 16-bit inputs), when
     * they were recorded in F32? Values recorded in a 16-bit dtype are lowered by definition. */
    bool lowered;
    uint64_t calls; /* tensors summarised */
    uint64_t count; /* elements */
    uint64_t zeros, nonfinite;
    double amax;                               /* largest finite |x| (0 when none) */
    double min_nonzero;                        /* smallest non-zero finite |x| (0 when none) */
    ampc_stats_range range[AMPC_FORMAT_COUNT]; /* BF16, FP16, FP8-E4M3, FP8-E5M2 (FP32, TF32: zeros) */
    uint64_t hist[AMPC_STATS_BINS];
} ampc_stats_entry;

AMPC_API ampc_status ampc_stats_new(ampc_stats **out);
AMPC_API void ampc_stats_free(ampc_stats *st);
/* Attaches st to ctx (NULL detaches). One object may serve one context at a time. */
AMPC_API ampc_status ampc_stats_attach(ampc_ctx *ctx, ampc_stats *st);
/* Forgets every site and count. Between steps only: tensors and tape nodes of the current step still
 * name sites of before. */
AMPC_API void ampc_stats_reset(ampc_stats *st);
/* Sites in the order they were first seen (ampc_stats_get: NULL past the end). */
AMPC_API int ampc_stats_count(const ampc_stats *st);
AMPC_API const ampc_stats_entry *ampc_stats_get(const ampc_stats *st, int i);
/* The sites whose output site i's op would cast down to the autocast dtype (an F32 tensor entering a
 * lowering op): their values overflow or flush there even when they are F32 themselves. Writes up to max
 * indices to out and returns how many there are. */
AMPC_API int ampc_stats_cast_inputs(const ampc_stats *st, int i, int *out, int max);
/* Wall time spent summarising (seconds), and the number of steps the context ended while attached. */
AMPC_API double ampc_stats_seconds(const ampc_stats *st);
AMPC_API int64_t ampc_stats_steps(const ampc_stats *st);
/* Exact counts for n values of src_dtype against one format, the way a site counts them (tests, tools). */
AMPC_API ampc_status ampc_stats_classify(ampc_format fmt, const void *x, ampc_dtype src_dtype, size_t n,
                                         ampc_stats_range *out);

/* The doctor's verdict on one site in one format (FP16, BF16, FP8-E4M3, FP8-E5M2); docs/DOCTOR.md has the
 * rules in full. Forward values must fit as they are; gradients may be shifted by a loss scale; FP8 is
 * judged with a per-tensor power-of-two scale from the amax (subnormals count as representable). */
typedef enum ampc_stats_verdict {
    AMPC_VERDICT_SAFE = 0,      /* forward: no overflow, at most 0.1% of the non-zero values flush to zero;
                                   gradients: more than 99.9% normal at scale 1, none overflowing */
    AMPC_VERDICT_NEEDS_SCALING, /* gradients: scale_log2 is the smallest power-of-two scale keeping more
                                   than 99.9% normal without overflowing any (or, when none does, the
                                   largest without overflow if what stays below carries under 0.1% of the
                                   magnitude: rounding noise); FP8: the per-tensor scale */
    AMPC_VERDICT_UNSAFE,        /* forward values overflow or flush (> 0.1%), or an F32 input this op casts
                                   down overflows, or no single scale fits the gradient's range */
    AMPC_VERDICT_KEPT_FP32,     /* not lowered by the policies: stays F32 under autocast */
    AMPC_VERDICT_COUNT
} ampc_stats_verdict;
AMPC_API const char *ampc_stats_verdict_name(ampc_stats_verdict v); /* "safe", "needs scaling", "unsafe", "kept fp32" */

typedef struct ampc_stats_advice {
    ampc_stats_verdict verdict;
    int scale_log2;         /* NEEDS_SCALING: the scale is 2^scale_log2 (negative: scale down) */
    double normal_fraction; /* of non-zero values, normal in the format at that scale (1 at SAFE) */
    char why[192];          /* one line: "amax 9.1e+04 > 65504", "0.8% of values below 2^-14" */
} ampc_stats_advice;
AMPC_API ampc_status ampc_stats_advise(const ampc_stats *st, int i, ampc_format fmt, ampc_stats_advice *out);
/* The loss scale for fmt over every lowered gradient site (GRAD and PARAM_GRAD): the smallest power of two
 * 2^k, k >= 0, for which more than `coverage` (0.999 when 0) of their non-zero values are normal in fmt
 * while the largest stays finite; when none is, the largest k without overflow (negative when the
 * gradients overflow at 1). Counted per binade (a value is normal when its binade, scaled, is at or above
 * the format's smallest normal). *normal_fraction: at 2^k. */
AMPC_API ampc_status ampc_stats_loss_scale(const ampc_stats *st, ampc_format fmt, double coverage, int *scale_log2,
                                           double *normal_fraction);

/* The doctor's recommendation for autocast to fmt (FP16 or BF16). */
typedef struct ampc_stats_recommendation {
    char fp32_modules[1024]; /* an --fp32-modules value: the module of every UNSAFE site ("" none);
                                numbered siblings that are all unsafe fold into one glob ("blocks.*.attn") */
    char fp32_ops[256];      /* an --fp32-ops value: ops of UNSAFE sites outside every module ("" none) */
    int scale_log2;          /* ampc_stats_loss_scale(fmt, 0.999) over the gradients outside those modules */
    double normal_fraction;
    int unsafe_sites; /* sites whose verdict is UNSAFE */
} ampc_stats_recommendation;
AMPC_API ampc_status ampc_stats_recommend(const ampc_stats *st, ampc_format fmt, ampc_stats_recommendation *out);

/* ------------------------------------------------------------------------------------------------
 * Optimizers over named parameter groups. Master weights and optimizer state are always F32, each a
 * contiguous block; gradients live in one block per dtype (each parameter's gradient is a view).
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_optim ampc_optim;

typedef enum ampc_optim_kind { AMPC_OPTIM_SGD = 0, AMPC_OPTIM_ADAMW } ampc_optim_kind;

typedef enum ampc_master_mode {
    AMPC_MASTER_AUTO = 0, /* F32 parameters are their own masters (PyTorch AMP / Apex O1); F16/BF16
                              parameters get F32 master copies owned by the optimizer (Apex O2): the
                              update runs on the master, the parameter receives the rounded master */
    AMPC_MASTER_NONE,     /* no master copies: low-precision parameters are updated in place, the
                              update rounded to their dtype (the tutorials' risky model.half()) */
} ampc_master_mode;

typedef struct ampc_optim_params {
    ampc_optim_kind kind;
    double lr;           /* 0 = 1e-3 */
    double weight_decay; /* literal: 0 = none (SGD: L2 added to the gradient; AdamW: decoupled) */
    double momentum;     /* SGD */
    double dampening;    /* SGD */
    bool nesterov;       /* SGD (needs momentum > 0 and dampening 0) */
    double beta1, beta2; /* AdamW; 0 = 0.9, 0.999 */
    double eps;          /* AdamW; 0 = 1e-8 */
    ampc_master_mode master;
    /* With AMPC_MASTER_NONE: BF16 parameters receive their update rounded stochastically (up with
     * probability proportional to the distance from the value below, as llm.c does), so updates smaller
     * than half a BF16 step are kept on average instead of lost. The random bits are Philox draws of
     * (context seed, parameter index, step, element): deterministic for a seed and the same for any thread
     * count or sharding. Needs master = NONE; F16 parameters are refused (F32 ones are not rounded). */
    bool stochastic_rounding;
} ampc_optim_params;

typedef struct ampc_param_group_params {
    double lr_scale;      /* this group's lr = optimizer lr * lr_scale; 0 = 1 */
    bool no_weight_decay; /* e.g. biases and norm weights */
} ampc_param_group_params;

AMPC_API ampc_status ampc_optim_new(ampc_ctx *ctx, const ampc_optim_params *params, ampc_optim **out);
AMPC_API void ampc_optim_free(ampc_optim *opt);
/* Adds a named group of n parameters (leaf tensors that require grad, F32/F16/BF16, each in at most one
 * group of one optimizer). The optimizer gives each its gradient storage and, where the master mode
 * says so, an F32 master copy. group may be NULL (defaults). */
AMPC_API ampc_status ampc_optim_add_group(ampc_optim *opt, const char *name, ampc_tensor *const *params, int n,
                                          const ampc_param_group_params *group);
/* One update of every parameter that has a gradient (parameters without one are left alone, as in
 * PyTorch). */
AMPC_API ampc_status ampc_optim_step(ampc_optim *opt);
/* Set-to-none: every parameter's gradient becomes absent (the storage is kept for the next backward). */
AMPC_API void ampc_optim_zero_grad(ampc_optim *opt);
AMPC_API ampc_status ampc_optim_set_lr(ampc_optim *opt, double lr);
AMPC_API double ampc_optim_lr(const ampc_optim *opt);
AMPC_API int64_t ampc_optim_steps(const ampc_optim *opt); /* optimizer steps taken */
AMPC_API int ampc_optim_num_params(const ampc_optim *opt);
AMPC_API ampc_tensor *ampc_optim_param(const ampc_optim *opt, int i);
/* The F32 master of parameter i (the parameter itself when it is its own master), for inspection. */
AMPC_API const ampc_tensor *ampc_optim_master(const ampc_optim *opt, int i);
/* Bytes of optimizer state this process holds (F32 masters, first and second moments): with a sharded
 * data-parallel optimizer about 1/N of the whole. */
AMPC_API int64_t ampc_optim_state_bytes(const ampc_optim *opt);
/* True when every existing gradient is finite; *first_bad (may be NULL) receives the first offender's
 * name ("" if unnamed; NULL when all are finite). */
AMPC_API bool ampc_optim_grads_finite(const ampc_optim *opt, const char **first_bad);
/* Global L2 norm of all gradients (accumulated in double), computed after unscale. When it exceeds
 * max_norm, every gradient is multiplied by max_norm / (norm + 1e-6) as torch.nn.utils.clip_grad_norm_
 * does. A non-finite norm is returned as is and the gradients are left untouched (a scaler step will
 * skip them). */
AMPC_API ampc_status ampc_clip_grad_norm(ampc_optim *opt, double max_norm, double *norm);

/* ------------------------------------------------------------------------------------------------
 * GradScaler: dynamic loss scaling with PyTorch's rule to the bit, plus opt-in min/max scale and
 * Megatron-style hysteresis. Per optimizer: READY -> (unscale) UNSCALED -> (step) STEPPED -> (update)
 * READY.
 * Gradient accumulation (PyTorch's recipe): for each of N micro-batches, ampc_backward(ctx,
 * ampc_grad_scaler_scale(gs, loss / N)) (the scale does not change between updates, so every
 * micro-batch is scaled alike, and the backwards add into the gradients), optionally ampc_ctx_step_end
 * between them (the gradients of owned parameters survive it); then unscale once, clip, step and update.
 * A non-finite value from any micro-batch makes the whole step skip. Data parallel: see
 * ampc_dist_set_sync.
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_grad_scaler ampc_grad_scaler;

typedef struct ampc_grad_scaler_params {
    uint32_t init;           /* AMPC_PARAMS_INIT: start from ampc_grad_scaler_defaults() */
    double init_scale;       /* 65536 (0 also means it) */
    double growth_factor;    /* 2.0 (0 also); must be > 1 */
    double backoff_factor;   /* 0.5 (0 also); must be in (0, 1) */
    int64_t growth_interval; /* 2000 clean steps (0 also) */
    /* true; false: every call a no-op, scale 1 (torch GradScaler(enabled=False), e.g. for BF16) */
    bool enabled;
    double min_scale; /* 0 = none (PyTorch): backoff may go below 1 */
    double max_scale; /* 0 = none: growth is still refused when the result would be inf */
    int hysteresis;   /* 0 or 1 = none (PyTorch); n > 1: back off only at the n-th overflow since
                                 the last growth (Megatron-LM) */
} ampc_grad_scaler_params;
/* PyTorch's GradScaler defaults, enabled, init set: change what you need. */
AMPC_API ampc_grad_scaler_params ampc_grad_scaler_defaults(void);

typedef struct ampc_grad_scaler_state {
    double scale;           /* FP32 value, as a double */
    int64_t growth_tracker; /* clean steps since the last growth or overflow */
    int64_t hysteresis_tracker;
    int64_t steps;         /* update() calls */
    int64_t skipped_steps; /* optimizer steps skipped for non-finite gradients */
    ampc_grad_scaler_params config;
} ampc_grad_scaler_state;

typedef struct ampc_grad_scaler_overflow {
    bool found_inf;        /* at the last unscale of any optimizer since the last update */
    int64_t tensors;       /* how many gradients had a non-finite value */
    char first_tensor[64]; /* the first one's name ("" if unnamed) */
    int64_t at_step;       /* the scaler's step count then */
} ampc_grad_scaler_overflow;

/* params NULL: the defaults, enabled. */
AMPC_API ampc_status ampc_grad_scaler_new(ampc_ctx *ctx, const ampc_grad_scaler_params *params, ampc_grad_scaler **out);
AMPC_API void ampc_grad_scaler_free(ampc_grad_scaler *gs);
AMPC_API bool ampc_grad_scaler_enabled(const ampc_grad_scaler *gs);
/* The current scale (1.0 when disabled). */
AMPC_API double ampc_grad_scaler_get_scale(const ampc_grad_scaler *gs);
/* loss * scale (differentiable). A 0-dim F16/BF16 loss becomes F32, as with PyTorch's type promotion.
 * Disabled: returns loss itself. */
AMPC_API ampc_tensor *ampc_grad_scaler_scale(ampc_grad_scaler *gs, const ampc_tensor *loss);
/* Multiplies opt's gradients (F32, F16 or BF16) by 1/scale (the reciprocal in double, rounded to F32) and
 * records whether any was non-finite. Error when called twice before update() or after step(). */
AMPC_API ampc_status ampc_grad_scaler_unscale(ampc_grad_scaler *gs, ampc_optim *opt);
/* Unscales if not yet done, then steps opt unless a non-finite gradient was found at unscale time.
 * *stepped (may be NULL) says which. Error when called twice before update(). */
AMPC_API ampc_status ampc_grad_scaler_step(ampc_grad_scaler *gs, ampc_optim *opt, bool *stepped);
/* Applies the update rule once for all optimizers stepped since the last update (backs off if any
 * found a non-finite gradient) and returns every optimizer to READY. Error when nothing was unscaled. */
AMPC_API ampc_status ampc_grad_scaler_update(ampc_grad_scaler *gs);
/* Sets the scale directly (growth tracker untouched, as PyTorch's update(new_scale)). */
AMPC_API ampc_status ampc_grad_scaler_update_to(ampc_grad_scaler *gs, double new_scale);
AMPC_API ampc_status ampc_grad_scaler_get_overflow(const ampc_grad_scaler *gs, ampc_grad_scaler_overflow *out);
/* The whole state (scale, trackers, counts, configuration), and its restoration. Loading into a disabled
 * scaler does nothing (as in PyTorch); a state saved from a disabled scaler cannot be loaded into an
 * enabled one (AMPC_STATUS_STATE). */
AMPC_API ampc_status ampc_grad_scaler_state_save(const ampc_grad_scaler *gs, ampc_grad_scaler_state *out);
AMPC_API ampc_status ampc_grad_scaler_state_load(ampc_grad_scaler *gs, const ampc_grad_scaler_state *state);

/* ------------------------------------------------------------------------------------------------
 * Models. Parameters live in one contiguous block of the parameter dtype and are named the way a
 * PyTorch state_dict would name them ("blocks.3.attn.qkv.weight"); forward passes push the module path
 * as the context's scope, so anomaly reports name the module. Initial weights depend only on the seed.
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_model ampc_model;

typedef enum ampc_model_kind {
    AMPC_MODEL_GPT = 0, /* character-level decoder: token + learned position embeddings, pre-LayerNorm
                             blocks (causal multi-head attention, GELU MLP 4x), final LayerNorm, output
                             tied to the token embedding */
    AMPC_MODEL_MLP,     /* in -> hidden... -> classes, ReLU between (784-1024-1024-10 by default) */
    AMPC_MODEL_CNN,     /* conv 3x3 32 (pad 1), ReLU, max-pool 2 -> conv 3x3 64, ReLU, max-pool 2 ->
                             FC 128, ReLU -> FC classes */
    AMPC_MODEL_SIMPLE,  /* the tutorials' SimpleModel: Linear 5->4, ReLU, Linear 4->3, MSE loss */
    AMPC_MODEL_COUNT
} ampc_model_kind;

#define AMPC_MODEL_MAX_HIDDEN 8

typedef struct ampc_model_config {
    ampc_model_kind kind;
    uint64_t seed;          /* initial weights */
    ampc_dtype param_dtype; /* F32 (0, the default: masters = parameters), BF16 or F16 */
    /* gpt (0 = default): */
    int layers;     /* 6 */
    int d_model;    /* 384 */
    int heads;      /* 6; must divide d_model */
    int context;    /* 256: the longest sequence */
    int vocab;      /* 256 (bytes); for token data the data set's (ampc_dataset_info.num_classes) */
    double dropout; /* literal: 0 = none */
    /* classifiers (0 = default): */
    int in_features;                   /* mlp: 784 */
    int hidden[AMPC_MODEL_MAX_HIDDEN]; /* mlp: up to 8 widths, 0-terminated; all 0 = {1024, 1024} */
    int in_channels;                   /* cnn: 1 */
    int image_size;                    /* cnn: 28 (must be divisible by 4) */
    int classes;                       /* mlp, cnn: 10 */
} ampc_model_config;

AMPC_API ampc_status ampc_model_new(ampc_ctx *ctx, const ampc_model_config *config, ampc_model **out);
AMPC_API void ampc_model_free(ampc_model *m);
/* The configuration with every default filled in. */
AMPC_API ampc_model_config ampc_model_get_config(const ampc_model *m);
AMPC_API const char *ampc_model_kind_name(ampc_model_kind kind); /* "gpt", "mlp", "cnn", "simple" */
AMPC_API ampc_status ampc_model_kind_parse(const char *name, ampc_model_kind *out);

/* Forward pass. gpt: input ids (B, T) I32/I64 with T <= context -> logits (B, T, vocab). mlp: (B, in) or
 * (B, C, H, W) -> (B, classes). cnn: (B, C, H, W) -> (B, classes). simple: (B, 5) -> (B, 3). */
AMPC_API ampc_tensor *ampc_model_forward(ampc_model *m, const ampc_tensor *input);
/* The training loss: cross-entropy of the logits against class indices (gpt: (B, T) next-token ids,
 * ignore_index -100), MSE against (B, 3) targets for simple. A 0-dim tensor. */
AMPC_API ampc_tensor *ampc_model_loss(ampc_model *m, const ampc_tensor *input, const ampc_tensor *target);
/* Dropout active (training, the default) or not (evaluation). */
AMPC_API void ampc_model_set_training(ampc_model *m, bool training);
/* ------------------------------------------------------------------------------------------------
 * FP8 scaling recipes (TransformerEngine's DelayedScaling and current scaling), as reference functions
 * on caller-owned state: a tensor's scale maps its values into the FP8 format's range before the
 * saturating cast, q = cast(x * scale), and the GEMM's result is divided by the scales of its operands.
 * ---------------------------------------------------------------------------------------------- */

typedef enum ampc_fp8_amax_compute {
    AMPC_FP8_AMAX_MAX = 0,     /* the largest amax of the whole history (TE's "max", the default) */
    AMPC_FP8_AMAX_MOST_RECENT, /* the amax of the step just ended (TE's "most_recent") */
} ampc_fp8_amax_compute;

/* TE's scale rule: 2^(floor(log2(fp8_max / amax)) - margin), a power of two that puts amax at most
 * fp8_max / 2^margin; `previous` when amax is 0, negative or not finite (nothing to learn from). */
AMPC_API double ampc_fp8_scale_rule(double amax, double fp8_max, int margin, double previous);
/* Current (just-in-time) scaling: the rule applied to the tensor's own amax, previous scale 1. */
AMPC_API double ampc_fp8_current_scale(double amax, double fp8_max, int margin);
/* One delayed-scaling update at the end of a step, as TE's _default_get_amax_and_update_history and
 * _default_sf_compute do. history holds len >= 1 amaxes, row 0 the step just ended (the forward passes
 * raise it to the largest |x| they quantised). The amax is the largest row (MAX) or row 0 (MOST_RECENT);
 * *scale becomes the rule's scale from it (kept when the amax is 0 or not finite); then the history
 * rolls as TE rolls it: row i takes row i + 1, the last row takes the old row 0, and row 0 is zeroed for
 * the next step. *amax_out (may be NULL) receives the amax used. */
AMPC_API ampc_status ampc_fp8_delayed_update(float *history, int len, ampc_fp8_amax_compute compute, double fp8_max,
                                             int margin, float *scale, float *amax_out);

/* FP8 training (TransformerEngine's fp8_autocast): inside an FP8 region, ampc_linear and ampc_matmul whose
 * second operand is a parameter (a leaf that requires grad) quantise their inputs and weights to
 * FP8-E4M3 and, in the backward, their output gradients to FP8-E5M2 (HYBRID) or E4M3, each with its own
 * per-tensor scale, by the saturating cast (TE's: beyond the largest finite becomes it, counted). The
 * GEMMs run on the quantised values, exactly: every FP8 value is a BF16 value, and dividing by a
 * power-of-two scale is exact, so the BF16 GEMMs (F32 accumulation) compute sum(qx qw) / (sx sw) bit for
 * bit as an FP8 GEMM with an F32 accumulator would. Outputs and gradients take the inputs' dtype (BF16
 * under autocast), the bias is added in F32 and its gradient is summed from the unquantised output
 * gradient (as TE). Everything else runs as it would without the region. Regions nest (a counter). */
typedef enum ampc_fp8_format {
    AMPC_FP8_HYBRID = 0, /* E4M3 forward (inputs, weights), E5M2 output gradients: TE's default */
    AMPC_FP8_E4M3,       /* E4M3 everywhere */
} ampc_fp8_format;
typedef enum ampc_fp8_scaling {
    AMPC_FP8_DELAYED = 0, /* scales from each tensor's amax history, updated at every ampc_ctx_step_end */
    AMPC_FP8_CURRENT,     /* each tensor's scale from its own amax, just in time */
} ampc_fp8_scaling;
typedef struct ampc_fp8_recipe { /* zero: TE's DelayedScaling defaults */
    ampc_fp8_format format;
    ampc_fp8_scaling scaling;
    int amax_history_len; /* 0 = 1024 */
    ampc_fp8_amax_compute amax_compute;
    int margin;
} ampc_fp8_recipe;
/* Enters an FP8 region (params NULL: the defaults). The recipe is the context's: a second region with
 * another recipe while the tensors' state exists fails (AMPC_STATUS_STATE). */
AMPC_API ampc_status ampc_fp8_begin(ampc_ctx *ctx, const ampc_fp8_recipe *recipe);
AMPC_API ampc_status ampc_fp8_end(ampc_ctx *ctx);
AMPC_API bool ampc_fp8_enabled(const ampc_ctx *ctx);
/* What the FP8 ops did since the last step end, and the scales they hold now: tensors (operands with
 * FP8 state: a weight's input, the weight, its output gradient), the smallest and largest scale, the
 * values the casts saturated this step. */
typedef struct ampc_fp8_stats {
    int tensors;
    double min_scale, max_scale;
    uint64_t saturated;
} ampc_fp8_stats;
AMPC_API ampc_status ampc_fp8_get_stats(const ampc_ctx *ctx, ampc_fp8_stats *out);

/* The model's modules, the paths its forward pushes as scopes ("wte", "blocks.0", "blocks.0.attn",
 * "blocks.0.attn.qkv", ..., "lm_head"), in forward order; NULL past the end. */
AMPC_API int ampc_model_num_modules(const ampc_model *m);
AMPC_API const char *ampc_model_module_name(const ampc_model *m, int i);
/* Checks the context's module-precision rules against this model: a rule whose glob matches none of its
 * modules fails (AMPC_STATUS_INVALID_ARG) naming the rule and the model's modules. */
AMPC_API ampc_status ampc_model_check_module_precision(const ampc_model *m);
AMPC_API int ampc_model_num_params(const ampc_model *m);
AMPC_API ampc_tensor *ampc_model_param(const ampc_model *m, int i);
AMPC_API int64_t ampc_model_param_count(const ampc_model *m); /* total elements */
/* Adds the parameters to opt as two groups: "decay" (weights) and "no_decay" (biases, LayerNorm and
 * embedding tables), the usual GPT-2 practice. */
AMPC_API ampc_status ampc_model_add_to_optim(ampc_model *m, ampc_optim *opt);

/* ------------------------------------------------------------------------------------------------
 * Data sets and loaders.
 *
 * A data set holds a whole corpus in host memory (malloc'd, or for token files mapped read-only; not
 * counted by ampc_memory_stats; it needs no context and may be shared by several loaders and contexts).
 * Two tasks:
 *  - image classification (Fashion-MNIST): samples are 28 x 28 grey images with a label in 0..9;
 *    a batch is x (B, 1, 28, 28) F32, each pixel byte p becoming ((p / 255) - 0.2860) / 0.3530 (evaluated
 *    in double, rounded once to F32: the data set's mean and standard deviation), and y (B) I64 labels.
 *  - language modelling (AMPC_TASK_CHAR_LM): the built-in corpus and any text file, whose bytes are the
 *    tokens (a vocabulary of 256 at least), or token files (AMPC_DATA_TOKENS: uint16 ids, see below).
 *    Without a separate validation file the last val_fraction of the ids is the validation split. With
 *    context T a split of L ids is cut into (L - 1) / T windows (integer division): window i covers ids
 *    [i*T, i*T + T], T + 1 ids, so consecutive windows share one id and each id after the first, up to
 *    the end of the last window, is a target exactly once; no window crosses from the training split
 *    into the validation split. A batch is x (B, T) I64 = ids [i*T, i*T + T) and y (B, T) I64 = ids
 *    [i*T + 1, i*T + T]: y is x shifted left by one.
 * Token files come in two formats, told apart by their first bytes:
 *  - nanoGPT's train.bin / val.bin: raw uint16 little-endian ids, no header (an even number of bytes);
 *  - llm.c's: a header of 256 int32 little-endian, [0] = AMPC_TOKENS_LLMC_MAGIC (20240520), [1] = 1
 *    (version 1: uint16 ids), [2] = the number of ids, the rest 0; then the ids, uint16 little-endian;
 *    the file is exactly 1024 + 2 * count bytes. Headers of other llm.c formats (another version, or
 *    another magic such as Llama 3's 20240801 with uint32 ids) are refused, not read as raw ids.
 *  They are mapped read-only (mmap), never copied, and scanned once at open for the largest id.
 * Text and IDX files may be gzip-compressed or plain (zlib reads both); files over AMPC_DATA_MAX_BYTES
 * uncompressed are refused (token files, which are mapped, are not capped). Malformed files fail with
 * AMPC_STATUS_FORMAT (truncated data, a bad IDX or llm.c header, dims that disagree with the data or with
 * each other, labels out of range, a token file of odd length), missing or unreadable ones with
 * AMPC_STATUS_IO, a vocabulary that cannot hold the data with AMPC_STATUS_INVALID_ARG; the message names
 * the file and what was expected (for an id outside the vocabulary: the file and its position).
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_dataset ampc_dataset;
typedef struct ampc_loader ampc_loader;

typedef enum ampc_data_kind {
    AMPC_DATA_BUILTIN = 0,   /* the arithmetic corpus below, made by code: needs no file */
    AMPC_DATA_FASHION_MNIST, /* the four IDX files of Fashion-MNIST in a directory */
    AMPC_DATA_TEXT,          /* any file, read as bytes */
    AMPC_DATA_TOKENS,        /* uint16 token ids: nanoGPT's raw .bin files or llm.c's headered ones */
    AMPC_DATA_KIND_COUNT
} ampc_data_kind;

typedef enum ampc_task {
    AMPC_TASK_IMAGE_CLASSIFICATION = 0,
    AMPC_TASK_CHAR_LM, /* language modelling: next-id prediction over bytes or token ids */
} ampc_task;

typedef enum ampc_split {
    AMPC_SPLIT_TRAIN = 0,
    AMPC_SPLIT_EVAL, /* Fashion-MNIST: the test set (t10k); text: the validation part */
    AMPC_SPLIT_COUNT
} ampc_split;

#define AMPC_DATA_MAX_BYTES ((size_t)1 << 30)                      /* per file, after decompression */
#define AMPC_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist" /* Debian's dataset-fashion-mnist */
#define AMPC_FASHION_MNIST_MEAN 0.2860
#define AMPC_FASHION_MNIST_STD 0.3530
#define AMPC_TOKENS_LLMC_MAGIC 20240520 /* llm.c's GPT-2 token files (version 1: uint16 ids) */
#define AMPC_TOKENS_VOCAB_ROUND 64      /* default vocabulary of token data: largest id + 1, rounded up to this */

/* The built-in corpus (AMPC_DATA_BUILTIN), a char-LM data set generated by code: AMPC_BUILTIN_LINES
 * lines of integer arithmetic, line k (k = 0, 1, ...) made from the words w[0..3] of
 * ampc_rng_block(AMPC_BUILTIN_SEED, 0, k):
 *   op = w[0] % 3;
 *   op 0: a = w[1] % 1000, b = w[2] % 1000, "a+b=c\n" with c = a + b          ("417+285=702\n")
 *   op 1: a = w[1] % 1000, b = w[2] % 1000, swapped if a < b, "a-b=c\n", c = a - b >= 0
 *   op 2: a = w[1] % 100,  b = w[2] % 10,   "a*b=c\n" with c = a * b           ("93*7=651\n")
 * numbers in plain decimal without leading zeros. The text is AMPC_BUILTIN_BYTES bytes (ASCII digits,
 * "+-*=" and '\n'); the validation split is its last 10% (val_fraction applies as for text files). A
 * model that learns the format reaches a loss far below ln(256), and the answers after '=' become
 * predictable as it learns to add. */
#define AMPC_BUILTIN_SEED 0x616d7063ull /* "ampc" */
#define AMPC_BUILTIN_LINES 30000
#define AMPC_BUILTIN_BYTES 322243

typedef struct ampc_dataset_params {
    ampc_data_kind kind;
    /* FASHION_MNIST: the directory (NULL = AMPC_FASHION_MNIST_DIR) holding train-images-idx3-ubyte,
     * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each as NAME.gz or plain
     * NAME (the .gz is tried first). TEXT: the file (required). TOKENS: "TRAIN" or "TRAIN,VAL", the
     * training file and optionally the validation file, as in the CLI's spec (a file whose name holds a
     * comma cannot be named: link it under another name). BUILTIN: ignored. Copied. */
    const char *path;
    /* Language modelling: the fraction of the ids, at the end, held out for validation: the validation
     * split is the last round(len * val_fraction) ids. 0 = 0.1; otherwise it must be in (0, 1), and both
     * splits must keep at least one id. Ignored for Fashion-MNIST (its split is fixed) and for token data
     * with a validation file (which is the whole validation split). */
    double val_fraction;
    /* Language modelling: the vocabulary V, the model's number of ids (ampc_dataset_info.num_classes).
     * 0 = the default: 256 for bytes; for token data the largest id in the files + 1, rounded up to a
     * multiple of AMPC_TOKENS_VOCAB_ROUND (llm.c pads GPT-2's 50257 ids to 50304 the same way, for faster
     * GEMMs). Given, it must hold every id: at least 256 for bytes, above the largest id for tokens
     * (INVALID_ARG naming the first id >= V: its file and position). Must be 0 for Fashion-MNIST. */
    int vocab;
} ampc_dataset_params;

/* Reads (or generates, or for token files maps) the whole data set. params NULL: the built-in corpus.
 * Errors: IO (a missing file: the message names it and, for Fashion-MNIST, how to install the package or
 * pass a directory), FORMAT (malformed or empty data), INVALID_ARG (bad parameters, a vocabulary too small
 * for the data), UNSUPPORTED (an llm.c token file of another format), OOM. */
AMPC_API ampc_status ampc_dataset_open(const ampc_dataset_params *params, ampc_dataset **out);
AMPC_API void ampc_dataset_free(ampc_dataset *ds);

/* Parses the CLI's data spec: "builtin", "fashion-mnist", "fashion-mnist:DIR", "text:FILE" or
 * "tokens:TRAIN[,VAL]", into out->kind and out->path (pointing into spec, so spec must outlive the use of
 * out; for tokens the path is "TRAIN[,VAL]"; val_fraction and vocab are left as they were). INVALID_ARG
 * naming the accepted forms otherwise (also for more than two token files, or an empty name). */
AMPC_API ampc_status ampc_dataset_parse(const char *spec, ampc_dataset_params *out);

typedef struct ampc_dataset_info {
    ampc_data_kind kind;
    ampc_task task;
    const char *name;    /* for display: "builtin (integer arithmetic)", "fashion-mnist",
                                  "text:FILE", "tokens:TRAIN[,VAL]"; owned by the data set */
    int64_t num_classes; /* image classification: 10; language modelling: the vocabulary V */
    /* Shape of one input sample: images (1, 28, 28); char LM: ndim 1 with input_shape[0] = 0, standing
     * for the context length T a loader chooses. */
    int input_ndim;
    int64_t input_shape[AMPC_MAX_DIMS];
    int64_t split_size[AMPC_SPLIT_COUNT]; /* images (60000 / 10000), or ids (bytes of text, tokens) */
    int64_t max_id; /* language modelling: the largest id in the data (both splits); -1 for images */
    /* One line naming the data for a run's first message: the files, their formats and sizes, the split,
     * the vocabulary and where it came from ("tokens: a.bin (llm.c, 1000 tokens, the last 100 for
     * validation); largest id 300, vocab 320 (largest id + 1, rounded up to a multiple of 64)"; "text:
     * b.txt (5000 bytes, the last 500 for validation), vocab 256"; images: the name); owned by the data
     * set. */
    const char *summary;
} ampc_dataset_info;

AMPC_API ampc_status ampc_dataset_get_info(const ampc_dataset *ds, ampc_dataset_info *out);
AMPC_API const char *ampc_data_kind_name(ampc_data_kind kind); /* "builtin", "fashion-mnist", "text", "tokens" */
AMPC_API const char *ampc_split_name(ampc_split split);        /* "train", "eval"; "?" out of range */
/* Fashion-MNIST's class names ("T-shirt/top", "Trouser", ... "Ankle boot"); NULL for other data sets
 * and out-of-range classes. */
AMPC_API const char *ampc_dataset_class_name(const ampc_dataset *ds, int64_t cls);
/* Byte-level sets (text, built-in): the bytes of a split (owned by ds, valid until ampc_dataset_free) and
 * their count in *len (may be NULL). NULL (and *len = 0) for image and token sets or a bad split. */
AMPC_API const uint8_t *ampc_dataset_text(const ampc_dataset *ds, ampc_split split, size_t *len);
/* Language-modelling sets: the ids of a split as stored, *count ids of *id_bytes bytes each, little-endian
 * (1: the bytes of a text; 2: uint16 tokens, a view into the mapped file past its header); owned by ds,
 * valid until ampc_dataset_free. count and id_bytes may be NULL. NULL (and 0s) for image sets or a bad
 * split. */
AMPC_API const void *ampc_dataset_ids(const ampc_dataset *ds, ampc_split split, size_t *count, int *id_bytes);

/* Loaders: batches of one split, epoch after epoch.
 *
 * Order: with shuffle off, epoch e delivers samples 0, 1, ..., n-1. With shuffle on, epoch e delivers
 * perm_e, the permutation made by this Fisher-Yates shuffle (reproducible anywhere):
 *     perm[i] = i for every i; k = 0;
 *     for i = n-1 down to 1:
 *         w = word k % 4 of ampc_rng_block(seed, AMPC_DATA_SHUFFLE_STREAM + e, k / 4);
 *         j = (w * (i + 1)) >> 32    (a 64-bit product: j is in [0, i]);
 *         swap perm[i] and perm[j]; k = k + 1;
 * Batches take the next B entries of the order. At the end of an epoch the remainder (fewer than B
 * samples) is dropped when drop_last is set, otherwise it forms a smaller last batch. Then a repeating
 * loader goes on with epoch e + 1 in the same call; a non-repeating one reports the end once (*end = true,
 * no tensors) and its next call starts epoch e + 1.
 *
 * The cursor {epoch, position} says where the next batch starts: position = samples of epoch `epoch`
 * already delivered. Saving it after a step and setting it on a fresh loader with the same data set and
 * parameters reproduces the following batches exactly. */
#define AMPC_DATA_SHUFFLE_STREAM 0x6461746100000000ull /* "data" in the high 32 bits */

typedef struct ampc_loader_params {
    ampc_split split;
    int64_t batch;   /* B: 0 = 32; must be >= 1 */
    int64_t context; /* T, language modelling only: 0 = 64; must be >= 1 and the split must hold at least
                           T + 1 ids (and fewer than 2^32 windows). Must be 0 for images. */
    uint64_t seed;   /* shuffling seed */
    /* Literal flags (a zeroed struct gives an evaluation loader: in order, every sample, one pass at a
     * time). Training: {.shuffle = true, .drop_last = true, .repeat = true}. */
    bool shuffle;
    bool drop_last; /* needs at least B samples in the split */
    bool repeat;
    /* Data parallelism (DistributedSampler's job): with shard_count N > 1 every batch is the global batch
     * of B samples the order gives, and this loader delivers only rows [first, first + rows) of it for
     * shard_index r (ampc_loader_shard_rows: r * (B / N) + min(r, B % N), B / N rows plus one for the
     * first B % N shards); the cursor counts whole global batches, so it is the same on every shard and a
     * run resumes on another number of shards at exactly the same sample. 0 = one shard. */
    int shard_index, shard_count;
} ampc_loader_params;

/* The rows of a global batch of `batch` samples that shard `index` of `count` gets (see above). */
AMPC_API void ampc_loader_shard_rows(int64_t batch, int index, int count, int64_t *first, int64_t *rows);

typedef struct ampc_loader_cursor {
    int64_t epoch;    /* >= 0 */
    int64_t position; /* 0 <= position <= samples per epoch */
} ampc_loader_cursor;

/* ds must outlive the loader. Batches are filled with ampc_parallel_for on ctx's threads (the result
 * does not depend on the thread count). Errors: INVALID_ARG (bad parameters, a split too small for one
 * window or, with drop_last, for one batch: the message gives the sizes), OOM. */
AMPC_API ampc_status ampc_loader_new(ampc_ctx *ctx, const ampc_dataset *ds, const ampc_loader_params *params,
                                     ampc_loader **out);
AMPC_API void ampc_loader_free(ampc_loader *ld);
/* The next batch as arena tensors of the loader's context (valid until ampc_ctx_step_end): images x
 * (B, 1, 28, 28) F32 and y (B) I64; char LM x (B, T) I64 and y (B, T) I64; B is smaller for the last batch
 * of an epoch without drop_last. end may be NULL; at the end of a non-repeating loader's epoch the call
 * returns AMPC_OK with *end = true and *x = *y = NULL. */
AMPC_API ampc_status ampc_loader_next(ampc_loader *ld, ampc_tensor **x, ampc_tensor **y, bool *end);
AMPC_API ampc_status ampc_loader_get_cursor(const ampc_loader *ld, ampc_loader_cursor *out);
/* INVALID_ARG when epoch < 0 or position is outside [0, samples per epoch]. */
AMPC_API ampc_status ampc_loader_set_cursor(ampc_loader *ld, const ampc_loader_cursor *cursor);
/* Samples per epoch (images, or windows of T + 1 ids); 0 for NULL. */
AMPC_API int64_t ampc_loader_num_samples(const ampc_loader *ld);
/* Batches per epoch: n / B with drop_last, ceil(n / B) without; 0 for NULL. */
AMPC_API int64_t ampc_loader_num_batches(const ampc_loader *ld);

/* ------------------------------------------------------------------------------------------------
 * safetensors files (the format of huggingface/safetensors, readable by PyTorch's tooling):
 *   bytes 0-7   N, the header length, unsigned 64-bit little-endian;
 *   N bytes     a UTF-8 JSON object: {"__metadata__": {"key": "value", ...},
 *               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...},
 *               padded with spaces to a multiple of 8 so the data starts aligned;
 *   the rest    the data buffer: each tensor little-endian, row-major, at [BEGIN, END) of the buffer.
 * The reader refuses, with AMPC_STATUS_FORMAT and a message naming the file and the field: a file
 * shorter than 8 bytes, N = 0, N > AMPC_ST_MAX_HEADER or beyond the file, JSON that is not exactly one
 * object (bad syntax, invalid UTF-8, control characters, numbers that are not non-negative integers
 * <= 2^53 where integers are expected, nesting deeper than the schema), bytes other than spaces after
 * the object inside the header, duplicate names or keys, a missing or unknown field in a tensor entry,
 * an unknown dtype, more than AMPC_ST_MAX_DIMS dims, shapes whose byte size overflows or differs from
 * END - BEGIN, offsets that overlap, leave gaps, or run past the buffer, and trailing bytes after the
 * last tensor. `__metadata__` values must be strings. Tensors of dtypes ampc does not compute in
 * (BOOL, I8, U16, F8_E4M3, ...) can be listed and read as bytes; the packed sub-byte dtypes (F4,
 * F6_E2M3, F6_E3M2) are refused as not supported. The header must begin with '{' (JSON whitespace is
 * allowed between tokens), and the escape \u0000 is refused, since names and values are C strings.
 * ---------------------------------------------------------------------------------------------- */

#define AMPC_ST_MAX_DIMS 8
#define AMPC_ST_MAX_HEADER 100000000u /* the reference reader's limit */

typedef struct ampc_safetensors ampc_safetensors;

typedef struct ampc_st_tensor {
    const char *name;
    const char *dtype_name; /* as in the file: "F32", "BF16", "F8_E4M3", ... */
    ampc_dtype dtype;       /* AMPC_DTYPE_COUNT when ampc has no such dtype */
    int bits;               /* bits per element (8 x bytes; sub-byte formats are refused) */
    int ndim;               /* 0 = a scalar */
    int64_t shape[AMPC_ST_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte offsets in the data buffer, end exclusive */
    const void *data;    /* the bytes (inside the loaded file, valid until ampc_safetensors_free) */
} ampc_st_tensor;

/* Reads and validates a whole file into memory. IO when it cannot be read, FORMAT as above. */
AMPC_API ampc_status ampc_safetensors_read(const char *path, ampc_safetensors **out);
/* The same from memory (the bytes are copied); name is used in messages (NULL: "<memory>"). */
AMPC_API ampc_status ampc_safetensors_parse(const void *bytes, size_t len, const char *name, ampc_safetensors **out);
AMPC_API void ampc_safetensors_free(ampc_safetensors *st);
AMPC_API const char *ampc_safetensors_name(const ampc_safetensors *st); /* the path or name given */
/* Tensors in the order of their offsets; i in [0, count). NULL out of range. */
AMPC_API int ampc_safetensors_count(const ampc_safetensors *st);
AMPC_API const ampc_st_tensor *ampc_safetensors_tensor(const ampc_safetensors *st, int i);
AMPC_API const ampc_st_tensor *ampc_safetensors_find(const ampc_safetensors *st, const char *name);
/* __metadata__ entries in file order; NULL key/value out of range. */
AMPC_API int ampc_safetensors_metadata_count(const ampc_safetensors *st);
AMPC_API ampc_status ampc_safetensors_metadata_at(const ampc_safetensors *st, int i, const char **key,
                                                  const char **value);
AMPC_API const char *ampc_safetensors_metadata(const ampc_safetensors *st, const char *key); /* NULL: absent */
/* The data buffer (after the header) and its length. */
AMPC_API const void *ampc_safetensors_data(const ampc_safetensors *st, size_t *len);
/* Checks the CRC-32 (zlib's, as 8 lowercase hex digits) of the data buffer against metadata[key]:
 * FORMAT naming the file, the key and both values when it is missing or differs. */
AMPC_API ampc_status ampc_safetensors_verify_checksum(const ampc_safetensors *st, const char *key);

/* Writer. Tensors are laid out as the reference writer does (larger dtypes first, then by name), with no
 * gaps; the header is compact JSON with __metadata__ first (keys sorted byte-wise; the reference's order
 * is its hash map's), padded with spaces to a multiple of 8. The same tensors and at most one metadata
 * key give the same bytes as Python's safetensors.save_file. */
typedef struct ampc_safetensors_writer ampc_safetensors_writer;

AMPC_API ampc_status ampc_safetensors_writer_new(ampc_safetensors_writer **out);
AMPC_API void ampc_safetensors_writer_free(ampc_safetensors_writer *w);
/* Adds a tensor of numel(shape) elements at data (NOT copied: it must stay valid until the write). Names
 * must be unique, non-empty valid UTF-8, and not "__metadata__". */
AMPC_API ampc_status ampc_safetensors_add(ampc_safetensors_writer *w, const char *name, ampc_dtype dtype, int ndim,
                                          const int64_t *shape, const void *data);
/* A contiguous tensor (its storage is referenced, not copied). */
AMPC_API ampc_status ampc_safetensors_add_tensor(ampc_safetensors_writer *w, const char *name, const ampc_tensor *t);
/* Sets (or replaces) a metadata entry; both strings are copied. */
AMPC_API ampc_status ampc_safetensors_set_metadata(ampc_safetensors_writer *w, const char *key, const char *value);
/* When set, the write stores the CRC-32 of the data buffer in metadata[key]. */
AMPC_API ampc_status ampc_safetensors_set_checksum_key(ampc_safetensors_writer *w, const char *key);
/* Writes atomically: PATH.tmp in the same directory, fsync, rename onto path, fsync the directory. On
 * failure (IO naming the path and the system error) path is left as it was and PATH.tmp removed. */
AMPC_API ampc_status ampc_safetensors_write(ampc_safetensors_writer *w, const char *path);
/* The same bytes in memory (malloc'd; free() them). */
AMPC_API ampc_status ampc_safetensors_serialize(ampc_safetensors_writer *w, void **bytes, size_t *len);

/* ------------------------------------------------------------------------------------------------
 * Checkpoints: one safetensors file holding everything a run needs to continue bit for bit.
 *   tensors    every model parameter under its own name in its storage dtype ("blocks.0.attn.qkv.weight",
 *              F32/BF16/F16: the part PyTorch's safetensors tooling loads as a state_dict);
 *              "master.NAME" F32 master weights when they are separate from the parameters;
 *              "optim.NAME.exp_avg", "optim.NAME.exp_avg_sq" (AdamW) or "optim.NAME.momentum_buffer"
 *              (SGD with momentum), F32, and "optim.NAME.step", an I64 scalar (PyTorch keeps an F32 one;
 *              I64 stays exact past 2^24 steps).
 *   metadata   "format": "pt"; "ampc.format": "ampc-checkpoint"; "ampc.format_version": "1"; "ampc.step";
 *              "ampc.model.*" (the whole model configuration); "ampc.optim.*" (kind, lr, steps, ...);
 *              "ampc.scaler.*" (the whole GradScaler state and configuration); "ampc.rng.*" (seed, stream,
 *              counter); "ampc.data.*" (the loader cursor and samples per epoch); the caller's own
 *              entries; "ampc.kernels", the kernel the model's context ran in every slot with a choice
 *              ("softmax=ampc_k_softmax_f32__avx512;gemm_bf16=SMALL,MEDIUM,LARGE;...": per size class
 *              where they differ, "-" for none); "ampc.payload_crc32", the CRC-32 of the data buffer.
 *              Numbers are decimal, doubles in the fewest digits (15 to 17) that read back exactly.
 * ---------------------------------------------------------------------------------------------- */

#define AMPC_CHECKPOINT_FORMAT "ampc-checkpoint"
#define AMPC_CHECKPOINT_VERSION 1

typedef struct ampc_checkpoint_state {
    ampc_model *model;        /* required */
    ampc_optim *optim;        /* NULL: no optimizer state (or none restored) */
    ampc_grad_scaler *scaler; /* NULL: none */
    ampc_rng *rng;            /* NULL: none (ampc_ctx_rng(ctx) for dropout) */
    ampc_loader *loader;      /* NULL: no data cursor */
    int64_t step;             /* training steps completed (restore sets it) */
    /* save only: n_extra more metadata entries, extra[2i] = key, extra[2i + 1] = value; keys must not
     * begin with "ampc." or be "format". */
    const char *const *extra;
    int n_extra;
    /* the number of data-parallel processes that trained (save: 0 = 1; restore: what the file recorded,
     * 1 for files of one process); a resume may run on any number */
    int world_size;
} ampc_checkpoint_state;

/* Writes the checkpoint atomically (see ampc_safetensors_write): a crash leaves either the previous file
 * or the new one at path, never a torn one. */
AMPC_API ampc_status ampc_checkpoint_save(const char *path, const ampc_checkpoint_state *state);
/* Reads a checkpoint and checks its format, version and payload checksum. FORMAT for a file that is not
 * a safetensors file, not an ampc checkpoint, from a newer format version, or corrupt. */
AMPC_API ampc_status ampc_checkpoint_open(const char *path, ampc_safetensors **out);
/* The model configuration recorded in an opened checkpoint. */
AMPC_API ampc_status ampc_checkpoint_model_config(const ampc_safetensors *ck, ampc_model_config *out);
/* Loads an opened checkpoint into the objects of state (those that are not NULL) and sets state->step.
 * Everything is checked before anything is written: the model configuration, every tensor's presence,
 * dtype and shape (no tensor may be left over), the optimizer kind, the scaler, RNG and cursor values;
 * on any error (FORMAT or SHAPE, naming the file and the field) the objects are untouched. The optimizer
 * gets its state, step counts and current lr; its hyperparameters stay as the caller made them. The
 * model's context runs the kernels the checkpoint recorded (ampc.kernels) from then on, wherever they
 * are usable at its level, so the run continues with the same bits; one warning through the context's
 * log names those that are not (another CPU, a lower AMPC_ISA). A checkpoint without the key (0.2.0 and
 * older) leaves the context's kernels as they are. */
AMPC_API ampc_status ampc_checkpoint_restore(const ampc_safetensors *ck, ampc_checkpoint_state *state);

/* ------------------------------------------------------------------------------------------------
 * Data parallelism over MPI (src/dist/; built when CMake finds MPI, unless -DAMPC_MPI=OFF).
 *
 * N processes (ranks), one model replica each, started by mpirun. ampc_dist_new joins them (initialising
 * MPI unless the program already did; ampc.h never needs mpi.h: pass a pointer to your MPI_Comm).
 * ampc_dist_attach makes an optimizer data-parallel, after which the ordinary AMP loop of one process
 * (forward, ampc_grad_scaler_scale, ampc_backward, unscale, clip, step, update) trains all ranks as one:
 *   - parameters are broadcast from rank 0 and checked by a checksum on every rank;
 *   - during ampc_backward, gradients go into buckets (about bucket_bytes each, in the order backward
 *     finishes them: parameters sharing a storage, as a model's do, in reverse declaration order, others
 *     in reverse optimizer order; F32 gradients reduced in F32 live in their bucket, DDP's
 *     gradient_as_bucket_view) and each bucket's non-blocking reduction starts as soon as its last
 *     gradient is final, overlapping the rest of the backward (PyTorch DDP's reducer); a parameter no
 *     rank's backward reached keeps no gradient;
 *   - reductions run in reduce_dtype (F32, BF16 or F16: 16-bit sums are formed in F32 and rounded once
 *     per combining step) with FSDP's division rule: each rank's contribution is multiplied by its share
 *     w_r / f before the sum and the sum by f / N after it, f being FSDP's gradient_predivide_factor (f = 1;
 *     doubled while N % f == 0 and N / f > f: 2 for N = 2, 3, 4, 4 for N = 6, 8, 16), so the reduced sum is
 *     at most N / f times the largest contribution (for N = 2 never larger than it: an FP16 reduction
 *     cannot overflow where the F32 average would not); w_r = 1 unless ampc_dist_set_grad_weight says so;
 *   - everything that decides (the GradScaler's found-inf and first bad tensor, the no-scaler finiteness
 *     check, the clipping norm) agrees across ranks, so all ranks skip the same steps and keep the same
 *     scale;
 *   - shard OPTIMIZER is ZeRO-1: each bucket is split in N equal slices and rank r owns slice r of every
 *     bucket: gradients are reduce-scattered, each rank unscales, checks and updates its slice (F32 masters
 *     and moments exist for owned elements only: about 1/N of the optimizer state per rank), and the
 *     updated parameters are all-gathered in the parameters' dtype after the step. Shard FULL adds
 *     FSDP2's parameter sharding: the parameters of each numbered module ("blocks.3.*", a unit; the
 *     rest form root units that stay gathered) exist only as this rank's F32 master slice between uses:
 *     an op or a backward that reads one gathers its unit (all-gather in the parameters' dtype, from
 *     the masters; the next unit's all-gather starts at once, FSDP's prefetch), and gathering a unit of
 *     another module releases the previous one, so about two units are whole at a time. FSDP2's
 *     MixedPrecisionPolicy maps to: param_dtype = the model's parameter dtype (keep parameters in BF16
 *     with F32 masters for the full saving: F32 parameters under autocast are cast, and the cast cache
 *     keeps the casts for the step), reduce_dtype = reduce_dtype, the output dtype = the autocast dtype.
 *     Gradients keep their full-size block in this version.
 * One backward per optimizer step reduces; gradient accumulation (several backwards before one step) runs
 * the backwards before the last with ampc_dist_set_sync(d, false), DDP's no_sync: they add into the local
 * gradients without any communication, and the last backward, with sync on, reduces the sums once. A
 * second backward with sync on before the step is refused. Every collective waits at most
 * timeout_s seconds: a rank that died or stopped answering makes the others fail with AMPC_STATUS_DIST and
 * a message naming the collective, never hang. Without MPI in the build every call but ampc_dist_available
 * and the rank queries fails with AMPC_STATUS_UNSUPPORTED.
 * ---------------------------------------------------------------------------------------------- */

typedef struct ampc_dist ampc_dist;

typedef enum ampc_dist_shard {
    AMPC_DIST_SHARD_NONE = 0,  /* DDP: every rank holds everything, gradients all-reduced */
    AMPC_DIST_SHARD_OPTIMIZER, /* ZeRO-1: optimizer state (masters, moments) sharded */
    AMPC_DIST_SHARD_FULL,      /* FSDP2-style: parameters sharded between uses as well */
} ampc_dist_shard;

typedef enum ampc_dist_op { AMPC_DIST_SUM = 0, AMPC_DIST_MAX, AMPC_DIST_MIN } ampc_dist_op;

/* True when the library was built with MPI. */
AMPC_API bool ampc_dist_available(void);
/* "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line), or "" without MPI. */
AMPC_API const char *ampc_dist_library(void);
/* The rank and size mpirun gave this process, read from its environment (OMPI_COMM_WORLD_*, PMI_*,
 * PMIX_RANK) before MPI is initialised: a program can keep ranks > 0 quiet while it parses its options.
 * 0 and 1 when not started by a launcher. */
AMPC_API int ampc_dist_launch_rank(void);
AMPC_API int ampc_dist_launch_size(void);

typedef struct ampc_dist_params {
    const void *comm; /* a pointer to the MPI_Comm to train on (duplicated); NULL: MPI_COMM_WORLD,
                         initialised here (MPI_Init_thread, FUNNELED) when the program has not */
    double timeout_s; /* the longest any collective may wait: 0 = 300 */
} ampc_dist_params;

/* Errors: UNSUPPORTED (no MPI in this build), DIST (MPI failed to start). */
AMPC_API ampc_status ampc_dist_new(const ampc_dist_params *params, ampc_dist **out);
/* Changes the collectives' deadline (seconds > 0). */
AMPC_API ampc_status ampc_dist_set_timeout(ampc_dist *d, double timeout_s);
/* Frees the handle (before or after its optimizer), and finalises MPI when ampc_dist_new initialised it. */
AMPC_API void ampc_dist_free(ampc_dist *d);
AMPC_API int ampc_dist_rank(const ampc_dist *d);       /* 0 for NULL */
AMPC_API int ampc_dist_world_size(const ampc_dist *d); /* 1 for NULL */
AMPC_API int ampc_dist_local_size(const ampc_dist *d); /* ranks on this machine (sharing its cores); 1 for NULL */

/* Collectives over all ranks, in place, with the handle's timeout. dtypes: F32, F64, I64, BF16, F16 (16-bit
 * sums in F32, rounded once per combining step); broadcast takes any dtype. Every rank must call them in
 * the same order with the same n and dtype. */
AMPC_API ampc_status ampc_dist_broadcast(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, int root);
AMPC_API ampc_status ampc_dist_allreduce(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, ampc_dist_op op);
AMPC_API ampc_status ampc_dist_barrier(ampc_dist *d);
/* Agreement on success: every rank passes its own status; all get AMPC_OK only when every rank had one,
 * else AMPC_STATUS_DIST naming the lowest failing rank (whose own message is its business). */
AMPC_API ampc_status ampc_dist_agree(ampc_dist *d, ampc_status mine);
/* Ends every rank of the job at once (MPI_Abort) with the exit code: for a rank that cannot go on. */
AMPC_API void ampc_dist_abort(ampc_dist *d, int code);

typedef struct ampc_dist_train_params {
    ampc_dtype reduce_dtype; /* F32 (0, the default), BF16 or F16 */
    int64_t bucket_bytes;    /* 0 = 25 MiB (DDP's bucket_cap_mb), counted in reduce_dtype */
    ampc_dist_shard shard;
} ampc_dist_train_params;

/* Makes opt data-parallel over d (see above); call after every parameter group was added and any
 * checkpoint restored, before the first backward. The parameters of rank 0 win (broadcast) and every
 * rank checks their checksum. Errors: INVALID_ARG, STATE (opt already attached, or d has an optimizer),
 * DTYPE (reduce_dtype), DIST. */
AMPC_API ampc_status ampc_dist_attach(ampc_dist *d, ampc_optim *opt, const ampc_dist_train_params *params);
/* This rank's share of the global batch relative to an equal share (rows * N / B; 1 when the batch
 * divides evenly): its gradient counts that much in the average, so uneven shards average exactly like
 * one process on the whole batch. */
AMPC_API ampc_status ampc_dist_set_grad_weight(ampc_dist *d, double weight);
/* DDP's no_sync for gradient accumulation: while sync is false, backwards reduce nothing (the gradients
 * add up locally, in their own blocks); the next backward with sync true (the default) reduces the
 * accumulated gradients, once. Sharded runs accumulate the same way (the gradients keep their full-size
 * blocks until the reduction). An optimizer step (or unscale, clip) after a backward that ran with sync
 * false and before one that ran with sync true fails with STATE: the ranks' gradients were never reduced.
 * Every rank must switch alike. */
AMPC_API ampc_status ampc_dist_set_sync(ampc_dist *d, bool sync);
/* Waits for the gradient reductions of the last backward (the optimizer and the GradScaler call it
 * themselves before they read gradients). */
AMPC_API ampc_status ampc_dist_sync_grads(ampc_dist *d);
/* Shard FULL: gathers every parameter (they stay until the next optimizer step), so code outside the ops
 * may read them; AMPC_OK and nothing to do otherwise. */
AMPC_API ampc_status ampc_dist_unshard(ampc_dist *d);

/* What the reductions cost, summed since attach (or the last reset). */
typedef struct ampc_dist_stats {
    int64_t steps;          /* backwards reduced */
    int64_t buckets;        /* buckets per step */
    int64_t bytes_reduced;  /* per step: gradient bytes sent into reductions (reduce dtype) */
    int64_t bytes_gathered; /* per step: parameter bytes all-gathered (sharded) */
    double comm_seconds;    /* from each bucket's launch to its completion */
    double exposed_seconds; /* time spent waiting for reductions after backward ended */
} ampc_dist_stats;
/* The median time of the gradient reductions of one step run back to back with nothing to hide them
 * (every rank calls it, between steps: the gradients are left undefined): exposed_seconds / steps
 * against it is the fraction of communication that backward did not hide. */
AMPC_API ampc_status ampc_dist_time_reduction(ampc_dist *d, int reps, double *seconds);
AMPC_API ampc_status ampc_dist_get_stats(const ampc_dist *d, ampc_dist_stats *out);
AMPC_API void ampc_dist_reset_stats(ampc_dist *d);

/* ampc_checkpoint_save for data-parallel runs, called by every rank: a sharded optimizer's state is
 * gathered to rank 0, which writes the one file (atomically, the same format as one process, with the
 * world size recorded); the status is agreed, so every rank learns whether the save worked. Resuming is
 * ampc_checkpoint_restore on every rank before ampc_dist_attach, on any number of ranks. */
AMPC_API ampc_status ampc_dist_checkpoint_save(ampc_dist *d, const char *path, const ampc_checkpoint_state *state);

/* ------------------------------------------------------------------------------------------------
 * Deprecated names. Renamed in 0.2.0 to follow the naming rules above; the old names still work (they
 * call the new functions) and warn at compile time. They will be removed in 0.3.0.
 * ---------------------------------------------------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
#define AMPC_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define AMPC_DEPRECATED(use)
#endif

AMPC_API AMPC_DEPRECATED("ampc_format_get_info") ampc_status
    ampc_format_info_get(ampc_format fmt, ampc_format_info *out);
AMPC_API AMPC_DEPRECATED("ampc_autocast_policy") ampc_status
    ampc_autocast_get_policy(const ampc_ctx *ctx, const char *op, ampc_cast_policy *out);
AMPC_API AMPC_DEPRECATED("ampc_autocast_get_stats") ampc_status
    ampc_autocast_stats_get(const ampc_ctx *ctx, ampc_autocast_stats *out);
AMPC_API AMPC_DEPRECATED("ampc_autograd_set_detect_anomaly") void ampc_ctx_set_check_finite(ampc_ctx *ctx, bool on);
AMPC_API AMPC_DEPRECATED("ampc_grad_scaler_get_overflow") ampc_status
    ampc_grad_scaler_overflow_get(const ampc_grad_scaler *gs, ampc_grad_scaler_overflow *out);
AMPC_API AMPC_DEPRECATED("ampc_dataset_get_info") ampc_status
    ampc_dataset_info_get(const ampc_dataset *ds, ampc_dataset_info *out);
AMPC_API AMPC_DEPRECATED("ampc_ctx_set_fp32_matmul_precision") ampc_status
    ampc_set_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p);
AMPC_API AMPC_DEPRECATED("ampc_ctx_fp32_matmul_precision") ampc_fp32_precision
    ampc_get_fp32_matmul_precision(const ampc_ctx *ctx);
AMPC_API AMPC_DEPRECATED("ampc_ctx_push_fp32_matmul_precision") ampc_status
    ampc_fp32_matmul_precision_push(ampc_ctx *ctx, ampc_fp32_precision p);
AMPC_API AMPC_DEPRECATED("ampc_ctx_pop_fp32_matmul_precision") ampc_status
    ampc_fp32_matmul_precision_pop(ampc_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* AMPC_H */
