/* scope.c: the module path ("blocks.3.attn") that model code pushes and pops around its modules, so
 * that anomaly reports, overflow messages and range statistics can say where a tensor was made. The
 * public push and pop (src/amp/module_precision.c) add the module-precision regions around these. */
#include "core.h"

#include <stdio.h>
#include <string.h>

ampc_status ampci_scope_push(ampc_ctx *ctx, const char *name) {
    if (!ctx || !name) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_scope_push: ctx and name must not be NULL");
    size_t len = strlen(ctx->scope), add = strlen(name) + (len ? 1 : 0);
    int max_depth = (int)(sizeof ctx->scope_len / sizeof ctx->scope_len[0]);
    if (ctx->scope_depth == max_depth || len + add >= sizeof ctx->scope)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_scope_push: scope '%s' + '%s' is deeper than %d levels or "
                          "longer than %zu characters",
                          ctx->scope, name, max_depth, sizeof ctx->scope - 1);
    ctx->scope_len[ctx->scope_depth++] = (int)len;
    snprintf(ctx->scope + len, sizeof ctx->scope - len, "%s%s", len ? "." : "", name);
    return AMPC_OK;
}

void ampci_scope_pop(ampc_ctx *ctx) {
    if (ctx && ctx->scope_depth > 0) ctx->scope[ctx->scope_len[--ctx->scope_depth]] = '\0';
}

const char *ampc_scope_path(const ampc_ctx *ctx) { return ctx ? ctx->scope : ""; }

size_t ampc_scope_pattern(const char *path, const char *number, char *out, size_t size) {
    size_t o = 0, nlen = strlen(number);
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ".");
        bool digits = len > 0 && strspn(p, "0123456789") >= len;
        const char *piece = digits ? number : p;
        size_t plen = digits ? nlen : len;
        for (size_t i = 0; i < plen; i++, o++)
            if (o + 1 < size) out[o] = piece[i];
        p += len;
        if (*p == '.') {
            if (o + 1 < size) out[o] = '.';
            o++, p++;
        }
    }
    if (size) out[o < size ? o : size - 1] = '\0';
    return o;
}
