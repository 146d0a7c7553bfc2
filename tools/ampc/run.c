/* run.c: one training run, the loop PyTorch AMP users write, in C: autocast around the forward pass,
 * loss scaling for FP16, unscale before clipping (so the logged gradient norm is the true one), a step
 * that is skipped when a gradient is non-finite (by the scaler, or by a check when no scaler runs), the
 * scale update, then the step end that frees every activation. Each step leaves one JSONL object; the
 * run ends with an evaluation (test accuracy for classifiers, validation loss for the GPT) and a final
 * object. Everything but the timing fields is a function of the flags, the seed, the kernel level and the
 * thread count. Between steps the loop looks at the stop flag of safety.h (Ctrl-C: save, then stop); a
 * save that fails does not end the run (ckpt_save_or_rescue); a resumed run that is already complete does
 * nothing. The checkpoints themselves, and --resume, are run_resume.c's. */
#include "run_state.h"

#include "ckpt.h"
#include "dist_cli.h"
#include "json.h"
#include "safety.h"
#include "term.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int run_fail(const char *prog, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, ampc_last_error());
    return 1;
}

/* The rules of --precisions' entry, after the command's own: each checked against the model, so an error
 * names the flag that brought the glob. */
static int run_policy_rules(const char *prog, const run_config *cfg, ampc_ctx *ctx, const ampc_model *model) {
    if (!cfg->run_policy) return 0;
    if (ampc_module_precision_parse(ctx, cfg->run_policy) == AMPC_OK &&
        ampc_model_check_module_precision(model) == AMPC_OK)
        return 0;
    fprintf(stderr, "%s: --precisions: %s\n", prog, ampc_last_error());
    return CLI_EXIT_USAGE;
}

int run_module_rules(const char *prog, const run_config *cfg, ampc_ctx *ctx, const ampc_model *model) {
    if (cfg->module_precision && ampc_module_precision_parse(ctx, cfg->module_precision) != AMPC_OK) {
        fprintf(stderr, "%s: --module-precision: %s\n", prog, ampc_last_error());
        return CLI_EXIT_USAGE;
    }
    for (const char *p = cfg->fp32_modules; p && *p;) {
        char glob[128];
        size_t len = strcspn(p, ",");
        snprintf(glob, sizeof glob, "%.*s", (int)len, p);
        if (ampc_module_precision_add(ctx, glob, AMPC_DTYPE_F32) != AMPC_OK) {
            fprintf(stderr, "%s: --fp32-modules: %s\n", prog, ampc_last_error());
            return CLI_EXIT_USAGE;
        }
        p += len + (p[len] == ',');
    }
    if (ampc_model_check_module_precision(model) == AMPC_OK) return run_policy_rules(prog, cfg, ctx, model);
    fprintf(stderr, "%s: --module-precision / --fp32-modules: %s\n", prog, ampc_last_error());
    return CLI_EXIT_USAGE;
}

int run_open_data(const char *prog, const run_config *cfg, ampc_dataset **ds) {
    ampc_dataset_params p = {0};
    if (ampc_dataset_parse(cfg->data_spec, &p) != AMPC_OK) {
        fprintf(stderr, "%s: --data: %s\n", prog, ampc_last_error());
        return CLI_EXIT_USAGE;
    }
    /* images have no vocabulary: --model gpt on them is refused by the pairing check, which says more */
    p.vocab = p.kind == AMPC_DATA_FASHION_MNIST ? 0 : cfg->model.vocab;
    if (ampc_dataset_open(&p, ds) == AMPC_OK) return 0;
    /* the files are fine but --vocab cannot hold them: a flag that cannot work with this data */
    bool vocab = ampc_last_status() == AMPC_STATUS_INVALID_ARG && p.vocab;
    fprintf(stderr, "%s: %s: %s%s\n", prog, vocab ? "--vocab" : "data", ampc_last_error(),
            cfg->data_note ? cfg->data_note : "");
    return vocab ? CLI_EXIT_USAGE : 1;
}

void run_say_data(const char *prog, const run_config *cfg, const ampc_dataset *ds) {
    ampc_dataset_info info;
    if (cfg->quiet || ampc_dataset_get_info(ds, &info) != AMPC_OK || info.kind != AMPC_DATA_TOKENS) return;
    fprintf(stderr, "%s: data: %s\n", prog, info.summary);
}

static void state_free(run_state *s) {
    ampc_loader_free(s->train), ampc_loader_free(s->eval);
    ampc_grad_scaler_free(s->scaler);
    ampc_optim_free(s->opt);
    ampc_model_free(s->model);
    ampc_ctx_free(s->ctx);
}

static bool scaler_enabled(const run_config *cfg) {
    return cfg->scaler_mode == RUN_SCALER_ON || (cfg->scaler_mode == RUN_SCALER_AUTO && cfg->prec == PREC_FP16);
}

/* --threads, or by default this process's CPUs; ranks sharing a machine share its CPUs by default (an
 * unbound rank would otherwise start a thread per CPU, as many times as there are ranks). */
static int run_threads(const run_state *s) {
    if (s->cfg->threads || !s->dist) return s->cfg->threads;
    long all = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = ampc_cpu()->online_cpus, share = (int)(all / ampc_dist_local_size(s->dist));
    int t = mine < share ? mine : share;
    return t > 0 ? t : 1;
}

/* Model and data must agree: the GPT reads text, the classifiers read images; simple brings its own data. */
static int check_pairing(run_state *s) {
    ampc_model_kind k = s->cfg->model.kind;
    if (k == AMPC_MODEL_SIMPLE || (k == AMPC_MODEL_GPT) == s->lm) return 0;
    fprintf(stderr, "%s: --model %s cannot train on --data %s (%s); use %s\n", s->prog, ampc_model_kind_name(k),
            s->cfg->data_spec, s->lm ? "text" : "images",
            s->lm ? "--model gpt for text" : "--model mlp or cnn for images");
    return CLI_EXIT_USAGE;
}

/* The tutorials' SimpleModel trains on one fixed batch: 6 random inputs of 5 features, 6 random targets
 * of 3, drawn from the seed (torch.randn(6, 5), torch.randn(6, 3)). */
static void simple_batch(run_state *s, ampc_tensor **x, ampc_tensor **y) {
    ampc_rng r = ampc_rng_make(s->cfg->seed, 77);
    float v[30 + 18];
    ampc_rng_normal(&r, v, 48, 0, 1);
    int64_t a = s->first_row, n = s->rows; /* data parallel: this rank's rows of the six */
    *x = ampc_tensor_from_buffer(s->ctx, AMPC_DTYPE_F32, 2, (int64_t[]){n, 5}, v + 5 * a, AMPC_DTYPE_F32);
    *y = ampc_tensor_from_buffer(s->ctx, AMPC_DTYPE_F32, 2, (int64_t[]){n, 3}, v + 30 + 3 * a, AMPC_DTYPE_F32);
}

static bool is_simple(const run_state *s) { return s->cfg->model.kind == AMPC_MODEL_SIMPLE; }

/* The next training batch. */
static int next_batch(run_state *s, ampc_tensor **x, ampc_tensor **y) {
    if (is_simple(s)) {
        simple_batch(s, x, y);
        return *x && *y ? 0 : run_fail(s->prog, "data");
    }
    if (s->cfg->random_vocab) {
        int64_t T = ampc_model_get_config(s->model).context;
        run_random_tokens(s->ctx, s->cfg->seed, s->random_batches++, s->first_row, s->rows, T, s->cfg->random_vocab, x,
                          y);
        return *x && *y ? 0 : run_fail(s->prog, "random tokens");
    }
    return ampc_loader_next(s->train, x, y, NULL) == AMPC_OK ? 0 : run_fail(s->prog, "training data");
}

static int setup(run_state *s, const ampc_dataset *ds) {
    const run_config *cfg = s->cfg;
    s->dist = cfg->dist, s->rank = ampc_dist_rank(s->dist), s->world = ampc_dist_world_size(s->dist);
    int64_t B = is_simple(s) ? 6 : cfg->batch;
    if (B < s->world) {
        fprintf(stderr,
                "%s: --batch %lld is smaller than the %d ranks: each rank needs at least one sample of "
                "every batch\n",
                s->prog, (long long)B, s->world);
        return CLI_EXIT_USAGE;
    }
    ampc_loader_shard_rows(B, s->rank, s->world, &s->first_row, &s->rows);
    if (cfg->random_vocab) s->info = (ampc_dataset_info){.task = AMPC_TASK_CHAR_LM, .num_classes = cfg->random_vocab};
    else if (ampc_dataset_get_info(ds, &s->info) != AMPC_OK) return run_fail(s->prog, "data");
    s->lm = s->info.task == AMPC_TASK_CHAR_LM && !is_simple(s);
    int rc = check_pairing(s);
    if (rc) return rc;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = cfg->seed, .threads = run_threads(s), .device = cfg->device},
                     &s->ctx) != AMPC_OK)
        return run_fail(s->prog, "context");
    ampc_autograd_set_detect_anomaly(s->ctx, cfg->check_finite);
    if (cfg->stats && ampc_stats_attach(s->ctx, cfg->stats) != AMPC_OK) return run_fail(s->prog, "statistics");
    ampc_model_config mc = cfg->model;
    if (s->lm) {
        mc.vocab = (int)s->info.num_classes; /* the data's: --vocab (or --preset) given to it, checked there */
    } else if (!is_simple(s)) {
        mc.classes = (int)s->info.num_classes;
        mc.in_channels = (int)s->info.input_shape[0];
        mc.image_size = (int)s->info.input_shape[1];
        mc.in_features = (int)(s->info.input_shape[0] * s->info.input_shape[1] * s->info.input_shape[2]);
    }
    if (ampc_model_new(s->ctx, &mc, &s->model) != AMPC_OK) return run_fail(s->prog, "model");
    ampc_optim_params op = {.kind = cfg->optimizer == RUN_OPTIM_SGD ? AMPC_OPTIM_SGD : AMPC_OPTIM_ADAMW,
                            .lr = cfg->lr,
                            .weight_decay = cfg->weight_decay,
                            .momentum = cfg->momentum,
                            .beta2 = cfg->beta2,
                            .master = cfg->master,
                            .stochastic_rounding = cfg->stochastic_rounding};
    if (ampc_optim_new(s->ctx, &op, &s->opt) != AMPC_OK || ampc_model_add_to_optim(s->model, s->opt) != AMPC_OK)
        return run_fail(s->prog, "optimizer");
    if (ampc_autocast_load_table(s->ctx, cfg->amp_table) != AMPC_OK) return run_fail(s->prog, "amp table");
    if (ampc_ctx_set_fp32_matmul_precision(s->ctx, cfg->fp32_matmul) != AMPC_OK)
        return run_fail(s->prog, "fp32 matmul precision");
    for (int i = 0; i < cfg->n_fp32_ops; i++)
        if (ampc_autocast_set_policy(s->ctx, cfg->fp32_ops[i], AMPC_CAST_FP32) != AMPC_OK)
            return run_fail(s->prog, "--fp32-ops");
    int rc_rules = run_module_rules(s->prog, cfg, s->ctx, s->model);
    if (rc_rules) return rc_rules;
    ampc_grad_scaler_params sp = cfg->scaler;
    sp.init = AMPC_PARAMS_INIT, sp.enabled = scaler_enabled(cfg); /* the knobs the options set; 0: default */
    if (ampc_grad_scaler_new(s->ctx, &sp, &s->scaler) != AMPC_OK) return run_fail(s->prog, "scaler");
    if (is_simple(s)) {
        s->steps = cfg->steps;
        s->per_step = 6;
        return 0;
    }
    int64_t T = s->lm ? ampc_model_get_config(s->model).context : 0;
    s->per_step = cfg->batch * (s->lm ? T : 1);
    if (cfg->random_vocab) {
        s->steps = cfg->steps;
        return 0;
    }
    ampc_loader_params tp = {.split = AMPC_SPLIT_TRAIN,
                             .batch = cfg->batch,
                             .context = T,
                             .seed = cfg->seed,
                             .shuffle = true,
                             .drop_last = true,
                             .repeat = true,
                             .shard_index = s->rank,
                             .shard_count = s->world};
    ampc_loader_params ep = {.split = AMPC_SPLIT_EVAL, .batch = cfg->batch, .context = T};
    if (ampc_loader_new(s->ctx, ds, &tp, &s->train) != AMPC_OK || ampc_loader_new(s->ctx, ds, &ep, &s->eval) != AMPC_OK)
        return run_fail(s->prog, "data");
    s->steps = cfg->steps ? cfg->steps : cfg->epochs * ampc_loader_num_batches(s->train) / cfg->grad_accum;
    s->per_step = cfg->batch * cfg->grad_accum * (s->lm ? T : 1); /* throughput counts every micro-batch */
    return 0;
}

/* A schedule's length in steps: given, or its run's (in epochs of this data). */
run_schedule run_resolve_schedule(const run_state *s, run_schedule sc, int64_t run_steps) {
    if (!sc.steps) sc.steps = sc.epochs && s->train ? sc.epochs * ampc_loader_num_batches(s->train) : run_steps;
    return sc;
}

/* ---- learning rate ---- */

/* Past the schedule's end (--schedule-steps shorter than the run) the progress stays at 1: the lr holds at
 * its final value, lr/10 for cosine. Within it the formula is the one every earlier version used. */
double run_lr_at(const run_schedule *sc, int64_t step) {
    if (step < sc->warmup) return sc->lr * (double)(step + 1) / (double)sc->warmup; /* either schedule */
    if (sc->kind == RUN_LR_CONSTANT) return sc->lr;
    double progress = sc->steps > sc->warmup ? (double)(step - sc->warmup) / (double)(sc->steps - sc->warmup) : 1.0;
    if (progress > 1) progress = 1;
    return sc->lr * (0.1 + 0.9 * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}

/* ---- status lines ---- */

/* One status line on stderr. On a terminal a progress line (`live`) is rewritten in place (\r), cut to
 * the width so it never wraps (a wrapped line cannot be rewritten: each update would leave a new line),
 * and padded over what the previous one left; other lines (a skipped step) replace it and end with a
 * newline, whole. Elsewhere plain lines; progress lines are cut only when COLUMNS asks for a width. */
static void status_line(run_state *s, const char *text, bool live, bool last) {
    int width = term_columns(stderr);
    if (!isatty(STDERR_FILENO)) {
        fprintf(stderr, "%.*s\n", (int)(live && width > 0 ? term_fit(text, width) : strlen(text)), text);
        return;
    }
    bool keep = !live || last;
    int room = width > 1 ? width - 1 : 1; /* the last column would make some terminals wrap */
    size_t n = live ? term_fit(text, room) : strlen(text);
    int w = live && term_text_width(text) > room ? room : term_text_width(text);
    int clear = s->line_len > w ? s->line_len - w : 0;
    fprintf(stderr, "\r%.*s%*s%s", (int)n, text, clear, "", keep ? "\n" : "");
    s->line_len = keep ? 0 : w;
}

/* Ends a live progress line before other output. */
static void status_close(run_state *s) {
    if (s->line_len) fputc('\n', stderr);
    s->line_len = 0;
}

/* Blanks a live progress line, so that whatever is printed next starts a clean line (the next update
 * writes the progress again). */
void run_status_clear(run_state *s) {
    if (s->line_len) fprintf(stderr, "\r%*s\r", s->line_len, "");
    s->line_len = 0;
}

/* ---- data parallel ---- */

/* A rank that cannot go on mid-run ends the job (the others would wait for it in the next collective). */
static int fatal(const run_state *s, int rc) {
    if (s->dist && rc && rc < 128) ampc_dist_abort(s->dist, rc);
    return rc;
}

/* v summed over the ranks (v itself for one process). */
static int sum_over_ranks(run_state *s, double *v, int n) {
    if (!s->dist || ampc_dist_allreduce(s->dist, v, n, AMPC_DTYPE_F64, AMPC_DIST_SUM) == AMPC_OK) return 0;
    return fatal(s, run_fail(s->prog, "data parallel"));
}

/* The stop signal, agreed: every rank stops before the same step (mpirun forwards Ctrl-C to all of them,
 * but each sees it between different instructions). */
static int stop_signal(run_state *s) {
    double sig = safety_stop_signal();
    if (s->dist && ampc_dist_allreduce(s->dist, &sig, 1, AMPC_DTYPE_F64, AMPC_DIST_MAX) != AMPC_OK)
        fatal(s, run_fail(s->prog, "data parallel"));
    return (int)sig;
}

/* Makes the optimizer data-parallel: the rank's gradient counts by its share of the batch. */
static int attach(run_state *s) {
    if (!s->dist) return 0;
    static const ampc_dtype rd[] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    const run_config *cfg = s->cfg;
    ampc_dist_train_params tp = {.reduce_dtype = rd[cfg->reduce_dtype],
                                 .bucket_bytes = cfg->bucket_mb << 20,
                                 .shard = (ampc_dist_shard)cfg->shard};
    int64_t B = is_simple(s) ? 6 : cfg->batch;
    if (ampc_dist_set_grad_weight(s->dist, (double)(s->rows * s->world) / (double)B) != AMPC_OK ||
        ampc_dist_attach(s->dist, s->opt, &tp) != AMPC_OK)
        return run_fail(s->prog, "data parallel");
    ampc_memory_reset_peak(s->ctx); /* the peak of training, not of the one-time sharding of the state */
    return 0;
}

/* ---- evaluation: mean loss over every sample (token) of the eval split, and accuracy for classifiers ---- */

typedef struct eval_result {
    double loss, accuracy;
} eval_result;

static int64_t count_correct(const ampc_tensor *logits, const ampc_tensor *y) {
    int64_t B = ampc_tensor_dim(logits, 0), C = ampc_tensor_dim(logits, 1), correct = 0;
    float *l = malloc((size_t)(B * C) * sizeof *l);
    int64_t *t = malloc((size_t)B * sizeof *t);
    if (l && t && ampc_tensor_copy_to(logits, l, AMPC_DTYPE_F32) == AMPC_OK &&
        ampc_tensor_copy_to(y, t, AMPC_DTYPE_I64) == AMPC_OK) {
        for (int64_t b = 0; b < B; b++) {
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (l[b * C + c] > l[b * C + best]) best = c;
            correct += best == t[b];
        }
    }
    free(l), free(t);
    return correct;
}

/* fp8: BF16 autocast with the FP8 region inside it (linear and matmul layers in FP8, as TE's
 * fp8_autocast inside torch.autocast). */
static bool autocast_begin(run_state *s) {
    if (s->cfg->prec == PREC_FP32) return true;
    ampc_dtype dt = s->cfg->prec == PREC_FP16 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
    ampc_autocast_params ap = ampc_autocast_defaults();
    ap.dtype = dt;
    if (ampc_autocast_begin(s->ctx, &ap) != AMPC_OK) return false;
    if (s->cfg->prec != PREC_FP8 || ampc_fp8_begin(s->ctx, &s->cfg->fp8) == AMPC_OK) return true;
    ampc_autocast_end(s->ctx);
    return false;
}

static void autocast_end(run_state *s) {
    if (s->cfg->prec == PREC_FP8) ampc_fp8_end(s->ctx);
    if (s->cfg->prec != PREC_FP32) ampc_autocast_end(s->ctx);
}

/* simple: the loss on its one batch */
static int evaluate_simple(run_state *s, eval_result *out) {
    ampc_tensor *x, *y;
    simple_batch(s, &x, &y);
    ampc_no_grad_begin(s->ctx);
    autocast_begin(s);
    ampc_tensor *loss = ampc_model_loss(s->model, x, y);
    autocast_end(s);
    ampc_no_grad_end(s->ctx);
    float v;
    int rc = loss && ampc_tensor_copy_to(loss, &v, AMPC_DTYPE_F32) == AMPC_OK ? 0 : run_fail(s->prog, "evaluation");
    double sum = (double)v * (double)s->rows / 6; /* the mean over all six rows */
    if (!rc) rc = sum_over_ranks(s, &sum, 1);
    out->loss = rc ? NAN : s->dist ? sum : v, out->accuracy = NAN;
    ampc_ctx_step_end(s->ctx);
    return fatal(s, rc);
}

static int evaluate(run_state *s, eval_result *out) {
    if (is_simple(s)) return evaluate_simple(s, out);
    double loss_sum = 0;
    int64_t count = 0, correct = 0, batches = 0;
    /* shard full: ranks evaluate different batches, so no forward may need the others: every parameter is
     * gathered for the evaluation (FSDP's summon_full_params), until the next step releases them */
    if (s->dist && ampc_dist_unshard(s->dist) != AMPC_OK) return fatal(s, run_fail(s->prog, "evaluation"));
    ampc_model_set_training(s->model, false);
    ampc_no_grad_begin(s->ctx);
    ampc_loader_set_cursor(s->eval, &(ampc_loader_cursor){0, 0});
    int rc = 0;
    for (bool end = false; !rc; batches++) {
        ampc_tensor *x, *y;
        if (safety_stop_signal() && !s->dist) { /* an evaluation can be long; the run is saved, stop now */
            rc = 128 + safety_stop_signal();
            break;
        }
        if (ampc_loader_next(s->eval, &x, &y, &end) != AMPC_OK) rc = run_fail(s->prog, "evaluation data");
        if (rc || end || (s->cfg->eval_batches && batches == s->cfg->eval_batches)) break;
        if (batches % s->world != s->rank) { /* data parallel: rank r evaluates batches r, r + N, ... */
            ampc_ctx_step_end(s->ctx);
            continue;
        }
        int64_t n = s->lm ? ampc_tensor_numel(y) : ampc_tensor_dim(y, 0);
        autocast_begin(s);
        ampc_tensor *logits = s->lm ? NULL : ampc_model_forward(s->model, x);
        ampc_tensor *loss = s->lm ? ampc_model_loss(s->model, x, y)
                                  : ampc_cross_entropy(s->ctx, logits, y, AMPC_IGNORE_INDEX);
        autocast_end(s);
        float v;
        if (!loss || ampc_tensor_copy_to(loss, &v, AMPC_DTYPE_F32) != AMPC_OK) rc = run_fail(s->prog, "evaluation");
        else {
            loss_sum += (double)v * (double)n, count += n;
            if (!s->lm) correct += count_correct(logits, y);
        }
        ampc_ctx_step_end(s->ctx);
    }
    ampc_no_grad_end(s->ctx);
    ampc_model_set_training(s->model, true);
    double all[3] = {loss_sum, (double)count, (double)correct};
    if (!rc && s->dist) {
        rc = sum_over_ranks(s, all, 3);
        loss_sum = all[0], count = (int64_t)all[1], correct = (int64_t)all[2];
    }
    rc = fatal(s, rc);
    out->loss = count ? loss_sum / (double)count : NAN;
    out->accuracy = s->lm || !count ? NAN : (double)correct / (double)count;
    return rc;
}

/* ---- one optimizer step ---- */

typedef struct step_result {
    double loss, scale, grad_norm, lr;
    bool skipped;
    char inf_tensor[64];
    ampc_fp8_stats fp8; /* --precision fp8: this step's saturations, the scales for the next */
} step_result;

/* One micro-batch: forward, the loss (its value into *lv), the backward of the scaled loss / N (the
 * gradients add into the parameters' own: PyTorch's gradient accumulation under AMP, every micro-batch
 * scaled alike). Data parallel: only the step's last micro-batch reduces (DDP's no_sync for the others).
 * Every micro-batch but the last ends its context step, so activations never pile up. */
static int micro_batch(run_state *s, int64_t k, int64_t n, float *lv) {
    ampc_tensor *x, *y;
    if (s->dist && ampc_dist_set_sync(s->dist, k == n - 1) != AMPC_OK) return run_fail(s->prog, "data parallel");
    if (next_batch(s, &x, &y)) return 1;
    if (!autocast_begin(s)) return run_fail(s->prog, "autocast");
    ampc_tensor *loss = ampc_model_loss(s->model, x, y);
    autocast_end(s);
    if (!loss || ampc_tensor_copy_to(loss, lv, AMPC_DTYPE_F32) != AMPC_OK) return run_fail(s->prog, "forward");
    ampc_tensor *part = n > 1 ? ampc_div_scalar(s->ctx, loss, (double)n) : loss; /* loss / N, as PyTorch's recipe */
    if (ampc_backward(s->ctx, ampc_grad_scaler_scale(s->scaler, part)) != AMPC_OK) return run_fail(s->prog, "backward");
    if (k == n - 1) return 0;
    ampc_fp8_stats f;
    ampc_fp8_get_stats(s->ctx, &f); /* step end moves the scales: what this micro-batch used */
    s->fp8_saturated += f.saturated;
    ampc_ctx_step_end(s->ctx);
    return 0;
}

static int train_step(run_state *s, int64_t step, step_result *r) {
    int64_t n = s->cfg->grad_accum;
    double sum = 0; /* the micro-batches' losses: their mean is the step's loss (the big batch's) */
    r->scale = ampc_grad_scaler_get_scale(s->scaler); /* the scale this step's backwards use */
    s->fp8_saturated = 0;
    for (int64_t k = 0; k < n; k++) {
        float lv;
        if (micro_batch(s, k, n, &lv)) return 1;
        sum += lv;
    }
    r->loss = n > 1 ? sum / (double)n : sum; /* data parallel: the global batch's mean, once reduced (below) */
    if (ampc_grad_scaler_unscale(s->scaler, s->opt) != AMPC_OK ||
        ampc_clip_grad_norm(s->opt, s->cfg->clip > 0 ? s->cfg->clip : INFINITY, &r->grad_norm) != AMPC_OK)
        return run_fail(s->prog, "unscale");
    if (s->dist) { /* the mean over the global batch: each rank's mean weighted by its rows */
        double wl = r->loss * (double)s->rows / (double)(is_simple(s) ? 6 : s->cfg->batch);
        if (sum_over_ranks(s, &wl, 1)) return 1;
        r->loss = wl;
    }
    r->lr = run_lr_at(&s->sched, step);
    ampc_optim_set_lr(s->opt, r->lr);
    bool stepped = false;
    const char *bad = NULL;
    r->inf_tensor[0] = '\0';
    if (ampc_grad_scaler_enabled(s->scaler)) {
        if (ampc_grad_scaler_step(s->scaler, s->opt, &stepped) != AMPC_OK) return run_fail(s->prog, "step");
        ampc_grad_scaler_overflow ov;
        ampc_grad_scaler_get_overflow(s->scaler, &ov);
        if (!stepped) snprintf(r->inf_tensor, sizeof r->inf_tensor, "%s", ov.first_tensor);
        if (ampc_grad_scaler_update(s->scaler) != AMPC_OK) return run_fail(s->prog, "scaler update");
    } else if (isfinite(r->loss) && (isfinite(r->grad_norm) || ampc_optim_grads_finite(s->opt, &bad))) {
        /* no scaler: skip non-finite steps. A finite norm (always computed: clipping to inf when off) says
         * every gradient is finite (a square in double cannot overflow), so the check that names the
         * offending gradient runs only when the norm is not */
        if (ampc_optim_step(s->opt) != AMPC_OK) return run_fail(s->prog, "step");
        stepped = true;
    } else {
        snprintf(r->inf_tensor, sizeof r->inf_tensor, "%s", bad ? bad : "loss");
    }
    r->skipped = !stepped;
    ampc_optim_zero_grad(s->opt);
    ampc_fp8_get_stats(s->ctx, &r->fp8);  /* the scales this step used: step end moves them */
    r->fp8.saturated += s->fp8_saturated; /* and the earlier micro-batches' saturations */
    ampc_ctx_step_end(s->ctx);
    return 0;
}

/* ---- logging and progress ---- */

static void log_step(FILE *log, const run_state *s, int64_t step, const step_result *r, double rate, size_t peak) {
    json_writer w;
    json_init(&w, log, false);
    json_obj_begin(&w);
    json_kint(&w, "step", step);
    json_knum(&w, "loss", r->loss);
    json_knum(&w, "scale", r->scale);
    json_kbool(&w, "skipped", r->skipped);
    json_kstr(&w, "inf_tensor", r->skipped ? r->inf_tensor : NULL);
    json_knum(&w, "grad_norm", r->grad_norm);
    json_knum(&w, "lr", r->lr);
    if (s->cfg->prec == PREC_FP8) { /* the FP8 casts of this step */
        json_knum(&w, "fp8_min_scale", r->fp8.min_scale);
        json_knum(&w, "fp8_max_scale", r->fp8.max_scale);
        json_kint(&w, "fp8_saturated", (int64_t)r->fp8.saturated);
    }
    json_knum(&w, s->lm ? "tokens_per_s" : "samples_per_s", rate);
    json_kint(&w, "peak_bytes", (int64_t)peak);
    json_obj_end(&w);
    json_finish(&w);
}

/* "4:05", or "1:02:05" past an hour */
static void fmt_eta(double seconds, char *buf, size_t size) {
    long t = seconds > 0 && seconds < 1e9 ? (long)(seconds + 0.5) : 0;
    if (t >= 3600) snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

/* Console numbering: "step N" is the step's 0-based index, as the JSONL's "step" field; [N/M] on the
 * progress line counts the steps done, as a checkpoint's step does. */
static void progress(run_state *s, int64_t step, const step_result *r, double elapsed) {
    const run_config *cfg = s->cfg;
    if (cfg->quiet) return;
    char line[512];
    if (r->skipped) {
        int n = snprintf(line, sizeof line, "%s step %lld skipped: non-finite gradient in %s", cfg->label,
                         (long long)step, r->inf_tensor[0] ? r->inf_tensor : "(unnamed)");
        if (ampc_grad_scaler_enabled(s->scaler))
            snprintf(line + n, sizeof line - (size_t)n, " (loss scale %g -> %g)", r->scale,
                     ampc_grad_scaler_get_scale(s->scaler));
        status_line(s, line, false, false);
        /* A lone back-off after the scale grew is the scaler probing (routine); a skip without a scaler, one
         * within growth-interval steps of the last, or one that takes the scale below its initial value is
         * the trouble the doctor looks into. */
        bool scaler = ampc_grad_scaler_enabled(s->scaler);
        int64_t interval = cfg->scaler.growth_interval ? cfg->scaler.growth_interval : 2000;
        double init = cfg->scaler.init_scale ? cfg->scaler.init_scale : 65536;
        bool trouble = !scaler || (s->last_skip >= 0 && step - s->last_skip <= interval) ||
                       ampc_grad_scaler_get_scale(s->scaler) < init;
        s->last_skip = step;
        if (trouble && !s->hinted) { /* once a run: where to look next */
            s->hinted = true;
            status_line(s,
                        "  hint: `ampc doctor` with the same options shows which tensors leave the format's range, "
                        "and the --init-scale / --fp32-modules that avoid it",
                        false, false);
        }
    }
    int64_t done = step + 1, every = s->steps >= 10 ? s->steps / 10 : 1;
    bool tty = isatty(STDERR_FILENO);
    if (!tty && done % every && done != s->steps) return;
    double per_step = elapsed / (double)(done - s->start),
           rate = (double)s->per_step / (per_step > 0 ? per_step : 1e-9);
    /* the final evaluation too: a batch's forward pass is about a third of a step */
    int64_t eb = cfg->no_eval || !s->eval ? 0 : ampc_loader_num_batches(s->eval);
    if (cfg->eval_batches && eb > cfg->eval_batches) eb = cfg->eval_batches;
    double eval_s = (double)eb * per_step / 3, run_s = per_step * (double)s->steps + eval_s;
    char eta[32], all[32];
    fmt_eta(per_step * (double)(s->steps - done) + eval_s, eta, sizeof eta);
    fmt_eta(per_step * (double)(s->steps - done) + eval_s + cfg->runs_after * run_s, all, sizeof all);
    snprintf(line, sizeof line, "%s [%lld/%lld] loss %.4f scale %g %.0f %s ETA %s%s%s", cfg->label, (long long)done,
             (long long)s->steps, r->loss, r->scale, rate, s->lm ? "tok/s" : "samples/s", eta,
             cfg->runs_after ? ", all runs " : "", cfg->runs_after ? all : "");
    int width = term_columns(stderr);
    if (width > 0 && term_text_width(line) >= width) /* narrow: what matters most, before it is cut */
        snprintf(line, sizeof line, "%s [%lld/%lld] loss %.4f ETA %s", cfg->label, (long long)done, (long long)s->steps,
                 r->loss, cfg->runs_after ? all : eta);
    status_line(s, line, true, done == s->steps);
}

static void log_final(FILE *log, const run_state *s, const run_output *out) {
    json_writer w;
    json_init(&w, log, false);
    json_obj_begin(&w);
    json_kbool(&w, "final", true);
    json_kstr(&w, "precision", s->cfg->label);
    json_kint(&w, "steps", out->r.n);
    json_knum(&w, "eval_loss", out->r.eval_loss);
    if (!isnan(out->r.eval_accuracy)) json_knum(&w, "eval_accuracy", out->r.eval_accuracy); /* classifiers */
    json_kint(&w, "skipped_steps", out->r.skipped_steps);
    json_knum(&w, "final_scale", out->r.final_scale);
    json_kint(&w, "peak_bytes", (int64_t)out->r.peak_bytes);
    json_knum(&w, "seconds", out->r.seconds);
    json_knum(&w, s->lm ? "tokens_per_s" : "samples_per_s", out->r.throughput);
    json_obj_end(&w);
    json_finish(&w);
}

/* ---- the run ---- */

static int alloc_series(run_output *out, int64_t n) {
    out->loss = calloc((size_t)n, sizeof *out->loss);
    out->scale = calloc((size_t)n, sizeof *out->scale);
    out->skipped = calloc((size_t)n, sizeof *out->skipped);
    out->step_seconds = calloc((size_t)n, sizeof *out->step_seconds);
    return out->loss && out->scale && out->skipped && out->step_seconds ? 0 : -1;
}

static void summarise(run_output *out, const run_state *s, double seconds) {
    run_result *r = &out->r;
    int64_t ran = r->n - s->start, tail = ran < 20 ? ran : 20; /* steps of this process */
    double sum = 0;
    for (int64_t i = r->n - tail; i < r->n; i++) sum += out->loss[i];
    r->final_train_loss = tail ? sum / (double)tail : NAN;
    r->final_scale = ampc_grad_scaler_get_scale(s->scaler);
    ampc_memory_usage mu;
    ampc_memory_stats(s->ctx, &mu);
    r->peak_bytes = mu.peak_bytes;
    if (s->dist) { /* per rank: the largest */
        int64_t pk = (int64_t)mu.peak_bytes;
        if (ampc_dist_allreduce(s->dist, &pk, 1, AMPC_DTYPE_I64, AMPC_DIST_MAX) == AMPC_OK) r->peak_bytes = (size_t)pk;
    }
    r->seconds = seconds;
    r->throughput = seconds > 0 ? (double)(ran * s->per_step) / seconds : NAN;
    /* a resumed run reports the skips of the whole run where the scaler has counted them */
    if (s->start && ampc_grad_scaler_enabled(s->scaler)) {
        ampc_grad_scaler_state gs;
        ampc_grad_scaler_state_save(s->scaler, &gs);
        r->skipped_steps = gs.skipped_steps;
    }
    r->throughput_unit = s->lm ? "tokens/s" : "samples/s";
    r->max_abs_dloss = r->final_abs_dloss = r->speedup = NAN;
}

/* SIGINT/SIGTERM between steps: the step that was running is complete, so its state is saved (when a
 * checkpoint is configured and this process has done a step since the last save) and the run ends with
 * 128 + the signal; the caller says where the checkpoint is and how to resume. */
static int stop(run_state *s, int64_t done, run_output *out, int sig) {
    status_close(s);
    out->stopped_by = sig;
    if (s->cfg->checkpoint && done > s->start && s->saved_step != done) run_save(s, done, out);
    out->stop_seconds = safety_seconds_since_stop();
    safety_set_stop_line(NULL);
    return 128 + out->stopped_by;
}

static bool save_due(const run_config *cfg, int64_t done, bool last) {
    return cfg->checkpoint && (last || (cfg->checkpoint_every && done % cfg->checkpoint_every == 0));
}

/* --eval-every: 0, 1 on failure, or 128 + a signal that stopped it. */
static int periodic_eval(run_state *s, int64_t done) {
    eval_result e;
    int rc = evaluate(s, &e);
    if (!rc && !s->cfg->quiet) {
        status_close(s);
        fprintf(stderr, "%s after %lld steps: eval loss %.4f\n", s->cfg->label, (long long)done, e.loss);
    }
    return rc;
}

static int loop(run_state *s, FILE *log, run_output *out) {
    double t0 = now();
    out->per_step = s->per_step;
    const run_config *cfg = s->cfg;
    out->r.n = s->start;
    uint64_t syncs0[AMPC_SYNC_POINT_COUNT] = {0}, flops0 = 0;
    for (int64_t step = s->start; step < s->steps; step++) {
        int sig = stop_signal(s);
        if (sig) return stop(s, step, out, sig);
        run_set_stop_line(s, step);
        if (step == s->start + cfg->untimed) {
            ampc_ctx_sync_counts(s->ctx, syncs0), flops0 = ampc_ctx_matmul_flops(s->ctx);
            if (cfg->profile && ampc_ctx_profile_start(s->ctx) != AMPC_OK)
                return fatal(s, run_fail(s->prog, "profiling"));
        }
        if (s->dist && step == s->start + cfg->untimed) ampc_dist_reset_stats(s->dist);
        step_result r;
        double ts = now();
        int rc = train_step(s, step, &r);
        if (rc) return fatal(s, rc);
        out->step_seconds[step] = now() - ts;
        out->loss[step] = r.loss, out->scale[step] = r.scale, out->skipped[step] = r.skipped;
        out->r.skipped_steps += r.skipped;
        out->r.n = step + 1;
        double elapsed = now() - t0,
               rate = (double)((step + 1 - s->start) * s->per_step) / (elapsed > 0 ? elapsed : 1e-9);
        ampc_memory_usage mu;
        ampc_memory_stats(s->ctx, &mu);
        if (log) log_step(log, s, step, &r, rate, mu.peak_bytes), fflush(log); /* written out before a checkpoint */
        progress(s, step, &r, elapsed);
        bool last = step + 1 == s->steps;
        if (save_due(cfg, step + 1, last)) {
            double tc = now();
            run_save(s, step + 1, out);
            if (!last) run_check_kill_budget(s, now() - tc, out->step_seconds[step]);
        }
        if (cfg->eval_every && (step + 1) % cfg->eval_every == 0 && !last && (rc = periodic_eval(s, step + 1)))
            return rc > 128 ? stop(s, step + 1, out, rc - 128) : rc;
    }
    summarise(out, s, now() - t0);
    ampc_ctx_sync_counts(s->ctx, out->syncs);
    for (int p = 0; p < AMPC_SYNC_POINT_COUNT; p++) out->syncs[p] -= syncs0[p];
    out->matmul_flops = ampc_ctx_matmul_flops(s->ctx) - flops0;
    if (cfg->profile && (out->nprof = ampc_ctx_profile_read(s->ctx, NULL, 0)) > 0) {
        if (!(out->prof = calloc((size_t)out->nprof, sizeof *out->prof)))
            return fatal(s, run_fail(s->prog, "profiling"));
        ampc_ctx_profile_read(s->ctx, out->prof, out->nprof);
    }
    ampc_ctx_profile_stop(s->ctx);
    if (s->dist) {
        ampc_dist_get_stats(s->dist, &out->dist);
        if (cfg->measure_comm && ampc_dist_time_reduction(s->dist, 5, &out->reduce_alone) != AMPC_OK)
            return fatal(s, run_fail(s->prog, "timing the reductions"));
    }
    return 0;
}

/* --resume of a run that is already as long as asked: nothing to train, nothing to save. */
static void say_complete(const run_state *s, run_output *out) {
    out->complete = true;
    out->r.n = s->start;
    if (s->rank) return;
    printf("%s: this run is complete after %lld steps", s->cfg->label, (long long)s->start);
    if (s->start > s->steps) printf(" (more than the %lld asked for)", (long long)s->steps);
    printf("; pass --steps N with N > %lld to continue it\n", (long long)s->start);
}

static void print_eval(const run_config *cfg, const eval_result *e) {
    if (cfg->quiet || cfg->no_eval) return;
    if (isnan(e->accuracy)) fprintf(stderr, "%s: eval loss %.4f\n", cfg->label, e->loss);
    else fprintf(stderr, "%s: eval loss %.4f, accuracy %.2f%%\n", cfg->label, e->loss, 100 * e->accuracy);
}

int run_training(const char *prog, const run_config *cfg, const ampc_dataset *ds, FILE *log, run_output *out) {
    memset(out, 0, sizeof *out);
    run_state s = {.prog = prog, .cfg = cfg, .saved_step = -1, .last_skip = -1};
    ckpt_set_dist(cfg->dist);
    dist_quiet q; /* data parallel: what fails alike on every rank is said once, by the lowest */
    dist_quiet_begin(&q);
    int rc = setup(&s, ds);
    if (!rc) {
        run_schedule sc = {cfg->lr, cfg->lr_schedule, cfg->warmup, cfg->schedule_steps, 0};
        s.sched = run_resolve_schedule(&s, sc, s.steps);
        rc = run_resume(&s);
    }
    rc = dist_quiet_end(&q, cfg->dist, rc);
    if (!rc && cfg->dist) { /* every rank is ready: rank 0's weights go to all */
        dist_quiet_begin(&q);
        rc = dist_quiet_end(&q, cfg->dist, attach(&s));
    }
    out->total = s.steps;
    out->world = s.world > 0 ? s.world : 1;
    out->r.label = cfg->label;
    if (!rc) {
        ampc_memory_usage mu;
        ampc_memory_stats(s.ctx, &mu);
        out->r.state_bytes = mu.live_bytes;
    }
    if (!rc && s.start >= s.steps) {
        say_complete(&s, out);
        state_free(&s);
        return 0;
    }
    if (!rc && alloc_series(out, s.steps))
        rc = (fprintf(stderr, "%s: out of memory for %lld steps\n", prog, (long long)s.steps), 1);
    out->r.loss = out->loss, out->r.scale = out->scale, out->r.skipped = out->skipped;
    if (!rc) rc = loop(&s, log, out);
    eval_result e = {NAN, NAN};
    double te = now();
    if (!rc && !cfg->no_eval) rc = evaluate(&s, &e);
    out->r.eval_seconds = cfg->no_eval ? 0 : now() - te;
    if (rc > 128) out->stopped_by = rc - 128;
    out->r.eval_loss = e.loss, out->r.eval_accuracy = e.accuracy;
    if (!rc && log) log_final(log, &s, out);
    if (!rc) print_eval(cfg, &e);
    out->finished = !rc;
    if (!rc && s.save_failed) rc = 1; /* the run is done and evaluated, but its checkpoint is elsewhere */
    state_free(&s);
    return rc;
}

void run_output_free(run_output *out) {
    free(out->loss), free(out->scale), free(out->skipped), free(out->step_seconds), free(out->prof);
    memset(out, 0, sizeof *out);
}
