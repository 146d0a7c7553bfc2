/* gpt.c: the character-level GPT: token and learned position embeddings, L pre-LayerNorm blocks of causal
 * multi-head attention and a GELU (tanh form, as GPT-2) MLP of width 4D, a final LayerNorm, and logits
 * from the token embedding (tied weights). Initialisation follows GPT-2: N(0, 0.02) weights, the two
 * residual projections of each block scaled by 1/sqrt(2L), zero biases, unit LayerNorm gains. */
#include "nn.h"

#include <math.h>

/* Parameter indices, in declaration order. */
enum { WTE = 0, WPE, BLOCKS };
enum { LN1_W = 0, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FC2_W, FC2_B, PER_BLOCK };
#define LNF_W(L) (BLOCKS + (L)*PER_BLOCK)

ampc_status ampci_gpt_declare(ampc_model *m) {
    const ampc_model_config *c = &m->cfg;
    int64_t D = c->d_model, V = c->vocab;
    if (BLOCKS + c->layers * PER_BLOCK + 2 > AMPCI_MAX_PARAMS)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_model_new (gpt): %d layers is more than %d", c->layers,
                          (AMPCI_MAX_PARAMS - BLOCKS - 2) / PER_BLOCK);
    double std = 0.02, resid = 0.02 / sqrt(2.0 * c->layers);
    ampci_model_declare(m, AMPCI_INIT_NORMAL, std, true, 2, (int64_t[]){V, D}, "wte.weight");
    ampci_model_declare(m, AMPCI_INIT_NORMAL, std, true, 2, (int64_t[]){c->context, D}, "wpe.weight");
    for (int l = 0; l < c->layers; l++) {
        ampci_model_declare(m, AMPCI_INIT_ONES, 0, true, 1, (int64_t[]){D}, "blocks.%d.ln1.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "blocks.%d.ln1.bias", l);
        ampci_model_declare(m, AMPCI_INIT_NORMAL, std, false, 2, (int64_t[]){3 * D, D}, "blocks.%d.attn.qkv.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){3 * D}, "blocks.%d.attn.qkv.bias", l);
        ampci_model_declare(m, AMPCI_INIT_NORMAL, resid, false, 2, (int64_t[]){D, D}, "blocks.%d.attn.proj.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "blocks.%d.attn.proj.bias", l);
        ampci_model_declare(m, AMPCI_INIT_ONES, 0, true, 1, (int64_t[]){D}, "blocks.%d.ln2.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "blocks.%d.ln2.bias", l);
        ampci_model_declare(m, AMPCI_INIT_NORMAL, std, false, 2, (int64_t[]){4 * D, D}, "blocks.%d.mlp.fc.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){4 * D}, "blocks.%d.mlp.fc.bias", l);
        ampci_model_declare(m, AMPCI_INIT_NORMAL, resid, false, 2, (int64_t[]){D, 4 * D}, "blocks.%d.mlp.proj.weight",
                            l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "blocks.%d.mlp.proj.bias", l);
    }
    ampci_model_declare(m, AMPCI_INIT_ONES, 0, true, 1, (int64_t[]){D}, "ln_f.weight");
    ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "ln_f.bias");
    /* the modules, in the order the forward enters them */
    ampci_model_module(m, "wte");
    ampci_model_module(m, "wpe");
    static const char *const block[] = {"",     ".ln1", ".attn",   ".attn.qkv", ".attn.proj",
                                        ".ln2", ".mlp", ".mlp.fc", ".mlp.proj"};
    for (int l = 0; l < c->layers; l++)
        for (size_t k = 0; k < sizeof block / sizeof block[0]; k++) ampci_model_module(m, "blocks.%d%s", l, block[k]);
    ampci_model_module(m, "ln_f");
    ampci_model_module(m, "lm_head");
    return AMPC_OK;
}

/* ln(x) with the LayerNorm whose weight is params[w] (and bias params[w + 1]), in scope `name`. */
static ampc_tensor *ln(ampc_model *m, const char *name, const ampc_tensor *x, int w) {
    if (ampc_scope_push(m->ctx, name) != AMPC_OK) return NULL;
    ampc_tensor *y = ampc_layer_norm(m->ctx, x, m->params[w], m->params[w + 1], 1e-5);
    ampc_scope_pop(m->ctx);
    return y;
}

/* The rows ids of embedding table params[w], in scope `name`. */
static ampc_tensor *embed(ampc_model *m, const char *name, int w, const ampc_tensor *ids) {
    if (ampc_scope_push(m->ctx, name) != AMPC_OK) return NULL;
    ampc_tensor *y = ampc_embedding(m->ctx, m->params[w], ids);
    ampc_scope_pop(m->ctx);
    return y;
}

/* Dropout on the embeddings and on each branch before it joins the residual stream (training only). */
static ampc_tensor *dropout(ampc_model *m, ampc_tensor *y) {
    return m->training && m->cfg.dropout > 0 ? ampc_dropout(m->ctx, y, m->cfg.dropout, true) : y;
}

/* Column block `which` (0 q, 1 k, 2 v) of qkv (B, T, 3D) as heads (B, H, T, D/H): views of qkv. */
static ampc_tensor *heads(ampc_model *m, const ampc_tensor *qkv, int which) {
    int64_t B = ampc_tensor_dim(qkv, 0), T = ampc_tensor_dim(qkv, 1), D = m->cfg.d_model, H = m->cfg.heads;
    ampc_tensor *part = ampc_tensor_slice(qkv, -1, which * D, (which + 1) * D, 1);
    ampc_tensor *split = ampc_tensor_reshape(part, 4, (int64_t[]){B, T, H, D / H});
    return ampc_tensor_permute(split, (int[]){0, 2, 1, 3});
}

/* Heads o (B, H, T, D/H) back side by side: (B, T, D), a copy. */
static ampc_tensor *merge_heads(ampc_model *m, const ampc_tensor *o) {
    int64_t B = ampc_tensor_dim(o, 0), T = ampc_tensor_dim(o, 2);
    return ampc_tensor_reshape(ampc_tensor_permute(o, (int[]){0, 2, 1, 3}), 3, (int64_t[]){B, T, m->cfg.d_model});
}

/* attn(h): causal self-attention of h (B, T, D), q, k and v from one projection, with the block's
 * parameters from p. qkv goes once the heads are attended, their output once merged. */
static ampc_tensor *attn(ampc_model *m, int p, const ampc_tensor *h) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_scope_push(ctx, "attn") != AMPC_OK) return NULL;
    ampci_frame f = ampci_frame_begin(ctx);
    ampc_tensor *qkv = ampci_model_linear(m, "qkv", h, p + QKV_W, true);
    ampc_tensor *o = ampci_frame_keep(&f,
                                      ampc_attention(ctx, heads(m, qkv, 0), heads(m, qkv, 1), heads(m, qkv, 2), true));
    ampc_tensor *y = ampci_model_linear(m, "proj", ampci_frame_keep(&f, merge_heads(m, o)), p + PROJ_W, true);
    ampc_scope_pop(ctx);
    return ampci_frame_end(&f, dropout(m, y));
}

/* mlp(h): proj(gelu(fc(h))), the hidden layer 4D wide; fc's output goes once GELU has run. */
static ampc_tensor *mlp(ampc_model *m, int p, const ampc_tensor *h) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_scope_push(ctx, "mlp") != AMPC_OK) return NULL;
    ampci_frame f = ampci_frame_begin(ctx);
    ampc_tensor *a = ampci_frame_keep(&f,
                                      ampc_gelu(ctx, ampci_model_linear(m, "fc", h, p + FC_W, true), AMPC_GELU_TANH));
    ampc_tensor *y = ampci_model_linear(m, "proj", a, p + FC2_W, true);
    ampc_scope_pop(ctx);
    return ampci_frame_end(&f, dropout(m, y));
}

typedef ampc_tensor *(*sublayer_fn)(ampc_model *m, int p, const ampc_tensor *h);

/* x + f(ln(x)) for the sublayer f of block l, whose LayerNorm has its weight at `ln_w` in the block. ln(x)
 * goes once f is done, f's output once the sum is made: the points where PyTorch's reference counts let
 * them go, so memory is what the ops saved for the backward. */
static ampc_tensor *residual(ampc_model *m, int l, sublayer_fn f, const char *ln_name, int ln_w, const ampc_tensor *x) {
    ampc_ctx *ctx = m->ctx;
    char name[24];
    snprintf(name, sizeof name, "blocks.%d", l);
    if (ampc_scope_push(ctx, name) != AMPC_OK) return NULL;
    int p = BLOCKS + l * PER_BLOCK;
    ampci_frame fr = ampci_frame_begin(ctx);
    ampc_tensor *y = ampci_frame_keep(&fr, f(m, p, ln(m, ln_name, x, p + ln_w)));
    ampc_tensor *sum = ampci_frame_end(&fr, ampc_add(ctx, x, y));
    ampc_scope_pop(ctx);
    return sum;
}

/* The logits h wte^T (tied weights). */
static ampc_tensor *lm_head(ampc_model *m, const ampc_tensor *h) {
    if (ampc_scope_push(m->ctx, "lm_head") != AMPC_OK) return NULL;
    ampc_tensor *logits = ampc_matmul(m->ctx, h, m->params[WTE], AMPC_TRANS_B);
    ampc_scope_pop(m->ctx);
    return logits;
}

ampc_tensor *ampci_gpt_forward(ampc_model *m, const ampc_tensor *ids) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_tensor_ndim(ids) != 2 || ampc_tensor_dim(ids, 1) > m->cfg.context || ampc_tensor_dim(ids, 1) < 1) {
        char b[128];
        return ampci_fail_null(AMPC_STATUS_SHAPE,
                               "ampc_model_forward (gpt): ids %s; expected (B, T) token ids with "
                               "1 <= T <= context %d",
                               ampc_tensor_describe(ids, b, sizeof b), m->cfg.context);
    }
    int64_t T = ampc_tensor_dim(ids, 1);
    int64_t pos[4096];
    int64_t *positions = T <= 4096 ? pos : NULL;
    if (!positions)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "ampc_model_forward (gpt): T = %lld exceeds 4096", (long long)T);
    for (int64_t t = 0; t < T; t++) positions[t] = t;
    ampc_tensor *pt = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, 1, (int64_t[]){T}, positions, AMPC_DTYPE_I64);
    /* Each intermediate is let go after its last use (the frames of ops/frame.h), so memory held for the
     * backward is what the ops saved, as with PyTorch's reference counting. */
    ampci_frame f = ampci_frame_begin(ctx);
    ampc_tensor *tok = embed(m, "wte", WTE, ids); /* in this order: the modules' declared order */
    ampc_tensor *x = ampci_frame_keep(&f, ampc_add(ctx, tok, embed(m, "wpe", WPE, pt)));
    x = dropout(m, x);
    for (int l = 0; l < m->cfg.layers && x; l++) {
        x = ampci_frame_keep(&f, residual(m, l, attn, "ln1", LN1_W, x)); /* x = x + attn(ln1(x)) */
        x = ampci_frame_keep(&f, residual(m, l, mlp, "ln2", LN2_W, x));  /* x = x + mlp(ln2(x)) */
    }
    ampc_tensor *h = ampci_frame_keep(&f, ln(m, "ln_f", x, LNF_W(m->cfg.layers)));
    return ampci_frame_end(&f, lm_head(m, h));
}
