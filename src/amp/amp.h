/* amp.h: internal interface of autocast. Autocast answers one question for the op layer: which dtype
 * must input i of op X have here (ampci_autocast_plan)? The op layer then casts (src/ops) and keeps the
 * casts of F32 weights in the weight-cast cache held here, which lives as long as the outermost region. */
#ifndef AMPC_AMP_H
#define AMPC_AMP_H

#include "../tensor/tensor.h"

/* Every op autocast knows; the names (ampc_autocast_op_name) are the public spelling. */
typedef enum ampci_op {
    AMPCI_OP_LINEAR = 0,
    AMPCI_OP_MATMUL,
    AMPCI_OP_BMM,
    AMPCI_OP_CONV2D,
    AMPCI_OP_ATTENTION,
    AMPCI_OP_SOFTMAX,
    AMPCI_OP_LOG_SOFTMAX,
    AMPCI_OP_LAYER_NORM,
    AMPCI_OP_CROSS_ENTROPY,
    AMPCI_OP_MSE_LOSS,
    AMPCI_OP_EXP,
    AMPCI_OP_LOG,
    AMPCI_OP_SQRT,
    AMPCI_OP_TANH,
    AMPCI_OP_SIGMOID,
    AMPCI_OP_RELU,
    AMPCI_OP_GELU,
    AMPCI_OP_NEG,
    AMPCI_OP_ADD,
    AMPCI_OP_SUB,
    AMPCI_OP_MUL,
    AMPCI_OP_DIV,
    AMPCI_OP_ADD_SCALAR,
    AMPCI_OP_SUB_SCALAR,
    AMPCI_OP_MUL_SCALAR,
    AMPCI_OP_DIV_SCALAR,
    AMPCI_OP_SUM,
    AMPCI_OP_MEAN,
    AMPCI_OP_EMBEDDING,
    AMPCI_OP_DROPOUT,
    AMPCI_OP_MAX_POOL2D,
    AMPCI_OP_POSITIONAL_ENCODING,
    AMPCI_OP_CONCAT,
    AMPCI_OP_COUNT
} ampci_op;

/* "linear", "softmax", ...: the op's autocast name. */
AMPCI_HIDDEN const char *ampci_op_name(ampci_op op);

/* Autocast's answer for a call of op with inputs in[0..n) (NULL entries allowed): to[i] is the dtype
 * input i must have (its own dtype when it stays as it is); cache[i] says that the cast may be served
 * from, and kept in, the weight-cast cache. Outside an enabled region every input stays. False (error
 * recorded) when the op is banned in the region or a promote mixes F16 and BF16. */
AMPCI_HIDDEN bool ampci_autocast_plan(const ampc_ctx *ctx, ampci_op op, const ampc_tensor *const *in, int n,
                                      ampc_dtype *to, bool *cache);
/* The weight-cast cache of the current outermost region: a cast of t to `to` made earlier under the same
 * version and grad mode (counted as a hit), or NULL; and remembering a new one. Only for inputs the plan
 * marked cacheable. */
AMPCI_HIDDEN const ampc_tensor *ampci_autocast_cache_find(ampc_ctx *ctx, const ampc_tensor *t, ampc_dtype to);
AMPCI_HIDDEN void ampci_autocast_cache_put(ampc_ctx *ctx, const ampc_tensor *t, ampc_dtype to, ampc_tensor *cast);
/* Counts a cast autocast asked for (ampc_autocast_get_stats). */
AMPCI_HIDDEN void ampci_autocast_count_cast(ampc_ctx *ctx);

/* A region pushed by module precision (src/amp/module_precision.c): enabled, of dtype F32 (an FP32 island:
 * every op's float inputs go to F32), BF16 or F16; popped with ampc_autocast_end. */
AMPCI_HIDDEN ampc_status ampci_autocast_push(ampc_ctx *ctx, ampc_dtype dtype);
/* Range statistics' question for an op that ran outside any enabled region: would it produce 16-bit
 * values under an autocast region with the current policies, given which inputs would be 16-bit
 * (low[i])? And does it cast its float inputs down (LOWER)? Inside a disabled region (an island) ops
 * keep their inputs' dtypes. */
AMPCI_HIDDEN bool ampci_autocast_would_lower(const ampc_ctx *ctx, ampci_op op, const bool *low, const bool *is_float,
                                             int n, bool *casts_inputs);
/* True inside an enabled region (then the dtypes are real, not simulated). */
AMPCI_HIDDEN bool ampci_autocast_active(const ampc_ctx *ctx);

/* Module precision's per-context state, kept in the autocast state (module_precision.c). */
#define AMPCI_MAX_MODULE_RULES 32
typedef struct ampci_module_rules {
    struct {
        char pattern[128];
        ampc_dtype dtype;
    } rule[AMPCI_MAX_MODULE_RULES];
    int n;
    int in_effect[17]; /* per scope depth: the rule applying there (-1: none) */
    bool opened[17];   /* per scope depth: its push opened a region */
} ampci_module_rules;
AMPCI_HIDDEN ampci_module_rules *ampci_module_rules_of(ampc_ctx *ctx);
AMPCI_HIDDEN const ampci_module_rules *ampci_module_rules_peek(const ampc_ctx *ctx);

/* Range statistics (stats.c): an op output, recorded by the op epilogue while statistics are attached.
 * in[0..n) are the op's inputs after autocast; node is out's tape node, or NULL. */
AMPCI_HIDDEN void ampci_stats_output(ampc_ctx *ctx, ampci_op op, const char *name, ampc_tensor *out,
                                     const ampc_tensor *const *in, int n, struct ampci_node *node);
/* A shape op's or a cast's output: it carries its input's site and lowness (a cast: its dtype's). */
AMPCI_HIDDEN void ampci_stats_carry(ampc_tensor *out, const ampc_tensor *in);
/* Step end while attached: counts the step. */
AMPCI_HIDDEN void ampci_stats_step_end(ampc_ctx *ctx);

/* ---- FP8 (fp8.c) ---- */
/* One parameter's FP8 state: a scale and an amax history per role (0: the op's input, 1: the weight,
 * 2: the output gradient), found by the parameter. */
#define AMPCI_FP8_ROLES 3
typedef struct ampci_fp8_meta {
    const ampc_tensor *w;
    char name[64];
    float scale[AMPCI_FP8_ROLES];
    float *history; /* AMPCI_FP8_ROLES rows of the recipe's history length, role-major */
    bool touched;   /* quantised something this step: its delayed scales update at step end */
} ampci_fp8_meta;
/* The state of parameter w (made on first use), or NULL (error recorded) on OOM. */
AMPCI_HIDDEN ampci_fp8_meta *ampci_fp8_meta_for(ampc_ctx *ctx, const ampc_tensor *w);
/* The state of parameter w, or NULL when it has none. */
AMPCI_HIDDEN const ampci_fp8_meta *ampci_fp8_meta_find(const ampc_ctx *ctx, const ampc_tensor *w);
/* t (contiguous, F32/F16/BF16) quantised for role by m's scale (current scaling: t's own) into a fresh
 * arena BF16 tensor of the dequantised values q / scale (exact); the amax goes into the role's history
 * (forward roles only while grad mode is on: evaluation does not move the scales). NULL on failure. */
AMPCI_HIDDEN ampc_tensor *ampci_fp8_quantize(ampc_ctx *ctx, ampci_fp8_meta *m, int role, const ampc_tensor *t,
                                             const char *op);
/* The checkpoint's view: the recipe, and the states one by one (NULL past the end). */
AMPCI_HIDDEN const ampc_fp8_recipe *ampci_fp8_recipe(const ampc_ctx *ctx);
AMPCI_HIDDEN int ampci_fp8_history_len(const ampc_ctx *ctx);
AMPCI_HIDDEN const ampci_fp8_meta *ampci_fp8_meta_at(const ampc_ctx *ctx, int i);
/* Restores one parameter's state (scale: 3 values, history: 3 rows of len) under recipe. */
AMPCI_HIDDEN ampc_status ampci_fp8_restore(ampc_ctx *ctx, const ampc_fp8_recipe *recipe, const ampc_tensor *w,
                                           const float *scale, const float *history, int len);
/* What is wrong with recipe r (NULL: nothing); a history length of 0 becomes the default first. */
AMPCI_HIDDEN const char *ampci_fp8_recipe_problem(ampc_fp8_recipe *r);
/* "hybrid, delayed scaling, history 1024, amax max, margin 0" */
AMPCI_HIDDEN void ampci_fp8_describe(const ampc_fp8_recipe *r, char *buf, size_t size);
/* The context's FP8 state (if any) was made under recipe r (restore's early check). */
AMPCI_HIDDEN bool ampci_fp8_compatible(const ampc_ctx *ctx, const ampc_fp8_recipe *r);
AMPCI_HIDDEN void ampci_fp8_step_end(ampc_ctx *ctx);
/* The amax event: at a step end that moves delayed scales, the step's amaxes (row 0 of every state's
 * roles, n values in state order) before the scales are computed from them. A listener may change them in
 * place: data parallel takes the largest over the ranks (TE's reduce_amax), so every rank computes the
 * same scales and one rank's checkpoint is every rank's FP8 state. Not fired when nothing was quantised
 * since the last step end (evaluation), so every rank fires it the same number of times. */
typedef void ampci_fp8_amax_fn(void *arg, float *amax, int n);
AMPCI_HIDDEN ampc_status ampci_fp8_on_amax(ampc_ctx *ctx, ampci_fp8_amax_fn *fn, void *arg);
AMPCI_HIDDEN bool ampci_fp8_off_amax(ampc_ctx *ctx, ampci_fp8_amax_fn *fn, void *arg);
AMPCI_HIDDEN void ampci_fp8_release(ampc_ctx *ctx);

/* The context assembly's hooks: step end (cached casts live in the arena) and context end. */
AMPCI_HIDDEN void ampci_amp_step_end(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_amp_release(ampc_ctx *ctx);

#endif
