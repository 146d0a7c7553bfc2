/* train.c: `ampc train`: one run of one model in one precision, with the JSONL log the README describes, a
 * progress line (a live line on a terminal, plain lines otherwise), a closing summary on stdout, and
 * checkpoints. A checkpoint records the run's own options (train.args: every option that shapes the
 * run, once, in table order, without those that only steer this process: --log, --checkpoint...,
 * --resume, --quiet); --resume FILE parses them first and the command line after them, so a resumed run
 * is the same run unless an option is given again. It also records where the run saves (the file name
 * and the cadence: a resume without --checkpoint goes on saving next to the file it resumed from) and
 * what it trains on (the data spec with an absolute path, and the data's size and CRC-32, which a resume
 * checks). Every destination is tried before the first step, and Ctrl-C saves before it stops. */
#include "ckpt.h"
#include "cli.h"
#include "data_id.h"
#include "dist_cli.h"
#include "run.h"
#include "safety.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_OPTS 96
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
               "  ampc train --resume run.safetensors\n\n"
               "Ctrl-C (SIGINT) or SIGTERM finishes the step in progress, saves the checkpoint and exits with\n"
               "status 130 (143); a second Ctrl-C exits at once. Step numbers (\"step 57 skipped\", the JSONL's\n"
               "\"step\") are 0-based; [58/300] on the progress line and a checkpoint's step count steps done.\n\n");
}

/* Options that steer this process only; train.args does not record them (the checkpoint destination
 * and cadence have metadata of their own). */
static const char *const control_opts[] = {
    "log",       "checkpoint",   "checkpoint-every", "keep", "resume", "quiet", "allow-data-change",
    "bucket-mb", "dist-timeout", "overwrite",        NULL};

static bool is_control(const char *name) {
    for (int i = 0; control_opts[i]; i++)
        if (!strcmp(name, control_opts[i])) return true;
    return false;
}

typedef struct train_cli {
    run_config cfg;
    train_only x; /* precision, log and resume paths */
    cli_opt opts[MAX_OPTS];
    int n;
    bool seen[MAX_OPTS];
    /* --resume: what came from the checkpoint rather than the command line */
    bool ck_recorded, data_recorded;
    char ck_path[4200];
    char data_note[4400];
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
    int p = find(t, "precision", strlen("precision")); /* recorded even when it is the default */
    if (p >= 0 && !set[p]) set[p] = true, val[p] = precision_names[t->x.prec];
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
        if (k >= 0 && t->opts[k].kind != CLI_FLAG && nl) { /* its value is the next line */
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

/* A recorded integer: false when absent or not a number (then the option keeps its value). */
static bool meta_int(const ampc_safetensors *ck, const char *key, int64_t *out) {
    const char *v = ampc_safetensors_metadata(ck, key);
    char *end;
    if (!v || !*v) return false;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < 0) return false;
    *out = x;
    return true;
}

/* The checkpoint settings a resume inherits unless the command line gives them: the destination is the
 * recorded file name in the directory of the file resumed from (so a moved run folder keeps saving into
 * itself), and the cadence. */
static void recorded_destination(train_cli *t, const ampc_safetensors *ck, int argc, char **argv) {
    const char *name = ampc_safetensors_metadata(ck, "train.checkpoint");
    if (!given(t, argc, argv, "checkpoint") && name && *name && !strchr(name, '/')) {
        const char *path = t->x.resume_path, *slash = strrchr(path, '/');
        snprintf(t->ck_path, sizeof t->ck_path, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, name);
        t->cfg.checkpoint = t->ck_path;
        t->ck_recorded = true;
    }
    if (!given(t, argc, argv, "checkpoint-every")) meta_int(ck, "train.checkpoint_every", &t->cfg.checkpoint_every);
    if (!given(t, argc, argv, "keep")) meta_int(ck, "train.keep", &t->cfg.keep);
}

/* The data a resume trains on, unless --data is given: the recorded absolute spec (older checkpoints:
 * the spelling in train.args). Errors about it say where it came from. */
static void recorded_data(train_cli *t, const ampc_safetensors *ck, int argc, char **argv) {
    if (given(t, argc, argv, "data")) return;
    const char *spec = ampc_safetensors_metadata(ck, "train.data");
    if (spec && *spec) t->cfg.data_spec = spec;
    t->data_recorded = true;
    snprintf(t->data_note, sizeof t->data_note, " (--data %s, as recorded in %s; pass --data to use another path)",
             t->cfg.data_spec ? t->cfg.data_spec : "builtin", t->x.resume_path);
    t->cfg.data_note = t->data_note;
}

/* The schedule the checkpoint's own options give, to compare with the resumed run's (run.c says when the
 * lr changes). Quietly skipped when they do not parse alone. */
static void recorded_schedule(train_cli *t, const char *recorded) {
    static train_cli rec;
    static char *argv[MAX_ARGS + 1];
    static char buf[16384];
    snprintf(buf, sizeof buf, "%s", recorded);
    int argc = 0;
    for (char *tok = buf; *tok && argc < MAX_ARGS;) {
        char *nl = strchr(tok, '\n');
        if (nl) *nl = '\0';
        argv[argc++] = tok;
        if (!nl) break;
        tok = nl + 1;
    }
    build_table(&rec);
    cli_parse_out po = {.seen = rec.seen};
    if (cli_parse(rec.opts, (size_t)rec.n, argc, argv, 0, NULL, &po) != CLI_PARSED) return;
    if (run_finish_options("ampc train", &rec.cfg, rec.opts, rec.n, rec.seen) >= 0) return;
    const run_config *c = &rec.cfg;
    t->cfg.recorded_schedule = (run_schedule){c->lr, c->lr_schedule, c->warmup,
                                              c->schedule_steps ? c->schedule_steps : c->steps,
                                              c->schedule_steps || c->steps ? 0 : c->epochs};
    t->cfg.has_recorded_schedule = true;
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
        fprintf(stderr, "%s: --resume: the options recorded in %s do not parse with the command line's: %s\n", prog,
                path, po.error);
        return CLI_EXIT_USAGE;
    }
    recorded_destination(t, *ck, *argc, *argv);
    recorded_data(t, *ck, *argc, *argv);
    recorded_schedule(t, recorded);
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

/* Every file the run will write, tried before anything else: a mistyped path costs a second, not a run. */
/* One line for a destination another run's file holds; CLI_EXIT_FAIL. */
static int refuse_other_run(const char *opt, const char *path, const char *what, const char *how) {
    fprintf(stderr, "ampc train: --%s %s %s: %s, write to another path, or pass --overwrite to replace it\n", opt, path,
            what, how);
    return CLI_EXIT_FAIL;
}

/* A fresh run does not replace what another run left at its destinations (--overwrite lets it): the
 * checkpoint, the numbered copies --keep would prune, a log it would truncate. A resumed run continues
 * its own files (the log is appended to). */
static int check_fresh(const train_cli *t) {
    if (t->cfg.resume || t->x.overwrite) return 0;
    const char *ck = t->cfg.checkpoint, *log = t->x.log_path;
    char what[600], how[4300];
    struct stat st;
    if (ck && stat(ck, &st) == 0 && S_ISREG(st.st_mode)) {
        ampc_safetensors *f;
        int64_t step;
        if (ampc_checkpoint_open(ck, &f) == AMPC_OK) {
            ampc_model_config mc;
            char model[200] = "";
            if (ampc_checkpoint_model_config(f, &mc) == AMPC_OK) run_describe_model(&mc, model, sizeof model);
            if (!meta_int(f, "ampc.step", &step)) step = -1;
            snprintf(what, sizeof what, "holds another run (after %lld steps, %.200s)", (long long)step, model);
            ampc_safetensors_free(f);
            snprintf(how, sizeof how, "continue it with --resume %.4000s", ck);
        } else {
            ampc_clear_error();
            snprintf(what, sizeof what, "exists and is not an ampc checkpoint (%lld bytes)", (long long)st.st_size);
            snprintf(how, sizeof how, "move it away");
        }
        return refuse_other_run("checkpoint", ck, what, how);
    }
    int64_t newest = 0;
    size_t copies = ck && t->cfg.keep > 1 ? ckpt_numbered_count(ck, &newest) : 0;
    if (copies) {
        char first[4200];
        ckpt_step_name(ck, newest, first, sizeof first);
        snprintf(what, sizeof what,
                 "has %zu numbered checkpoint%s of another run beside it (the newest %.400s), which "
                 "--keep would prune",
                 copies, copies == 1 ? "" : "s", first);
        snprintf(how, sizeof how, "continue that run with --resume %.4000s", first);
        return refuse_other_run("checkpoint", ck, what, how);
    }
    if (log && stat(log, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        snprintf(what, sizeof what, "holds another run's log (%lld bytes)", (long long)st.st_size);
        snprintf(how, sizeof how, "resume that run with --resume CHECKPOINT (it appends to its log)");
        return refuse_other_run("log", log, what, how);
    }
    return 0;
}

static int check_destinations(const train_cli *t) {
    const char *prog = "ampc train";
    if (t->cfg.checkpoint && safety_check_writable(prog, "checkpoint", t->cfg.checkpoint, true)) return CLI_EXIT_FAIL;
    if (t->x.log_path && safety_check_writable(prog, "log", t->x.log_path, false)) return CLI_EXIT_FAIL;
    return check_fresh(t);
}

/* What a resume says about the checkpoint settings it inherited (on its "resumed from" line), or did not
 * (a warning: a run that saves nothing must not look like one that does). */
static void say_destination(train_cli *t) {
    run_config *cfg = &t->cfg;
    if (!cfg->resume) return;
    if (!cfg->checkpoint) {
        fprintf(stderr,
                "ampc train: warning: no --checkpoint, and %s records none (older checkpoints do not): this "
                "run saves nothing\n",
                t->x.resume_path);
        return;
    }
    if (!t->ck_recorded) return;
    static char note[4600];
    int n = snprintf(note, sizeof note, "; saving to %s", cfg->checkpoint);
    if (cfg->checkpoint_every)
        n += snprintf(note + n, sizeof note - (size_t)n, " every %lld steps", (long long)cfg->checkpoint_every);
    if (cfg->keep > 1) n += snprintf(note + n, sizeof note - (size_t)n, ", keeping %lld", (long long)cfg->keep);
    snprintf(note + n, sizeof note - (size_t)n, " (recorded in the checkpoint)");
    cfg->resume_note = note;
}

/* --resume: the data must be the data the checkpoint was trained on. 0, or 1 after the message. */
static int check_data(const train_cli *t, const data_id *id) {
    const ampc_safetensors *ck = t->cfg.resume;
    int64_t size;
    const char *crc = ampc_safetensors_metadata(ck, "train.data.crc32");
    if (!crc || !meta_int(ck, "train.data.size", &size)) {
        if (!t->cfg.quiet)
            fprintf(stderr,
                    "ampc train: note: %s records no fingerprint of its data (older checkpoints do not); "
                    "the data is not checked\n",
                    t->x.resume_path);
        return 0;
    }
    char now[16];
    snprintf(now, sizeof now, "%08" PRIx32, id->crc32);
    if ((uint64_t)size == id->size && !strcmp(crc, now)) return 0;
    const char *was = ampc_safetensors_metadata(ck, "train.data");
    fprintf(stderr,
            "ampc train: --resume: the data differs from the data %s was trained on: %s is %llu bytes with "
            "CRC-32 %s, the checkpoint recorded %s: %lld bytes with CRC-32 %s; %s\n",
            t->x.resume_path, id->spec, (unsigned long long)id->size, now, was ? was : "?", (long long)size, crc,
            t->x.allow_data_change ? "going on (--allow-data-change)"
                                   : "pass --allow-data-change to train on it anyway");
    return t->x.allow_data_change ? 0 : CLI_EXIT_FAIL;
}

/* The metadata every save adds: the options, the destination and cadence, the data's identity. */
static void checkpoint_meta(const train_cli *t, const char *args, const data_id *id, char (*num)[32],
                            const char **meta) {
    const char *slash = t->cfg.checkpoint ? strrchr(t->cfg.checkpoint, '/') : NULL;
    snprintf(num[0], 32, "%lld", (long long)t->cfg.checkpoint_every);
    snprintf(num[1], 32, "%lld", (long long)(t->cfg.keep > 1 ? t->cfg.keep : 1));
    snprintf(num[2], 32, "%llu", (unsigned long long)id->size);
    snprintf(num[3], 32, "%08" PRIx32, id->crc32);
    const char *kv[] = {"train.args",
                        args,
                        "train.checkpoint",
                        slash               ? slash + 1
                        : t->cfg.checkpoint ? t->cfg.checkpoint
                                            : "",
                        "train.checkpoint_every",
                        num[0],
                        "train.keep",
                        num[1],
                        "train.data",
                        id->spec,
                        "train.data.crc32",
                        num[3],
                        "train.data.size",
                        num[2]};
    memcpy(meta, kv, sizeof kv);
}

/* After a signal: where the checkpoint is and how to go on, in one line. */
static void say_stopped(const train_cli *t, const run_output *o) {
    char q[4300], log[4400] = "";
    const char *sig = safety_signal_name(o->stopped_by);
    if (t->x.log_path) safety_shell_quote(t->x.log_path, q, sizeof q), snprintf(log, sizeof log, " --log %s", q);
    char launch[64] = ""; /* a data-parallel run resumes on as many ranks (any count works, this one is exact) */
    if (o->world > 1) snprintf(launch, sizeof launch, "mpirun -np %d ", o->world);
    fprintf(stderr, "ampc train: stopped by %s after %lld of %lld steps; ", sig, (long long)o->r.n,
            (long long)o->total);
    if (o->saved_to[0]) {
        safety_shell_quote(o->saved_to, q, sizeof q);
        fprintf(
            stderr,
            "the checkpoint is saved to %s (%.0f ms after the signal); resume with: %sampc train --resume %s%s%s%s\n",
            o->saved_to, 1e3 * o->stop_seconds, launch, q, o->saved_elsewhere ? " --checkpoint " : "",
            o->saved_elsewhere ? t->cfg.checkpoint : "", log);
    } else if (t->cfg.resume) {
        safety_shell_quote(t->x.resume_path, q, sizeof q);
        fprintf(stderr, "no step since %s, nothing new to save; resume with: %sampc train --resume %s%s\n",
                t->x.resume_path, launch, q, log);
    } else {
        fprintf(stderr, "nothing saved (%s)\n", t->cfg.checkpoint ? "no step was done" : "no --checkpoint");
    }
}

static int open_log(const train_cli *t, FILE **log) {
    *log = NULL;
    if (!t->x.log_path || (*log = fopen(t->x.log_path, t->cfg.resume ? "a" : "w"))) return 0;
    fprintf(stderr, "ampc train: --log: cannot write '%s': %s\n", t->x.log_path, strerror(errno));
    return CLI_EXIT_FAIL;
}

/* Opens the data and checks it against the checkpoint; fills id. */
static int open_data(train_cli *t, ampc_dataset **ds, data_id *id) {
    int rc = run_open_data("ampc train", &t->cfg, ds);
    if (rc) return rc;
    char why[4400];
    if (!data_id_make(t->cfg.data_spec, *ds, id, why, sizeof why)) {
        fprintf(stderr, "ampc train: data: %s%s\n", why, t->data_recorded ? t->data_note : "");
        rc = CLI_EXIT_FAIL;
    } else if (t->cfg.resume) {
        rc = check_data(t, id);
    }
    if (rc) ampc_dataset_free(*ds), *ds = NULL;
    return rc;
}

static int finish(const train_cli *t, const run_output *out, int rc) {
    if (out->stopped_by) say_stopped(t, out);
    if (out->finished) print_summary(&t->cfg, out);
    if (out->finished && out->saved_elsewhere)
        fprintf(stderr, "ampc train: finished, but the final checkpoint is %s%s, not %s\n",
                out->saved_to[0] ? "at " : "lost", out->saved_to, t->cfg.checkpoint);
    return rc;
}

/* Everything before the first step that every rank goes through alike: the destinations (rank 0's to
 * write), the data, the log. -1 to go on. */
static int prepare(train_cli *t, ampc_dataset **ds, data_id *id, FILE **log) {
    run_config *cfg = &t->cfg;
    bool root = ampc_dist_rank(cfg->dist) == 0;
    int rc = root ? check_destinations(t) : 0;
    if (rc) return rc;
    safety_install_signals();
    if (root) say_destination(t), run_warn_threads("ampc train", cfg);
    if ((rc = open_data(t, ds, id))) return rc;
    if (root) run_say_data("ampc train", cfg, *ds), run_say_world("ampc train", cfg);
    return (rc = open_log(t, log)) ? rc : -1;
}

static int train(train_cli *t, const char *args) {
    run_config *cfg = &t->cfg;
    cfg->prec = (precision)t->x.prec;
    cfg->label = precision_names[t->x.prec];
    cfg->allow_data_change = t->x.allow_data_change;
    int rc;
    char prog[48] = "ampc train";
    if (ampc_dist_rank(cfg->dist) > 0) { /* rank 0 speaks, logs and writes for the job */
        snprintf(prog, sizeof prog, "ampc train (rank %d)", ampc_dist_rank(cfg->dist));
        cfg->quiet = true, t->x.log_path = NULL;
    }
    ampc_dataset *ds = NULL;
    static data_id id;
    FILE *log = NULL;
    dist_quiet q;
    dist_quiet_begin(&q);
    rc = dist_quiet_end(&q, cfg->dist, prepare(t, &ds, &id, &log));
    if (rc >= 0) {
        if (log) fclose(log);
        ampc_dataset_free(ds);
        return rc;
    }
    char num[4][32];
    const char *meta[14];
    checkpoint_meta(t, args, &id, num, meta);
    cfg->ck_meta = meta, cfg->n_ck_meta = 7;
    run_output out;
    rc = run_training(prog, cfg, ds, log, &out);
    rc = ampc_dist_rank(cfg->dist) == 0 ? finish(t, &out, rc) : rc;
    if (log && fclose(log) != 0 && !rc) {
        fprintf(stderr, "ampc train: --log: writing '%s' failed: %s\n", t->x.log_path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    run_output_free(&out);
    ampc_dataset_free(ds);
    return rc;
}

int cmd_train(int argc, char **argv) {
    static train_cli t; /* large; one per process */
    static char args[16384];
    ampc_safetensors *ck = NULL;
    ampc_dist *d; /* under mpirun: the job is joined first, so that the ranks agree on the options */
    int rc = dist_join("ampc train", 300, &d);
    if (rc) return rc;
    dist_quiet q; /* the options parse alike on every rank: rank 0 says what is wrong, once; a rank alone
                     in failing (a --resume file missing on its host) says it itself */
    dist_quiet_begin(&q);
    rc = dist_quiet_end(&q, d, parse(&t, argc, argv, &ck, args, sizeof args));
    if (rc < 0 && d) ampc_dist_set_timeout(d, t.cfg.dist_timeout);
    if (rc < 0) {
        t.cfg.resume = ck, t.cfg.dist = d;
        rc = train(&t, args);
    }
    ampc_safetensors_free(ck);
    ampc_dist_free(d);
    return rc;
}
