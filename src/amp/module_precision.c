/* module_precision.c: per-module precision. Rules map globs over module paths to a compute dtype; the
 * public ampc_scope_push opens the rule's region (an FP32 island, or an autocast region of BF16/F16) when
 * model code enters a matching module, and ampc_scope_pop closes it, so every model that names its
 * modules with scopes gets per-module precision without code of its own. A rule applies to the matching
 * module and everything inside it; a nested module whose own path matches another rule opens that one. */
#include "amp.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Which rule applies at the path just pushed: of the rules matching it and the one in effect around it,
 * the last added. So with "blocks.*=bf16,blocks.*.attn=fp32" the whole attention module is FP32 (its
 * qkv matches only the earlier rule), and with the two swapped the later bf16 rule wins everywhere. */
static int rule_for(const ampci_module_rules *m, const char *path, int parent) {
    for (int i = m->n - 1; i > parent; i--)
        if (fnmatch(m->rule[i].pattern, path, 0) == 0) return i;
    return parent;
}

ampc_status ampc_scope_push(ampc_ctx *ctx, const char *name) {
    ampc_status s = ampci_scope_push(ctx, name);
    const ampci_module_rules *peek = ampci_module_rules_peek(ctx);
    if (s != AMPC_OK || !peek || peek->n == 0) return s;
    ampci_module_rules *m = ampci_module_rules_of(ctx);
    int d = ctx->scope_depth; /* 1.. after the push */
    int parent = d > 1 ? m->in_effect[d - 1] : -1;
    int r = rule_for(m, ctx->scope, parent);
    m->in_effect[d] = r;
    m->opened[d] = false;
    if (r < 0 || r == parent) return AMPC_OK; /* none, or the region the parent opened goes on */
    s = ampci_autocast_push(ctx, m->rule[r].dtype);
    if (s != AMPC_OK) {
        ampci_scope_pop(ctx);
        return s;
    }
    m->opened[d] = true;
    return AMPC_OK;
}

void ampc_scope_pop(ampc_ctx *ctx) {
    if (!ctx || ctx->scope_depth == 0) return;
    const ampci_module_rules *peek = ampci_module_rules_peek(ctx);
    int d = ctx->scope_depth;
    if (peek && peek->n > 0 && peek->opened[d]) {
        ampci_module_rules_of(ctx)->opened[d] = false;
        ampc_autocast_end(ctx);
    }
    ampci_scope_pop(ctx);
}

/* ---- the rules ---- */

static const char *dtype_spelling(ampc_dtype dt) {
    return dt == AMPC_DTYPE_F32 ? "fp32" : dt == AMPC_DTYPE_BF16 ? "bf16" : "fp16";
}

ampc_status ampc_module_precision_add(ampc_ctx *ctx, const char *pattern, ampc_dtype dtype) {
    static const char fn[] = "ampc_module_precision_add";
    if (!ctx || !pattern) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and pattern must not be NULL", fn);
    if (dtype != AMPC_DTYPE_F32 && dtype != AMPC_DTYPE_BF16 && dtype != AMPC_DTYPE_F16)
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: '%s' = %s; a module runs in F32, BF16 or F16", fn, pattern,
                          ampc_dtype_name(dtype));
    size_t len = strlen(pattern);
    bool blank = false; /* spaces and control characters */
    for (const char *c = pattern; *c; c++) blank |= (unsigned char)*c <= 0x20 || *c == 0x7f;
    if (len == 0 || blank || strpbrk(pattern, ",="))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: module glob '%s' must be non-empty, without spaces, ',' or '=' (e.g. 'blocks.*.attn')",
                          fn, pattern);
    ampci_module_rules *m = ampci_module_rules_of(ctx);
    if (!m) return AMPC_STATUS_OOM;
    if (len >= sizeof m->rule[0].pattern)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: module glob '%s' is longer than %zu characters", fn, pattern,
                          sizeof m->rule[0].pattern - 1);
    if (m->n == AMPCI_MAX_MODULE_RULES)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: more than %d module rules", fn, AMPCI_MAX_MODULE_RULES);
    if (ctx->scope_depth > 0)
        return ampci_fail(AMPC_STATUS_STATE, "%s: called inside module '%s'; set rules between forward passes", fn,
                          ctx->scope);
    memcpy(m->rule[m->n].pattern, pattern, len + 1);
    m->rule[m->n++].dtype = dtype;
    return AMPC_OK;
}

/* One "GLOB=DTYPE" of a spec: false (error recorded) when malformed. */
static bool parse_rule(const char *fn, const char *rule, size_t len, char *glob, size_t gsize, ampc_dtype *dt) {
    const char *eq = memchr(rule, '=', len);
    char dname[32];
    size_t glen = eq ? (size_t)(eq - rule) : 0, dlen = eq ? len - glen - 1 : 0;
    if (glen >= gsize) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: rule '%.*s': the glob is longer than %zu characters", fn, (int)len,
                   rule, gsize - 1);
        return false;
    }
    if (!eq || glen == 0 || dlen == 0 || dlen >= sizeof dname) {
        ampci_fail(AMPC_STATUS_INVALID_ARG,
                   "%s: rule '%.*s' is not GLOB=DTYPE (e.g. 'blocks.*.attn=bf16,lm_head=fp32'; dtype fp32, bf16 "
                   "or fp16)",
                   fn, (int)len, rule);
        return false;
    }
    memcpy(glob, rule, glen), glob[glen] = '\0';
    memcpy(dname, eq + 1, dlen), dname[dlen] = '\0';
    if (ampc_dtype_parse(dname, dt) != AMPC_OK ||
        (*dt != AMPC_DTYPE_F32 && *dt != AMPC_DTYPE_BF16 && *dt != AMPC_DTYPE_F16)) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: rule '%.*s': dtype '%s'; expected fp32, bf16 or fp16", fn, (int)len,
                   rule, dname);
        return false;
    }
    return true;
}

ampc_status ampc_module_precision_parse(ampc_ctx *ctx, const char *spec) {
    static const char fn[] = "ampc_module_precision_parse";
    if (!ctx || !spec) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and spec must not be NULL", fn);
    ampci_module_rules *m = ampci_module_rules_of(ctx);
    if (!m) return AMPC_STATUS_OOM;
    int before = m->n;
    ampc_status s = AMPC_OK;
    for (const char *p = spec; s == AMPC_OK;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char glob[128];
        ampc_dtype dt;
        s = parse_rule(fn, p, len, glob, sizeof glob, &dt) ? ampc_module_precision_add(ctx, glob, dt)
                                                           : AMPC_STATUS_INVALID_ARG;
        if (!comma) break;
        p = comma + 1;
    }
    if (s != AMPC_OK) m->n = before; /* all or none */
    return s;
}

void ampc_module_precision_clear(ampc_ctx *ctx) {
    const ampci_module_rules *peek = ampci_module_rules_peek(ctx);
    if (peek && ctx->scope_depth == 0) ampci_module_rules_of(ctx)->n = 0;
}

int ampc_module_precision_count(const ampc_ctx *ctx) {
    const ampci_module_rules *m = ampci_module_rules_peek(ctx);
    return m ? m->n : 0;
}

ampc_status ampc_module_precision_rule(const ampc_ctx *ctx, int i, const char **pattern, ampc_dtype *dtype) {
    const ampci_module_rules *m = ampci_module_rules_peek(ctx);
    if (!m || i < 0 || i >= m->n || !pattern || !dtype)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_module_precision_rule: rule %d of %d (or a NULL argument)", i,
                          m ? m->n : 0);
    *pattern = m->rule[i].pattern, *dtype = m->rule[i].dtype;
    return AMPC_OK;
}

size_t ampc_module_precision_string(const ampc_ctx *ctx, char *buf, size_t size) {
    const ampci_module_rules *m = ampci_module_rules_peek(ctx);
    size_t len = 0;
    if (buf && size) buf[0] = '\0';
    for (int i = 0; m && i < m->n; i++) {
        int k = snprintf(buf && len < size ? buf + len : NULL, buf && len < size ? size - len : 0, "%s%s=%s",
                         i ? "," : "", m->rule[i].pattern, dtype_spelling(m->rule[i].dtype));
        len += (size_t)k;
    }
    return len;
}
