/* anomaly.c: the diagnostics side of AMP: finiteness checks on bit patterns (so they survive any
 * compiler flags), anomaly mode (every op output and every gradient checked, failing at the first
 * non-finite value with the op, the tensors' names, the scope path and the step), and the scope path
 * itself ("blocks.3.attn") that modules push and pop. */
#include "amp.h"

#include "../numerics/half.h"

#include <stdio.h>
#include <string.h>

int64_t ampci_first_nonfinite(const ampc_tensor *t) {
    int64_t n = ampci_numel(t);
    const unsigned char *p = ampci_tensor_ptr(t);
    switch (t->dtype) {
    case AMPC_DTYPE_F32:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint32_t *)p)[i] & 0x7f800000u) == 0x7f800000u) return i;
        return -1;
    case AMPC_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint16_t *)p)[i] & 0x7c00u) == 0x7c00u) return i;
        return -1;
    case AMPC_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint16_t *)p)[i] & 0x7f80u) == 0x7f80u) return i;
        return -1;
    case AMPC_DTYPE_F64:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint64_t *)p)[i] & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return i;
        return -1;
    default: return -1;   /* integers are always finite */
    }
}

bool ampc_all_finite(const ampc_tensor *t) {
    if (!t) return false;
    if (ampc_tensor_is_contiguous(t)) return ampci_first_nonfinite(t) < 0;
    ampc_tensor *c = ampci_copy_as("ampc_all_finite", t, t->dtype);
    return c && ampci_first_nonfinite(c) < 0;
}

/* "nan" or "inf" for element i of contiguous t. */
static const char *what_at(const ampc_tensor *t, int64_t i) {
    double v;
    ampc_convert(&v, AMPC_DTYPE_F64, ampci_tensor_ptr(t) + (size_t)i * ampc_dtype_size(t->dtype), t->dtype, 1);
    return v != v ? "nan" : v > 0 ? "+inf" : "-inf";
}

/* "x 'fc.weight' [4, 8] BF16" */
static void name_tensor(const ampc_tensor *t, char *buf, size_t size) {
    char d[96];
    ampc_tensor_describe(t, d, sizeof d);
    if (t->name[0]) snprintf(buf, size, "'%s' %s", t->name, d);
    else snprintf(buf, size, "%s", d);
}

bool ampci_check_output(ampc_ctx *ctx, const ampc_tensor *t) {
    if (!ctx->check_finite || !t) return true;
    int64_t bad = ampci_first_nonfinite(t);
    if (bad < 0) return true;
    char out[192], ins[640] = "";
    name_tensor(t, out, sizeof out);
    size_t len = 0;
    for (int i = 0; i < ctx->cur_nin && len < sizeof ins; i++) {
        char b[192] = "none";
        if (ctx->cur_in[i]) name_tensor(ctx->cur_in[i], b, sizeof b);
        len += (size_t)snprintf(ins + len, sizeof ins - len, "%s%s", i ? ", " : "", b);
    }
    ampci_fail(AMPC_STATUS_STATE, "anomaly: ampc_%s produced %s at element %lld of its output %s (step %llu, scope '%s'); "
               "inputs: %s", ctx->cur_op ? ctx->cur_op : "?", what_at(t, bad), (long long)bad, out,
               (unsigned long long)ctx->step_id, ctx->scope, ins);
    return false;
}

bool ampci_check_grad(ampc_ctx *ctx, const char *op, const ampc_tensor *input, const ampc_tensor *g) {
    if (!ctx->check_finite) return true;
    int64_t bad = ampci_first_nonfinite(g);
    if (bad < 0) return true;
    char in[192];
    name_tensor(input, in, sizeof in);
    ampci_fail(AMPC_STATUS_STATE, "anomaly: the backward of %s produced %s at element %lld of the gradient for %s "
               "(step %llu)", op, what_at(g, bad), (long long)bad, in, (unsigned long long)ctx->step_id);
    return false;
}

void ampc_ctx_set_check_finite(ampc_ctx *ctx, bool on) {
    if (ctx) ctx->check_finite = on;
}

uint64_t ampc_ctx_step(const ampc_ctx *ctx) { return ctx ? ctx->step_id - 1 : 0; }

/* ---- scope path ---- */

ampc_status ampc_scope_push(ampc_ctx *ctx, const char *name) {
    if (!ctx || !name) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_scope_push: ctx and name must not be NULL");
    size_t len = strlen(ctx->scope), add = strlen(name) + (len ? 1 : 0);
    int max_depth = (int)(sizeof ctx->scope_len / sizeof ctx->scope_len[0]);
    if (ctx->scope_depth == max_depth || len + add >= sizeof ctx->scope)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_scope_push: scope '%s' + '%s' is deeper than %d levels or "
                          "longer than %zu characters", ctx->scope, name, max_depth, sizeof ctx->scope - 1);
    ctx->scope_len[ctx->scope_depth++] = (int)len;
    snprintf(ctx->scope + len, sizeof ctx->scope - len, "%s%s", len ? "." : "", name);
    return AMPC_OK;
}

void ampc_scope_pop(ampc_ctx *ctx) {
    if (ctx && ctx->scope_depth > 0) ctx->scope[ctx->scope_len[--ctx->scope_depth]] = '\0';
}

const char *ampc_scope_path(const ampc_ctx *ctx) { return ctx ? ctx->scope : ""; }
