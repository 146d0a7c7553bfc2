/* update.c: one optimizer update of one parameter (of the elements this process owns: all of them unless
 * sharded), fused in a single pass over chunks: read the
 * gradient (any float dtype) as F32, update the F32 weights (the master copy, the F32 parameter itself,
 * or for AMPC_MASTER_NONE a widened copy of the low-precision parameter) and the F32 state through the
 * kernel table, then write the parameter back rounded to its dtype: to nearest, or stochastically for
 * BF16 parameters without masters when asked. Chunks are independent, so they run on the context's
 * threads with identical results. */
#include "optim.h"

#include "../kernels/kernels.h"

#include <math.h>
#include <string.h>

#define CHUNK 4096
/* The Philox stream of stochastic rounding for parameter k: far from dropout's and the data's. */
#define SR_STREAM 0x5352000000000000ull

/* Stochastic rounding state of one parameter's update: element e of step t draws word e % 4 of Philox
 * block (seed, SR_STREAM + index, t * blocks + e / 4), blocks = ceil(n / 4). */
typedef struct sr_args {
    bool on;
    uint64_t seed, stream, base;
} sr_args;
/* Elements [b, e) of one parameter's update. */
typedef struct update_map {
    const struct ampc_kernels *k;
    ampci_param *pp;
    bool adam;
    ampci_sgd_args sgd;
    ampci_adamw_args adamw;
    sr_args sr;
} update_map;

/* dst[0..n) (BF16, elements b.. of the parameter) = w rounded up with probability (w - down) / (up - down):
 * the low 16 bits of w's F32 pattern against 16 random bits, as llm.c's stochastic_rounding. Non-finite
 * values round to nearest (NaN stays NaN). */
static void round_stochastic(uint16_t *dst, const float *w, int64_t n, int64_t b, const sr_args *sr) {
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

/* b, e count from the owned range's start: element lo + b of the parameter is element b of its state. */
AMPCI_ROW_BODY(update_run, update_map, j, sb, e, chunk) {
    ampci_param *pp = j->pp;
    ampc_tensor *p = pp->p, *g = p->grad;
    int64_t n = e - sb, b = pp->lo + sb;
    size_t ps = ampc_dtype_size(p->dtype), gs = ampc_dtype_size(g->dtype);
    unsigned char *pdata = !p->storage->absent ? (unsigned char *)ampc_tensor_data(p) + (size_t)b * ps : NULL;
    float gtmp[CHUNK], wtmp[CHUNK];
    const float *gf = gtmp;
    if (g->dtype == AMPC_DTYPE_F32) gf = (const float *)ampc_tensor_data(g) + b;
    else
        ampc_convert(gtmp, AMPC_DTYPE_F32, (const unsigned char *)ampc_tensor_data(g) + (size_t)b * gs, g->dtype,
                     (size_t)n);
    float *w = pp->master ? pp->master + sb : p->dtype == AMPC_DTYPE_F32 ? (float *)pdata : wtmp;
    if (w == wtmp) ampc_convert(wtmp, AMPC_DTYPE_F32, pdata, p->dtype, (size_t)n); /* no master: widen */
    if (j->adam) j->k->adamw(w, gf, pp->m + sb, pp->v + sb, n, &j->adamw);
    else j->k->sgd(w, gf, pp->m ? pp->m + sb : NULL, n, &j->sgd);
    /* the parameter from its master (shard FULL: only while its storage is there; a forced master of an
     * F32 parameter is copied back by the all-gather after the step) */
    if (w == wtmp && j->sr.on) round_stochastic((uint16_t *)pdata, w, n, b, &j->sr);
    else if (p->dtype != AMPC_DTYPE_F32 && pdata) ampc_convert(pdata, p->dtype, w, AMPC_DTYPE_F32, (size_t)n);
}

ampc_status ampci_optim_update(ampc_optim *opt, ampci_param *pp) {
    const ampci_group *gr = &opt->groups[pp->group];
    const ampc_optim_params *c = &opt->cfg;
    double lr = opt->lr * gr->lr_scale, wd = gr->no_weight_decay ? 0.0 : c->weight_decay;
    ampc_tensor *g = pp->p->grad;
    if (g->ndim != pp->p->ndim || ampc_tensor_numel(g) != pp->n || !ampc_tensor_is_contiguous(g)) {
        char a[128], b[128];
        return ampci_fail(AMPC_STATUS_SHAPE, "ampc_optim_step: gradient %s does not match parameter %s '%s'",
                          ampc_tensor_describe(g, a, sizeof a), ampc_tensor_describe(pp->p, b, sizeof b), pp->p->name);
    }
    update_map j = {.k = opt->ctx->kernels, .pp = pp, .adam = c->kind == AMPC_OPTIM_ADAMW};
    bool first = pp->steps == 0;
    int64_t t = ++pp->steps;
    if (j.adam) {
        double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
        j.adamw = (ampci_adamw_args){(float)(1.0 - lr * wd), (float)c->beta1,   (float)c->beta2,
                                     (float)c->eps,          (float)(lr / bc1), (float)sqrt(bc2)};
    } else {
        j.sgd = (ampci_sgd_args){(float)lr, (float)wd, (float)c->momentum, (float)c->dampening, c->nesterov, first};
    }
    if (c->stochastic_rounding && pp->p->dtype == AMPC_DTYPE_BF16 && !pp->master)
        j.sr = (sr_args){true, ampc_ctx_rng(opt->ctx)->seed, SR_STREAM + (uint64_t)(pp - opt->params),
                         (uint64_t)(t - 1) * (uint64_t)((pp->n + 3) / 4)};
    if (pp->hi > pp->lo) ampc_parallel_for(opt->ctx, pp->hi - pp->lo, CHUNK, update_run, &j);
    pp->p->storage->version++; /* an in-place write: saved-tensor checks and the cast cache see it */
    return AMPC_OK;
}
