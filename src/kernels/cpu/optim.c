/* optim.c: the CPU device's optimizer operations (dev_optim.h). The update is one fused pass over chunks
 * of CHUNK elements of a parameter's owned range: read the gradient (any float dtype) as F32, update the
 * F32 weights (the master copy, the F32 parameter itself, or for a master-less 16-bit parameter a widened
 * copy) and the F32 state through the kernel table, then write the parameter back rounded to its dtype:
 * to nearest, or stochastically for BF16 parameters without masters when asked. Chunks are independent,
 * so they run on the context's threads with identical results. The unscale and sum-of-squares passes
 * are the kernel table's, one call per gradient, their flag or sum written to the caller's device array. */
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

ampc_status ampci_cpu_grad_unscale(ampc_ctx *ctx, const ampci_grad_unscale_args *a) {
    bool bad = ctx->kernels->unscale[a->dt](a->g, a->n, a->factor);
    if (a->flag) a->flag[0] = bad;
    return AMPC_OK;
}

ampc_status ampci_cpu_grad_sumsq(ampc_ctx *ctx, const ampci_grad_sumsq_args *a) {
    a->out[0] = ctx->kernels->sumsq[a->dt](a->g, a->n);
    return AMPC_OK;
}
