/* optim.c: the CPU device's optimizer operations (dev_optim.h). The update is one fused pass over chunks
 * of CHUNK elements of a parameter's owned range: read the gradient (any float dtype) as F32, update the
 * F32 weights (the master copy, the F32 parameter itself, or for a master-less 16-bit parameter a widened
 * copy) and the F32 state through the kernel table, then write the parameter back rounded to its dtype:
 * to nearest, or stochastically for BF16 parameters without masters when asked. Chunks are independent,
 * so they run on the context's threads with identical results. The unscale and sum-of-squares passes
 * take a whole list of gradients (dev_optim.h) and run the kernel table's unscale / sum of squares on its
 * pieces in one parallel loop: every piece is computed the same way whichever thread takes it, and the
 * sums of an entry's pieces are added in order afterwards, so no result depends on the thread count. */
#include "../device.h"
#include "../../numerics/numerics.h"

#include <string.h>

#define CHUNK 4096

/* dst[0..n) (BF16, elements b.. of the parameter) = w rounded up with probability (w - down) / (up - down):
 * the low 16 bits of w's F32 pattern against 16 random bits, as llm.c's stochastic_rounding. Non-finite
 * values round to nearest (NaN stays NaN). */
static void round_stochastic(uint16_t *dst, const float *w, int64_t n, int64_t b, const ampci_sr_args *sr) {
    uint32_t words[4];
    int64_t have = -1; /* the block in words */
    for (int64_t i = 0; i < n; i++) {
        int64_t e = b + i;
        if (e / 4 != have) ampc_rng_block(sr->seed, sr->stream, sr->base + (uint64_t)(e / 4), words), have = e / 4;
        uint32_t bits;
        memcpy(&bits, &w[i], sizeof bits);
        if ((bits & 0x7f800000u) == 0x7f800000u) {
            dst[i] = ampc_bf16_from_f32(w[i]);
            continue;
        }
        /* sign-magnitude: +1 on the upper half moves away from zero, which is "up" in magnitude */
        dst[i] = (uint16_t)((bits >> 16) + ((bits & 0xffffu) > (words[e % 4] & 0xffffu)));
    }
}

/* Elements [b, e) of one parameter's update, with the context's kernel table. */
typedef struct update_map {
    const struct ampc_kernels *k;
    const ampci_optim_update_args *a;
} update_map;

/* sb, e count from the owned range's start: element lo + sb of the parameter is element sb of its state. */
AMPCI_ROW_BODY(update_run, update_map, j, sb, e, chunk) {
    const ampci_optim_update_args *a = j->a;
    int64_t n = e - sb, b = a->lo + sb;
    size_t ps = ampc_dtype_size(a->param_dt), gs = ampc_dtype_size(a->grad_dt);
    unsigned char *pdata = a->param ? (unsigned char *)a->param + (size_t)b * ps : NULL;
    float gtmp[CHUNK], wtmp[CHUNK];
    const float *gf = gtmp;
    if (a->grad_dt == AMPC_DTYPE_F32) gf = (const float *)a->grad + b;
    else ampc_convert(gtmp, AMPC_DTYPE_F32, (const unsigned char *)a->grad + (size_t)b * gs, a->grad_dt, (size_t)n);
    float *w = a->master ? a->master + sb : a->param_dt == AMPC_DTYPE_F32 ? (float *)pdata : wtmp;
    if (w == wtmp) ampc_convert(wtmp, AMPC_DTYPE_F32, pdata, a->param_dt, (size_t)n); /* no master: widen */
    if (a->adam) j->k->adamw(w, gf, a->m + sb, a->v + sb, n, &a->adamw);
    else j->k->sgd(w, gf, a->m ? a->m + sb : NULL, n, &a->sgd);
    /* the parameter from its master (shard FULL: only while its storage is there; a forced master of an
     * F32 parameter is copied back by the all-gather after the step) */
    if (w == wtmp && a->sr.on) round_stochastic((uint16_t *)pdata, w, n, b, &a->sr);
    else if (a->param_dt != AMPC_DTYPE_F32 && pdata) ampc_convert(pdata, a->param_dt, w, AMPC_DTYPE_F32, (size_t)n);
}

ampc_status ampci_cpu_optim_update(ampc_ctx *ctx, const ampci_optim_update_args *a) {
    update_map j = {ctx->kernels, a};
    if (a->hi > a->lo) ampc_parallel_for(ctx, a->hi - a->lo, CHUNK, update_run, &j);
    return AMPC_OK;
}

/* The pieces of a gradient list: entry t's elements in pieces of AMPCI_GRAD_PIECE (the last shorter), piece
 * k of the whole list being piece k - first[t] of entry t. */
typedef struct pieces {
    const ampci_grad_list *l;
    int64_t *first; /* (count + 1) */
} pieces;

static ampc_status pieces_make(ampc_ctx *ctx, const ampci_grad_list *l, pieces *p, const char *what) {
    p->l = l;
    p->first = ampci_alloc(ctx, (size_t)(l->count + 1) * sizeof *p->first, what);
    if (!p->first) return AMPC_STATUS_OOM;
    p->first[0] = 0;
    for (int t = 0; t < l->count; t++) p->first[t + 1] = p->first[t] + ampc_parallel_chunks(l->n[t], AMPCI_GRAD_PIECE);
    return AMPC_OK;
}
static void pieces_free(ampc_ctx *ctx, pieces *p) {
    ampci_free(ctx, p->first, (size_t)(p->l->count + 1) * sizeof *p->first);
}

/* Piece k: its entry, and its first element and length within it. */
static int piece_at(const pieces *p, int64_t k, int64_t *b, int64_t *n) {
    int lo = 0, hi = p->l->count - 1; /* the last entry whose first piece is <= k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->first[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    *b = (k - p->first[lo]) * AMPCI_GRAD_PIECE;
    *n = p->l->n[lo] - *b < AMPCI_GRAD_PIECE ? p->l->n[lo] - *b : AMPCI_GRAD_PIECE;
    return lo;
}

typedef struct list_job {
    const struct ampc_kernels *k;
    pieces p;
    float factor;
    int32_t *flag;
    double *part; /* sum of squares: one per piece */
} list_job;

/* Pieces [kb, ke) of j's list: fn(j, k, entry, its first element's address, length, dtype) for each. */
typedef void piece_fn(list_job *j, int64_t k, int t, unsigned char *p, int64_t n, ampc_dtype dt);
static void each_piece(list_job *j, int64_t kb, int64_t ke, piece_fn *fn) {
    for (int64_t k = kb; k < ke; k++) {
        int64_t b, n;
        int t = piece_at(&j->p, k, &b, &n);
        ampc_dtype dt = j->p.l->dt[t];
        fn(j, k, t, (unsigned char *)j->p.l->g[t] + (size_t)b * ampc_dtype_size(dt), n, dt);
    }
}

static void unscale_one(list_job *j, int64_t k, int t, unsigned char *p, int64_t n, ampc_dtype dt) {
    (void)k;
    bool bad = j->k->unscale[dt](p, n, j->factor);
    if (bad && j->flag) __atomic_store_n(&j->flag[t], 1, __ATOMIC_RELAXED); /* pieces of one entry race to 1 */
}
static void sumsq_one(list_job *j, int64_t k, int t, unsigned char *p, int64_t n, ampc_dtype dt) {
    (void)t;
    j->part[k] = j->k->sumsq[dt](p, n);
}

static void unscale_pieces(void *arg, int64_t kb, int64_t ke, int64_t chunk) {
    (void)chunk;
    each_piece(arg, kb, ke, unscale_one);
}
static void sumsq_pieces(void *arg, int64_t kb, int64_t ke, int64_t chunk) {
    (void)chunk;
    each_piece(arg, kb, ke, sumsq_one);
}

ampc_status ampci_cpu_grad_unscale(ampc_ctx *ctx, const ampci_grad_unscale_args *a) {
    list_job j = {.k = ctx->kernels, .factor = a->factor, .flag = a->flag};
    if (a->flag) memset(a->flag, 0, (size_t)a->list.count * sizeof *a->flag);
    if (pieces_make(ctx, &a->list, &j.p, "gradient unscale pieces") != AMPC_OK) return AMPC_STATUS_OOM;
    ampc_parallel_for(ctx, j.p.first[a->list.count], 1, unscale_pieces, &j);
    pieces_free(ctx, &j.p);
    return AMPC_OK;
}

ampc_status ampci_cpu_grad_sumsq(ampc_ctx *ctx, const ampci_grad_sumsq_args *a) {
    list_job j = {.k = ctx->kernels};
    if (pieces_make(ctx, &a->list, &j.p, "gradient sum-of-squares pieces") != AMPC_OK) return AMPC_STATUS_OOM;
    int64_t np = j.p.first[a->list.count];
    j.part = ampci_alloc(ctx, (size_t)(np ? np : 1) * sizeof *j.part, "gradient sum-of-squares pieces");
    if (!j.part) {
        pieces_free(ctx, &j.p);
        return AMPC_STATUS_OOM;
    }
    ampc_parallel_for(ctx, np, 1, sumsq_pieces, &j);
    for (int t = 0; t < a->list.count; t++) { /* the pieces of each entry added in order */
        double s = 0;
        for (int64_t k = j.p.first[t]; k < j.p.first[t + 1]; k++) s = k == j.p.first[t] ? j.part[k] : s + j.part[k];
        a->out[t] = s;
    }
    ampci_free(ctx, j.part, (size_t)(np ? np : 1) * sizeof *j.part);
    pieces_free(ctx, &j.p);
    return AMPC_OK;
}
