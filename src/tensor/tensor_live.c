/* tensor_live.c: stale tensor handles. An arena tensor (an op output, a view, ampc_tensor_from_buffer's
 * tensor) lives until ampc_ctx_step_end, and a handle kept past it used to read whatever the arena held
 * next: a tensor of another step, with its shape, silently. Arena tensor headers therefore come from a
 * pool of their own in two halves, one per step in turn: at a step end every header of the ending step is
 * marked released (with the step's number) and the other half is reused, so a handle from the step just
 * ended still shows its mark when it is used in the next one, and the public entry points that read a
 * tensor refuse it, saying when it was released. (A header is reused two step ends after its release: a
 * handle kept longer may name a tensor of that later step.) Freed owned tensors are marked the same way,
 * the header kept (marked) until 64 more owned tensors have been freed. */
#include "tensor.h"

#include <string.h>

#define CHUNK 256  /* headers per allocation */
#define RETIRED 64 /* freed owned headers kept (marked) before their memory goes back */

typedef struct half {
    ampc_tensor **chunks;
    int64_t nchunks, cap, used;
} half;

struct ampci_headers {
    half h[2];
    int cur;
    ampc_tensor *retired[RETIRED]; /* a ring of freed owned headers, oldest at `next` */
    int next;
};

/* One more chunk of headers for f (the chunk list grows by doubling); false on OOM (error recorded). */
static bool grow(ampc_ctx *ctx, half *f, const char *fn) {
    if (f->nchunks == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 16;
        ampc_tensor **g = ampci_alloc(ctx, (size_t)cap * sizeof *g, fn);
        if (!g) return false;
        if (f->nchunks) memcpy(g, f->chunks, (size_t)f->nchunks * sizeof *g);
        ampci_free(ctx, f->chunks, (size_t)f->cap * sizeof *g);
        f->chunks = g, f->cap = cap;
    }
    ampc_tensor *chunk = ampci_alloc(ctx, CHUNK * sizeof *chunk, fn);
    if (!chunk) return false;
    f->chunks[f->nchunks++] = chunk;
    return true;
}

static struct ampci_headers *pool(ampc_ctx *ctx, const char *fn) {
    struct ampci_headers *p = ctx->headers; /* all of it through the context's allocator */
    if (!p && (p = ctx->headers = ampci_alloc(ctx, sizeof *p, fn))) {
        memset(p, 0, sizeof *p);
        for (int k = 0; k < 2; k++) /* both halves at once: the second step allocates nothing new either */
            if (!grow(ctx, &p->h[k], fn)) return NULL;
    }
    return p;
}

ampc_tensor *ampci_tensor_header(ampc_ctx *ctx, const char *fn) {
    struct ampci_headers *p = pool(ctx, fn);
    if (!p) return NULL;
    half *f = &p->h[p->cur];
    int64_t c = f->used / CHUNK;
    if (c == f->nchunks && !grow(ctx, f, fn)) return NULL;
    return &f->chunks[c][f->used++ % CHUNK];
}

void ampci_tensor_step_end(ampc_ctx *ctx) {
    struct ampci_headers *p = ctx->headers;
    if (!p) return;
    half *f = &p->h[p->cur];
    for (int64_t i = 0; i < f->used; i++) {
        ampc_tensor *t = &f->chunks[i / CHUNK][i % CHUNK];
        t->live = 0;
        t->released_step = ctx->step_id;
    }
    p->cur ^= 1;
    p->h[p->cur].used = 0; /* released two step ends ago */
}

void ampci_tensor_retire(ampc_ctx *ctx, ampc_tensor *t) {
    struct ampci_headers *p = ctx->headers;
    if (!p) { /* no pool (none made yet, or the context is being freed): the memory goes back at once */
        ampci_free(ctx, t, sizeof *t);
        return;
    }
    ampci_free(ctx, p->retired[p->next], sizeof *t); /* the oldest (NULL: none yet) */
    p->retired[p->next] = t;
    p->next = (p->next + 1) % RETIRED;
}

void ampci_tensor_headers_free(ampc_ctx *ctx) {
    struct ampci_headers *p = ctx->headers;
    if (!p) return;
    for (int i = 0; i < RETIRED; i++) ampci_free(ctx, p->retired[i], sizeof(ampc_tensor));
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < p->h[k].nchunks; i++) ampci_free(ctx, p->h[k].chunks[i], CHUNK * sizeof(ampc_tensor));
        ampci_free(ctx, p->h[k].chunks, (size_t)p->h[k].cap * sizeof(ampc_tensor *));
    }
    ctx->headers = NULL;
    ampci_free(ctx, p, sizeof *p);
}

ampc_status ampci_tensor_usable(const char *fn, const char *what, const ampc_tensor *t) {
    if (!t) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s is NULL", fn, what);
    if (t->live == AMPCI_TENSOR_LIVE) return AMPC_OK;
    if (t->released_step == AMPCI_TENSOR_FREED)
        return ampci_fail(AMPC_STATUS_STATE, "%s: %s is a tensor freed by ampc_tensor_free", fn, what);
    return ampci_fail(AMPC_STATUS_STATE,
                      "%s: %s was released by ampc_ctx_step_end at the end of step %llu: op outputs, views and "
                      "ampc_tensor_from_buffer tensors live until the step end; make it again each step, or keep "
                      "it across steps with ampc_tensor_new",
                      fn, what, (unsigned long long)t->released_step);
}
