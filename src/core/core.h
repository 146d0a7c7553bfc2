/* core.h: internal declarations shared by the library's modules: error reporting, accounted allocation,
 * the step arena, the thread pool and the context struct. Nothing here is public; names are ampci_. */
#ifndef AMPC_CORE_H
#define AMPC_CORE_H

#include "ampc.h"

#include <stdarg.h>
#include <stdatomic.h>

#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "ampc must not be built with -ffast-math/-Ofast: they turn the NaN/Inf checks into constants"
#endif

#define AMPCI_HIDDEN __attribute__((visibility("hidden")))
#define AMPCI_ALIGN 64

/* A macro's expansion as a string literal (AMPCI_STR(AMPC_VERSION_MAJOR) is "0"; a kernel entry's name is
 * its function's identifier): the second step lets the argument expand first. */
#define AMPCI_STR_(x) #x
#define AMPCI_STR(x) AMPCI_STR_(x)

/* Library bugs only (never user input): log and abort. */
#define AMPCI_ASSERT(c)                                                                                                \
    do {                                                                                                               \
        if (!(c)) ampci_assert_fail(#c, __FILE__, __LINE__);                                                           \
    } while (0)
AMPCI_HIDDEN _Noreturn void ampci_assert_fail(const char *what, const char *file, int line);

/* Records a failure for ampc_last_error() and returns the status, so `return ampci_fail(...)` reads. */
AMPCI_HIDDEN ampc_status ampci_fail(ampc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
AMPCI_HIDDEN ampc_status ampci_vfail(ampc_status s, const char *fmt, va_list ap);
/* Same, for calls that return a pointer: records the failure and returns NULL. */
AMPCI_HIDDEN void *ampci_fail_null(ampc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A NULL input in a call chain: keeps the first failure's message; if there is none, says `what`. */
AMPCI_HIDDEN void *ampci_null_input(const char *fn, const char *what);
/* A parameter struct that must come from its _defaults() function (ampc.h: AMPC_PARAMS_INIT): AMPC_OK,
 * or INVALID_ARG naming `maker` when init is not the mark. */
AMPCI_HIDDEN ampc_status ampci_check_params_init(const char *fn, uint32_t init, const char *maker);

/* ---- step arena: a list of chunks, bump allocation, reset at step end ---- */
typedef struct ampci_arena_chunk {
    struct ampci_arena_chunk *next;
    size_t size, used;
    unsigned char *base;
} ampci_arena_chunk;

/* Something that must run when the arena resets (e.g. dropping a view's reference to owned storage). */
typedef struct ampci_arena_hook {
    struct ampci_arena_hook *next;
    void (*fn)(void *arg);
    void *arg;
} ampci_arena_hook;

typedef struct ampci_arena {
    ampci_arena_chunk *chunks; /* newest first */
    ampci_arena_hook *hooks;
    size_t initial, reserved, used, high_water;
    size_t next_chunk; /* size of the next first chunk: last step's high water (merging) */
} ampci_arena;

/* ---- step heap (step_heap.c): large step buffers with early release ---- */
#define AMPCI_HEAP_MIN ((size_t)16 << 10) /* smaller requests go to the arena */
#define AMPCI_HEAP_CLASSES (48 * 8)
struct ampci_heap_block;
typedef struct ampci_heap {
    struct ampci_heap_block *all;                      /* every block held */
    struct ampci_heap_block *free[AMPCI_HEAP_CLASSES]; /* per size class */
    struct ampci_heap_block *gen;                      /* the open generation's blocks */
    uint64_t gen_id;
    bool gen_open;
    size_t reserved, used, high_water; /* bytes incl. headers */
    struct ampci_heap_block **map;     /* a device's blocks by data address (step_heap.c) */
    size_t map_cap, map_n;
} ampci_heap;

/* ---- thread pool ---- */
typedef struct ampci_pool ampci_pool;
AMPCI_HIDDEN ampc_status ampci_pool_new(int threads, ampci_pool **out);
AMPCI_HIDDEN void ampci_pool_free(ampci_pool *p);
AMPCI_HIDDEN int ampci_pool_threads(const ampci_pool *p);
AMPCI_HIDDEN void ampci_pool_run(ampci_pool *p, int64_t n, int64_t grain, ampc_parallel_fn fn, void *arg);
/* Parallel regions the pool has handed to its workers so far (runs made serial are not counted). */
AMPCI_HIDDEN uint64_t ampci_pool_regions(const ampci_pool *p);
AMPCI_HIDDEN int ampci_online_cpus(void);

/* ---- row-parallel work ----
 * Work that splits into rows (a row: a tensor row, a plane, an image, a run of elements) states its row
 * body once, typed by its argument struct:
 *
 *     typedef struct bias_rows { float *y; const float *b; int64_t cols; } bias_rows;
 *     AMPCI_ROW_BODY(bias_run, bias_rows, j, r0, r1, chunk) {
 *         for (int64_t r = r0; r < r1; r++) ...j->y[r * j->cols + c] += j->b[c];
 *     }
 *     ampci_parallel_rows(ctx, rows, cols, bias_run, &(bias_rows){y, b, cols});
 *
 * AMPCI_ROW_BODY writes the void-pointer adapter ampc_parallel_for needs, so no body casts its argument
 * and no op keeps a trampoline of its own. `chunk` is the chunk's index, for bodies that write one
 * partial result per chunk (summed afterwards in chunk order). */
#define AMPCI_ROW_BODY(name, T, a, r0, r1, chunk)                                                                      \
    static void name##_typed(const T *a, int64_t r0, int64_t r1, int64_t chunk);                                       \
    static void name(void *arg_, int64_t r0_, int64_t r1_, int64_t chunk_) { name##_typed(arg_, r0_, r1_, chunk_); }   \
    static void name##_typed(const T *a, int64_t r0, int64_t r1, __attribute__((unused)) int64_t chunk)

/* Elements per chunk that pay for handing a chunk to a thread: element-wise maps take this many, row
 * work about this many (ampci_row_grain). */
#define AMPCI_GRAIN ((int64_t)16384)
/* Rows per chunk for rows of `cols` elements: about AMPCI_GRAIN elements, at least one row. */
static inline int64_t ampci_row_grain(int64_t cols) {
    return cols >= AMPCI_GRAIN ? 1 : AMPCI_GRAIN / (cols > 0 ? cols : 1);
}
/* Runs body on the chunks of [0, rows), ampci_row_grain(cols) rows each, on the context's threads. The
 * cut depends only on (rows, cols), so a body whose output for a chunk depends only on that chunk gives
 * the same bits for any thread count. cols = 1: an element-wise map in chunks of AMPCI_GRAIN elements.
 * Work with a grain of its own (column blocks, a bounded number of partials) calls ampc_parallel_for. */
AMPCI_HIDDEN void ampci_parallel_rows(ampc_ctx *ctx, int64_t rows, int64_t cols, ampc_parallel_fn body,
                                      const void *args);

#define AMPCI_FRAME_MAX_MADE 256 /* a tensor made when the list is full is simply not released early */

/* ---- devices (device.c, device_guard.c): where a context's tensor memory lives ----
 * A buffer type is what a device's memory can do, in the spirit of ggml-backend's buffer types: the host
 * reaches device memory only through these calls (and through the device's kernels, src/kernels). Sizes
 * are bytes; pointers named dev are device addresses, host pointers are host memory. */
typedef struct ampci_buft {
    const char *name;
    bool is_host; /* device addresses are host pointers the host may dereference (the CPU) */
    void *(*alloc)(ampc_ctx *ctx, size_t bytes);
    void (*free)(ampc_ctx *ctx, void *dev, size_t bytes);
    void (*memset)(ampc_ctx *ctx, void *dev, int value, size_t bytes);
    void (*copy_in)(ampc_ctx *ctx, void *dev, const void *host, size_t bytes);
    void (*copy_out)(ampc_ctx *ctx, void *host, const void *dev, size_t bytes);
    void (*copy)(ampc_ctx *ctx, void *dev_dst, const void *dev_src, size_t bytes);
    /* gives the whole pages of [dev, dev + bytes) back for a while, keeping the addresses (their contents
     * read as zeros afterwards) */
    void (*discard)(ampc_ctx *ctx, void *dev, size_t bytes);
    /* the device's own code is about to touch its memory from the host's threads, and is done with it
     * (the guard device lifts and restores its protection; NULL: nothing to do). Calls nest. */
    void (*enter)(ampc_ctx *ctx);
    void (*leave)(ampc_ctx *ctx);
    void (*release)(ampc_ctx *ctx); /* the context ends: everything the device holds for it goes */
} ampci_buft;

/* The context's device memory: its buffer type, per-device state and byte counts. */
typedef struct ampci_devmem {
    ampc_device device;
    const ampci_buft *buft;
    void *state; /* the buffer type's own (the guard's region), NULL for the CPU */
    atomic_size_t live, peak;
} ampci_devmem;

/* Opens the device of `d` for a new context (its buffer type and state): UNSUPPORTED with a message
 * naming the device when it is not built or not present. */
AMPCI_HIDDEN ampc_status ampci_devmem_open(ampc_ctx *ctx, ampc_device d);
/* Accounted device memory (64-byte aligned), NULL with the error recorded (naming `what` and the bytes)
 * on failure; and its release. On the CPU these are ampci_alloc / ampci_free. */
AMPCI_HIDDEN void *ampci_dev_alloc(ampc_ctx *ctx, size_t bytes, const char *what);
AMPCI_HIDDEN void ampci_dev_free(ampc_ctx *ctx, void *dev, size_t bytes);
/* Whether the context's device memory is host memory (the CPU). */
static inline bool ampci_dev_is_host(const ampc_ctx *ctx);
/* Host <-> device copies and fills of raw device memory through the buffer type. */
AMPCI_HIDDEN void ampci_dev_memset(ampc_ctx *ctx, void *dev, int value, size_t bytes);
AMPCI_HIDDEN void ampci_dev_copy_in(ampc_ctx *ctx, void *dev, const void *host, size_t bytes);
AMPCI_HIDDEN void ampci_dev_copy_out(ampc_ctx *ctx, void *host, const void *dev, size_t bytes);
AMPCI_HIDDEN void ampci_dev_copy(ampc_ctx *ctx, void *dev_dst, const void *dev_src, size_t bytes);
/* Device memory not needed for a while whose addresses must stay (src/dist, shard FULL's parameters between
 * uses): the whole pages of [dev, dev + bytes) go back through the buffer type's discard (their contents
 * read as zeros afterwards); ampci_dev_account moves bytes out of (add false) or back into (add true) the
 * device's live count, which on the CPU is the host's (ampci_account). */
AMPCI_HIDDEN void ampci_dev_discard(ampc_ctx *ctx, void *dev, size_t bytes);
AMPCI_HIDDEN void ampci_dev_account(ampc_ctx *ctx, size_t bytes, bool add);
/* The guard device's test buffer type and its region allocator (device_guard.c). */
extern AMPCI_HIDDEN const ampci_buft ampci_guard_buft;
/* A host synchronisation point: bytes of device memory dev read into host memory, counted under
 * `point` (include/ampc.h, ampc_sync_point). Every value a step needs on the host comes through here. */
AMPCI_HIDDEN void ampci_sync_read(ampc_ctx *ctx, ampc_sync_point point, void *host, const void *dev, size_t bytes);
/* Counts a synchronisation point whose read happens inside another call (ampci_host_map's). */
AMPCI_HIDDEN void ampci_sync_count(ampc_ctx *ctx, ampc_sync_point point);
/* Adds flops to the count of matrix-product FLOPs (ampc_ctx_matmul_flops): the ops floor calls it after
 * each GEMM, convolution or attention device operation that succeeded. */
AMPCI_HIDDEN void ampci_matmul_flops_add(ampc_ctx *ctx, uint64_t flops);

/* ---- listener lists: how a lower floor lets higher ones act on its events ----
 * The floor that fires an event owns a list of (fn, arg) subscribers with add and remove calls; it calls
 * them in the order they were added. The function type is the event's; it is stored as a plain pointer
 * and called back through the event's own typed wrapper in the firing floor. */
#define AMPCI_LISTENERS_MAX 8
typedef struct ampci_listeners {
    struct {
        void (*fn)(void);
        void *arg;
    } at[AMPCI_LISTENERS_MAX];
    int n;
} ampci_listeners;
/* Adds (fn, arg): INVALID_ARG for a NULL fn or a pair already there, STATE when the list is full
 * (`what` names the event in the message). */
AMPCI_HIDDEN ampc_status ampci_listeners_add(ampci_listeners *l, const char *what, void (*fn)(void), void *arg);
/* Removes (fn, arg); false when it was not there. */
AMPCI_HIDDEN bool ampci_listeners_remove(ampci_listeners *l, void (*fn)(void), void *arg);

struct ampc_kernels;
struct ampci_node;
struct ampci_autocast;

/* The context. Core owns the first group; the floors above keep their per-context state in the groups
 * after it, which core only stores (it never reads them): each floor reads and writes its own group, and
 * src/ctx.c, the context assembly above every floor, creates, resets at step end and frees them. */
struct ampci_storage; /* src/tensor */

struct ampc_ctx {
    /* ---- core ---- */
    ampc_allocator alloc;
    atomic_size_t live, peak;
    atomic_uint_least64_t allocations;
    ampci_arena arena;
    ampci_heap heap;
    ampci_pool *pool;
    ampc_rng rng;
    ampc_log_fn log;
    void *log_user;
    uint64_t step_id; /* counts ampc_ctx_step_end calls, from 1 */
    char scope[256];  /* the module path ampc_scope_push builds: "blocks.3.attn" */
    int scope_len[16], scope_depth;
    ampci_devmem dev_mem;                  /* the device: its memory */
    uint64_t syncs[AMPC_SYNC_POINT_COUNT]; /* host synchronisation points so far */
    /* FLOPs of the matrix products the ops ran (ampc_ctx_matmul_flops): a plain counter, since ops run on
     * the thread that calls them (the pool's workers run kernels only) */
    uint64_t matmul_flops;
    /* the step phase the host is in (ampci_phase: forward, backward, optimizer), and the profile of
     * device calls (core/profile.c; NULL: off; kernels/profile.c wraps ctx->dev while it is on) */
    int phase;
    struct ampci_profile *prof;
    /* ---- kernels: the table this context runs (its level's, or own_kernels: its level's with the
     * choices a restored checkpoint recorded) and the FP32 matmul precision (the global setting in [0],
     * then scoped overrides) ---- */
    ampc_isa isa;
    const struct ampc_kernels *kernels;
    const struct ampci_device_ops *dev; /* the device's operations (kernels/device.h) */
    struct ampc_kernels *own_kernels;
    int fp32_prec[9];
    int fp32_depth;
    /* ---- autograd: the tape (newest node first, in the arena), the no-grad nesting depth, and anomaly
     * mode with what it reports: the op running now, its inputs, the node whose backward runs ---- */
    struct ampci_node *tape;
    int no_grad_depth;
    bool check_finite;
    const char *cur_op;
    const char *cur_backward;
    const ampc_tensor *cur_in[4];
    int cur_nin;
    const struct ampci_node *cur_node; /* the node whose backward runs (NULL outside the walk) */
    /* the backward walk's events (autograd.h: ampci_autograd_on_grad_seen / _on_grad_ready): a gradient
     * before a node's backward consumes it or as it reaches a leaf (the doctor's statistics), and a
     * leaf's gradient final (DDP's reducer) */
    ampci_listeners grad_seen, grad_ready;
    /* ---- tensor: its events (tensor.h: ampci_tensor_on_absent / _on_free): a storage that is absent (a
     * sharded parameter between uses) must be made present before it is read, and an owned tensor is
     * being freed ---- */
    ampci_listeners storage_absent, tensor_freed;
    struct ampci_headers *headers; /* arena tensor headers, two halves by step (tensor_live.c) */
    /* ---- amp: autocast regions, policies and the weight-cast cache (NULL until first used) ---- */
    struct ampci_autocast *autocast;
    struct ampc_stats *stats; /* range statistics (src/amp/stats.c), NULL: off */
    struct ampci_fp8 *fp8;    /* FP8 regions and per-weight scaling state (src/amp/fp8.c), NULL until used */
    ampci_listeners fp8_amax; /* the step's FP8 amaxes before they move the scales (amp.h: ampci_fp8_on_amax) */
    /* ---- ops: the frames model code has open (src/ops/frame.c): the op outputs they made, outermost
     * frame first, and how many frames are open ---- */
    struct {
        const ampc_tensor *made[AMPCI_FRAME_MAX_MADE];
        int n, depth;
    } frames;
};

/* Step phases, for the profile of device calls: calls made by ampc_backward are backward's; by the
 * GradScaler, clipping, zero_grad and the optimizer, the optimizer's; all others forward's. Enter returns
 * the phase to give back to leave (so phases nest). */
enum { AMPCI_PHASE_FORWARD, AMPCI_PHASE_BACKWARD, AMPCI_PHASE_OPTIMIZER, AMPCI_PHASE_COUNT };
static inline int ampci_phase_enter(ampc_ctx *ctx, int phase) {
    int was = ctx->phase;
    ctx->phase = phase;
    return was;
}
static inline void ampci_phase_leave(ampc_ctx *ctx, int was) { ctx->phase = was; }

/* The profile of device calls (ampc_ctx_profile_*): one row per (op kind, operation, phase) seen, the
 * operation's name a static string; inner is the device's own operation table while the profile wraps
 * it (kernels/profile.c). */
#define AMPCI_PROF_CELLS 512 /* rows; later ones share one "other" row */
typedef struct ampci_prof_cell {
    const char *kind, *op;
    int phase;
    uint64_t calls, regions;
    double seconds;
} ampci_prof_cell;
typedef struct ampci_profile {
    const void *inner;
    int depth; /* timed calls in progress: only the outermost is timed */
    int n;
    ampci_prof_cell cells[AMPCI_PROF_CELLS + 1];
} ampci_profile;
typedef struct ampci_prof_mark {
    bool timed;
    uint64_t regions;
    double t0;
} ampci_prof_mark;
/* Around one call named op (a static string): enter marks its start (when the profile is on and no
 * other call is in progress), leave adds it to its row. Both do nothing while the profile is off. */
AMPCI_HIDDEN void ampci_prof_enter(ampc_ctx *ctx, ampci_prof_mark *m);
AMPCI_HIDDEN void ampci_prof_leave(ampc_ctx *ctx, const char *op, const ampci_prof_mark *m);
AMPCI_HIDDEN double ampci_prof_now(void);

static inline bool ampci_dev_is_host(const ampc_ctx *ctx) { return ctx->dev_mem.buft->is_host; }

/* The module path: appends ".name" (fails past 16 levels or 255 characters), and drops the last name. */
AMPCI_HIDDEN ampc_status ampci_scope_push(ampc_ctx *ctx, const char *name);
AMPCI_HIDDEN void ampci_scope_pop(ampc_ctx *ctx);

/* Core's part of the context's life: a context with the allocator, log, RNG and threads of `p`
 * (validated, defaults applied) and everything else zero, or NULL with the error recorded; and its
 * release. The context assembly (src/ctx.c) calls them around the other floors' setup. */
AMPCI_HIDDEN ampc_status ampci_ctx_core_new(const ampc_ctx_params *p, ampc_ctx **out);
AMPCI_HIDDEN void ampci_ctx_core_free(ampc_ctx *ctx);
/* Core's part of a step end: the arena and step heap are emptied and the step counter advances. */
AMPCI_HIDDEN void ampci_ctx_core_step_end(ampc_ctx *ctx);

/* Accounted allocation through the context's allocator; aligned to 64 bytes. NULL on failure (the
 * error is recorded, naming `what`). */
AMPCI_HIDDEN void *ampci_alloc(ampc_ctx *ctx, size_t size, const char *what);
AMPCI_HIDDEN void ampci_free(ampc_ctx *ctx, void *p, size_t size);
/* Memory an allocation gives back for a while without being freed (add false) or takes again (add true),
 * in the live and peak counts (src/dist: sharded parameters between uses). */
AMPCI_HIDDEN void ampci_account(ampc_ctx *ctx, size_t size, bool add);
/* Gives the whole pages inside [p, p + size) back to the OS, keeping the addresses (their contents read as
 * zeros afterwards): memory not needed for a while that raw pointers saved elsewhere still name. */
AMPCI_HIDDEN void ampci_discard_pages(void *p, size_t size);
/* Arena allocation (64-byte aligned), valid until the next ampc_ctx_step_end. */
AMPCI_HIDDEN void *ampci_arena_alloc(ampc_ctx *ctx, size_t size, const char *what);
/* Registers fn(arg) to run at the next arena reset. */
AMPCI_HIDDEN ampc_status ampci_arena_on_reset(ampc_ctx *ctx, void (*fn)(void *), void *arg);
AMPCI_HIDDEN void ampci_arena_reset(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_arena_release(ampc_ctx *ctx);
/* A step buffer (64-byte aligned), valid until ampc_ctx_step_end unless released earlier: from the step
 * heap when size >= AMPCI_HEAP_MIN, else from the arena (then free/ref/unref do nothing). */
AMPCI_HIDDEN void *ampci_step_alloc(ampc_ctx *ctx, size_t size, const char *what);
/* Gives p back now (p unreferenced; the caller promises nothing uses it any more). */
AMPCI_HIDDEN void ampci_step_free(ampc_ctx *ctx, void *p);
/* References keep a transient buffer alive past its generation's sweep; the last unref releases it.
 * Buffers made outside a generation are never released by unref (only by ampci_step_free). */
AMPCI_HIDDEN void ampci_step_ref(ampc_ctx *ctx, void *p);
AMPCI_HIDDEN void ampci_step_unref(ampc_ctx *ctx, void *p);
/* p is a transient step-heap buffer with exactly one reference: its holder may modify it in place. */
AMPCI_HIDDEN bool ampci_step_exclusive(const ampc_ctx *ctx, void *p);
/* A generation: step buffers made until the sweep are transient; the sweep releases those without
 * references. Generations do not nest (the autograd walk opens one per node). */
AMPCI_HIDDEN void ampci_step_gen_begin(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_step_gen_sweep(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_heap_reset(ampc_ctx *ctx);   /* step end: every block back to the free lists */
AMPCI_HIDDEN void ampci_heap_release(ampc_ctx *ctx); /* context end */

/* Elements [begin, end) of the fill ampc_rng_uniform/normal(rng, ...) would make, without advancing
 * rng: out[0] is element `begin`. Lets a fill be split over threads with identical bits. */
AMPCI_HIDDEN void ampci_rng_uniform_range(const ampc_rng *rng, float *out, int64_t begin, int64_t end, float lo,
                                          float hi);
AMPCI_HIDDEN void ampci_rng_normal_range(const ampc_rng *rng, float *out, int64_t begin, int64_t end, float mean,
                                         float std);

AMPCI_HIDDEN void ampci_log(const ampc_ctx *ctx, ampc_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Overflow-checked size arithmetic: false when a*b would not fit. */
static inline bool ampci_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

#endif
