/* anomaly.c: anomaly mode, torch.autograd.detect_anomaly's job: when on, every op output (forward) and
 * every gradient handed to an input (backward) is checked on its bit patterns, and the first non-finite
 * value fails the op with its name, the element, the tensors' names, the module path and the step. */
#include "autograd.h"

#include <stdio.h>
#include <string.h>

/* "nan" or "inf" for element i of contiguous t (read to the host: part of the anomaly check's sync). */
static const char *what_at(const ampc_tensor *t, int64_t i) {
    size_t es = ampc_dtype_size(t->dtype);
    unsigned char bits[8];
    double v;
    ampci_dev_copy_out(t->ctx, bits, ampci_dev_ptr(t) + (size_t)i * es, es);
    ampc_convert(&v, AMPC_DTYPE_F64, bits, t->dtype, 1);
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
    int64_t bad = ampci_tensor_first_nonfinite(t, AMPC_SYNC_ANOMALY);
    if (bad < 0) return true;
    char out[192], ins[640] = "";
    name_tensor(t, out, sizeof out);
    size_t len = 0;
    for (int i = 0; i < ctx->cur_nin && len < sizeof ins; i++) {
        char b[192] = "none";
        if (ctx->cur_in[i]) name_tensor(ctx->cur_in[i], b, sizeof b);
        len += (size_t)snprintf(ins + len, sizeof ins - len, "%s%s", i ? ", " : "", b);
    }
    ampci_fail(AMPC_STATUS_STATE,
               "anomaly: ampc_%s produced %s at element %lld of its output %s (step %llu, scope '%s'); "
               "inputs: %s (range statistics, ampc_stats_attach or `ampc doctor`, show which tensors leave a "
               "format's range)",
               ctx->cur_op ? ctx->cur_op : "?", what_at(t, bad), (long long)bad, out, (unsigned long long)ctx->step_id,
               ctx->scope, ins);
    return false;
}

bool ampci_check_grad(ampc_ctx *ctx, const char *op, const ampc_tensor *input, const ampc_tensor *g) {
    if (!ctx->check_finite) return true;
    int64_t bad = ampci_tensor_first_nonfinite(g, AMPC_SYNC_ANOMALY);
    if (bad < 0) return true;
    char in[192];
    name_tensor(input, in, sizeof in);
    ampci_fail(AMPC_STATUS_STATE,
               "anomaly: the backward of %s produced %s at element %lld of the gradient for %s "
               "(step %llu; range statistics, ampc_stats_attach or `ampc doctor`, show which tensors leave a "
               "format's range)",
               op, what_at(g, bad), (long long)bad, in, (unsigned long long)ctx->step_id);
    return false;
}

void ampc_autograd_set_detect_anomaly(ampc_ctx *ctx, bool on) {
    if (ctx) ctx->check_finite = on;
}

bool ampc_autograd_detect_anomaly(const ampc_ctx *ctx) { return ctx && ctx->check_finite; }

void ampci_anomaly_op(ampc_ctx *ctx, const char *op, const ampc_tensor *const *in, int n) {
    ctx->cur_op = op;
    ctx->cur_nin = n < 4 ? n : 4;
    for (int i = 0; i < ctx->cur_nin; i++) ctx->cur_in[i] = in[i];
}
