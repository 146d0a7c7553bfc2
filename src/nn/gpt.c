/* gpt.c: the character-level GPT: token and learned position embeddings, L pre-LayerNorm blocks of causal
 * multi-head attention and a GELU (tanh form, as GPT-2) MLP of width 4D, a final LayerNorm, and logits
 * from the token embedding (tied weights). Initialisation follows GPT-2: N(0, 0.02) weights, the two
 * residual projections of each block scaled by 1/sqrt(2L), zero biases, unit LayerNorm gains. */
#include "nn.h"

#include <math.h>

/* Parameter indices, in declaration order. */
enum { WTE = 0, WPE, BLOCKS };
enum { LN1_W = 0, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FC2_W, FC2_B, PER_BLOCK };
#define LNF_W(L) (BLOCKS + (L) * PER_BLOCK)

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
        ampci_model_declare(m, AMPCI_INIT_NORMAL, resid, false, 2, (int64_t[]){D, 4 * D}, "blocks.%d.mlp.proj.weight", l);
        ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "blocks.%d.mlp.proj.bias", l);
    }
    ampci_model_declare(m, AMPCI_INIT_ONES, 0, true, 1, (int64_t[]){D}, "ln_f.weight");
    ampci_model_declare(m, AMPCI_INIT_ZEROS, 0, true, 1, (int64_t[]){D}, "ln_f.bias");
    return AMPC_OK;
}

static ampc_tensor *layer_norm(ampc_model *m, const char *name, const ampc_tensor *x, int w) {
    if (ampc_scope_push(m->ctx, name) != AMPC_OK) return NULL;
    ampc_tensor *y = ampc_layer_norm(m->ctx, x, m->params[w], m->params[w + 1], 1e-5);
    ampc_scope_pop(m->ctx);
    return y;
}

/* Dropout on a branch before it joins the residual stream (training only); the input is released. */
static ampc_tensor *residual_dropout(ampc_model *m, ampc_tensor *y) {
    if (!m->training || m->cfg.dropout <= 0) return y;
    ampc_tensor *d = ampc_dropout(m->ctx, y, m->cfg.dropout, true);
    ampci_tensor_release(y);
    return d;
}

/* Column block `which` (0 q, 1 k, 2 v) of qkv (B, T, 3D) as (B, H, T, D/H). */
static ampc_tensor *heads(const ampc_tensor *qkv, int which, int64_t B, int64_t T, int64_t D, int64_t H) {
    ampc_tensor *part = ampc_tensor_slice(qkv, -1, which * D, (which + 1) * D, 1);
    ampc_tensor *split = ampc_tensor_reshape(part, 4, (int64_t[]){B, T, H, D / H});
    return ampc_tensor_permute(split, (int[]){0, 2, 1, 3});
}

static ampc_tensor *attention(ampc_model *m, const ampc_tensor *h, int base, int64_t B, int64_t T) {
    ampc_ctx *ctx = m->ctx;
    int64_t D = m->cfg.d_model, H = m->cfg.heads;
    if (ampc_scope_push(ctx, "attn") != AMPC_OK) return NULL;
    ampc_tensor *qkv = ampci_model_linear(m, "qkv", h, base + QKV_W, true);
    ampc_tensor *o = ampc_attention(ctx, heads(qkv, 0, B, T, D, H), heads(qkv, 1, B, T, D, H), heads(qkv, 2, B, T, D, H), true);
    ampci_tensor_release(qkv);
    ampc_tensor *merged = ampc_tensor_reshape(ampc_tensor_permute(o, (int[]){0, 2, 1, 3}), 3, (int64_t[]){B, T, D});
    ampci_tensor_release(o);
    ampc_tensor *y = ampci_model_linear(m, "proj", merged, base + PROJ_W, true);
    ampci_tensor_release(merged);
    ampc_scope_pop(ctx);
    return residual_dropout(m, y);
}

static ampc_tensor *mlp(ampc_model *m, const ampc_tensor *h, int base) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_scope_push(ctx, "mlp") != AMPC_OK) return NULL;
    ampc_tensor *f = ampci_model_linear(m, "fc", h, base + FC_W, true);
    ampc_tensor *a = ampc_gelu(ctx, f, AMPC_GELU_TANH);
    ampci_tensor_release(f);
    ampc_tensor *y = ampci_model_linear(m, "proj", a, base + FC2_W, true);
    ampci_tensor_release(a);
    ampc_scope_pop(ctx);
    return residual_dropout(m, y);
}

static ampc_tensor *block(ampc_model *m, ampc_tensor *x, int l, int64_t B, int64_t T) {
    ampc_ctx *ctx = m->ctx;
    char name[24];
    snprintf(name, sizeof name, "blocks.%d", l);
    if (ampc_scope_push(ctx, name) != AMPC_OK) return NULL;
    int base = BLOCKS + l * PER_BLOCK;
    /* Each intermediate is released after its last use (ampci_tensor_release), so memory held
     * for the backward is what the ops saved, as with PyTorch's reference counting. */
    for (int half = 0; half < 2 && x; half++) {
        ampc_tensor *h = layer_norm(m, half ? "ln2" : "ln1", x, base + (half ? LN2_W : LN1_W));
        ampc_tensor *y = half ? mlp(m, h, base) : attention(m, h, base, B, T);
        ampci_tensor_release(h);
        ampc_tensor *next = ampc_add(ctx, x, y);
        ampci_tensor_release(y);
        ampci_tensor_release(x);
        x = next;
    }
    ampc_scope_pop(ctx);
    return x;
}

ampc_tensor *ampci_gpt_forward(ampc_model *m, const ampc_tensor *ids) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_tensor_ndim(ids) != 2 || ampc_tensor_dim(ids, 1) > m->cfg.context || ampc_tensor_dim(ids, 1) < 1) {
        char b[128];
        return ampci_fail_null(AMPC_STATUS_SHAPE, "ampc_model_forward (gpt): ids %s; expected (B, T) token ids with "
                               "1 <= T <= context %d", ampc_tensor_describe(ids, b, sizeof b), m->cfg.context);
    }
    int64_t B = ampc_tensor_dim(ids, 0), T = ampc_tensor_dim(ids, 1);
    int64_t pos[4096];
    int64_t *positions = T <= 4096 ? pos : NULL;
    if (!positions) return ampci_fail_null(AMPC_STATUS_SHAPE, "ampc_model_forward (gpt): T = %lld exceeds 4096", (long long)T);
    for (int64_t t = 0; t < T; t++) positions[t] = t;
    ampc_tensor *pt = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, 1, (int64_t[]){T}, positions, AMPC_DTYPE_I64);
    ampc_tensor *tok = ampc_embedding(ctx, m->params[WTE], ids), *posn = ampc_embedding(ctx, m->params[WPE], pt);
    ampc_tensor *x = ampc_add(ctx, tok, posn);
    ampci_tensor_release(tok);
    ampci_tensor_release(posn);
    if (m->training && m->cfg.dropout > 0) x = ampc_dropout(ctx, x, m->cfg.dropout, true);
    for (int l = 0; l < m->cfg.layers && x; l++) x = block(m, x, l, B, T);
    ampc_tensor *h = layer_norm(m, "ln_f", x, LNF_W(m->cfg.layers));
    ampci_tensor_release(x);
    if (ampc_scope_push(ctx, "lm_head") != AMPC_OK) return NULL;
    ampc_tensor *logits = ampc_matmul(ctx, h, m->params[WTE], AMPC_TRANS_B);   /* tied: x wte^T */
    ampci_tensor_release(h);
    ampc_scope_pop(ctx);
    return logits;
}
