/* run.h: one training run as `ampc train` and `ampc compare` do it: the options both commands share, the
 * run engine (model, optimizer, scaler, loaders, the AMP training loop, evaluation, JSONL log, progress)
 * and what a run returns for the report. */
#ifndef AMPC_CLI_RUN_H
#define AMPC_CLI_RUN_H

#include "args.h"
#include "report.h"

#include "ampc.h"

/* fp8: BF16 autocast with linear and matmul layers in FP8 (TransformerEngine's recipe, --fp8-*) */
typedef enum precision { PREC_FP32 = 0, PREC_BF16, PREC_FP16, PREC_FP8, PREC_COUNT } precision;
extern const char *const precision_names[PREC_COUNT + 1]; /* "fp32", "bf16", "fp16", "fp8", NULL */
extern const char *const shard_names[];                   /* "none", "optimizer", "full", NULL */

/* The choices of options that have no library enum, in the order of their choice lists (run_options.c):
 * a CLI_CHOICE option stores the index of the value given. */
typedef enum run_scaler_mode { RUN_SCALER_AUTO = 0, RUN_SCALER_ON, RUN_SCALER_OFF } run_scaler_mode;
typedef enum run_optimizer { RUN_OPTIM_ADAMW = 0, RUN_OPTIM_SGD } run_optimizer;
typedef enum run_lr_schedule { RUN_LR_CONSTANT = 0, RUN_LR_COSINE } run_lr_schedule;
typedef enum run_param_dtype { RUN_PARAM_F32 = 0, RUN_PARAM_BF16, RUN_PARAM_F16 } run_param_dtype;

#define RUN_MAX_FP32_OPS 40

/* The learning-rate schedule: linear warmup over `warmup` steps, then constant or a cosine decay to lr/10
 * that ends after `steps` steps (the run's length, or --schedule-steps); past its end the lr holds at the
 * final value. */
typedef struct run_schedule {
    double lr;
    run_lr_schedule kind;
    int64_t warmup;
    int64_t steps;  /* 0: the run's length (ampc_train: resolved in setup) */
    int64_t epochs; /* when steps is 0 and the run was given in epochs */
} run_schedule;

typedef struct run_config {
    ampc_model_config model;
    const char *data_spec; /* "builtin", "fashion-mnist[:DIR]", "text:FILE", "tokens:TRAIN[,VAL]" */
    precision prec;
    run_scaler_mode scaler_mode;    /* auto = on for fp16 only */
    ampc_grad_scaler_params scaler; /* the knobs (enabled is decided by scaler_mode) */
    const char *fp32_ops[RUN_MAX_FP32_OPS];
    int n_fp32_ops;
    const char *module_precision; /* --module-precision 'GLOB=DTYPE,...' (checked for form), or NULL */
    const char *fp32_modules;     /* --fp32-modules 'GLOB,...', or NULL */
    const char *run_policy;       /* compare: this run's own module rules (--precisions 'bf16[...]'), or NULL */
    ampc_stats *stats;            /* doctor: range statistics attached to the run's context, or NULL */
    ampc_autocast_table amp_table;
    ampc_fp32_precision fp32_matmul;
    ampc_fp8_recipe fp8;   /* --precision fp8 */
    int64_t steps, epochs; /* exactly one > 0 after defaults */
    int64_t batch;         /* the micro-batch: samples (sequences) of one forward and backward */
    int64_t grad_accum;    /* micro-batches per optimizer step (>= 1 after defaults) */
    int64_t total_batch;   /* --total-batch: samples per optimizer step (0: batch x grad_accum) */
    double lr;
    run_optimizer optimizer;
    double weight_decay, momentum;
    double beta2;                /* AdamW */
    run_lr_schedule lr_schedule; /* cosine: with warmup */
    int64_t warmup;
    int64_t schedule_steps; /* the schedule spans this many steps (0 = the run's length) */
    double clip;            /* 0 = no clipping */
    uint64_t seed;
    ampc_device device; /* --device */
    int threads;
    int64_t eval_every, eval_batches;
    bool quiet;
    bool check_finite;        /* anomaly mode */
    bool no_eval;             /* skip the final evaluation (benchmarks) */
    int64_t random_vocab;     /* bench: > 0 = no data set; batches of uniform random ids in [0, random_vocab) */
    ampc_master_mode master;  /* for low-precision parameters */
    bool stochastic_rounding; /* BF16 parameters without masters: the update rounded stochastically */
    const char *label;        /* printed on progress lines */
    /* checkpoints (ampc train): */
    const char *checkpoint;         /* saved here at the end, and every checkpoint_every steps */
    int64_t checkpoint_every;       /* 0 = at the end only */
    int64_t keep;                   /* >1: also keep the newest `keep` as STEM-stepN.EXT (see ckpt.h) */
    const ampc_safetensors *resume; /* an opened checkpoint to continue from, or NULL */
    const char *const *ck_meta;     /* metadata pairs every save adds (the training configuration) */
    int n_ck_meta;
    bool has_recorded_schedule;     /* --resume: the schedule of the checkpoint's own options, to say so */
    run_schedule recorded_schedule; /* when a resumed run's lr differs from what the checkpoint's would be */
    const char *data_note;          /* appended to data errors: where --data came from (NULL: the command line) */
    bool allow_data_change;         /* --resume on other data: a loader of another length takes over the cursor */
    const char *resume_note;        /* appended to the "resumed from" line (where the run saves), or NULL */
    int runs_after;                 /* compare: runs still to come after this one, for the overall ETA */
    /* data parallelism (ampc train under mpirun): dist is NULL for one process */
    ampc_dist *dist;
    int reduce_dtype;    /* a precision index: fp32, bf16, fp16 */
    int shard;           /* ampc_dist_shard */
    int64_t bucket_mb;   /* bucket size in MiB */
    double dist_timeout; /* seconds a collective may wait */
    int64_t untimed;     /* bench: warm-up steps; the reduction statistics start after them */
    bool measure_comm;   /* bench: time the step's reductions alone at the end (out->reduce_alone) */
    bool profile;        /* bench: the device calls of the steps after untimed, per operation (out->prof) */
    /* raw option values, turned into the fields above by run_finish_options */
    struct {
        ampc_model_kind model;
        run_param_dtype param_dtype;
        int preset; /* an index into run_options.c's presets, when --preset was given */
        int64_t layers, d_model, heads, context, vocab, growth_interval, hysteresis, seed, threads, fp8_history,
            fp8_margin;
        int64_t hidden[AMPC_MODEL_MAX_HIDDEN];
    } cli;
} run_config;

/* A --precisions list ("fp32,bf16,fp16"): compare and bench step. An entry may carry module rules, as a
 * named policy: "bf16[blocks.*.attn=fp32]" or "attn32:bf16[blocks.*.attn=fp32]" (label attn32), and its
 * own parameter storage: "sr:bf16{param-dtype=bf16,master=none,stochastic-rounding}". */
#define RUN_MAX_PRECS 8
typedef struct prec_list {
    int n;
    precision p[RUN_MAX_PRECS];
    const char *policy[RUN_MAX_PRECS]; /* module rules of entry i, or NULL */
    /* entry i's own parameter storage ("{master=none,sr}"): param_dtype / master < 0: the command's */
    int param_dtype[RUN_MAX_PRECS], master[RUN_MAX_PRECS];
    bool sr[RUN_MAX_PRECS];
    char label[RUN_MAX_PRECS][64]; /* "fp32", "bf16[blocks.*.attn=fp32]", "attn32" */
    char file[RUN_MAX_PRECS][64];  /* the label as a file name ("bf16_blocks._.attn_fp32_") */
} prec_list;
/* The plain list of names (no policies). */
void run_prec_list_init(prec_list *l, const precision *p, int n);
/* cfg for entry i of l: its precision, label, module rules and parameter storage over the command's. */
void run_prec_apply(const prec_list *l, int i, const run_config *base, run_config *cfg);
/* Every entry's own settings checked before the first run (what can be checked without a model): 0, or
 * CLI_EXIT_USAGE after a message. */
int run_check_precs(const char *prog, const prec_list *l, const run_config *base);
/* --stochastic-rounding needs BF16 parameters without masters: 0, or CLI_EXIT_USAGE after a message. */
int run_check_sr(const char *prog, const char *what, ampc_dtype param_dtype, ampc_master_mode master, bool sr);
/* CLI_CUSTOM parser for a prec_list (distinct entries, at least one). */
bool run_parse_precisions(const char *v, void *out, char *why, size_t why_size);

/* The options train and compare share (defined in run_options.c). Each points into the config. */
int run_options(run_config *cfg, cli_opt *opts, int max);
/* The rows only `ampc train` has (--precision, --log, --checkpoint, --checkpoint-every, --keep, --resume,
 * --allow-data-change, --overwrite),
 * appended at o[n] (up to max rows in all); returns the new count. The fuzzer drives the same table. */
typedef struct train_only {
    int prec; /* precision; set to bf16 (the default) by the call */
    const char *log_path, *resume_path;
    bool allow_data_change;
    bool overwrite; /* a fresh run may replace another run's checkpoint and log */
} train_only;
int run_train_options(run_config *cfg, train_only *t, cli_opt *o, int n, int max);
/* The data-parallel rows (--reduce-dtype, --shard, --bucket-mb, --dist-timeout) at o[n]; the new count.
 * run_train_options appends them; `ampc bench step` too. */
int run_dist_options(run_config *cfg, cli_opt *o, int n, int max);
/* Defaults that depend on other options (model-dependent batch, lr, steps), after parsing; seen[i] tells
 * whether opts[i] was given. Fails (2) with a message for combinations that cannot work (a GPT whose
 * heads do not divide its width, --momentum without SGD). */
int run_finish_options(const char *prog, run_config *cfg, const cli_opt *opts, int nopts, const bool *seen);
/* The warmup a run gets without --warmup: GPTs min(100, span / 3) over the schedule's span in steps (100
 * when the span is given in epochs, span 0), other models none. */
int64_t run_default_warmup(ampc_model_kind kind, int64_t span);
/* Warns (one line) when --threads asks for more threads than this process has CPUs. */
void run_warn_threads(const char *prog, const run_config *cfg);
/* "gpt (6 layers, d 384, 6 heads, context 256)" */
void run_describe_model(const ampc_model_config *c, char *buf, size_t size);

typedef struct run_output {
    run_result r;         /* the report's view (label, series, summary) */
    double *loss, *scale; /* owned series, r points at them */
    bool *skipped;
    double *step_seconds; /* wall time of each step (owned) */
    int64_t per_step;     /* samples or tokens of one step */
    int64_t total;        /* the run's length in steps */
    bool complete;        /* --resume of a run already at (or past) its length: nothing was done */
    bool finished;        /* trained to the end and evaluated */
    int stopped_by;       /* the signal that stopped the run (safety.h), or 0 */
    double stop_seconds;  /* stopped_by: from the signal to the end of the final save (or of the step) */
    int world;            /* processes of the run (mpirun -np) */
    bool saved_elsewhere; /* the last save failed at --checkpoint: see saved_to */
    char saved_to[4200];  /* where the newest checkpoint of this process is ("" = none) */
    ampc_dist_stats dist; /* data parallel: the reductions (after cfg->untimed steps) */
    double reduce_alone;  /* with measure_comm: seconds of one step's reductions with nothing to hide them */
    /* host synchronisation points of the steps after cfg->untimed, per point (ampc_sync_point) */
    uint64_t syncs[AMPC_SYNC_POINT_COUNT];
    /* FLOPs of the matrix products this process ran in the steps after cfg->untimed, counted as syncs
     * (ampc_ctx_matmul_flops) */
    uint64_t matmul_flops;
    /* cfg->profile: the device calls of the steps after cfg->untimed (ampc_ctx_profile_read; owned) */
    ampc_profile_entry *prof;
    int nprof;
} run_output;

/* Runs one training run on ds, writing JSONL to log (may be NULL). 0 on success; 1 after printing a
 * one-line error `prog: ...` on stderr; 128 + the signal when SIGINT or SIGTERM stopped it (after the
 * step in progress, and its checkpoint when one is configured: see out->stopped_by and out->saved_to);
 * 0 with out->complete for a resumed run that has nothing left to do. A checkpoint that cannot be written
 * does not stop the run (ckpt_save_or_rescue); 1 at the end when the last one is not at --checkpoint. */
int run_training(const char *prog, const run_config *cfg, const ampc_dataset *ds, FILE *log, run_output *out);
void run_output_free(run_output *out);

/* CLI_CUSTOM parsers of --module-precision and --fp32-modules: the form only (globs are checked against
 * the model's modules when the run starts). */
bool run_parse_module_precision(const char *v, void *out, char *why, size_t why_size);
/* --device's value: an ampc_device this build has and this machine holds. */
bool run_parse_device(const char *v, void *out, char *why, size_t why_size);
bool run_parse_fp32_modules(const char *v, void *out, char *why, size_t why_size);
/* Sets the context's module rules from cfg (--module-precision, then --fp32-modules, then the run's own
 * policy) and checks them against the model: CLI_EXIT_USAGE after a message naming the flag and the
 * model's modules when a glob matches nothing. */
int run_module_rules(const char *prog, const run_config *cfg, ampc_ctx *ctx, const ampc_model *model);

/* Opens the data set of cfg->data_spec with cfg->model.vocab (0: the data's default): 0, 1 after printing
 * the error for bad data, CLI_EXIT_USAGE for a bad spec or a --vocab the data does not fit. */
int run_open_data(const char *prog, const run_config *cfg, ampc_dataset **ds);
/* Token data: one line on stderr naming it (files, formats, token counts, the split, the vocabulary and
 * where it came from), since the vocabulary is the data's own; other data is named by its spec. */
void run_say_data(const char *prog, const run_config *cfg, const ampc_dataset *ds);
/* Under mpirun (rank 0, unless --quiet): one line saying how many ranks run and how a batch splits. */
void run_say_world(const char *prog, const run_config *cfg);

#endif
