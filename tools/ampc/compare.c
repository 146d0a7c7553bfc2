/* compare.c: `ampc compare`: the same run (seed, initial weights, batches) in several precisions, one
 * after the other, then the answer to "did mixed precision help, and did it hurt accuracy?": a table on
 * stdout and, with --report DIR, report.md, loss.svg, scale.svg and each run's JSONL. Differences of
 * the loss against the FP32 run are computed step by step from the runs themselves. Every report file
 * is tried before the first run, so a comparison is never lost to its last write; the table fits the
 * terminal (or COLUMNS), and Ctrl-C stops after the step in progress. */
#include "cli.h"
#include "run.h"
#include "busy.h"
#include "safety.h"
#include "term.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_OPTS 96

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc compare [options]\n\n"
               "Trains the same model from the same seed, initial weights and batches in each precision and\n"
               "compares them: final losses, evaluation, |loss - loss_fp32| step by step, skipped steps, loss\n"
               "scale, peak memory, throughput and speed-up over FP32. With --report DIR it also writes\n"
               "report.md, loss.svg, scale.svg and one JSONL log per run.\n\n"
               "Example:\n"
               "  ampc compare --layers 2 --d-model 128 --heads 4 --context 64 --steps 300 --report out\n\n");
}

static int make_dir(const char *prog, const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    }
    fprintf(stderr, "%s: --report: cannot create directory '%s': %s\n", prog, dir,
            errno == EEXIST ? "a file of that name exists" : strerror(errno));
    return CLI_EXIT_FAIL;
}

/* The folder and every file the report will write there, tried before the first run; a folder that holds
 * another report is refused unless overwrite. */
static int check_report_dir(const char *prog, const char *dir, const prec_list *pl, bool overwrite) {
    int rc = make_dir(prog, dir);
    static const char *const files[] = {"report.md", "loss.svg", "scale.svg"};
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/report.md", dir);
    if (!rc && !overwrite && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        fprintf(stderr,
                "%s: --report %s holds another report (%s): write to another folder, or pass --overwrite to "
                "replace it\n",
                prog, dir, path);
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; !rc && i < 3 + pl->n; i++) {
        if (i < 3) snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        else snprintf(path, sizeof path, "%s/%s.jsonl", dir, pl->file[i - 3]);
        if (safety_check_writable(prog, "report", path, false)) rc = CLI_EXIT_FAIL;
    }
    return rc;
}

/* |loss - loss_fp32| per step and over the final window, and the speed-up, from the runs themselves. */
static void relate_to_fp32(run_output *runs, int n) {
    const run_result *base = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i].r.label, "fp32") == 0) base = &runs[i].r;
    for (int i = 0; i < n && base; i++) {
        run_result *r = &runs[i].r;
        if (r == base) continue;
        double mx = 0;
        for (int64_t k = 0; k < r->n && k < base->n; k++) {
            double d = fabs(r->loss[k] - base->loss[k]);
            if (d > mx || d != d) mx = d;
        }
        r->max_abs_dloss = mx;
        r->final_abs_dloss = fabs(r->final_train_loss - base->final_train_loss);
    }
    for (int i = 0; i < n && base; i++) runs[i].r.speedup = base->seconds / runs[i].r.seconds;
}

static void join_command(int argc, char **argv, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "ampc compare");
    for (int i = 0; i < argc && len < size; i++) len += (size_t)snprintf(buf + len, size - len, " %s", argv[i]);
}

static int run_all(const char *prog, const run_config *base, const prec_list *pl, const char *dir,
                   const ampc_dataset *ds, run_output *runs) {
    for (int i = 0; i < pl->n; i++) {
        run_config one, *cfg = &one;
        run_prec_apply(pl, i, base, cfg);
        FILE *log = NULL;
        char path[4096];
        if (dir) {
            snprintf(path, sizeof path, "%s/%s.jsonl", dir, pl->file[i]);
            if (!(log = fopen(path, "w"))) {
                fprintf(stderr, "%s: --report: cannot write '%s': %s\n", prog, path, strerror(errno));
                return CLI_EXIT_FAIL;
            }
        }
        cfg->runs_after = pl->n - 1 - i;
        busy_probe probe;
        busy_begin(&probe);
        int rc = run_training(prog, cfg, ds, log, &runs[i]);
        runs[i].r.others_load = busy_others(&probe);
        if (log) fclose(log);
        if (runs[i].stopped_by)
            fprintf(stderr, "%s: stopped by %s in the %s run after %lld of %lld steps; no report\n", prog,
                    safety_signal_name(runs[i].stopped_by), cfg->label, (long long)runs[i].r.n,
                    (long long)runs[i].total);
        if (rc) return rc;
    }
    return 0;
}

int cmd_compare(int argc, char **argv) {
    const char *prog = "ampc compare";
    if (ampc_dist_launch_size() > 1) { /* N copies of the same comparison would write one report N times */
        if (ampc_dist_launch_rank() == 0)
            fprintf(stderr,
                    "%s: runs in one process; for data-parallel runs use mpirun with ampc train, one "
                    "precision at a time\n",
                    prog);
        return CLI_EXIT_USAGE;
    }
    run_config cfg = {0};
    prec_list pl;
    run_prec_list_init(&pl, (const precision[]){PREC_FP32, PREC_BF16, PREC_FP16}, 3);
    const char *dir = NULL;
    cli_opt opts[MAX_OPTS];
    int n = run_options(&cfg, opts, MAX_OPTS - 3);
    opts[n++] = CLI_OPT(.name = "precisions", .kind = CLI_CUSTOM, .out = &pl, .parse = run_parse_precisions,
                        .metavar = "LIST", .accepts = "a comma-separated list of fp32, bf16, fp16, fp8",
                        .defval = "fp32,bf16,fp16",
                        .help = "the precisions to run, in order; an entry may be a named policy with module rules, "
                                "attn32:bf16[blocks.*.attn=fp32]");
    opts[n++] = CLI_OPT(.name = "report", .kind = CLI_STRING, .out = &dir, .metavar = "DIR",
                        .help = "write report.md, loss.svg, scale.svg and <precision>.jsonl there");
    bool overwrite = false;
    opts[n++] = CLI_OPT(.name = "overwrite", .kind = CLI_FLAG, .out = &overwrite,
                        .help = "--report: replace the report a folder already holds");
    bool seen[MAX_OPTS] = {false};
    cli_parse_out po = {.seen = seen};
    int rc = cli_parse_or_exit(prog, usage, opts, (size_t)n, argc, argv, 0, NULL, &po);
    if (rc < 0) rc = run_finish_options(prog, &cfg, opts, n, seen);
    if (rc >= 0) return rc;
    if ((rc = run_check_precs(prog, &pl, &cfg))) return rc;
    if (dir && (rc = check_report_dir(prog, dir, &pl, overwrite))) return rc;
    safety_install_signals();
    run_warn_threads(prog, &cfg);
    ampc_dataset *ds = NULL;
    if ((rc = run_open_data(prog, &cfg, &ds))) return rc;
    run_say_data(prog, &cfg, ds);
    run_output runs[RUN_MAX_PRECS] = {0};
    rc = run_all(prog, &cfg, &pl, dir, ds, runs);
    if (!rc) {
        relate_to_fp32(runs, pl.n);
        run_result rr[RUN_MAX_PRECS];
        char logs[RUN_MAX_PRECS][80];
        for (int i = 0; i < pl.n; i++) {
            rr[i] = runs[i].r;
            snprintf(logs[i], sizeof logs[i], "%s.jsonl", pl.file[i]);
            rr[i].log_file = dir ? logs[i] : NULL;
        }
        char model[160], command[2048];
        ampc_dataset_info info;
        ampc_dataset_get_info(ds, &info);
        run_describe_model(&cfg.model, model, sizeof model);
        join_command(argc, argv, command, sizeof command);
        int threads = cfg.threads ? cfg.threads : ampc_cpu()->online_cpus;
        report_meta meta = {model, info.name, command, rr[0].n, threads, cfg.seed};
        report_print_table_fit(stdout, &meta, rr, pl.n, true, term_columns(stdout));
        char err[512];
        if (dir && report_write_dir(dir, &meta, rr, pl.n, err, sizeof err) != 0) {
            fprintf(stderr, "%s: --report: %s\n", prog, err);
            rc = CLI_EXIT_FAIL;
        } else if (dir) {
            fprintf(stderr, "%s: report written to %s/report.md\n", prog, dir);
        }
    }
    for (int i = 0; i < pl.n; i++) run_output_free(&runs[i]);
    ampc_dataset_free(ds);
    return rc;
}
