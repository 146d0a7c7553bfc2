/* model.c: the model object shared by every architecture: configuration defaults and checks, the
 * parameter registry (one contiguous block of the parameter dtype, owned named views, per-parameter RNG
 * streams for initialisation), the forward/loss entry points, and the optimizer grouping into "decay"
 * and "no_decay" parameters. */
#include "nn.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const kind_names[AMPC_MODEL_COUNT] = {"gpt", "mlp", "cnn", "simple"};

const char *ampc_model_kind_name(ampc_model_kind kind) {
    return (unsigned)kind < AMPC_MODEL_COUNT ? kind_names[kind] : "?";
}

ampc_status ampc_model_kind_parse(const char *name, ampc_model_kind *out) {
    for (int i = 0; name && out && i < AMPC_MODEL_COUNT; i++)
        if (strcasecmp(name, kind_names[i]) == 0) {
            *out = (ampc_model_kind)i;
            return AMPC_OK;
        }
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "unknown model '%s': expected gpt, mlp, cnn or simple",
                      name ? name : "(null)");
}

int ampci_model_declare(ampc_model *m, ampci_init init, double a, bool no_decay, int ndim, const int64_t *shape,
                        const char *fmt, ...) {
    AMPCI_ASSERT(m->n < AMPCI_MAX_PARAMS);
    ampci_param_spec *s = &m->specs[m->n];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->init = init, s->a = a, s->no_decay = no_decay, s->ndim = ndim;
    for (int i = 0; i < ndim; i++) s->shape[i] = shape[i];
    return m->n++;
}

void ampci_model_module(ampc_model *m, const char *fmt, ...) {
    AMPCI_ASSERT(m->n_modules < AMPCI_MAX_MODULES);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->modules[m->n_modules++], sizeof m->modules[0], fmt, ap);
    va_end(ap);
}

/* Initial values of one parameter, in pieces on the context's threads: element k of a parameter is a pure
 * function of (seed, the parameter's stream, k) (counter-based draws), so the pieces give the bits one
 * pass would, and a large model (GPT-2's 124M weights) starts in a fraction of the serial time. */
typedef struct init_job {
    const ampci_param_spec *s;
    ampc_rng r;
    float *v;
} init_job;

#define INIT_PIECE ((int64_t)1 << 16)

static void init_piece(void *arg, int64_t b, int64_t e, int64_t chunk) {
    (void)chunk;
    const init_job *j = arg;
    float *v = j->v + b;
    switch (j->s->init) {
    case AMPCI_INIT_FAN_IN: {
        float bound = (float)(1.0 / sqrt(j->s->a));
        ampci_rng_uniform_range(&j->r, v, b, e, -bound, bound);
        break;
    }
    case AMPCI_INIT_NORMAL: ampci_rng_normal_range(&j->r, v, b, e, 0.0f, (float)j->s->a); break;
    case AMPCI_INIT_ONES:
        for (int64_t i = 0; i < e - b; i++) v[i] = 1.0f;
        break;
    default: memset(v, 0, (size_t)(e - b) * sizeof *v); break;
    }
}

static void init_values(ampc_ctx *ctx, const ampci_param_spec *s, uint64_t seed, uint64_t stream, float *v, int64_t n) {
    init_job j = {s, ampc_rng_make(seed, stream), v};
    ampc_parallel_for(ctx, n, INIT_PIECE, init_piece, &j);
}

ampc_status ampci_model_build(ampc_model *m) {
    int64_t total = 0;
    for (int i = 0; i < m->n; i++) {
        int64_t n = 1;
        for (int d = 0; d < m->specs[i].ndim; d++) n *= m->specs[i].shape[d];
        total += n;
    }
    m->block = ampc_tensor_new(m->ctx, m->cfg.param_dtype, 1, (int64_t[]){total});
    float *buf = m->block ? malloc((size_t)(total ? total : 1) * sizeof *buf) : NULL;
    if (!buf)
        return m->block ? ampci_fail(AMPC_STATUS_OOM, "ampc_model_new: out of memory initialising %lld weights",
                                     (long long)total)
                        : ampc_last_status();
    int64_t at = 0;
    ampc_status s = AMPC_OK;
    for (int i = 0; i < m->n && s == AMPC_OK; i++) {
        const ampci_param_spec *sp = &m->specs[i];
        ampc_tensor *p = ampci_tensor_owned_view(m->block, at, sp->ndim, sp->shape);
        if (!p) {
            s = ampc_last_status();
            break;
        }
        m->params[i] = p;
        int64_t n = ampc_tensor_numel(p);
        init_values(m->ctx, sp, m->cfg.seed, 1000 + (uint64_t)i, buf, n);
        s = ampc_tensor_copy_from(p, buf, AMPC_DTYPE_F32);
        if (s == AMPC_OK) s = ampc_tensor_set_name(p, sp->name);
        if (s == AMPC_OK) s = ampc_tensor_set_requires_grad(p, true);
        at += n;
    }
    free(buf);
    return s;
}

/* ---- configuration ---- */

static int or_default(int v, int d) { return v ? v : d; }

/* The sizes of the model's own kind, each named with its value in the message: a GPT's error does not
 * list image sizes, nor a CNN's attention heads. */
static ampc_status check_sizes(const char *fn, const ampc_model_config *c) {
    const char *bad = NULL, *kind = ampc_model_kind_name(c->kind);
    char vals[160] = "";
    switch (c->kind) {
    case AMPC_MODEL_GPT:
        if (c->layers < 1 || c->d_model < 1 || c->heads < 1 || c->context < 1 || c->vocab < 2)
            bad = "sizes must be positive (vocab >= 2)";
        else if (c->d_model % c->heads) bad = "heads must divide d_model";
        else if (!(c->dropout >= 0 && c->dropout < 1)) bad = "dropout must be in [0, 1)";
        snprintf(vals, sizeof vals, "layers %d, d_model %d, heads %d, context %d, vocab %d, dropout %g", c->layers,
                 c->d_model, c->heads, c->context, c->vocab, c->dropout);
        break;
    case AMPC_MODEL_MLP:
        if (c->in_features < 1 || c->classes < 2) bad = "sizes must be positive (classes >= 2)";
        for (int i = 0; !bad && i < AMPC_MODEL_MAX_HIDDEN && c->hidden[i]; i++)
            if (c->hidden[i] < 0) bad = "hidden widths must be positive";
        snprintf(vals, sizeof vals, "in_features %d, hidden[0] %d, classes %d", c->in_features, c->hidden[0],
                 c->classes);
        break;
    case AMPC_MODEL_CNN:
        if (c->in_channels < 1 || c->classes < 2) bad = "sizes must be positive (classes >= 2)";
        else if (c->image_size < 4 || c->image_size % 4)
            bad = "image_size must be a positive multiple of 4 (two 2x2 pools)";
        snprintf(vals, sizeof vals, "in_channels %d, image_size %d, classes %d", c->in_channels, c->image_size,
                 c->classes);
        break;
    default: break; /* simple: fixed sizes */
    }
    if (!bad) return AMPC_OK;
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s (%s): %s (%s)", fn, kind, bad, vals);
}

static ampc_status check_config(ampc_model_config *c) {
    static const char fn[] = "ampc_model_new";
    if ((unsigned)c->kind >= AMPC_MODEL_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: kind %d is not an ampc_model_kind", fn, (int)c->kind);
    if (c->param_dtype != AMPC_DTYPE_F32 && c->param_dtype != AMPC_DTYPE_BF16 && c->param_dtype != AMPC_DTYPE_F16)
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: param_dtype %s; expected F32, BF16 or F16", fn,
                          ampc_dtype_name(c->param_dtype));
    c->layers = or_default(c->layers, 6), c->d_model = or_default(c->d_model, 384), c->heads = or_default(c->heads, 6);
    c->context = or_default(c->context, 256), c->vocab = or_default(c->vocab, 256);
    c->in_features = or_default(c->in_features, 784), c->classes = or_default(c->classes, 10);
    c->in_channels = or_default(c->in_channels, 1), c->image_size = or_default(c->image_size, 28);
    if (!c->hidden[0]) c->hidden[0] = c->hidden[1] = 1024;
    return check_sizes(fn, c);
}

ampc_status ampc_model_new(ampc_ctx *ctx, const ampc_model_config *config, ampc_model **out) {
    if (!ctx || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_model_new: ctx and out must not be NULL");
    *out = NULL;
    ampc_model *m = calloc(1, sizeof *m);
    if (!m) return ampci_fail(AMPC_STATUS_OOM, "ampc_model_new: out of memory");
    m->ctx = ctx, m->training = true;
    if (config) m->cfg = *config;
    ampc_status s = check_config(&m->cfg);
    if (s == AMPC_OK) {
        static ampc_status (*const declare[AMPC_MODEL_COUNT])(ampc_model *) = {ampci_gpt_declare, ampci_mlp_declare,
                                                                               ampci_cnn_declare, ampci_simple_declare};
        s = declare[m->cfg.kind](m);
    }
    if (s == AMPC_OK) s = ampci_model_build(m);
    if (s != AMPC_OK) {
        ampc_model_free(m);
        return s;
    }
    *out = m;
    return AMPC_OK;
}

void ampc_model_free(ampc_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) ampc_tensor_free(m->params[i]);
    ampc_tensor_free(m->block);
    free(m);
}

ampc_model_config ampc_model_get_config(const ampc_model *m) { return m ? m->cfg : (ampc_model_config){0}; }
void ampc_model_set_training(ampc_model *m, bool training) {
    if (m) m->training = training;
}
int ampc_model_num_params(const ampc_model *m) { return m ? m->n : 0; }
ampc_tensor *ampc_model_param(const ampc_model *m, int i) { return m && i >= 0 && i < m->n ? m->params[i] : NULL; }
int64_t ampc_model_param_count(const ampc_model *m) { return m ? ampc_tensor_numel(m->block) : 0; }
int ampc_model_num_modules(const ampc_model *m) { return m ? m->n_modules : 0; }
const char *ampc_model_module_name(const ampc_model *m, int i) {
    return m && i >= 0 && i < m->n_modules ? m->modules[i] : NULL;
}

/* The model's modules for a message, numbered siblings shown once ("blocks.N.attn"), up to size. */
static void module_list(const ampc_model *m, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->n_modules && len + 1 < size; i++) {
        char g[64], h[64];
        ampc_scope_pattern(m->modules[i], "N", g, sizeof g);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            ampc_scope_pattern(m->modules[j], "N", h, sizeof h);
            seen = !strcmp(g, h);
        }
        if (!seen) len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", g);
    }
}

ampc_status ampc_model_check_module_precision(const ampc_model *m) {
    static const char fn[] = "ampc_model_check_module_precision";
    if (!m) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: model is NULL", fn);
    for (int r = 0; r < ampc_module_precision_count(m->ctx); r++) {
        const char *pattern;
        ampc_dtype dt;
        ampc_module_precision_rule(m->ctx, r, &pattern, &dt);
        bool hit = false;
        for (int i = 0; i < m->n_modules && !hit; i++) hit = fnmatch(pattern, m->modules[i], 0) == 0;
        if (hit) continue;
        char list[1024];
        module_list(m, list, sizeof list);
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "module precision: '%s' matches no module of this %s model; its modules are %s (%s'*' "
                          "matches any run of characters)",
                          pattern, ampc_model_kind_name(m->cfg.kind), list, strstr(list, "N") ? "N: a number; " : "");
    }
    return AMPC_OK;
}

/* ---- forward and loss ---- */

const ampc_tensor *ampci_model_input(ampc_model *m, const ampc_tensor *x) {
    if (m->cfg.param_dtype == AMPC_DTYPE_F32 || !ampc_dtype_is_float(x->dtype) || x->dtype == m->cfg.param_dtype)
        return x;
    return ampc_tensor_cast(x, m->cfg.param_dtype);
}

ampc_tensor *ampci_model_linear(ampc_model *m, const char *name, const ampc_tensor *x, int w, bool bias) {
    if (!x) return NULL; /* an earlier failure: no scope (and no module region) to open */
    if (ampc_scope_push(m->ctx, name) != AMPC_OK) return NULL;
    ampc_tensor *y = ampc_linear(m->ctx, x, m->params[w], bias ? m->params[w + 1] : NULL);
    ampc_scope_pop(m->ctx);
    return y;
}

ampc_tensor *ampc_model_forward(ampc_model *m, const ampc_tensor *input) {
    if (!m) return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "ampc_model_forward: model is NULL");
    if (!input) return ampci_null_input("ampc_model_forward", "input");
    static ampc_tensor *(*const fwd[AMPC_MODEL_COUNT])(ampc_model *, const ampc_tensor *) = {
        ampci_gpt_forward, ampci_mlp_forward, ampci_cnn_forward, ampci_simple_forward};
    return fwd[m->cfg.kind](m, input);
}

ampc_tensor *ampc_model_loss(ampc_model *m, const ampc_tensor *input, const ampc_tensor *target) {
    static const char fn[] = "ampc_model_loss";
    if (!m) return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: model is NULL", fn);
    if (!target) return ampci_null_input(fn, "target");
    ampc_tensor *logits = ampc_model_forward(m, input);
    if (!logits) return NULL;
    if (m->cfg.kind == AMPC_MODEL_SIMPLE) {
        const ampc_tensor *t = target->dtype == logits->dtype ? target : ampc_tensor_cast(target, logits->dtype);
        return ampc_mse_loss(m->ctx, logits, t);
    }
    if (m->cfg.kind == AMPC_MODEL_GPT) { /* (B, T, V) against (B, T): flatten the positions */
        int64_t v = ampc_tensor_dim(logits, -1);
        ampc_tensor *flat = ampc_tensor_reshape(logits, 2, (int64_t[]){-1, v});
        ampc_tensor *tflat = ampc_tensor_reshape(target, 1, (int64_t[]){-1});
        return ampc_cross_entropy(m->ctx, flat, tflat, AMPC_IGNORE_INDEX_DEFAULT);
    }
    return ampc_cross_entropy(m->ctx, logits, target, AMPC_IGNORE_INDEX_DEFAULT);
}

ampc_status ampc_model_add_to_optim(ampc_model *m, ampc_optim *opt) {
    if (!m || !opt)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_model_add_to_optim: model and optimizer must not be NULL");
    ampc_tensor *decay[AMPCI_MAX_PARAMS], *no_decay[AMPCI_MAX_PARAMS];
    int nd = 0, nn = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->specs[i].no_decay) no_decay[nn++] = m->params[i];
        else decay[nd++] = m->params[i];
    }
    ampc_status s = ampc_optim_add_group(opt, "decay", decay, nd, NULL);
    if (s == AMPC_OK)
        s = ampc_optim_add_group(opt, "no_decay", no_decay, nn, &(ampc_param_group_params){.no_weight_decay = true});
    return s;
}
