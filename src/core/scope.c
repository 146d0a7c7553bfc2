/* scope.c: the module path ("blocks.3.attn") that model code pushes and pops around its modules, so
 * that anomaly reports, overflow messages and range statistics can say where a tensor was made. */
#include "core.h"

#include <stdio.h>
#include <string.h>

ampc_status ampc_scope_push(ampc_ctx *ctx, const char *name) {
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

void ampc_scope_pop(ampc_ctx *ctx) {
    if (ctx && ctx->scope_depth > 0) ctx->scope[ctx->scope_len[--ctx->scope_depth]] = '\0';
}

const char *ampc_scope_path(const ampc_ctx *ctx) { return ctx ? ctx->scope : ""; }
