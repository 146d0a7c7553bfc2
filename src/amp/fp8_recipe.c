/* fp8_recipe.c: FP8 scaling recipes as reference functions: TransformerEngine's scale rule
 * (transformer_engine/pytorch/fp8.py, _default_sf_compute: exp = floor(log2(fp8_max / amax)) - margin,
 * scale = 2^exp, the previous scale kept for an amax that is 0 or not finite), current scaling, and one
 * delayed-scaling step (_default_get_amax_and_update_history: the amax from the history, then
 * torch.roll(history, -1) with row 0 zeroed). The state belongs to the caller, so an accelerator's
 * implementation can be checked against these step by step. */
#include "amp.h"

#include <math.h>

double ampc_fp8_scale_rule(double amax, double fp8_max, int margin, double previous) {
    if (!(amax > 0) || !isfinite(amax) || !(fp8_max > 0)) return previous;
    return ldexp(1.0, (int)floor(log2(fp8_max / amax)) - margin);
}

double ampc_fp8_current_scale(double amax, double fp8_max, int margin) {
    return ampc_fp8_scale_rule(amax, fp8_max, margin, 1.0);
}

ampc_status ampc_fp8_delayed_update(float *history, int len, ampc_fp8_amax_compute compute, double fp8_max, int margin,
                                    float *scale, float *amax_out) {
    static const char fn[] = "ampc_fp8_delayed_update";
    if (!history || !scale || len < 1)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: history and scale must not be NULL, len >= 1 (len %d)", fn,
                          len);
    if ((unsigned)compute > AMPC_FP8_AMAX_MOST_RECENT || !(fp8_max > 0))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: compute %d (MAX or MOST_RECENT), fp8_max %g (> 0)", fn,
                          (int)compute, fp8_max);
    float amax = history[0];
    for (int i = 1; compute == AMPC_FP8_AMAX_MAX && i < len; i++) /* torch.max: a NaN anywhere wins */
        if (history[i] > amax || history[i] != history[i]) amax = history[i];
    *scale = (float)ampc_fp8_scale_rule(amax, fp8_max, margin, *scale);
    if (amax_out) *amax_out = amax;
    float first = history[0];
    for (int i = 0; i + 1 < len; i++) history[i] = history[i + 1];
    history[len - 1] = first;
    history[0] = 0.0f;
    return AMPC_OK;
}
