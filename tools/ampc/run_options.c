/* run_options.c: the options `ampc train` and `ampc compare` share, as one table that
 * writes into a run_config, and the defaults that depend on other options: batch, learning rate and
 * run length follow the model and the data (a character GPT on text wants different numbers from a CNN
 * on Fashion-MNIST), unless given. */
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const precision_names[PREC_COUNT + 1] = {"fp32", "bf16", "fp16", "fp8", NULL};
static const char *const reduce_names[] = {"fp32", "bf16", "fp16", NULL}; /* --reduce-dtype: a precision index */

/* Choice lists, each in the order of the enum its option stores into (CLI_CHOICE stores the index). */
static const char *const model_names[] = {"gpt", "mlp", "cnn", "simple", NULL};        /* ampc_model_kind */
static const char *const scaler_modes[] = {"auto", "on", "off", NULL};                 /* run_scaler_mode */
static const char *const tables[] = {"tutorial", "pytorch-cpu", "pytorch-cuda", NULL}; /* ampc_autocast_table */
static const char *const fp32_precisions[] = {"highest", "high", "medium", NULL};      /* ampc_fp32_precision */
static const char *const optimizers[] = {"adamw", "sgd", NULL};                        /* run_optimizer */
static const char *const schedules[] = {"constant", "cosine", NULL};                   /* run_lr_schedule */
static const char *const dtypes[] = {"f32", "bf16", "f16", NULL};                      /* run_param_dtype */
static const char *const masters[] = {"auto", "none", NULL};                           /* ampc_master_mode */
static const char *const fp8_formats[] = {"hybrid", "e4m3", NULL};                     /* ampc_fp8_format */
static const char *const fp8_scalings[] = {"delayed", "current", NULL};                /* ampc_fp8_scaling */
static const char *const fp8_amax[] = {"max", "most-recent", NULL};                    /* ampc_fp8_amax_compute */
static const char *const preset_names[] = {"gpt2-small", "gpt2-medium", NULL};         /* presets[] */

/* --preset: GPT-2's shapes (the vocabulary is GPT-2's 50257 tokens padded to a multiple of 128, as llm.c
 * and nanoGPT pad it, so the output layer's GEMM tiles evenly). */
static const char *const preset_opts[5] = {"layers", "d-model", "heads", "context", "vocab"};
static const int64_t presets[][5] = {{12, 768, 12, 1024, 50304}, {24, 1024, 16, 1024, 50304}};
/* A CLI_CHOICE option writes an int; every enum above is int-sized (gcc: unsigned int or int). */
_Static_assert(sizeof(ampc_fp8_format) == sizeof(int) && sizeof(ampc_fp8_scaling) == sizeof(int) &&
                   sizeof(ampc_fp8_amax_compute) == sizeof(int),
               "CLI_CHOICE outputs are ints");
_Static_assert(sizeof(run_scaler_mode) == sizeof(int) && sizeof(run_optimizer) == sizeof(int) &&
                   sizeof(run_lr_schedule) == sizeof(int) && sizeof(ampc_model_kind) == sizeof(int) &&
                   sizeof(ampc_autocast_table) == sizeof(int) && sizeof(ampc_fp32_precision) == sizeof(int) &&
                   sizeof(ampc_master_mode) == sizeof(int) && sizeof(run_param_dtype) == sizeof(int),
               "CLI_CHOICE outputs are ints");

/* --hidden 1024,1024: up to AMPC_MODEL_MAX_HIDDEN positive widths */
static bool parse_hidden(const char *v, void *out, char *why, size_t why_size) {
    int64_t *h = out;
    int n = 0;
    memset(h, 0, AMPC_MODEL_MAX_HIDDEN * sizeof *h);
    for (const char *p = v; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 1 << 20 || n == AMPC_MODEL_MAX_HIDDEN || (*end && *end != ',')) {
            snprintf(why, why_size, "1 to %d comma-separated widths in 1..%d", AMPC_MODEL_MAX_HIDDEN, 1 << 20);
            return false;
        }
        h[n++] = x;
        p = *end ? end + 1 : end;
    }
    return n > 0;
}

static bool known_op(const char *name) {
    for (int i = 0; ampc_autocast_op_name(i); i++)
        if (strcmp(name, ampc_autocast_op_name(i)) == 0) return true;
    return false;
}

/* --fp32-ops softmax,gelu: op names autocast knows */
/* --device: a device this build has and this machine holds (the library says which are not). */
bool run_parse_device(const char *v, void *out, char *why, size_t why_size) {
    if (ampc_device_parse(v, out) == AMPC_OK) return true;
    const char *m = ampc_last_error(), *reason = strstr(m, "': ");
    if (ampc_last_status() == AMPC_STATUS_INVALID_ARG || !reason) snprintf(why, why_size, "cpu, cuda, cuda:N or guard");
    else snprintf(why, why_size, "a device present in this build (%s)", reason + 3);
    return false;
}

static bool parse_fp32_ops(const char *v, void *out, char *why, size_t why_size) {
    run_config *cfg = out;
    static char buf[1024]; /* the names point into it; options are parsed once per process */
    snprintf(buf, sizeof buf, "%s", v);
    cfg->n_fp32_ops = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (cfg->n_fp32_ops == RUN_MAX_FP32_OPS || !known_op(tok)) {
            size_t len = (size_t)snprintf(why, why_size, "comma-separated op names among ");
            for (int i = 0; ampc_autocast_op_name(i) && len < why_size; i++)
                len += (size_t)snprintf(why + len, why_size - len, "%s%s", i ? "," : "", ampc_autocast_op_name(i));
            return false;
        }
        cfg->fp32_ops[cfg->n_fp32_ops++] = tok;
    }
    return cfg->n_fp32_ops > 0;
}

int run_options(run_config *cfg, cli_opt *o, int max) {
    int n = 0;
    cli_opt all[] = {
        CLI_OPT(.name = "model", .kind = CLI_CHOICE, .out = &cfg->cli.model, .choices = model_names, .defval = "gpt",
                .help = "model to train"),
        CLI_OPT(.name = "data", .kind = CLI_STRING, .out = &cfg->data_spec, .metavar = "SPEC", .defval = "builtin",
                .help = "builtin | fashion-mnist[:DIR] | text:FILE | tokens:TRAIN[,VAL] (uint16 ids: nanoGPT .bin, "
                        "llm.c)"),
        CLI_OPT(.name = "vocab", .kind = CLI_INT, .out = &cfg->cli.vocab, .imin = 2, .imax = 1 << 24, .metavar = "V",
                .defval = "256 (bytes); tokens: largest id + 1, rounded up to a multiple of 64",
                .help = "gpt: vocabulary size (llm.c pads GPT-2's 50257 ids to 50304 the same way)"),
        CLI_OPT(.name = "scaler", .kind = CLI_CHOICE, .out = &cfg->scaler_mode, .choices = scaler_modes,
                .defval = "auto", .help = "dynamic loss scaling (auto: on for fp16 only)"),
        CLI_OPT(.name = "init-scale", .kind = CLI_DOUBLE, .out = &cfg->scaler.init_scale, .dmin = 1e-30, .dmax = 3e38,
                .defval = "65536", .help = "initial loss scale"),
        CLI_OPT(.name = "growth-factor", .kind = CLI_DOUBLE, .out = &cfg->scaler.growth_factor, .dmin = 1.000001,
                .dmax = 1e6, .defval = "2", .help = "scale growth after growth-interval clean steps"),
        CLI_OPT(.name = "backoff-factor", .kind = CLI_DOUBLE, .out = &cfg->scaler.backoff_factor, .dmin = 1e-6,
                .dmax = 0.999999, .defval = "0.5", .help = "scale backoff on overflow"),
        CLI_OPT(.name = "growth-interval", .kind = CLI_INT, .out = &cfg->cli.growth_interval, .imin = 1,
                .imax = 1 << 30, .defval = "2000", .help = "clean steps before the scale grows"),
        CLI_OPT(.name = "min-scale", .kind = CLI_DOUBLE, .out = &cfg->scaler.min_scale, .dmin = 0, .dmax = 3e38,
                .defval = "none", .help = "floor of the loss scale"),
        CLI_OPT(.name = "max-scale", .kind = CLI_DOUBLE, .out = &cfg->scaler.max_scale, .dmin = 0, .dmax = 3e38,
                .defval = "none", .help = "cap of the loss scale"),
        CLI_OPT(.name = "hysteresis", .kind = CLI_INT, .out = &cfg->cli.hysteresis, .imin = 0, .imax = 1000,
                .defval = "1", .help = "overflows tolerated before backing off (Megatron)"),
        CLI_OPT(.name = "fp32-ops", .kind = CLI_CUSTOM, .out = cfg, .parse = parse_fp32_ops, .metavar = "LIST",
                .accepts = "comma-separated op names", .help = "ops forced to FP32 under autocast (e.g. softmax,gelu)"),
        CLI_OPT(.name = "fp32-modules", .kind = CLI_CUSTOM, .out = &cfg->fp32_modules, .parse = run_parse_fp32_modules,
                .metavar = "GLOBS", .accepts = "comma-separated module globs",
                .help = "modules run in FP32 inside autocast (e.g. 'blocks.*.ln*,lm_head')"),
        CLI_OPT(.name = "module-precision", .kind = CLI_CUSTOM, .out = &cfg->module_precision,
                .parse = run_parse_module_precision, .metavar = "RULES", .accepts = "GLOB=fp32|bf16|fp16,...",
                .help = "per-module compute dtype (e.g. 'blocks.*.attn=bf16,lm_head=fp32')"),
        CLI_OPT(.name = "amp-table", .kind = CLI_CHOICE, .out = &cfg->amp_table, .choices = tables,
                .defval = "tutorial", .help = "autocast op policies"),
        CLI_OPT(.name = "fp32-matmul", .kind = CLI_CHOICE, .out = &cfg->fp32_matmul, .choices = fp32_precisions,
                .defval = "highest",
                .help = "FP32 GEMMs: high/medium allow BF16x3/BF16 passes where faster (TF32 switch)"),
        CLI_OPT(.name = "steps", .kind = CLI_INT, .out = &cfg->steps, .imin = 1, .imax = INT64_MAX / 2,
                .defval = "300 (text) / 1 epoch (images)", .help = "optimizer steps"),
        CLI_OPT(.name = "epochs", .kind = CLI_INT, .out = &cfg->epochs, .imin = 1, .imax = 100000,
                .help = "epochs instead of steps"),
        CLI_OPT(.name = "batch", .kind = CLI_INT, .out = &cfg->batch, .imin = 1, .imax = 1 << 20,
                .defval = "gpt 16, mlp/cnn 64, simple 6",
                .help = "batch size (with --grad-accum: of each micro-batch)"),
        CLI_OPT(.name = "grad-accum", .kind = CLI_INT, .out = &cfg->grad_accum, .imin = 1, .imax = 1 << 16,
                .defval = "1", .help = "micro-batches whose gradients add up before one optimizer step"),
        CLI_OPT(.name = "total-batch", .kind = CLI_INT, .out = &cfg->total_batch, .imin = 1, .imax = (int64_t)1 << 40,
                .metavar = "N", .help = "samples per optimizer step (sequences for gpt): --grad-accum = N / --batch"),
        CLI_OPT(.name = "lr", .kind = CLI_DOUBLE, .out = &cfg->lr, .dmin = 1e-12, .dmax = 100,
                .defval = "adamw 1e-3, sgd 0.1", .help = "learning rate"),
        CLI_OPT(.name = "optimizer", .kind = CLI_CHOICE, .out = &cfg->optimizer, .choices = optimizers,
                .defval = "adamw", .help = "optimizer"),
        CLI_OPT(.name = "weight-decay", .kind = CLI_DOUBLE, .out = &cfg->weight_decay, .dmin = 0, .dmax = 10,
                .defval = "0", .help = "weight decay (AdamW: decoupled; not on biases, norms, embeddings)"),
        CLI_OPT(.name = "beta2", .kind = CLI_DOUBLE, .out = &cfg->beta2, .dmin = 0, .dmax = 0.999999,
                .defval = "gpt 0.95, else 0.999", .help = "AdamW second-moment decay"),
        CLI_OPT(.name = "momentum", .kind = CLI_DOUBLE, .out = &cfg->momentum, .dmin = 0, .dmax = 0.9999, .defval = "0",
                .help = "SGD momentum"),
        CLI_OPT(.name = "lr-schedule", .kind = CLI_CHOICE, .out = &cfg->lr_schedule, .choices = schedules,
                .defval = "gpt cosine, else constant", .help = "after the warmup: constant, or cosine decay to lr/10"),
        CLI_OPT(.name = "warmup", .kind = CLI_INT, .out = &cfg->warmup, .imin = 0, .imax = INT64_MAX / 2,
                .defval = "gpt min(100, steps/3), else 0", .help = "steps of linear learning-rate warmup"),
        CLI_OPT(.name = "schedule-steps", .kind = CLI_INT, .out = &cfg->schedule_steps, .imin = 1,
                .imax = INT64_MAX / 2, .metavar = "N", .defval = "the run's length",
                .help =
                    "the schedule (warmup default, cosine) spans N steps; after them the lr holds at its end value"),
        CLI_OPT(.name = "clip", .kind = CLI_DOUBLE, .out = &cfg->clip, .dmin = 0, .dmax = 1e30,
                .defval = "gpt 1, else none", .help = "clip the global gradient norm (after unscaling); 0 = none"),
        CLI_OPT(.name = "seed", .kind = CLI_INT, .out = &cfg->cli.seed, .imin = 0, .imax = INT64_MAX, .defval = "1337",
                .help = "seed of weights, shuffling and dropout"),
        CLI_OPT(.name = "device", .kind = CLI_CUSTOM, .out = &cfg->device, .parse = run_parse_device, .metavar = "DEV",
                .accepts = "cpu, cuda, cuda:N or guard", .defval = "cpu",
                .help =
                    "where tensors live and kernels run (guard: the CPU on memory the host may not touch, for tests)"),
        CLI_OPT(.name = "threads", .kind = CLI_INT, .out = &cfg->cli.threads, .imin = 0, .imax = 1024, .defval = "0",
                .help = "worker threads; 0 = all online CPUs"),
        CLI_OPT(.name = "eval-every", .kind = CLI_INT, .out = &cfg->eval_every, .imin = 0, .imax = INT64_MAX / 2,
                .defval = "end only", .help = "evaluate every K steps"),
        CLI_OPT(.name = "eval-batches", .kind = CLI_INT, .out = &cfg->eval_batches, .imin = 0, .imax = INT64_MAX / 2,
                .defval = "all", .help = "cap on evaluation batches"),
        CLI_OPT(.name = "quiet", .kind = CLI_FLAG, .out = &cfg->quiet, .help = "no progress lines"),
        CLI_OPT(.name = "check-finite", .kind = CLI_FLAG, .out = &cfg->check_finite,
                .help = "anomaly mode: stop at the first op producing inf/NaN, naming it"),
        CLI_OPT(.name = "preset", .kind = CLI_CHOICE, .out = &cfg->cli.preset, .choices = preset_names,
                .help = "gpt: GPT-2's shape (small: 12 layers, d 768, 12 heads, context 1024, vocab 50304; medium: "
                        "24, 1024, 16, 1024, 50304); --layers --d-model --heads --context --vocab override it; meant "
                        "for token data (byte data uses ids 0..255 of the vocabulary)"),
        CLI_OPT(.name = "layers", .kind = CLI_INT, .out = &cfg->cli.layers, .imin = 1, .imax = 100, .defval = "6",
                .help = "gpt: transformer blocks"),
        CLI_OPT(.name = "d-model", .kind = CLI_INT, .out = &cfg->cli.d_model, .imin = 1, .imax = 1 << 16,
                .defval = "384", .help = "gpt: width"),
        CLI_OPT(.name = "heads", .kind = CLI_INT, .out = &cfg->cli.heads, .imin = 1, .imax = 1024, .defval = "6",
                .help = "gpt: attention heads (divide d-model)"),
        CLI_OPT(.name = "context", .kind = CLI_INT, .out = &cfg->cli.context, .imin = 1, .imax = 4096, .defval = "256",
                .help = "gpt: sequence length"),
        CLI_OPT(.name = "dropout", .kind = CLI_DOUBLE, .out = &cfg->model.dropout, .dmin = 0, .dmax = 0.99,
                .defval = "0", .help = "gpt: dropout"),
        CLI_OPT(.name = "hidden", .kind = CLI_CUSTOM, .out = cfg->cli.hidden, .parse = parse_hidden, .metavar = "LIST",
                .accepts = "comma-separated widths", .defval = "1024,1024", .help = "mlp: hidden widths"),
        CLI_OPT(.name = "param-dtype", .kind = CLI_CHOICE, .out = &cfg->cli.param_dtype, .choices = dtypes,
                .defval = "f32", .help = "parameter storage (bf16/f16: FP32 masters in the optimizer)"),
        CLI_OPT(.name = "master", .kind = CLI_CHOICE, .out = &cfg->master, .choices = masters, .defval = "auto",
                .help = "none: update low-precision parameters directly (model.half())"),
        CLI_OPT(.name = "fp8-format", .kind = CLI_CHOICE, .out = &cfg->fp8.format, .choices = fp8_formats,
                .defval = "hybrid", .help = "fp8: E4M3 forward + E5M2 gradients (hybrid), or E4M3 everywhere"),
        CLI_OPT(.name = "fp8-scaling", .kind = CLI_CHOICE, .out = &cfg->fp8.scaling, .choices = fp8_scalings,
                .defval = "delayed", .help = "fp8: scales from an amax history (delayed) or each tensor's own amax"),
        CLI_OPT(.name = "fp8-history", .kind = CLI_INT, .out = &cfg->cli.fp8_history, .imin = 1, .imax = 65536,
                .defval = "1024", .help = "fp8: amax history length (delayed scaling)"),
        CLI_OPT(.name = "fp8-amax", .kind = CLI_CHOICE, .out = &cfg->fp8.amax_compute, .choices = fp8_amax,
                .defval = "max", .help = "fp8: the amax a delayed scale follows: the history's largest, or the last"),
        CLI_OPT(.name = "fp8-margin", .kind = CLI_INT, .out = &cfg->cli.fp8_margin, .imin = -64, .imax = 64,
                .defval = "0", .help = "fp8: scale = 2^(floor(log2(max / amax)) - margin)"),
        CLI_OPT(.name = "stochastic-rounding", .kind = CLI_FLAG, .out = &cfg->stochastic_rounding,
                .help = "with --param-dtype bf16 --master none: round each update up or down at random, in "
                        "proportion (small updates are kept on average)"),
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < max; i++) o[n++] = all[i];
    return n;
}

const char *const shard_names[] = {"none", "optimizer", "full", NULL}; /* ampc_dist_shard order */

int run_train_options(run_config *c, train_only *t, cli_opt *o, int n, int max) {
    t->prec = PREC_BF16;
    cli_opt rows[] = {
        CLI_OPT(.name = "precision", .kind = CLI_CHOICE, .out = &t->prec, .choices = precision_names, .defval = "bf16",
                .help = "fp32, or autocast in bf16 / fp16; fp8: bf16 with FP8 linear layers"),
        CLI_OPT(.name = "log", .kind = CLI_STRING, .out = &t->log_path, .metavar = "FILE.jsonl",
                .help = "one JSON object per step (\"step\" 0-based), then a final one (appended to with --resume)"),
        CLI_OPT(.name = "checkpoint", .kind = CLI_STRING, .out = &c->checkpoint, .metavar = "FILE",
                .help = "save the whole training state here (safetensors) at the end and on Ctrl-C"),
        CLI_OPT(.name = "checkpoint-every", .kind = CLI_INT, .out = &c->checkpoint_every, .imin = 0,
                .imax = INT64_MAX / 2, .metavar = "K", .defval = "0",
                .help = "also save every K steps; 0 = at the end only"),
        CLI_OPT(.name = "keep", .kind = CLI_INT, .out = &c->keep, .imin = 1, .imax = 1000000, .metavar = "N",
                .defval = "1",
                .help = "keep the newest N checkpoints as STEM-stepNNNNNNNN.EXT (FILE names the newest)"),
        CLI_OPT(.name = "resume", .kind = CLI_STRING, .out = &t->resume_path, .metavar = "FILE",
                .help =
                    "continue the run saved in FILE, with its options and checkpoint settings (given ones override)"),
        CLI_OPT(.name = "allow-data-change", .kind = CLI_FLAG, .out = &t->allow_data_change,
                .help = "--resume: train on data that differs from the checkpoint's (size or CRC-32)"),
        CLI_OPT(.name = "overwrite", .kind = CLI_FLAG, .out = &t->overwrite,
                .help = "a fresh run replaces the checkpoint (and numbered copies) and log another run left there"),
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0] && n < max; i++) o[n++] = rows[i];
    return run_dist_options(c, o, n, max);
}

int run_dist_options(run_config *c, cli_opt *o, int n, int max) {
    c->bucket_mb = 25, c->dist_timeout = 300;
    cli_opt rows[] = {
        CLI_OPT(.name = "reduce-dtype", .kind = CLI_CHOICE, .out = &c->reduce_dtype, .choices = reduce_names,
                .defval = "fp32", .help = "mpirun: the dtype gradients are averaged in across ranks"),
        CLI_OPT(.name = "shard", .kind = CLI_CHOICE, .out = &c->shard, .choices = shard_names, .defval = "none",
                .help = "mpirun: optimizer = ZeRO-1 (optimizer state split across ranks), full = FSDP2-style"),
        CLI_OPT(.name = "bucket-mb", .kind = CLI_INT, .out = &c->bucket_mb, .imin = 1, .imax = 4096, .metavar = "MB",
                .defval = "25",
                .help = "mpirun: gradient bucket size (each bucket's reduction starts when it is ready)"),
        CLI_OPT(.name = "dist-timeout", .kind = CLI_DOUBLE, .out = &c->dist_timeout, .dmin = 1, .dmax = 86400,
                .metavar = "S", .defval = "300",
                .help = "mpirun: the longest a rank waits for the others before it gives up"),
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0] && n < max; i++) o[n++] = rows[i];
    return n;
}

static int opt_index(const cli_opt *opts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0) return i;
    return -1;
}

static bool given(const cli_opt *opts, int n, const bool *seen, const char *name) {
    int i = opt_index(opts, n, name);
    return i >= 0 && seen[i];
}

/* "--d-model 384 (the default)", "--d-model 768 (--preset gpt2-small)" */
static void value_text(const char *name, int v, const run_config *cfg, const cli_opt *opts, int nopts, const bool *seen,
                       char *buf, size_t size) {
    if (given(opts, nopts, seen, name)) snprintf(buf, size, "--%s %d", name, v);
    else if (given(opts, nopts, seen, "preset"))
        snprintf(buf, size, "--%s %d (--preset %s)", name, v, preset_names[cfg->cli.preset]);
    else snprintf(buf, size, "--%s %d (the default)", name, v);
}

/* The GPT's shape, checked here rather than by the library's model constructor so that a mistake is a
 * usage error (status 2) naming the options involved and what would work. */
static int check_gpt_shape(const char *prog, const run_config *cfg, const cli_opt *opts, int nopts, const bool *seen) {
    const ampc_model_config *m = &cfg->model;
    if (m->kind != AMPC_MODEL_GPT) return -1;
    int d = m->d_model ? m->d_model : 384, h = m->heads ? m->heads : 6;
    if (d % h == 0) return -1;
    char dt[64], ht[64], list[256];
    value_text("d-model", d, cfg, opts, nopts, seen, dt, sizeof dt);
    value_text("heads", h, cfg, opts, nopts, seen, ht, sizeof ht);
    size_t n = 0;
    list[0] = '\0';
    for (int k = 1; k <= d && k <= 64 && n < sizeof list; k++)
        if (d % k == 0) n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", k);
    fprintf(stderr, "%s: %s does not divide %s: the heads split the width evenly; heads that divide %d: %s%s\n", prog,
            ht, dt, d, list, d > 64 ? ", ..." : "");
    return CLI_EXIT_USAGE;
}

/* --preset fills each shape option that the command line does not give itself, whatever the order. */
static int apply_preset(const char *prog, run_config *cfg, const cli_opt *opts, int nopts, const bool *seen) {
    if (!given(opts, nopts, seen, "preset")) return 0;
    if (cfg->cli.model != AMPC_MODEL_GPT) {
        fprintf(stderr, "%s: --preset %s sizes a GPT; --model %s has no such shape\n", prog,
                preset_names[cfg->cli.preset], ampc_model_kind_name(cfg->cli.model));
        return CLI_EXIT_USAGE;
    }
    int64_t *field[] = {&cfg->cli.layers, &cfg->cli.d_model, &cfg->cli.heads, &cfg->cli.context, &cfg->cli.vocab};
    for (int i = 0; i < 5; i++)
        if (!given(opts, nopts, seen, preset_opts[i])) *field[i] = presets[cfg->cli.preset][i];
    return 0;
}

int run_finish_options(const char *prog, run_config *cfg, const cli_opt *opts, int nopts, const bool *seen) {
    static const ampc_dtype dt[] = {
        [RUN_PARAM_F32] = AMPC_DTYPE_F32, [RUN_PARAM_BF16] = AMPC_DTYPE_BF16, [RUN_PARAM_F16] = AMPC_DTYPE_F16};
    ampc_model_config *m = &cfg->model;
    if (apply_preset(prog, cfg, opts, nopts, seen)) return CLI_EXIT_USAGE;
    m->kind = cfg->cli.model;
    m->layers = (int)cfg->cli.layers, m->d_model = (int)cfg->cli.d_model, m->heads = (int)cfg->cli.heads;
    m->context = (int)cfg->cli.context, m->vocab = (int)cfg->cli.vocab; /* 0: the data's */
    m->param_dtype = dt[cfg->cli.param_dtype];
    for (int i = 0; i < AMPC_MODEL_MAX_HIDDEN; i++) m->hidden[i] = (int)cfg->cli.hidden[i];
    cfg->seed = given(opts, nopts, seen, "seed") ? (uint64_t)cfg->cli.seed : 1337;
    m->seed = cfg->seed;
    cfg->threads = (int)cfg->cli.threads;
    cfg->scaler.growth_interval = cfg->cli.growth_interval;
    cfg->fp8.amax_history_len = (int)cfg->cli.fp8_history, cfg->fp8.margin = (int)cfg->cli.fp8_margin;
    cfg->scaler.hysteresis = (int)cfg->cli.hysteresis;
    if (!cfg->data_spec) cfg->data_spec = "builtin";
    bool text_model = m->kind == AMPC_MODEL_GPT;
    if (!given(opts, nopts, seen, "batch"))
        cfg->batch = m->kind == AMPC_MODEL_GPT ? 16 : m->kind == AMPC_MODEL_SIMPLE ? 6 : 64;
    if (!cfg->grad_accum) cfg->grad_accum = 1;
    if (cfg->total_batch) { /* llm.c's total batch: it must be whole micro-batches */
        if (cfg->total_batch % cfg->batch ||
            (given(opts, nopts, seen, "grad-accum") && cfg->total_batch != cfg->batch * cfg->grad_accum)) {
            fprintf(stderr,
                    "%s: --total-batch %lld is not %s--batch %lld: a step is whole micro-batches (--total-batch = "
                    "--batch x --grad-accum)\n",
                    prog, (long long)cfg->total_batch,
                    cfg->total_batch % cfg->batch ? "a multiple of " : "--grad-accum x ", (long long)cfg->batch);
            return CLI_EXIT_USAGE;
        }
        cfg->grad_accum = cfg->total_batch / cfg->batch;
    }
    if (!given(opts, nopts, seen, "lr")) cfg->lr = cfg->optimizer == RUN_OPTIM_SGD ? 0.1 : 1e-3;
    /* small char-level GPTs at lr 1e-3 hit loss spikes early on without it (in every precision) */
    if (!given(opts, nopts, seen, "clip") && m->kind == AMPC_MODEL_GPT) cfg->clip = 1.0;
    /* GPT practice (GPT-3, nanoGPT): beta2 0.95; with 0.999 rarely-updated rows blow up in a single step */
    if (!given(opts, nopts, seen, "beta2")) cfg->beta2 = m->kind == AMPC_MODEL_GPT ? 0.95 : 0.999;
    if (given(opts, nopts, seen, "steps") && given(opts, nopts, seen, "epochs")) {
        fprintf(stderr, "%s: --steps and --epochs both given; choose one\n", prog);
        return CLI_EXIT_USAGE;
    }
    if (!cfg->steps && !cfg->epochs) {
        if (text_model || m->kind == AMPC_MODEL_SIMPLE) cfg->steps = 300;
        else cfg->epochs = 1;
    }
    /* GPT practice (nanoGPT): warm up, then decay. Without a long enough warmup small char-level GPTs at lr
     * 1e-3 spike to a loss of ~10 for one step right after it (in every precision, and in PyTorch alike:
     * the built-in corpus, 2 layers, warmup 30 spikes at step ~40 in both), and an FP16 run's skipped
     * steps there put it on another path; 100 warmup steps avoid it */
    if (m->kind == AMPC_MODEL_GPT) {
        int64_t span = cfg->schedule_steps ? cfg->schedule_steps : cfg->steps;
        if (!given(opts, nopts, seen, "lr-schedule")) cfg->lr_schedule = RUN_LR_COSINE;
        if (!given(opts, nopts, seen, "warmup")) cfg->warmup = run_default_warmup(m->kind, span);
    }
    if (run_check_sr(prog, "--stochastic-rounding", m->param_dtype, cfg->master, cfg->stochastic_rounding))
        return CLI_EXIT_USAGE;
    if (m->vocab && m->kind != AMPC_MODEL_GPT) {
        fprintf(stderr, "%s: --vocab applies to --model gpt (the ids of text and token data), not to --model %s\n",
                prog, ampc_model_kind_name(m->kind));
        return CLI_EXIT_USAGE;
    }
    if (cfg->momentum > 0 && cfg->optimizer != RUN_OPTIM_SGD) {
        fprintf(stderr, "%s: --momentum applies to --optimizer sgd only\n", prog);
        return CLI_EXIT_USAGE;
    }
    return check_gpt_shape(prog, cfg, opts, nopts, seen);
}

int run_check_sr(const char *prog, const char *what, ampc_dtype param_dtype, ampc_master_mode master, bool sr) {
    if (!sr || (param_dtype == AMPC_DTYPE_BF16 && master == AMPC_MASTER_NONE)) return 0;
    fprintf(stderr,
            "%s: %s rounds BF16 parameters that have no F32 master: give it with --param-dtype bf16 --master none\n",
            prog, what);
    return CLI_EXIT_USAGE;
}

int64_t run_default_warmup(ampc_model_kind kind, int64_t span) {
    if (kind != AMPC_MODEL_GPT) return 0;
    return span ? (span / 3 < 100 ? span / 3 : 100) : 100; /* 100 when the length is in epochs */
}

void run_warn_threads(const char *prog, const run_config *cfg) {
    int online = ampc_cpu()->online_cpus;
    if (cfg->threads > online)
        fprintf(stderr,
                "%s: warning: --threads %d is more than the %d CPU%s this process may use; the threads will "
                "share them and run slower than --threads %d (or 0, all CPUs)\n",
                prog, cfg->threads, online, online == 1 ? "" : "s", online);
}

void run_describe_model(const ampc_model_config *c, char *buf, size_t size) {
    switch (c->kind) {
    case AMPC_MODEL_GPT:
        snprintf(buf, size, "gpt (%d layer%s, d %d, %d head%s, context %d, vocab %d)", c->layers ? c->layers : 6,
                 c->layers == 1 ? "" : "s", c->d_model ? c->d_model : 384, c->heads ? c->heads : 6,
                 c->heads == 1 ? "" : "s", c->context ? c->context : 256, c->vocab ? c->vocab : 256);
        break;
    case AMPC_MODEL_MLP: {
        static const int defaults[AMPC_MODEL_MAX_HIDDEN] = {1024, 1024}; /* ampc_model_config: all 0 */
        const int *h = c->hidden[0] ? c->hidden : defaults;
        size_t len = (size_t)snprintf(buf, size, "mlp (784");
        for (int i = 0; i < AMPC_MODEL_MAX_HIDDEN && h[i] && len < size; i++)
            len += (size_t)snprintf(buf + len, size - len, "-%d", h[i]);
        if (len < size) snprintf(buf + len, size - len, "-10)");
        break;
    }
    case AMPC_MODEL_CNN: snprintf(buf, size, "cnn (conv32-pool-conv64-pool-fc128-fc10)"); break;
    default: snprintf(buf, size, "simple (5-4-3)"); break;
    }
}

void run_prec_list_init(prec_list *l, const precision *p, int n) {
    memset(l, 0, sizeof *l);
    for (int i = 0; i < RUN_MAX_PRECS; i++) l->param_dtype[i] = l->master[i] = -1;
    for (int i = 0; i < n && i < RUN_MAX_PRECS; i++) {
        l->p[l->n] = p[i];
        snprintf(l->label[l->n], sizeof l->label[0], "%s", precision_names[p[i]]);
        snprintf(l->file[l->n], sizeof l->file[0], "%s", precision_names[p[i]]);
        l->n++;
    }
}

/* The "{...}" options of entry i (param-dtype=f32|bf16|f16, master=auto|none, stochastic-rounding), cut
 * off tok; false when malformed. */
static bool parse_entry_options(prec_list *l, int i, char *tok) {
    char *open = strchr(tok, '{');
    if (!open) return true;
    size_t len = strlen(open);
    if (len < 3 || open[len - 1] != '}') return false; /* "{}" says nothing */
    open[len - 1] = '\0', *open = '\0';
    static const char *const dts[] = {"f32", "bf16", "f16"}, *const ms[] = {"auto", "none"};
    for (char *o = open + 1; *o;) {
        size_t n = strcspn(o, ",");
        bool last = !o[n];
        o[n] = '\0';
        bool ok = n > 0 && !strcmp(o, "stochastic-rounding") && (l->sr[i] = true);
        for (int k = 0; k < 3 && !ok; k++)
            if (!strncmp(o, "param-dtype=", 12) && !strcmp(o + 12, dts[k])) l->param_dtype[i] = k, ok = true;
        for (int k = 0; k < 2 && !ok; k++)
            if (!strncmp(o, "master=", 7) && !strcmp(o + 7, ms[k])) l->master[i] = k, ok = true;
        if (!ok || (!last && !o[n + 1])) return false; /* an unknown option, or a trailing comma */
        o = last ? o + n : o + n + 1;
    }
    return true;
}

/* One entry "[NAME:]PREC[[RULES]][{OPTIONS}]" of --precisions into slot l->n; false when malformed. */
static bool parse_prec_entry(prec_list *l, char *tok) {
    char label_src[128];
    if (strlen(tok) >= sizeof label_src) return false;
    memcpy(label_src, tok, strlen(tok) + 1);
    if (!parse_entry_options(l, l->n, tok)) return false;
    char *name = NULL, *colon = strchr(tok, ':'), *br = strchr(tok, '[');
    if (colon && (!br || colon < br)) *colon = '\0', name = tok, tok = colon + 1;
    char *rules = NULL;
    if ((br = strchr(tok, '['))) {
        size_t len = strlen(br);
        if (len < 3 || br[len - 1] != ']') return false;
        br[len - 1] = '\0', *br = '\0', rules = br + 1;
        char why[8];
        if (!run_parse_module_precision(rules, &(const char *){NULL}, why, sizeof why)) return false;
    }
    int k = -1;
    for (int i = 0; i < PREC_COUNT; i++)
        if (strcmp(tok, precision_names[i]) == 0) k = i;
    if (k < 0 || (name && !*name)) return false;
    int i = l->n;
    l->p[i] = (precision)k, l->policy[i] = rules;
    size_t need = name ? strlen(name) : strlen(tok) + (rules ? strlen(rules) + 2 : 0);
    if (need >= sizeof l->label[0]) return false; /* too long to label a run: name it */
    char *lb = l->label[i];
    if (name) memcpy(lb, name, need + 1);
    else if (rules) lb[0] = '\0', strcat(strcat(strcat(strcat(lb, tok), "["), rules), "]");
    else memcpy(lb, tok, need + 1);
    if (!name && strchr(label_src, '{')) { /* the options name the run too */
        if (strlen(label_src) >= sizeof l->label[0]) return false;
        snprintf(lb, sizeof l->label[0], "%s", label_src);
    }
    for (size_t c = 0; c < sizeof l->file[0] - 1 && l->label[i][c]; c++) {
        char ch = l->label[i][c];
        l->file[i][c] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                                ch == '-'
                            ? ch
                            : '_';
    }
    for (int j = 0; j < i; j++)
        if (!strcmp(l->label[j], l->label[i]) || !strcmp(l->file[j], l->file[i])) return false;
    l->n++;
    return true;
}

bool run_parse_precisions(const char *v, void *out, char *why, size_t why_size) {
    prec_list *l = out;
    static char buf[2048]; /* the policies point into it; options are parsed once per process */
    snprintf(buf, sizeof buf, "%s", v);
    run_prec_list_init(l, NULL, 0);
    bool ok = true;
    for (char *p = buf; ok && *p;) {
        char *end = p;
        for (int depth = 0; *end && (depth || *end != ','); end++)
            depth += (*end == '[' || *end == '{') - (*end == ']' || *end == '}');
        bool last = !*end;
        *end = '\0';
        ok = l->n < RUN_MAX_PRECS && parse_prec_entry(l, p);
        p = last ? end : end + 1;
    }
    if (!ok || l->n == 0)
        snprintf(why, why_size,
                 "a comma-separated list of distinct fp32, bf16, fp16, fp8, each optionally with a name, module rules "
                 "and parameter storage: attn32:bf16[blocks.*.attn=fp32], "
                 "sr:bf16{param-dtype=bf16,master=none,stochastic-rounding} (at most %d)",
                 RUN_MAX_PRECS);
    return ok && l->n > 0;
}

/* A glob as module rules take it (as ampc_module_precision_add): non-empty, no spaces, control
 * characters, ',' or '='. */
static bool glob_ok(const char *g, size_t len) {
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)g[i] <= 0x20 || g[i] == 0x7f || g[i] == ',' || g[i] == '=') return false;
    return len > 0;
}

bool run_parse_module_precision(const char *v, void *out, char *why, size_t why_size) {
    for (const char *p = v;;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        char dt[16] = "";
        if (eq && (size_t)(p + len - eq - 1) < sizeof dt) memcpy(dt, eq + 1, (size_t)(p + len - eq - 1));
        if (!eq || !glob_ok(p, (size_t)(eq - p)) ||
            (strcmp(dt, "fp32") && strcmp(dt, "f32") && strcmp(dt, "bf16") && strcmp(dt, "fp16") &&
             strcmp(dt, "f16"))) {
            snprintf(why, why_size, "GLOB=DTYPE rules, comma-separated, DTYPE fp32, bf16 or fp16 ('%.*s' is not)",
                     (int)len, p);
            return false;
        }
        if (!p[len]) break;
        p += len + 1;
    }
    *(const char **)out = v;
    return true;
}

bool run_parse_fp32_modules(const char *v, void *out, char *why, size_t why_size) {
    for (const char *p = v;;) {
        size_t len = strcspn(p, ",");
        if (!glob_ok(p, len)) {
            snprintf(why, why_size, "comma-separated module globs without spaces or '=' ('%.*s' is not)", (int)len, p);
            return false;
        }
        if (!p[len]) break;
        p += len + 1;
    }
    *(const char **)out = v;
    return true;
}

void run_prec_apply(const prec_list *l, int i, const run_config *base, run_config *cfg) {
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    *cfg = *base;
    cfg->prec = l->p[i], cfg->label = l->label[i], cfg->run_policy = l->policy[i];
    if (l->param_dtype[i] >= 0) cfg->model.param_dtype = dts[l->param_dtype[i]];
    if (l->master[i] >= 0) cfg->master = (ampc_master_mode)l->master[i];
    cfg->stochastic_rounding |= l->sr[i];
}

int run_check_precs(const char *prog, const prec_list *l, const run_config *base) {
    for (int i = 0; i < l->n; i++) {
        run_config c;
        run_prec_apply(l, i, base, &c);
        char what[96];
        snprintf(what, sizeof what, "--precisions entry '%s': stochastic rounding", l->label[i]);
        if (run_check_sr(prog, what, c.model.param_dtype, c.master, c.stochastic_rounding)) return CLI_EXIT_USAGE;
    }
    return 0;
}

void run_say_world(const char *prog, const run_config *cfg) {
    int world = ampc_dist_world_size(cfg->dist);
    if (world < 2 || cfg->quiet || ampc_dist_rank(cfg->dist) != 0) return;
    int64_t lo = cfg->batch / world, hi = (cfg->batch + world - 1) / world;
    char rows[48];
    if (lo == hi) snprintf(rows, sizeof rows, "%lld", (long long)lo);
    else snprintf(rows, sizeof rows, "%lld or %lld", (long long)lo, (long long)hi);
    fprintf(stderr,
            "%s: data parallel over %d ranks (mpirun -np %d): each takes %s of the %lld rows of a batch%s; "
            "gradients averaged in %s, --shard %s\n",
            prog, world, world, rows, (long long)cfg->batch, cfg->grad_accum > 1 ? " (of each micro-batch)" : "",
            reduce_names[cfg->reduce_dtype], shard_names[cfg->shard]);
}
