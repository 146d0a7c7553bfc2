/* train.c: `ampc train`: one run of one model in one precision, with the JSONL log of design.md §4, a
 * progress line (a live line on a terminal, plain lines otherwise), a closing summary on stdout, and
 * checkpoints. A checkpoint records the run's own options (train.args: every option that shapes the
 * run, once, in table order, without those that only steer this process: --log, --checkpoint...,
 * --resume, --quiet); --resume FILE parses them first and the command line after them, so a resumed run
 * is the same run unless an option is given again. */
#include "cli.h"
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 64
#define MAX_ARGS 256

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc train [options]\n\n"
               "Trains one model in one precision: FP32, or BF16/FP16 autocast (FP32 master weights, loss\n"
               "scaling for FP16). Writes one JSON object per optimizer step with --log, and evaluates at the\n"
               "end (test accuracy for images, validation loss for text). --checkpoint saves the whole state\n"
               "(safetensors); --resume continues a run bit for bit, with the options it was started with.\n\n"
               "Examples:\n"
               "  ampc train --layers 2 --d-model 128 --heads 4 --context 64 --steps 300\n"
               "  ampc train --model cnn --data fashion-mnist --precision fp16 --epochs 3 --log cnn.jsonl\n"
               "  ampc train --data text:book.txt --steps 2000 --checkpoint run.safetensors --checkpoint-every 200\n"
               "  ampc train --resume run.safetensors --checkpoint run.safetensors --checkpoint-every 200\n\n");
}

/* Options that steer this process only; a checkpoint does not record them. */
static const char *const control_opts[] = {"log", "checkpoint", "checkpoint-every", "keep", "resume", "quiet", NULL};

static bool is_control(const char *name) {
    for (int i = 0; control_opts[i]; i++)
        if (!strcmp(name, control_opts[i])) return true;
    return false;
}

typedef struct train_cli {
    run_config cfg;
    train_only x;   /* precision, log and resume paths */
    cli_opt opts[MAX_OPTS];
    int n;
    bool seen[MAX_OPTS];
} train_cli;

static void build_table(train_cli *t) {
    memset(t, 0, sizeof *t);
    t->n = run_train_options(&t->cfg, &t->x, t->opts, run_options(&t->cfg, t->opts, MAX_OPTS), MAX_OPTS);
}

static int find(const train_cli *t, const char *name, size_t len) {
    for (int i = 0; i < t->n; i++)
        if (strlen(t->opts[i].name) == len && !strncmp(t->opts[i].name, name, len)) return i;
    return -1;
}

/* train.args from an argument list that parsed: the last value of each run option, in table order,
 * one token per line. 1 (after a message) when a value cannot be recorded. */
static int canonical_args(const train_cli *t, int argc, char **argv, char *buf, size_t size) {
    const char *val[MAX_OPTS];
    bool set[MAX_OPTS] = {false};
    for (int i = 0; i < argc && strcmp(argv[i], "--"); i++) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        int k = find(t, name, eq ? (size_t)(eq - name) : strlen(name));
        if (k < 0) continue;
        set[k] = true;
        val[k] = t->opts[k].kind == CLI_FLAG ? NULL : eq ? eq + 1 : argv[++i];
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->n; k++) {
        if (!set[k] || is_control(t->opts[k].name)) continue;
        if (val[k] && strchr(val[k], '\n')) {
            fprintf(stderr, "ampc train: --%s: a value with a line break cannot be recorded in a checkpoint\n",
                    t->opts[k].name);
            return 1;
        }
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s--%s%s%s", len ? "\n" : "", t->opts[k].name,
                                val[k] ? "\n" : "", val[k] ? val[k] : "");
    }
    if (len >= size) return fprintf(stderr, "ampc train: the options are too long to record in a checkpoint\n"), 1;
    return 0;
}

/* Did argv give option `name`? */
static bool given(const train_cli *t, int argc, char **argv, const char *name) {
    for (int i = 0; i < argc && strcmp(argv[i], "--"); i++) {
        const char *n = argv[i] + 2, *eq = strchr(n, '=');
        int k = strncmp(argv[i], "--", 2) ? -1 : find(t, n, eq ? (size_t)(eq - n) : strlen(n));
        if (k >= 0 && !strcmp(t->opts[k].name, name)) return true;
    }
    return false;
}

/* all = the checkpoint's recorded options, then argv. A run length given on the command line (--steps
 * or --epochs) replaces the recorded one, whichever it was. Returns the count, or -1 after a message. */
static int merge_args(const train_cli *t, const char *recorded, int argc, char **argv, char **all) {
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s", recorded);
    bool new_length = given(t, argc, argv, "steps") || given(t, argc, argv, "epochs");
    int n = 0;
    for (char *tok = buf; *tok;) {
        char *val = NULL, *nl = strchr(tok, '\n');
        if (nl) *nl = '\0';
        int k = strncmp(tok, "--", 2) ? -1 : find(t, tok + 2, strlen(tok + 2));
        if (k >= 0 && t->opts[k].kind != CLI_FLAG && nl) {   /* its value is the next line */
            val = nl + 1, nl = strchr(val, '\n');
            if (nl) *nl = '\0';
        }
        bool drop = k >= 0 && new_length && (!strcmp(t->opts[k].name, "steps") || !strcmp(t->opts[k].name, "epochs"));
        if (n + 2 + argc > MAX_ARGS)
            return fprintf(stderr, "ampc train: too many arguments to combine with a checkpoint's options\n"), -1;
        if (!drop) {
            all[n++] = tok;
            if (val) all[n++] = val;
        }
        if (!nl) break;
        tok = nl + 1;
    }
    for (int i = 0; i < argc; i++) all[n++] = argv[i];
    all[n] = NULL;
    return n;
}

/* --resume: opens the checkpoint and parses its recorded options followed by the command line's.
 * Returns -1 to go on (with *argc, *argv the merged list), else the exit status. */
static int with_recorded(train_cli *t, int *argc, char ***argv, char **all, ampc_safetensors **ck) {
    const char *prog = "ampc train", *path = t->x.resume_path;
    if (ampc_checkpoint_open(path, ck) != AMPC_OK) return cli_fail_lib("ampc train: --resume", ampc_last_status());
    const char *recorded = ampc_safetensors_metadata(*ck, "train.args");
    if (!recorded) {
        fprintf(stderr, "%s: --resume: %s was not written by ampc train (no train.args metadata)\n", prog, path);
        return CLI_EXIT_FAIL;
    }
    int n = merge_args(t, recorded, *argc, *argv, all);
    if (n < 0) return CLI_EXIT_USAGE;
    cli_parse_out po = {.seen = t->seen};
    build_table(t);
    if (cli_parse(t->opts, (size_t)t->n, n, all, 0, NULL, &po) != CLI_PARSED) {
        fprintf(stderr, "%s: --resume: the options recorded in %s do not parse with the command line's: %s\n", prog, path,
                po.error);
        return CLI_EXIT_USAGE;
    }
    *argc = n, *argv = all;
    return -1;
}

/* Parses argv; with --resume, the checkpoint's train.args first. Returns -1 to go on. */
static int parse(train_cli *t, int argc, char **argv, ampc_safetensors **ck, char *args, size_t args_size) {
    const char *prog = "ampc train";
    static char *all[MAX_ARGS + 1];
    cli_parse_out po = {.seen = t->seen};
    build_table(t);
    int rc = cli_parse_or_exit(prog, usage, t->opts, (size_t)t->n, argc, argv, 0, NULL, &po);
    if (rc < 0 && t->x.resume_path) rc = with_recorded(t, &argc, &argv, all, ck);
    if (rc < 0) rc = run_finish_options(prog, &t->cfg, t->opts, t->n, t->seen);
    if (rc >= 0) return rc;
    if ((t->cfg.checkpoint_every || t->cfg.keep) && !t->cfg.checkpoint) {
        fprintf(stderr, "%s: --%s needs --checkpoint FILE\n", prog, t->cfg.keep ? "keep" : "checkpoint-every");
        return CLI_EXIT_USAGE;
    }
    return canonical_args(t, argc, argv, args, args_size) ? CLI_EXIT_USAGE : -1;
}

static void print_summary(const run_config *cfg, const run_output *o) {
    const run_result *r = &o->r;
    printf("%s: %lld steps, final train loss %.4f, eval loss %.4f", cfg->label, (long long)r->n, r->final_train_loss,
           r->eval_loss);
    if (r->eval_accuracy == r->eval_accuracy) printf(", eval accuracy %.2f%%", 100 * r->eval_accuracy);
    printf(", skipped %lld, final scale %g, peak memory %.1f MiB, %.0f %s\n", (long long)r->skipped_steps,
           r->final_scale, (double)r->peak_bytes / (1 << 20), r->throughput, r->throughput_unit);
}

static int train(train_cli *t, const char *args) {
    const char *prog = "ampc train";
    run_config *cfg = &t->cfg;
    cfg->prec = (precision)t->x.prec;
    cfg->label = precision_names[t->x.prec];
    const char *meta[] = {"train.args", args};
    cfg->ck_meta = meta, cfg->n_ck_meta = 1;
    ampc_dataset *ds = NULL;
    int rc = run_open_data(prog, cfg, &ds);
    if (rc) return rc;
    FILE *log = NULL;
    if (t->x.log_path && !(log = fopen(t->x.log_path, cfg->resume ? "a" : "w"))) {
        fprintf(stderr, "%s: --log: cannot write '%s': %s\n", prog, t->x.log_path, strerror(errno));
        ampc_dataset_free(ds);
        return CLI_EXIT_FAIL;
    }
    run_output out;
    rc = run_training(prog, cfg, ds, log, &out);
    if (!rc) print_summary(cfg, &out);
    if (log && fclose(log) != 0 && !rc) {
        fprintf(stderr, "%s: --log: writing '%s' failed: %s\n", prog, t->x.log_path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    run_output_free(&out);
    ampc_dataset_free(ds);
    return rc;
}

int cmd_train(int argc, char **argv) {
    static train_cli t;   /* large; one per process */
    static char args[16384];
    ampc_safetensors *ck = NULL;
    int rc = parse(&t, argc, argv, &ck, args, sizeof args);
    if (rc < 0) {
        t.cfg.resume = ck;
        rc = train(&t, args);
    }
    ampc_safetensors_free(ck);
    return rc;
}
