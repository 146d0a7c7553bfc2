/* profile.c: the profile of a context's device calls (ampc_ctx_profile_*). While it is on, ctx->dev is a
 * table of wrappers, one per device operation, that time the call they pass on to the table that was
 * there before (the CPU's, the guard's) and add it to the row of (op kind, operation, ctx->phase), with
 * the parallel regions the thread pool ran meanwhile. Host wall time is the right clock for a synchronous
 * device; a call made from inside another (none today) is left to its caller's time so nothing counts
 * twice. */
#include "device.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OP_INDEX(op) AMPCI_OPI_##op,
enum { AMPCI_DEVICE_OPS(OP_INDEX) AMPCI_OPI_COUNT };
#undef OP_INDEX

/* One row: a device operation, in a phase, on behalf of one op kind (the op or backward running). */
typedef struct cell {
    const char *kind;
    int op, phase;
    uint64_t calls, regions;
    double seconds;
} cell;

#define MAX_CELLS 512 /* (kind, op, phase) triples seen; later ones share one "other" row */

struct ampci_profile {
    const ampci_device_ops *inner; /* the table the wrappers call */
    int depth;                     /* calls in progress (a nested call is not timed) */
    int n;
    cell cells[MAX_CELLS + 1];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The op kind a call is made for: the op whose forward or backward runs (their names are static strings,
 * so a pointer compare finds the row), the optimizer, or the autograd walk between backwards. */
static const char *kind_of(const ampc_ctx *ctx, int phase) {
    if (phase == AMPCI_PHASE_OPTIMIZER) return "optimizer";
    const char *k = phase == AMPCI_PHASE_BACKWARD ? ctx->cur_backward : ctx->cur_op;
    if (!k) return phase == AMPCI_PHASE_BACKWARD ? "autograd" : "outside ops";
    return strncmp(k, "ampc_", 5) == 0 ? k + 5 : k; /* a backward is named by its public function */
}

static cell *find(struct ampci_profile *p, const char *kind, int op, int phase) {
    for (int i = p->n - 1; i >= 0; i--) /* newest first: a step repeats its sequence */
        if (p->cells[i].kind == kind && p->cells[i].op == op && p->cells[i].phase == phase) return &p->cells[i];
    if (p->n == MAX_CELLS) { /* all later rows in one: "other" */
        cell *c = &p->cells[MAX_CELLS];
        if (!c->calls) *c = (cell){.kind = "other", .op = -1, .phase = phase};
        return c;
    }
    p->cells[p->n] = (cell){.kind = kind, .op = op, .phase = phase};
    return &p->cells[p->n++];
}

static void add(ampc_ctx *ctx, int op, double t0, uint64_t r0) {
    int phase = ctx->phase >= 0 && ctx->phase < AMPCI_PHASE_COUNT ? ctx->phase : 0;
    cell *c = find(ctx->prof, kind_of(ctx, phase), op, phase);
    c->calls++;
    c->regions += ampci_pool_regions(ctx->pool) - r0;
    c->seconds += now_s() - t0;
}

#define PROF_WRAP(op)                                                                                                  \
    static ampc_status prof_##op(ampc_ctx *ctx, const ampci_##op##_args *a) {                                          \
        struct ampci_profile *p = ctx->prof;                                                                           \
        if (p->depth++) {                                                                                              \
            ampc_status s = p->inner->op(ctx, a);                                                                      \
            p->depth--;                                                                                                \
            return s;                                                                                                  \
        }                                                                                                              \
        uint64_t r0 = ampci_pool_regions(ctx->pool);                                                                   \
        double t0 = now_s();                                                                                           \
        ampc_status s = p->inner->op(ctx, a);                                                                          \
        add(ctx, AMPCI_OPI_##op, t0, r0);                                                                              \
        p->depth--;                                                                                                    \
        return s;                                                                                                      \
    }
AMPCI_DEVICE_OPS(PROF_WRAP)
#undef PROF_WRAP

#define PROF_ENTRY(op) .op = prof_##op,
static const ampci_device_ops prof_ops = {.name = "profile", AMPCI_DEVICE_OPS(PROF_ENTRY)};
#undef PROF_ENTRY

ampc_status ampc_ctx_profile_start(ampc_ctx *ctx) {
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_profile_start: ctx is NULL");
    if (!ctx->prof) {
        struct ampci_profile *p = calloc(1, sizeof *p);
        if (!p) return ampci_fail(AMPC_STATUS_OOM, "ampc_ctx_profile_start: out of memory for the profile");
        p->inner = ctx->dev;
        ctx->prof = p;
        ctx->dev = &prof_ops;
    }
    const ampci_device_ops *inner = ctx->prof->inner;
    *ctx->prof = (struct ampci_profile){.inner = inner};
    return AMPC_OK;
}

void ampc_ctx_profile_stop(ampc_ctx *ctx) {
    if (!ctx || !ctx->prof) return;
    ctx->dev = ctx->prof->inner;
    free(ctx->prof);
    ctx->prof = NULL;
}

int ampc_ctx_profile_read(const ampc_ctx *ctx, ampc_profile_entry *out, int max) {
    static const char *const phases[AMPCI_PHASE_COUNT] = {"forward", "backward", "optimizer"};
    if (!ctx || !ctx->prof) return 0;
    int count;
    const char *const *names = ampci_device_op_names(&count);
    const struct ampci_profile *p = ctx->prof;
    int n = 0, cells = p->n + (p->cells[MAX_CELLS].calls > 0);
    for (int i = 0; i < cells; i++) {
        const cell *c = &p->cells[i < p->n ? i : MAX_CELLS];
        if (out && n < max)
            out[n] = (ampc_profile_entry){.kind = c->kind,
                                          .op = c->op >= 0 && c->op < count ? names[c->op] : "several",
                                          .phase = phases[c->phase],
                                          .calls = c->calls,
                                          .regions = c->regions,
                                          .seconds = c->seconds};
        n++;
    }
    return n;
}
