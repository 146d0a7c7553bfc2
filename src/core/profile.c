/* profile.c (core): the accounting behind ampc_ctx_profile_* (kernels/profile.c turns it on by wrapping
 * the device's operation table). A timed call is one row of (op kind, operation, phase): the device's
 * operations, and the buffer type's raw memsets and copies (ampci_dev_memset and friends), so a step's
 * time splits into named pieces and what is left is the host's own. Only the outermost call is timed: a
 * memset inside a device operation is that operation's time. */
#include "core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double ampci_prof_now(void) {
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

static ampci_prof_cell *find(ampci_profile *p, const char *kind, const char *op, int phase) {
    for (int i = p->n - 1; i >= 0; i--) /* newest first: a step repeats its sequence */
        if (p->cells[i].kind == kind && p->cells[i].op == op && p->cells[i].phase == phase) return &p->cells[i];
    if (p->n == AMPCI_PROF_CELLS) { /* all later rows in one: "other" */
        ampci_prof_cell *c = &p->cells[AMPCI_PROF_CELLS];
        if (!c->calls) *c = (ampci_prof_cell){.kind = "other", .op = "several", .phase = phase};
        return c;
    }
    p->cells[p->n] = (ampci_prof_cell){.kind = kind, .op = op, .phase = phase};
    return &p->cells[p->n++];
}

void ampci_prof_enter(ampc_ctx *ctx, ampci_prof_mark *m) {
    m->timed = ctx->prof && ctx->prof->depth++ == 0;
    if (!m->timed) return;
    m->regions = ampci_pool_regions(ctx->pool);
    m->t0 = ampci_prof_now();
}

void ampci_prof_leave(ampc_ctx *ctx, const char *op, const ampci_prof_mark *m) {
    if (!ctx->prof) return;
    ctx->prof->depth--;
    if (!m->timed) return;
    int phase = ctx->phase >= 0 && ctx->phase < AMPCI_PHASE_COUNT ? ctx->phase : 0;
    ampci_prof_cell *c = find(ctx->prof, kind_of(ctx, phase), op, phase);
    c->calls++;
    c->regions += ampci_pool_regions(ctx->pool) - m->regions;
    c->seconds += ampci_prof_now() - m->t0;
}

int ampc_ctx_profile_read(const ampc_ctx *ctx, ampc_profile_entry *out, int max) {
    static const char *const phases[AMPCI_PHASE_COUNT] = {"forward", "backward", "optimizer"};
    if (!ctx || !ctx->prof) return 0;
    const ampci_profile *p = ctx->prof;
    int n = 0, cells = p->n + (p->cells[AMPCI_PROF_CELLS].calls > 0);
    for (int i = 0; i < cells; i++) {
        const ampci_prof_cell *c = &p->cells[i < p->n ? i : AMPCI_PROF_CELLS];
        if (out && n < max)
            out[n] = (ampc_profile_entry){.kind = c->kind,
                                          .op = c->op,
                                          .phase = phases[c->phase],
                                          .calls = c->calls,
                                          .regions = c->regions,
                                          .seconds = c->seconds};
        n++;
    }
    return n;
}
