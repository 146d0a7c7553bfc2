/* autocast.c: autocast regions, per-op cast policies and the weight-cast cache's memory (PyTorch's
 * autocast semantics). A region stack per context holds (enabled, dtype, cache_enabled). For every op
 * call, ampci_autocast_plan answers which dtype each input must have, as the op's policy says; eligible
 * inputs are F32/F16/BF16, never F64 or integers. The op layer does the casting (through the
 * differentiable cast, so gradients flow back in each source's dtype) and keeps F32 leaf parameters cast
 * to the region dtype here, per outermost region, keyed by (tensor, dtype, version counter, grad mode):
 * a weight used many times is cast once and an in-place update inside a region is never served stale. */
#include "amp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 32

typedef struct region {
    bool enabled, cache;
    ampc_dtype dtype;
} region;

typedef struct cache_entry {
    const ampc_tensor *src;
    ampc_dtype dtype;
    uint64_t version;
    bool with_grad;
    ampc_tensor *cast;
} cache_entry;

struct ampci_autocast {
    region stack[MAX_DEPTH];
    int depth;
    ampc_cast_policy policy[AMPCI_OP_COUNT];
    cache_entry *cache;
    size_t ncache, cap;
    uint64_t casts, hits;
    ampci_module_rules mods;
    bool warned_step_end; /* a step end inside an open region was reported (once per context) */
};

static const char *const op_names[AMPCI_OP_COUNT] = {
    "linear",        "matmul",     "bmm", "conv2d", "attention", "softmax", "log_softmax", "layer_norm",
    "cross_entropy", "mse_loss",   "exp", "log",    "sqrt",      "tanh",    "sigmoid",     "relu",
    "gelu",          "neg",        "add", "sub",    "mul",       "div",     "add_scalar",  "sub_scalar",
    "mul_scalar",    "div_scalar", "sum", "mean",   "embedding", "dropout", "max_pool2d",  "positional_encoding",
    "concat"};

static const char *const policy_names[AMPC_CAST_COUNT] = {"none", "lower", "fp32", "fp32_output", "promote", "banned"};

const char *ampc_autocast_op_name(int i) { return i >= 0 && i < AMPCI_OP_COUNT ? op_names[i] : NULL; }
const char *ampci_op_name(ampci_op op) { return op_names[op]; }
const char *ampc_cast_policy_name(ampc_cast_policy p) { return (unsigned)p < AMPC_CAST_COUNT ? policy_names[p] : "?"; }

/* ---- the built-in tables ---- */

static void table_fill(ampc_cast_policy *pol, ampc_autocast_table table) {
    static const ampci_op gemm[] = {AMPCI_OP_LINEAR, AMPCI_OP_MATMUL, AMPCI_OP_BMM, AMPCI_OP_CONV2D,
                                    AMPCI_OP_ATTENTION};
    for (int i = 0; i < AMPCI_OP_COUNT; i++) pol[i] = AMPC_CAST_NONE;
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++) pol[gemm[i]] = AMPC_CAST_LOWER;
    switch (table) {
    case AMPC_AUTOCAST_TABLE_TUTORIAL: {
        /* the tutorials' advice: precision-sensitive ops stay FP32, sums of mixed inputs promote */
        static const ampci_op fp32[] = {AMPCI_OP_SOFTMAX,    AMPCI_OP_LOG_SOFTMAX,
                                        AMPCI_OP_LAYER_NORM, AMPCI_OP_CROSS_ENTROPY,
                                        AMPCI_OP_MSE_LOSS,   AMPCI_OP_EXP,
                                        AMPCI_OP_LOG,        AMPCI_OP_SUM,
                                        AMPCI_OP_MEAN,       AMPCI_OP_POSITIONAL_ENCODING};
        for (size_t i = 0; i < sizeof fp32 / sizeof fp32[0]; i++) pol[fp32[i]] = AMPC_CAST_FP32;
        pol[AMPCI_OP_ADD] = pol[AMPCI_OP_CONCAT] = AMPC_CAST_PROMOTE;
        break;
    }
    case AMPC_AUTOCAST_TABLE_PYTORCH_CPU:
        /* aten/src/ATen/autocast_mode.cpp, AutocastCPU: losses fp32, cat promote; softmax, layer_norm and
         * sum are not listed, so they run in their input's dtype on CPU */
        pol[AMPCI_OP_CROSS_ENTROPY] = pol[AMPCI_OP_MSE_LOSS] = AMPC_CAST_FP32;
        pol[AMPCI_OP_CONCAT] = AMPC_CAST_PROMOTE;
        break;
    case AMPC_AUTOCAST_TABLE_PYTORCH_CUDA:
        /* the CUDA lists: exp, log, layer_norm, mse_loss fp32; softmax, log_softmax, sum set the output dtype
         * to fp32; cross_entropy = log_softmax (fp32 output) + nll_loss (fp32) */
        pol[AMPCI_OP_EXP] = pol[AMPCI_OP_LOG] = pol[AMPCI_OP_LAYER_NORM] = AMPC_CAST_FP32;
        pol[AMPCI_OP_MSE_LOSS] = pol[AMPCI_OP_CROSS_ENTROPY] = AMPC_CAST_FP32;
        pol[AMPCI_OP_SOFTMAX] = pol[AMPCI_OP_LOG_SOFTMAX] = pol[AMPCI_OP_SUM] = AMPC_CAST_FP32_OUTPUT;
        break;
    default: break;
    }
}

static struct ampci_autocast *state(ampc_ctx *ctx) {
    if (!ctx->autocast) {
        ctx->autocast = calloc(1, sizeof *ctx->autocast);
        if (!ctx->autocast) {
            ampci_fail(AMPC_STATUS_OOM, "autocast: out of memory for the region state");
            return NULL;
        }
        table_fill(ctx->autocast->policy, AMPC_AUTOCAST_TABLE_TUTORIAL);
    }
    return ctx->autocast;
}

ampci_module_rules *ampci_module_rules_of(ampc_ctx *ctx) {
    struct ampci_autocast *ac = state(ctx);
    return ac ? &ac->mods : NULL;
}

const ampci_module_rules *ampci_module_rules_peek(const ampc_ctx *ctx) {
    return ctx && ctx->autocast ? &ctx->autocast->mods : NULL;
}

static void cache_clear(struct ampci_autocast *ac) { ac->ncache = 0; }

void ampci_amp_step_end(ampc_ctx *ctx) {
    struct ampci_autocast *ac = ctx->autocast;
    if (ac && ac->depth > 0 && !ac->warned_step_end) { /* PyTorch's regions close with their `with` block */
        ac->warned_step_end = true;
        ampci_log(ctx, AMPC_LOG_WARN,
                  "ampc_ctx_step_end: %d autocast region%s still open (an ampc_autocast_begin without its "
                  "ampc_autocast_end?): the region goes on into the next step and its weight-cast cache is "
                  "emptied here; end regions before the step end (said once per context)",
                  ac->depth, ac->depth == 1 ? " is" : "s are");
    }
    /* cached casts live in the step arena: they go with it */
    if (ac) cache_clear(ac);
    ampci_fp8_step_end(ctx);
}

void ampci_amp_release(ampc_ctx *ctx) {
    ampci_fp8_release(ctx);
    if (!ctx->autocast) return;
    free(ctx->autocast->cache);
    free(ctx->autocast);
    ctx->autocast = NULL;
}

/* ---- regions ---- */

ampc_autocast_params ampc_autocast_defaults(void) {
    return (ampc_autocast_params){
        .init = AMPC_PARAMS_INIT, .dtype = AMPC_DTYPE_BF16, .enabled = true, .cache_enabled = true};
}

ampc_status ampc_autocast_begin(ampc_ctx *ctx, const ampc_autocast_params *params) {
    static const char fn[] = "ampc_autocast_begin";
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn);
    ampc_autocast_params p = params ? *params : ampc_autocast_defaults();
    if (ampci_check_params_init(fn, p.init, "ampc_autocast_defaults") != AMPC_OK) return ampc_last_status();
    if (!p.enabled && (unsigned)p.dtype >= AMPC_DTYPE_COUNT) p.dtype = AMPC_DTYPE_BF16; /* an island: unused */
    if (p.enabled && p.dtype != AMPC_DTYPE_BF16 && p.dtype != AMPC_DTYPE_F16)
        return ampci_fail(AMPC_STATUS_DTYPE,
                          "%s: dtype %s; autocast lowers to BF16 or F16 (for F32, a region with enabled = false: "
                          "PyTorch's CPU autocast disables itself for float32)",
                          fn, (unsigned)p.dtype < AMPC_DTYPE_COUNT ? ampc_dtype_name(p.dtype) : "?");
    struct ampci_autocast *ac = state(ctx);
    if (!ac) return AMPC_STATUS_OOM;
    if (ac->depth == MAX_DEPTH)
        return ampci_fail(AMPC_STATUS_STATE, "%s: more than %d nested regions (is an ampc_autocast_end missing?)", fn,
                          MAX_DEPTH);
    ac->stack[ac->depth++] = (region){p.enabled, p.cache_enabled, p.dtype};
    return AMPC_OK;
}

ampc_status ampci_autocast_push(ampc_ctx *ctx, ampc_dtype dtype) {
    struct ampci_autocast *ac = state(ctx);
    if (!ac) return AMPC_STATUS_OOM;
    if (ac->depth == MAX_DEPTH)
        return ampci_fail(AMPC_STATUS_STATE,
                          "ampc_scope_push: module '%s' would open autocast region %d; at most %d nest", ctx->scope,
                          MAX_DEPTH + 1, MAX_DEPTH);
    ac->stack[ac->depth++] = (region){true, dtype != AMPC_DTYPE_F32, dtype};
    return AMPC_OK;
}

ampc_status ampc_autocast_end(ampc_ctx *ctx) {
    if (!ctx || !ctx->autocast || ctx->autocast->depth == 0)
        return ampci_fail(AMPC_STATUS_STATE, "ampc_autocast_end: no autocast region is open");
    if (--ctx->autocast->depth == 0) cache_clear(ctx->autocast);
    return AMPC_OK;
}

static const region *top(const ampc_ctx *ctx) {
    return ctx && ctx->autocast && ctx->autocast->depth ? &ctx->autocast->stack[ctx->autocast->depth - 1] : NULL;
}

bool ampc_autocast_enabled(const ampc_ctx *ctx) {
    const region *r = top(ctx);
    return r && r->enabled;
}

ampc_dtype ampc_autocast_dtype(const ampc_ctx *ctx) {
    const region *r = top(ctx);
    return r ? r->dtype : AMPC_DTYPE_BF16;
}

/* ---- policies ---- */

static int find_op(const char *name) {
    for (int i = 0; name && i < AMPCI_OP_COUNT; i++)
        if (strcasecmp(name, op_names[i]) == 0) return i;
    return -1;
}

static ampc_status unknown_op(const char *fn, const char *op) {
    char list[512];
    size_t len = 0;
    for (int i = 0; i < AMPCI_OP_COUNT && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", op_names[i]);
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: unknown op '%s'; expected one of: %s", fn, op ? op : "(null)",
                      list);
}

ampc_status ampc_autocast_load_table(ampc_ctx *ctx, ampc_autocast_table table) {
    if (!ctx || (unsigned)table >= AMPC_AUTOCAST_TABLE_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_autocast_load_table: table %d; expected an "
                          "ampc_autocast_table value%s",
                          (int)table, ctx ? "" : " (and ctx is NULL)");
    struct ampci_autocast *ac = state(ctx);
    if (!ac) return AMPC_STATUS_OOM;
    table_fill(ac->policy, table);
    return AMPC_OK;
}

ampc_status ampc_autocast_set_policy(ampc_ctx *ctx, const char *op, ampc_cast_policy policy) {
    static const char fn[] = "ampc_autocast_set_policy";
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn);
    int i = find_op(op);
    if (i < 0) return unknown_op(fn, op);
    if ((unsigned)policy >= AMPC_CAST_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: policy %d for '%s'; expected none, lower, fp32, fp32_output, "
                          "promote or banned",
                          fn, (int)policy, op);
    struct ampci_autocast *ac = state(ctx);
    if (!ac) return AMPC_STATUS_OOM;
    ac->policy[i] = policy;
    return AMPC_OK;
}

ampc_status ampc_autocast_policy(const ampc_ctx *ctx, const char *op, ampc_cast_policy *out) {
    static const char fn[] = "ampc_autocast_policy";
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx and out must not be NULL", fn);
    int i = find_op(op);
    if (i < 0) return unknown_op(fn, op);
    if (ctx->autocast) *out = ctx->autocast->policy[i];
    else {
        ampc_cast_policy pol[AMPCI_OP_COUNT];
        table_fill(pol, AMPC_AUTOCAST_TABLE_TUTORIAL);
        *out = pol[i];
    }
    return AMPC_OK;
}

ampc_status ampc_autocast_get_stats(const ampc_ctx *ctx, ampc_autocast_stats *out) {
    if (!ctx || !out)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_autocast_get_stats: ctx and out must not be NULL");
    const struct ampci_autocast *ac = ctx->autocast;
    *out = (ampc_autocast_stats){ac ? ac->casts : 0, ac ? ac->hits : 0, ac ? ac->ncache : 0};
    return AMPC_OK;
}

/* ---- the answer for one op call, and the weight-cast cache ---- */

static bool eligible(const ampc_tensor *t) {
    return t && (t->dtype == AMPC_DTYPE_F32 || t->dtype == AMPC_DTYPE_F16 || t->dtype == AMPC_DTYPE_BF16);
}

/* PyTorch caches: an F32 leaf that requires grad and is not a view, cast to the region's dtype. */
static bool cacheable(const ampc_tensor *t, const region *r, ampc_dtype to) {
    return r->cache && to == r->dtype && t->dtype == AMPC_DTYPE_F32 && t->requires_grad && !t->node && t->owned;
}

const ampc_tensor *ampci_autocast_cache_find(ampc_ctx *ctx, const ampc_tensor *t, ampc_dtype to) {
    struct ampci_autocast *ac = ctx->autocast;
    bool with_grad = ampc_grad_enabled(ctx);
    for (size_t i = 0; i < ac->ncache; i++) {
        const cache_entry *e = &ac->cache[i];
        if (e->src == t && e->dtype == to && e->version == t->storage->version && e->with_grad == with_grad) {
            ac->hits++;
            return e->cast;
        }
    }
    return NULL;
}

void ampci_autocast_cache_put(ampc_ctx *ctx, const ampc_tensor *t, ampc_dtype to, ampc_tensor *cast) {
    struct ampci_autocast *ac = ctx->autocast;
    if (ac->ncache == ac->cap) {
        size_t cap = ac->cap ? ac->cap * 2 : 64;
        cache_entry *n = realloc(ac->cache, cap * sizeof *n);
        if (!n) return; /* no room to remember it: the cast is still correct */
        ac->cache = n, ac->cap = cap;
    }
    ac->cache[ac->ncache++] = (cache_entry){t, to, t->storage->version, ampc_grad_enabled(ctx), cast};
}

void ampci_autocast_count_cast(ampc_ctx *ctx) { ctx->autocast->casts++; }

/* PROMOTE: F32 if any eligible input is F32, else the region dtype; the other 16-bit dtype is refused
 * (at::autocast::prioritize raises on a Half/BFloat16 mix). */
static bool promote_target(ampci_op op, const region *r, const ampc_tensor *const *in, int n, ampc_dtype *to) {
    *to = r->dtype;
    for (int i = 0; i < n; i++) {
        if (!eligible(in[i]) || in[i]->dtype == r->dtype) continue;
        if (in[i]->dtype == AMPC_DTYPE_F32) *to = AMPC_DTYPE_F32;
        else {
            char b[128];
            ampci_fail(AMPC_STATUS_DTYPE,
                       "ampc_%s: under autocast (%s region, policy promote) input %d %s mixes F16 "
                       "and BF16; cast it first",
                       op_names[op], ampc_dtype_name(r->dtype), i, ampc_tensor_describe(in[i], b, sizeof b));
            return false;
        }
    }
    return true;
}

bool ampci_autocast_plan(const ampc_ctx *ctx, ampci_op op, const ampc_tensor *const *in, int n, ampc_dtype *to,
                         bool *cache) {
    for (int i = 0; i < n; i++) to[i] = in[i] ? in[i]->dtype : AMPC_DTYPE_F32, cache[i] = false;
    const region *r = top(ctx);
    if (!r || !r->enabled) return true;
    if (r->dtype == AMPC_DTYPE_F32) { /* a module's FP32 island: every float input goes up */
        for (int i = 0; i < n; i++)
            if (eligible(in[i]) && in[i]->ctx == ctx) to[i] = AMPC_DTYPE_F32;
        return true;
    }
    ampc_cast_policy pol = ctx->autocast->policy[op];
    ampc_dtype target;
    int m = n; /* the leading inputs the policy applies to */
    switch (pol) {
    case AMPC_CAST_NONE: return true;
    case AMPC_CAST_BANNED:
        ampci_fail(AMPC_STATUS_UNSUPPORTED,
                   "ampc_%s is banned inside an autocast region (its policy is 'banned'); run "
                   "it in an enabled = false region, or change the policy with ampc_autocast_set_policy",
                   op_names[op]);
        return false;
    case AMPC_CAST_LOWER: target = r->dtype; break;
    case AMPC_CAST_PROMOTE:
        if (!promote_target(op, r, in, n, &target)) return false;
        /* The binary elementwise ops already widen mixed F32/16-bit inputs to F32 exactly and round the
         * 16-bit input's gradient back once, as a cast's backward would: the same bits without a
         * materialised F32 copy of the 16-bit input (one activation per residual add). */
        if (target == AMPC_DTYPE_F32 && op >= AMPCI_OP_ADD && op <= AMPCI_OP_DIV) m = 0;
        break;
    case AMPC_CAST_FP32_OUTPUT: /* only the first input, and only when it is eligible */
        m = eligible(in[0]) ? 1 : 0;
        target = AMPC_DTYPE_F32;
        break;
    default: target = AMPC_DTYPE_F32; break;
    }
    for (int i = 0; i < m; i++) {
        if (!eligible(in[i]) || in[i]->dtype == target || in[i]->ctx != ctx) continue;
        to[i] = target;
        cache[i] = cacheable(in[i], r, target);
    }
    return true;
}

/* ---- what autocast would do (range statistics) ---- */

bool ampci_autocast_active(const ampc_ctx *ctx) {
    const region *r = top(ctx);
    return r && r->enabled;
}

bool ampci_autocast_would_lower(const ampc_ctx *ctx, ampci_op op, const bool *low, const bool *is_float, int n,
                                bool *casts_inputs) {
    ampc_cast_policy pol;
    if (ctx->autocast) pol = ctx->autocast->policy[op];
    else {
        ampc_cast_policy all[AMPCI_OP_COUNT];
        table_fill(all, AMPC_AUTOCAST_TABLE_TUTORIAL);
        pol = all[op];
    }
    const region *r = top(ctx);
    if (r && !r->enabled) pol = AMPC_CAST_NONE; /* an FP32 island: ops run in their inputs' dtypes */
    *casts_inputs = pol == AMPC_CAST_LOWER;
    if (pol == AMPC_CAST_LOWER) return true;
    if (pol != AMPC_CAST_NONE && pol != AMPC_CAST_PROMOTE) return false;
    /* none and promote: 16-bit when every float input is (one F32 input makes the result F32) */
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!is_float[i]) continue;
        if (!low[i]) return false;
        any = true;
    }
    return any;
}
