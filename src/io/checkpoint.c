/* checkpoint.c: a training run's whole state as one safetensors file (layout in ampc.h). Saving gathers the
 * tensors by reference and the scalar state as metadata text, then writes atomically (the writer reads
 * device memory through its host map, so a file is the same whatever device wrote it). Restoring is
 * two-phase so a bad file never leaves a half-loaded model: every metadata value is parsed and every tensor
 * matched to its destination (name, dtype, shape, nothing left over) into a plan, and only then is anything
 * copied (into tensors through the tensor floor, whatever their device, so any device loads any file; only
 * the optimizer's step counts are host memory). Scalar fields are described once, by tables of (key, type,
 * offset), and the same tables write, parse and compare them. The kernels the model's context ran
 * (ampc.kernels) are recorded and, where usable, run again after a restore, so the resumed run computes the
 * same bits. */
#include "../kernels/kernels.h"
#include "../amp/amp.h"
#include "../nn/nn.h"
#include "../optim/optim.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRC_KEY "ampc.payload_crc32"
#define KERNELS_KEY "ampc.kernels"

/* ---- scalar fields: one table per struct ---- */

typedef enum ftype { F_INT, F_I64, F_U64, F_DOUBLE, F_BOOL, F_DTYPE, F_KIND, F_OPTIM, F_HIDDEN } ftype;

typedef struct field {
    const char *key;
    ftype type;
    size_t off;
} field;

#define MF(k, t, m)                                                                                                    \
    { "ampc.model." k, t, offsetof(ampc_model_config, m) }
static const field model_fields[] = {
    MF("kind", F_KIND, kind),
    MF("param_dtype", F_DTYPE, param_dtype),
    MF("seed", F_U64, seed),
    MF("layers", F_INT, layers),
    MF("d_model", F_INT, d_model),
    MF("heads", F_INT, heads),
    MF("context", F_INT, context),
    MF("vocab", F_INT, vocab),
    MF("dropout", F_DOUBLE, dropout),
    MF("in_features", F_INT, in_features),
    MF("hidden", F_HIDDEN, hidden),
    MF("in_channels", F_INT, in_channels),
    MF("image_size", F_INT, image_size),
    MF("classes", F_INT, classes),
};

#define SF(k, t, m)                                                                                                    \
    { "ampc.scaler." k, t, offsetof(ampc_grad_scaler_state, m) }
static const field scaler_fields[] = {
    SF("enabled", F_BOOL, config.enabled),
    SF("scale", F_DOUBLE, scale),
    SF("growth_tracker", F_I64, growth_tracker),
    SF("hysteresis_tracker", F_I64, hysteresis_tracker),
    SF("steps", F_I64, steps),
    SF("skipped_steps", F_I64, skipped_steps),
    SF("init_scale", F_DOUBLE, config.init_scale),
    SF("growth_factor", F_DOUBLE, config.growth_factor),
    SF("backoff_factor", F_DOUBLE, config.backoff_factor),
    SF("growth_interval", F_I64, config.growth_interval),
    SF("min_scale", F_DOUBLE, config.min_scale),
    SF("max_scale", F_DOUBLE, config.max_scale),
    SF("hysteresis", F_INT, config.hysteresis),
};

/* The optimizer's record: what restore needs (kind, lr, steps) and what a reader wants to see. */
typedef struct optim_rec {
    ampc_optim_kind kind;
    double lr, base_lr, weight_decay, momentum, dampening, beta1, beta2, eps;
    bool nesterov;
    int64_t steps;
    int master;
} optim_rec;
#define OF(k, t, m)                                                                                                    \
    { "ampc.optim." k, t, offsetof(optim_rec, m) }
static const field optim_fields[] = {
    OF("kind", F_OPTIM, kind),
    OF("lr", F_DOUBLE, lr),
    OF("steps", F_I64, steps),
    OF("base_lr", F_DOUBLE, base_lr),
    OF("weight_decay", F_DOUBLE, weight_decay),
    OF("momentum", F_DOUBLE, momentum),
    OF("dampening", F_DOUBLE, dampening),
    OF("nesterov", F_BOOL, nesterov),
    OF("beta1", F_DOUBLE, beta1),
    OF("beta2", F_DOUBLE, beta2),
    OF("eps", F_DOUBLE, eps),
    OF("master", F_INT, master),
};

/* Step, RNG and data cursor. */
typedef struct misc_rec {
    int64_t step;
    uint64_t rng_seed, rng_stream, rng_counter;
    int64_t epoch, position, samples;
    int64_t world_size;
} misc_rec;
#define XF(k, t, m)                                                                                                    \
    { "ampc." k, t, offsetof(misc_rec, m) }
static const field step_fields[] = {XF("step", F_I64, step)};
/* written by data-parallel runs only (a file of one process stays as it was), so absent means 1 */
static const field world_fields[] = {XF("world_size", F_I64, world_size)};
static const field rng_fields[] = {XF("rng.seed", F_U64, rng_seed), XF("rng.stream", F_U64, rng_stream),
                                   XF("rng.counter", F_U64, rng_counter)};
static const field data_fields[] = {XF("data.epoch", F_I64, epoch), XF("data.position", F_I64, position),
                                    XF("data.samples", F_I64, samples)};

#define NF(t) (int)(sizeof t / sizeof t[0])

static void format_field(const field *f, const void *base, char *buf, size_t size) {
    const char *p = (const char *)base + f->off;
    switch (f->type) {
    case F_INT: snprintf(buf, size, "%d", *(const int *)p); break;
    case F_I64: snprintf(buf, size, "%" PRId64, *(const int64_t *)p); break;
    case F_U64: snprintf(buf, size, "%" PRIu64, *(const uint64_t *)p); break;
    case F_DOUBLE: { /* the shortest of 15..17 digits that reads back exactly */
        double d = *(const double *)p;
        for (int digits = 15; digits <= 17; digits++)
            if (snprintf(buf, size, "%.*g", digits, d) > 0 && strtod(buf, NULL) == d) break;
        break;
    }
    case F_BOOL: snprintf(buf, size, "%s", *(const bool *)p ? "true" : "false"); break;
    case F_DTYPE: snprintf(buf, size, "%s", ampc_dtype_name(*(const ampc_dtype *)p)); break;
    case F_KIND: snprintf(buf, size, "%s", ampc_model_kind_name(*(const ampc_model_kind *)p)); break;
    case F_OPTIM: snprintf(buf, size, "%s", *(const ampc_optim_kind *)p == AMPC_OPTIM_SGD ? "sgd" : "adamw"); break;
    case F_HIDDEN: {
        const int *h = (const int *)p;
        size_t n = 0;
        buf[0] = '\0';
        for (int i = 0; i < AMPC_MODEL_MAX_HIDDEN && h[i] && n < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s%d", i ? "," : "", h[i]);
        break;
    }
    }
}

static bool parse_i64(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!*v || !(*v == '-' || (*v >= '0' && *v <= '9'))) return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static bool parse_hidden(const char *v, int *h) {
    memset(h, 0, AMPC_MODEL_MAX_HIDDEN * sizeof *h);
    if (!*v) return true;
    for (int i = 0;; i++) {
        char *end;
        errno = 0;
        long x = *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
        if (x <= 0 || x > (1 << 30) || errno || i == AMPC_MODEL_MAX_HIDDEN) return false;
        h[i] = (int)x;
        if (!*end) return true;
        if (*end != ',') return false;
        v = end + 1;
    }
}

/* Parses one value into base; false when it does not fit the type. */
static bool parse_value(const field *f, const char *v, void *base) {
    char *p = (char *)base + f->off, *end;
    int64_t i;
    switch (f->type) {
    case F_INT: return parse_i64(v, INT32_MIN, INT32_MAX, &i) ? (*(int *)p = (int)i, true) : false;
    case F_I64: return parse_i64(v, INT64_MIN, INT64_MAX, (int64_t *)p);
    case F_U64: {
        if (!(*v >= '0' && *v <= '9')) return false;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 10);
        return !errno && !*end ? (*(uint64_t *)p = u, true) : false;
    }
    case F_DOUBLE: {
        if (!*v || *v == ' ') return false;
        double d = strtod(v, &end);
        return !*end && !isnan(d) ? (*(double *)p = d, true) : false;
    }
    case F_BOOL:
        if (strcmp(v, "true") && strcmp(v, "false")) return false;
        *(bool *)p = v[0] == 't';
        return true;
    case F_DTYPE: {
        for (int d = 0; d < AMPC_DTYPE_COUNT; d++)
            if (!strcmp(v, ampc_dtype_name((ampc_dtype)d))) return *(ampc_dtype *)p = (ampc_dtype)d, true;
        return false;
    }
    case F_KIND: return ampc_model_kind_parse(v, (ampc_model_kind *)p) == AMPC_OK;
    case F_OPTIM:
        if (strcmp(v, "sgd") && strcmp(v, "adamw")) return false;
        *(ampc_optim_kind *)p = v[0] == 's' ? AMPC_OPTIM_SGD : AMPC_OPTIM_ADAMW;
        return true;
    case F_HIDDEN: return parse_hidden(v, (int *)p);
    }
    return false;
}

static const char *expected(ftype t) {
    static const char *const e[] = {"a 32-bit integer",
                                    "a 64-bit integer",
                                    "an unsigned 64-bit integer",
                                    "a number",
                                    "true or false",
                                    "a dtype name (F32, BF16, F16, ...)",
                                    "gpt, mlp, cnn or simple",
                                    "sgd or adamw",
                                    "comma-separated positive widths"};
    return e[t];
}

/* Parses every field of a table from ck's metadata into base. */
static ampc_status parse_fields(const ampc_safetensors *ck, const field *fs, int n, void *base) {
    for (int i = 0; i < n; i++) {
        const char *v = ampc_safetensors_metadata(ck, fs[i].key);
        if (!v)
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata %s is missing", ampc_safetensors_name(ck), fs[i].key);
        if (!parse_value(&fs[i], v, base))
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata %s is \"%.64s\"; expected %s",
                              ampc_safetensors_name(ck), fs[i].key, v, expected(fs[i].type));
    }
    return AMPC_OK;
}

static ampc_status put_fields(ampc_safetensors_writer *w, const field *fs, int n, const void *base) {
    char buf[160];
    for (int i = 0; i < n; i++) {
        format_field(&fs[i], base, buf, sizeof buf);
        ampc_status s = ampc_safetensors_set_metadata(w, fs[i].key, buf);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

static optim_rec optim_record(const ampc_optim *o) {
    const ampc_optim_params *c = ampci_optim_config(o);
    return (optim_rec){.kind = c->kind,
                       .lr = ampc_optim_lr(o),
                       .base_lr = c->lr,
                       .weight_decay = c->weight_decay,
                       .momentum = c->momentum,
                       .dampening = c->dampening,
                       .beta1 = c->beta1,
                       .beta2 = c->beta2,
                       .eps = c->eps,
                       .nesterov = c->nesterov,
                       .steps = ampc_optim_steps(o),
                       .master = (int)c->master};
}

static int tensor_shape(const ampc_tensor *t, int64_t *shape) {
    int nd = ampc_tensor_ndim(t);
    for (int d = 0; d < nd; d++) shape[d] = ampc_tensor_dim(t, d);
    return nd;
}

/* ---- save ---- */

/* A tensor entry (device memory, read through the writer's host map) or host memory (the step count). */
static ampc_status save_entry(void *w, const char *name, ampc_tensor *t, ampc_dtype dt, int nd, const int64_t *shape,
                              void *data) {
    return t ? ampc_safetensors_add_tensor(w, name, t) : ampc_safetensors_add(w, name, dt, nd, shape, data);
}

/* Written only when on, so files without stochastic rounding keep today's metadata. */
#define SR_KEY "ampc.optim.stochastic_rounding"

static ampc_status add_optim(ampc_safetensors_writer *w, ampc_optim *opt) {
    ampc_status s = ampci_optim_each_state(opt, save_entry, w);
    optim_rec r = optim_record(opt);
    if (s == AMPC_OK) s = put_fields(w, optim_fields, NF(optim_fields), &r);
    if (s == AMPC_OK && ampci_optim_config(opt)->stochastic_rounding)
        s = ampc_safetensors_set_metadata(w, SR_KEY, "true");
    return s;
}

static ampc_status add_scalars(ampc_safetensors_writer *w, const ampc_checkpoint_state *st) {
    ampc_model_config mc = ampc_model_get_config(st->model);
    misc_rec x = {.step = st->step};
    ampc_status s = put_fields(w, model_fields, NF(model_fields), &mc);
    if (s == AMPC_OK) s = put_fields(w, step_fields, NF(step_fields), &x);
    x.world_size = st->world_size;
    if (s == AMPC_OK && st->world_size > 1) s = put_fields(w, world_fields, NF(world_fields), &x);
    if (s == AMPC_OK && st->scaler) {
        ampc_grad_scaler_state gs;
        s = ampc_grad_scaler_state_save(st->scaler, &gs);
        if (s == AMPC_OK) s = put_fields(w, scaler_fields, NF(scaler_fields), &gs);
    }
    if (s == AMPC_OK && st->rng) {
        x.rng_seed = st->rng->seed, x.rng_stream = st->rng->stream, x.rng_counter = st->rng->counter;
        s = put_fields(w, rng_fields, NF(rng_fields), &x);
    }
    if (s == AMPC_OK && st->loader) {
        ampc_loader_cursor c;
        s = ampc_loader_get_cursor(st->loader, &c);
        x.epoch = c.epoch, x.position = c.position, x.samples = ampc_loader_num_samples(st->loader);
        if (s == AMPC_OK) s = put_fields(w, data_fields, NF(data_fields), &x);
    }
    return s;
}

/* The kernels of every cell with a choice in the model's context (choices.c formats them). */
static ampc_status add_kernels(ampc_safetensors_writer *w, const ampc_model *m) {
    int len = ampci_kernels_format(m->ctx, NULL, 0);
    char *v = malloc((size_t)len + 1);
    if (!v) return ampci_fail(AMPC_STATUS_OOM, "ampc_checkpoint_save: out of memory");
    ampci_kernels_format(m->ctx, v, (size_t)len + 1);
    ampc_status s = ampc_safetensors_set_metadata(w, KERNELS_KEY, v);
    free(v);
    return s;
}

/* The context's module-precision rules (ampc.module_precision), when it has any: what the run's modules
 * computed in, for `ampc inspect` and for a resume to compare with. */
static ampc_status add_module_precision(ampc_safetensors_writer *w, const ampc_model *m) {
    size_t len = ampc_module_precision_string(m->ctx, NULL, 0);
    if (len == 0) return AMPC_OK;
    char *v = malloc(len + 1);
    if (!v) return ampci_fail(AMPC_STATUS_OOM, "ampc_checkpoint_save: out of memory");
    ampc_module_precision_string(m->ctx, v, len + 1);
    ampc_status s = ampc_safetensors_set_metadata(w, "ampc.module_precision", v);
    free(v);
    return s;
}

/* ---- FP8 state: fp8.<param>.scale (3) and fp8.<param>.amax_history (3, L) per parameter with state,
 * under metadata ampc.fp8.recipe ("format scaling history amax_compute margin") ---- */
#define FP8_KEY "ampc.fp8.recipe"

static ampc_status add_fp8(ampc_safetensors_writer *w, const ampc_model *model) {
    const ampc_ctx *ctx = model->ctx;
    const ampc_fp8_recipe *r = ampci_fp8_recipe(ctx);
    if (!r || !ampci_fp8_meta_at(ctx, 0)) return AMPC_OK;
    char v[96], name[128];
    snprintf(v, sizeof v, "%d %d %d %d %d", (int)r->format, (int)r->scaling, r->amax_history_len, (int)r->amax_compute,
             r->margin);
    ampc_status s = ampc_safetensors_set_metadata(w, FP8_KEY, v);
    int64_t len = r->amax_history_len;
    for (int i = 0; s == AMPC_OK && i < model->n; i++) {
        const ampci_fp8_meta *m = ampci_fp8_meta_find(ctx, model->params[i]);
        if (!m) continue;
        snprintf(name, sizeof name, "fp8.%s.scale", model->params[i]->name);
        s = ampc_safetensors_add(w, name, AMPC_DTYPE_F32, 1, (int64_t[]){AMPCI_FP8_ROLES}, m->scale);
        snprintf(name, sizeof name, "fp8.%s.amax_history", model->params[i]->name);
        if (s == AMPC_OK)
            s = ampc_safetensors_add(w, name, AMPC_DTYPE_F32, 2, (int64_t[]){AMPCI_FP8_ROLES, len}, m->history);
    }
    return s;
}

static ampc_status add_header(ampc_safetensors_writer *w, const ampc_checkpoint_state *st) {
    static const char fn[] = "ampc_checkpoint_save";
    char v[16];
    snprintf(v, sizeof v, "%d", AMPC_CHECKPOINT_VERSION);
    const char *kv[] = {"format", "pt",           "ampc.format", AMPC_CHECKPOINT_FORMAT, "ampc.format_version",
                        v,        "ampc.version", ampc_version()};
    for (int i = 0; i < 8; i += 2) {
        ampc_status s = ampc_safetensors_set_metadata(w, kv[i], kv[i + 1]);
        if (s != AMPC_OK) return s;
    }
    for (int i = 0; i < st->n_extra; i++) {
        const char *k = st->extra[2 * i], *val = st->extra[2 * i + 1];
        if (!k || !val || !strncmp(k, "ampc.", 5) || !strcmp(k, "format"))
            return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: extra metadata key \"%s\" is reserved or NULL", fn,
                              k ? k : "(null)");
        ampc_status s = ampc_safetensors_set_metadata(w, k, val);
        if (s != AMPC_OK) return s;
    }
    return ampc_safetensors_set_checksum_key(w, CRC_KEY);
}

ampc_status ampc_checkpoint_save(const char *path, const ampc_checkpoint_state *st) {
    if (!path || !st || !st->model || (st->n_extra > 0 && !st->extra) || st->n_extra < 0 || st->step < 0)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_checkpoint_save: path, state and state->model must be set "
                          "(extra %d entries, step %lld)",
                          st ? st->n_extra : 0, st ? (long long)st->step : 0);
    ampc_safetensors_writer *w;
    ampc_status s = ampc_safetensors_writer_new(&w);
    for (int i = 0, n = ampc_model_num_params(st->model); i < n && s == AMPC_OK; i++) {
        const ampc_tensor *p = ampc_model_param(st->model, i);
        s = ampc_safetensors_add_tensor(w, ampc_tensor_name(p), p);
    }
    if (s == AMPC_OK && st->optim) s = add_optim(w, st->optim);
    if (s == AMPC_OK) s = add_header(w, st);
    if (s == AMPC_OK) s = add_scalars(w, st);
    if (s == AMPC_OK) s = add_kernels(w, st->model);
    if (s == AMPC_OK) s = add_module_precision(w, st->model);
    if (s == AMPC_OK) s = add_fp8(w, st->model);
    if (s == AMPC_OK) s = ampc_safetensors_write(w, path);
    ampc_safetensors_writer_free(w);
    return s;
}

/* ---- open ---- */

ampc_status ampc_checkpoint_open(const char *path, ampc_safetensors **out) {
    if (!path || !out)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_checkpoint_open: path and out must not be NULL");
    *out = NULL;
    ampc_safetensors *ck;
    ampc_status s = ampc_safetensors_read(path, &ck);
    if (s != AMPC_OK) return s;
    const char *fmt = ampc_safetensors_metadata(ck, "ampc.format");
    const char *ver = ampc_safetensors_metadata(ck, "ampc.format_version");
    int64_t v = 0;
    if (!fmt || strcmp(fmt, AMPC_CHECKPOINT_FORMAT))
        s = ampci_fail(AMPC_STATUS_FORMAT,
                       "%s: not an ampc checkpoint (metadata ampc.format is %s%s%s; a safetensors "
                       "file with %d tensors)",
                       path, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "", ampc_safetensors_count(ck));
    else if (!ver || !parse_i64(ver, 1, INT32_MAX, &v))
        s = ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata ampc.format_version is %s; expected a positive integer", path,
                       ver ? ver : "missing");
    else if (v != AMPC_CHECKPOINT_VERSION)
        s = ampci_fail(AMPC_STATUS_FORMAT, "%s: checkpoint format version %lld; this ampc (%s) reads version %d", path,
                       (long long)v, ampc_version(), AMPC_CHECKPOINT_VERSION);
    else s = ampc_safetensors_verify_checksum(ck, CRC_KEY);
    if (s != AMPC_OK) {
        ampc_safetensors_free(ck);
        return s;
    }
    *out = ck;
    return AMPC_OK;
}

ampc_status ampc_checkpoint_model_config(const ampc_safetensors *ck, ampc_model_config *out) {
    if (!ck || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_checkpoint_model_config: NULL argument");
    ampc_model_config c = {0};
    ampc_status s = parse_fields(ck, model_fields, NF(model_fields), &c);
    if (s == AMPC_OK) *out = c;
    return s;
}

/* ---- restore: plan, then copy ---- */

typedef struct copy_op {
    const ampc_st_tensor *src;
    ampc_tensor *dst_t; /* a tensor destination (version counters move; any device) ... */
    void *dst;          /* ... or host memory (the optimizer's step counts) */
} copy_op;

typedef struct plan {
    const ampc_safetensors *ck;
    copy_op *ops;
    int n, cap;
    bool *used;          /* per file tensor */
    ampc_fp8_recipe fp8; /* the recorded FP8 recipe, when has_fp8 */
    bool has_fp8;
} plan;

static const char *ck_name(const plan *pl) { return ampc_safetensors_name(pl->ck); }

static void shape_str(char *buf, size_t size, int nd, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < nd && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* Finds name in the file and checks its dtype and shape against what the destination holds. */
static ampc_status plan_add(plan *pl, const char *name, ampc_dtype dt, int nd, const int64_t *shape, ampc_tensor *dst_t,
                            void *dst) {
    const ampc_st_tensor *t = ampc_safetensors_find(pl->ck, name);
    if (!t)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: tensor \"%s\" is missing (the checkpoint was saved from another "
                          "model or optimizer)",
                          ck_name(pl), name);
    bool same = t->dtype == dt && t->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char want[96], have[96];
        shape_str(want, sizeof want, nd, shape), shape_str(have, sizeof have, t->ndim, t->shape);
        return ampci_fail(t->dtype == dt ? AMPC_STATUS_SHAPE : AMPC_STATUS_DTYPE,
                          "%s: tensor \"%s\" is %s %s; this run "
                          "expects %s %s",
                          ck_name(pl), name, t->dtype_name, have, ampc_dtype_name(dt), want);
    }
    if (pl->n == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 64;
        copy_op *o = realloc(pl->ops, (size_t)cap * sizeof *o);
        if (!o) return ampci_fail(AMPC_STATUS_OOM, "ampc_checkpoint_restore: out of memory");
        pl->ops = o, pl->cap = cap;
    }
    pl->ops[pl->n++] = (copy_op){t, dst_t, dst};
    pl->used[t - ampc_safetensors_tensor(pl->ck, 0)] = true;
    return AMPC_OK;
}

static ampc_status plan_tensor(plan *pl, const char *name, ampc_tensor *t) {
    int64_t shape[AMPC_MAX_DIMS];
    int nd = tensor_shape(t, shape);
    return plan_add(pl, name, ampc_tensor_dtype(t), nd, shape, t, NULL);
}

static ampc_status plan_entry(void *pl, const char *name, ampc_tensor *t, ampc_dtype dt, int nd, const int64_t *shape,
                              void *data) {
    return plan_add(pl, name, dt, nd, shape, t, data);
}

/* Compares the recorded model configuration with the model's, naming the first field that differs. */
static ampc_status check_model(const plan *pl, const ampc_model *m) {
    ampc_model_config have = ampc_model_get_config(m), saved = {0};
    ampc_status s = parse_fields(pl->ck, model_fields, NF(model_fields), &saved);
    for (int i = 0; s == AMPC_OK && i < NF(model_fields); i++) {
        char a[160], b[160];
        format_field(&model_fields[i], &saved, a, sizeof a), format_field(&model_fields[i], &have, b, sizeof b);
        if (strcmp(a, b))
            s = ampci_fail(AMPC_STATUS_SHAPE, "%s: checkpoint for another model: %s is %s, this model has %s",
                           ck_name(pl), model_fields[i].key, a, b);
    }
    return s;
}

/* Every tensor of the file must have found its place; optimizer state only matters when an optimizer is
 * restored (a model alone may be loaded from a full checkpoint). */
static ampc_status check_leftovers(const plan *pl, bool with_optim) {
    for (int i = 0, n = ampc_safetensors_count(pl->ck); i < n; i++) {
        const char *name = ampc_safetensors_tensor(pl->ck, i)->name;
        bool state = !strncmp(name, "optim.", 6) || !strncmp(name, "master.", 7);
        if (pl->used[i] || (state && !with_optim)) continue;
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: tensor \"%s\" is not a %s of this run", ck_name(pl), name,
                          state ? "state tensor of the optimizer" : "parameter of the model");
    }
    return AMPC_OK;
}

static ampc_status check_optim(const plan *pl, const ampc_optim *opt, optim_rec *rec) {
    ampc_status s = parse_fields(pl->ck, optim_fields, NF(optim_fields), rec);
    if (s != AMPC_OK) return s;
    optim_rec have = optim_record(opt);
    if (rec->kind != have.kind || rec->master != have.master)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: the optimizer was %s with master mode %d; this run uses %s with %d",
                          ck_name(pl), rec->kind == AMPC_OPTIM_SGD ? "sgd" : "adamw", rec->master,
                          have.kind == AMPC_OPTIM_SGD ? "sgd" : "adamw", have.master);
    const char *sr = ampc_safetensors_metadata(pl->ck, SR_KEY);
    bool was_sr = sr && !strcmp(sr, "true"), is_sr = ampci_optim_config(opt)->stochastic_rounding;
    if (was_sr != is_sr) /* the same run continues only with the same rounding */
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: the optimizer rounded updates %s; this run rounds them %s",
                          ck_name(pl), was_sr ? "stochastically" : "to nearest",
                          is_sr ? "stochastically" : "to nearest");
    if (!(rec->lr >= 0) || rec->steps < 0)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata ampc.optim.lr %g / ampc.optim.steps %lld out of range",
                          ck_name(pl), rec->lr, (long long)rec->steps);
    return AMPC_OK;
}

/* The scaler, RNG and data cursor records (those the caller restores); checked, nothing applied. */
static ampc_status check_scalars(const plan *pl, const ampc_checkpoint_state *st, misc_rec *x,
                                 ampc_grad_scaler_state *gs, bool *load_scaler) {
    ampc_status s = parse_fields(pl->ck, step_fields, NF(step_fields), x);
    if (s == AMPC_OK && x->step < 0)
        s = ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata ampc.step is %lld", ck_name(pl), (long long)x->step);
    x->world_size = 1;
    if (s == AMPC_OK && ampc_safetensors_metadata(pl->ck, world_fields[0].key) &&
        (s = parse_fields(pl->ck, world_fields, NF(world_fields), x)) == AMPC_OK && x->world_size < 1)
        s = ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata ampc.world_size is %lld", ck_name(pl),
                       (long long)x->world_size);
    *load_scaler = false;
    if (s == AMPC_OK && st->scaler && ampc_grad_scaler_enabled(st->scaler)) {
        if (!ampc_safetensors_metadata(pl->ck, "ampc.scaler.enabled"))
            s = ampci_fail(AMPC_STATUS_FORMAT,
                           "%s: no GradScaler state (metadata ampc.scaler.*), but this run scales "
                           "the loss",
                           ck_name(pl));
        else if ((s = parse_fields(pl->ck, scaler_fields, NF(scaler_fields), gs)) == AMPC_OK)
            *load_scaler = gs->config.enabled; /* a disabled scaler's state leaves a fresh one as it is */
    }
    if (s == AMPC_OK && st->rng) s = parse_fields(pl->ck, rng_fields, NF(rng_fields), x);
    if (s == AMPC_OK && st->loader && (s = parse_fields(pl->ck, data_fields, NF(data_fields), x)) == AMPC_OK) {
        int64_t n = ampc_loader_num_samples(st->loader);
        if (x->samples != n)
            s = ampci_fail(AMPC_STATUS_FORMAT,
                           "%s: the data cursor is for %lld samples per epoch; this loader has %lld "
                           "(another data set, context or batch size)",
                           ck_name(pl), (long long)x->samples, (long long)n);
        else if (x->epoch < 0 || x->position < 0 || x->position > n)
            s = ampci_fail(AMPC_STATUS_FORMAT, "%s: data cursor epoch %lld, position %lld is outside [0, %lld]",
                           ck_name(pl), (long long)x->epoch, (long long)x->position, (long long)n);
    }
    return s;
}

/* The FP8 state of parameter p in the file, checked and marked used: *scale and *hist (NULL when p has
 * none). */
static ampc_status plan_fp8_param(plan *pl, const ampc_tensor *p, int len, const ampc_st_tensor **scale,
                                  const ampc_st_tensor **hist) {
    char a[128], b[128];
    snprintf(a, sizeof a, "fp8.%s.scale", p->name), snprintf(b, sizeof b, "fp8.%s.amax_history", p->name);
    *scale = ampc_safetensors_find(pl->ck, a), *hist = ampc_safetensors_find(pl->ck, b);
    if (!*scale && !*hist) return AMPC_OK;
    if (!*scale || !*hist || (*scale)->dtype != AMPC_DTYPE_F32 || (*hist)->dtype != AMPC_DTYPE_F32 ||
        (*scale)->numel != AMPCI_FP8_ROLES || (*hist)->numel != (int64_t)AMPCI_FP8_ROLES * len)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: FP8 state of '%s': expected F32 %s (3) and %s (3, %d)", ck_name(pl),
                          p->name, a, b, len);
    pl->used[*scale - ampc_safetensors_tensor(pl->ck, 0)] = pl->used[*hist - ampc_safetensors_tensor(pl->ck, 0)] = true;
    return AMPC_OK;
}

/* The recorded FP8 recipe (*has false without one) and every parameter's state checked. */
static ampc_status plan_fp8(plan *pl, const ampc_model *m, ampc_fp8_recipe *r, bool *has) {
    const char *v = ampc_safetensors_metadata(pl->ck, FP8_KEY);
    int f, sc, len, am, margin;
    *has = v != NULL;
    if (!v) return AMPC_OK;
    if (sscanf(v, "%d %d %d %d %d", &f, &sc, &len, &am, &margin) != 5 || len < 1)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata %s is \"%s\"", ck_name(pl), FP8_KEY, v);
    *r = (ampc_fp8_recipe){(ampc_fp8_format)f, (ampc_fp8_scaling)sc, len, (ampc_fp8_amax_compute)am, margin};
    const char *why = ampci_fp8_recipe_problem(r); /* here, so that restore_fp8 cannot fail on it */
    if (why) return ampci_fail(AMPC_STATUS_FORMAT, "%s: metadata %s is \"%s\": %s", ck_name(pl), FP8_KEY, v, why);
    if (!ampci_fp8_compatible(m->ctx, r)) {
        char was[96];
        ampci_fp8_describe(r, was, sizeof was);
        return ampci_fail(AMPC_STATUS_STATE,
                          "%s: its FP8 state was made under the recipe %s; this context already holds FP8 state "
                          "under another",
                          ck_name(pl), was);
    }
    const ampc_st_tensor *a, *b;
    ampc_status s = AMPC_OK;
    for (int i = 0; i < m->n && s == AMPC_OK; i++) s = plan_fp8_param(pl, m->params[i], len, &a, &b);
    return s;
}

/* Each parameter's state, found again (the plan checked it) and handed to the context. */
static ampc_status restore_fp8(plan *pl, const ampc_model *m, const ampc_fp8_recipe *r) {
    const ampc_st_tensor *a, *b;
    ampc_status s = AMPC_OK;
    for (int i = 0; i < m->n && s == AMPC_OK; i++)
        if ((s = plan_fp8_param(pl, m->params[i], r->amax_history_len, &a, &b)) == AMPC_OK && a)
            s = ampci_fp8_restore(m->ctx, r, m->params[i], a->data, b->data, r->amax_history_len);
    return s;
}

static ampc_status make_plan(plan *pl, const ampc_checkpoint_state *st, optim_rec *rec) {
    ampc_status s = check_model(pl, st->model);
    for (int i = 0, n = ampc_model_num_params(st->model); i < n && s == AMPC_OK; i++) {
        ampc_tensor *p = ampc_model_param(st->model, i);
        s = plan_tensor(pl, ampc_tensor_name(p), p);
    }
    if (s == AMPC_OK && st->optim && (s = check_optim(pl, st->optim, rec)) == AMPC_OK)
        s = ampci_optim_each_state(st->optim, plan_entry, pl);
    if (s == AMPC_OK) s = plan_fp8(pl, st->model, &pl->fp8, &pl->has_fp8);
    if (s == AMPC_OK) s = check_leftovers(pl, st->optim != NULL);
    return s;
}

static void apply(const plan *pl) {
    for (int i = 0; i < pl->n; i++) {
        const copy_op *o = &pl->ops[i];
        if (o->dst_t) ampc_tensor_copy_from(o->dst_t, o->src->data, o->src->dtype); /* moves the version */
        else memcpy(o->dst, o->src->data, (size_t)(o->src->end - o->src->begin));   /* host memory */
    }
}

ampc_status ampc_checkpoint_restore(const ampc_safetensors *ck, ampc_checkpoint_state *st) {
    if (!ck || !st || !st->model)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_checkpoint_restore: checkpoint, state and state->model must be set");
    plan pl = {.ck = ck, .used = calloc((size_t)ampc_safetensors_count(ck) + 1, sizeof(bool))};
    if (!pl.used) return ampci_fail(AMPC_STATUS_OOM, "ampc_checkpoint_restore: out of memory");
    optim_rec rec = {0};
    misc_rec x = {0};
    ampc_grad_scaler_state gs = {0};
    bool load_scaler = false;
    struct ampc_kernels *kernels = NULL; /* the recorded kernels, when they differ from the context's */
    const char *recorded = ampc_safetensors_metadata(ck, KERNELS_KEY);
    ampc_status s = make_plan(&pl, st, &rec);
    if (s == AMPC_OK) s = check_scalars(&pl, st, &x, &gs, &load_scaler);
    if (s == AMPC_OK && recorded) s = ampci_kernels_recorded(st->model->ctx, ck_name(&pl), recorded, &kernels);
    /* The scaler checks its own state as it loads; it goes last among the fallible steps. */
    if (s == AMPC_OK && load_scaler && ampc_grad_scaler_state_load(st->scaler, &gs) != AMPC_OK) /* a bad file */
        s = ampci_fail(AMPC_STATUS_FORMAT, "%s: GradScaler state: %s", ck_name(&pl), ampc_last_error());
    if (s == AMPC_OK) {
        apply(&pl);
        if (pl.has_fp8) s = restore_fp8(&pl, st->model, &pl.fp8); /* checked in the plan: fails only for memory */
        if (st->optim) ampci_optim_restore_counters(st->optim, rec.lr, rec.steps);
        if (st->rng) *st->rng = (ampc_rng){x.rng_seed, x.rng_stream, x.rng_counter};
        if (st->loader) ampc_loader_set_cursor(st->loader, &(ampc_loader_cursor){x.epoch, x.position});
        if (kernels) ampci_kernels_adopt(st->model->ctx, kernels), kernels = NULL;
        st->step = x.step;
        st->world_size = (int)x.world_size;
    }
    free(kernels);
    free(pl.ops), free(pl.used);
    return s;
}
