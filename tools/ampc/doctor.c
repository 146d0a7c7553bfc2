/* doctor.c: `ampc doctor`: know before you train which parts of a model are safe in FP16/BF16. It trains
 * N steps (20) in FP32 with range statistics attached, then prints a verdict per op and module for
 * FP16, BF16 and the two FP8 formats (numbered modules with the same verdicts share one line), the loss
 * scale FP16 needs, and the exact `ampc train` command line it recommends: the user's own options with
 * --precision fp16, that scale, and the modules (or ops) to keep in FP32. --json prints the same for
 * scripts; --report DIR writes report.md and the heat map (doctor_report.c). */
#include "cli.h"
#include "doctor_report.h"
#include "json.h"
#include "run.h"
#include "safety.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_OPTS 96
#define NFMT 4

static const ampc_format fmts[NFMT] = {AMPC_FORMAT_FP16, AMPC_FORMAT_BF16, AMPC_FORMAT_FP8_E4M3, AMPC_FORMAT_FP8_E5M2};
static const char *const fmt_keys[NFMT] = {"fp16", "bf16", "fp8_e4m3", "fp8_e5m2"};

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc doctor [train options] [--steps N] [--json] [--report DIR]\n\n"
               "Trains N steps (20) in FP32 with range statistics on: every op output, every gradient of an\n"
               "op output and every parameter gradient, per module and op. Then it says, per op and module,\n"
               "what FP16, BF16, FP8-E4M3 and FP8-E5M2 would do to those values: safe, needs loss scaling\n"
               "(with the scale), unsafe (overflow, flush to zero: keep it in FP32 or use BF16), or kept in\n"
               "FP32 by the autocast policies; and ends with the `ampc train` command line it recommends.\n\n"
               "Examples:\n"
               "  ampc doctor --layers 2 --d-model 128 --heads 4 --context 64\n"
               "  ampc doctor --model cnn --data fashion-mnist --steps 50 --report doctor-cnn\n\n");
}

typedef struct doctor_cli {
    run_config cfg;
    cli_opt opts[MAX_OPTS];
    int n;
    bool seen[MAX_OPTS];
    bool json;
    const char *dir;
} doctor_cli;

/* ---- the recommended command line ---- */

static int find_opt(const doctor_cli *d, const char *name, size_t len) {
    for (int i = 0; i < d->n; i++)
        if (strlen(d->opts[i].name) == len && !strncmp(d->opts[i].name, name, len)) return i;
    return -1;
}

/* Appends s to buf, single-quoted when the shell would read it otherwise. */
static void shell_word(char *buf, size_t size, const char *s) {
    size_t len = strlen(buf);
    bool plain = *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+") == strlen(s);
    if (plain) {
        snprintf(buf + len, size - len, " %s", s);
        return;
    }
    len += (size_t)snprintf(buf + len, size - len, " '");
    for (; *s && len + 5 < size; s++) len += (size_t)snprintf(buf + len, size - len, *s == '\'' ? "'\\''" : "%c", *s);
    snprintf(buf + len, size - len, "'");
}

/* The user's options that shape training, without the doctor's own and without those the recommendation
 * replaces; `merged` receives the user's values of --fp32-ops / --fp32-modules to merge with. */
static void user_options(const doctor_cli *d, int argc, char **argv, char *buf, size_t size, const char **ops,
                         const char **mods) {
    static const char *const dropped[] = {"steps", "epochs", "init-scale", "fp32-ops",     "fp32-modules",
                                          "quiet", "json",   "report",     "check-finite", NULL};
    buf[0] = '\0';
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        int k = strncmp(argv[i], "--", 2) ? -1 : find_opt(d, name, eq ? (size_t)(eq - name) : strlen(name));
        if (k < 0) continue;
        const char *val = d->opts[k].kind == CLI_FLAG ? NULL : eq ? eq + 1 : i + 1 < argc ? argv[++i] : "";
        bool drop = false;
        for (int j = 0; dropped[j]; j++) drop |= !strcmp(d->opts[k].name, dropped[j]);
        if (!strcmp(d->opts[k].name, "fp32-ops")) *ops = val;
        if (!strcmp(d->opts[k].name, "fp32-modules")) *mods = val;
        if (drop) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, " --%s", d->opts[k].name);
        if (val) shell_word(buf, size, val);
    }
}

/* "a,b" + "b,c" -> "a,b,c" */
static void merge_lists(char *out, size_t size, const char *a, const char *b) {
    out[0] = '\0';
    const char *lists[2] = {a, b};
    for (int l = 0; l < 2; l++)
        for (const char *p = lists[l]; p && *p;) {
            size_t n = strcspn(p, ",");
            bool have = false;
            for (const char *q = out; *q && !have;) {
                size_t m = strcspn(q, ",");
                have = m == n && !strncmp(q, p, n);
                q += m + (q[m] == ',');
            }
            size_t used = strlen(out);
            if (!have && n) snprintf(out + used, size - used, "%s%.*s", used ? "," : "", (int)n, p);
            p += n + (p[n] == ',');
        }
}

static void recommend(const doctor_cli *d, int argc, char **argv, const ampc_stats *st, char *fp16, char *bf16,
                      char *fp8, size_t size, ampc_stats_recommendation *rec) {
    char opts[4096];
    const char *user_ops = NULL, *user_mods = NULL;
    user_options(d, argc, argv, opts, sizeof opts, &user_ops, &user_mods);
    ampc_stats_recommend(st, AMPC_FORMAT_FP16, rec);
    char ops[512], mods[1536];
    merge_lists(ops, sizeof ops, user_ops, rec->fp32_ops);
    merge_lists(mods, sizeof mods, user_mods, rec->fp32_modules);
    snprintf(fp16, size, "ampc train%s --precision fp16 --init-scale %.0f", opts, ldexp(1.0, rec->scale_log2));
    if (*ops) snprintf(fp16 + strlen(fp16), size - strlen(fp16), " --fp32-ops %s", ops);
    if (*mods) {
        size_t len = strlen(fp16);
        snprintf(fp16 + len, size - len, " --fp32-modules");
        shell_word(fp16, size, mods);
    }
    char uops[512] = "", umods[1024] = "";
    if (user_ops) snprintf(uops, sizeof uops, " --fp32-ops %s", user_ops);
    if (user_mods) {
        snprintf(umods, sizeof umods, " --fp32-modules");
        shell_word(umods, sizeof umods, user_mods);
    }
    snprintf(bf16, size, "ampc train%s --precision bf16%s%s", opts, uops, umods);
    snprintf(fp8, size, "ampc train%s --precision fp8%s%s", opts, uops, umods);
}

/* Linear and matmul sites (what --precision fp8 quantises) that FP8 cannot hold even with a per-tensor
 * scale: outputs and parameter gradients judged in E4M3, output gradients in E5M2 (the hybrid recipe). */
static int fp8_unsafe_sites(const ampc_stats *st) {
    int n = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (strcmp(e->op, "linear") && strcmp(e->op, "matmul")) continue;
        ampc_stats_advice a;
        ampc_stats_advise(st, i, e->role == AMPC_STATS_GRAD ? AMPC_FORMAT_FP8_E5M2 : AMPC_FORMAT_FP8_E4M3, &a);
        n += a.verdict == AMPC_VERDICT_UNSAFE;
    }
    return n;
}

/* ---- the verdict table: sites grouped over numbered modules ---- */

static void site_key(const ampc_stats_entry *e, char *key, size_t size) {
    char m[256], p[128];
    ampc_scope_pattern(e->module, "*", m, sizeof m);
    ampc_scope_pattern(e->param, "*", p, sizeof p);
    snprintf(key, size, "%s|%s|%d|%s", m, e->op, (int)e->role, p);
}

static void site_label(const ampc_stats_entry *e, bool general, char *buf, size_t size) {
    char m[256], p[128];
    if (general) ampc_scope_pattern(e->module, "*", m, sizeof m), ampc_scope_pattern(e->param, "*", p, sizeof p);
    else snprintf(m, sizeof m, "%s", e->module), snprintf(p, sizeof p, "%s", e->param);
    if (e->role == AMPC_STATS_PARAM_GRAD) snprintf(buf, size, "%s %s grad(%s)", m[0] ? m : "-", e->op, p);
    else snprintf(buf, size, "%s %s %s", m[0] ? m : "-", e->op, ampc_stats_role_name(e->role));
}

static void verdict_cell(const ampc_stats_advice *a, char *buf, size_t size) {
    if (a->verdict == AMPC_VERDICT_NEEDS_SCALING) snprintf(buf, size, "scale 2^%d", a->scale_log2);
    else snprintf(buf, size, "%s", ampc_stats_verdict_name(a->verdict));
}

/* Sites i.. with the same key as i whose verdicts all agree: how many (members in order in idx). */
static int group_of(const ampc_stats *st, int i, const bool *done, int *idx) {
    char key[512], other[512];
    site_key(ampc_stats_get(st, i), key, sizeof key);
    int n = 0;
    for (int j = i; j < ampc_stats_count(st); j++) {
        if (done[j]) continue;
        site_key(ampc_stats_get(st, j), other, sizeof other);
        if (strcmp(key, other)) continue;
        bool same = true; /* the same verdicts; FP8's per-tensor scales may differ (the row shows their span) */
        for (int f = 0; f < NFMT && n > 0; f++) {
            ampc_stats_advice a, b;
            ampc_stats_advise(st, i, fmts[f], &a), ampc_stats_advise(st, j, fmts[f], &b);
            same &= a.verdict == b.verdict && (f >= 2 || a.scale_log2 == b.scale_log2);
        }
        if (same) idx[n++] = j;
    }
    return n;
}

static void print_row(const ampc_stats *st, const int *idx, int n, int width) {
    const ampc_stats_entry *e = ampc_stats_get(st, idx[0]);
    double amax = 0, mn = 0;
    for (int k = 0; k < n; k++) {
        const ampc_stats_entry *x = ampc_stats_get(st, idx[k]);
        if (x->amax > amax) amax = x->amax;
        if (x->min_nonzero > 0 && (mn == 0 || x->min_nonzero < mn)) mn = x->min_nonzero;
    }
    char label[400], cells[NFMT][24], why[200] = "";
    site_label(e, n > 1, label, sizeof label);
    if (n > 1) snprintf(label + strlen(label), sizeof label - strlen(label), " (x%d)", n);
    for (int f = 0; f < NFMT; f++) {
        ampc_stats_advice a, b;
        ampc_stats_advise(st, idx[0], fmts[f], &a);
        verdict_cell(&a, cells[f], sizeof cells[f]);
        int lo = a.scale_log2, hi = a.scale_log2;
        for (int k = 1; k < n && a.verdict == AMPC_VERDICT_NEEDS_SCALING; k++) {
            ampc_stats_advise(st, idx[k], fmts[f], &b);
            lo = b.scale_log2 < lo ? b.scale_log2 : lo, hi = b.scale_log2 > hi ? b.scale_log2 : hi;
        }
        if (lo != hi) snprintf(cells[f], sizeof cells[f], "scale 2^%d..%d", lo, hi);
        if (f == 0 && (a.verdict == AMPC_VERDICT_UNSAFE || a.verdict == AMPC_VERDICT_NEEDS_SCALING))
            snprintf(why, sizeof why, "  (%s)", a.why);
    }
    printf("%-*s %10.3g %10.3g  %-13s %-10s %-14s %-14s%s\n", width, label, amax, mn, cells[0], cells[1], cells[2],
           cells[3], why);
}

static void print_table(const ampc_stats *st) {
    int n = ampc_stats_count(st);
    bool *done = calloc((size_t)n + 1, 1);
    int *idx = malloc(((size_t)n + 1) * sizeof *idx);
    if (!done || !idx) {
        free(done), free(idx);
        return;
    }
    int width = 14; /* the label column: as wide as the longest row's label (two passes over the groups) */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            printf("%-*s %10s %10s  %-13s %-10s %-14s %-14s\n", width, "module op role", "amax", "min |x|>0", "FP16",
                   "BF16", "FP8-E4M3", "FP8-E5M2");
        memset(done, 0, (size_t)n + 1);
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            int m = group_of(st, i, done, idx);
            for (int k = 0; k < m; k++) done[idx[k]] = true;
            if (pass == 1) {
                print_row(st, idx, m, width);
                continue;
            }
            char label[400];
            site_label(ampc_stats_get(st, i), m > 1, label, sizeof label);
            int len = (int)strlen(label) + (m > 1 ? 5 : 0);
            width = len > width ? len : width;
        }
    }
    free(done), free(idx);
}

/* ---- JSON ---- */

static void json_site(json_writer *w, const ampc_stats *st, int i) {
    const ampc_stats_entry *e = ampc_stats_get(st, i);
    json_obj_begin(w);
    json_kstr(w, "module", e->module), json_kstr(w, "op", e->op);
    json_kstr(w, "role", ampc_stats_role_name(e->role));
    json_kstr(w, "param", e->param[0] ? e->param : NULL);
    json_kbool(w, "lowered", e->lowered);
    json_kint(w, "count", (int64_t)e->count), json_kint(w, "zeros", (int64_t)e->zeros);
    json_kint(w, "nonfinite", (int64_t)e->nonfinite);
    json_knum(w, "amax", e->amax), json_knum(w, "min_nonzero", e->min_nonzero);
    for (int f = 0; f < NFMT; f++) {
        ampc_stats_advice a;
        ampc_stats_advise(st, i, fmts[f], &a);
        const ampc_stats_range *r = &e->range[fmts[f]];
        json_key(w, fmt_keys[f]);
        json_obj_begin(w);
        json_kstr(w, "verdict", ampc_stats_verdict_name(a.verdict));
        json_kint(w, "scale_log2", a.scale_log2);
        json_knum(w, "normal_fraction", a.normal_fraction);
        json_kstr(w, "why", a.why);
        json_kint(w, "overflow", (int64_t)r->overflow), json_kint(w, "underflow", (int64_t)r->underflow);
        json_kint(w, "subnormal", (int64_t)r->subnormal);
        json_obj_end(w);
    }
    json_key(w, "hist_log2");
    json_obj_begin(w); /* binade exponent -> count, non-empty bins only */
    for (int b = 1; b < 255; b++) {
        char k[8];
        snprintf(k, sizeof k, "%d", b - 127);
        if (e->hist[b]) json_kint(w, k, (int64_t)e->hist[b]);
    }
    json_obj_end(w);
    json_obj_end(w);
}

static void print_json(const ampc_stats *st, const doctor_meta *m, const ampc_stats_recommendation *rec) {
    json_writer w;
    json_init(&w, stdout, true);
    json_obj_begin(&w);
    json_kstr(&w, "model", m->model), json_kstr(&w, "data", m->data);
    json_kint(&w, "steps", m->steps);
    json_knum(&w, "step_seconds", m->step_seconds), json_knum(&w, "stats_seconds", m->stats_seconds);
    json_knum(&w, "stats_overhead", doctor_stats_overhead(m));
    json_key(&w, "sites");
    json_arr_begin(&w);
    for (int i = 0; i < ampc_stats_count(st); i++) json_site(&w, st, i);
    json_arr_end(&w);
    json_kint(&w, "unsafe_fp16_sites", rec->unsafe_sites);
    json_kint(&w, "fp16_loss_scale_log2", rec->scale_log2);
    json_knum(&w, "fp16_normal_fraction", rec->normal_fraction);
    json_kstr(&w, "fp32_modules", rec->fp32_modules), json_kstr(&w, "fp32_ops", rec->fp32_ops);
    json_kstr(&w, "recommended", m->recommended), json_kstr(&w, "bf16_command", m->bf16_command);
    json_kstr(&w, "fp8_command", m->fp8_command);
    json_kint(&w, "fp8_unsafe_sites", fp8_unsafe_sites(st));
    json_obj_end(&w);
    json_finish(&w);
}

/* ---- the command ---- */

static int parse(doctor_cli *d, int argc, char **argv) {
    d->n = run_options(&d->cfg, d->opts, MAX_OPTS - 2);
    d->opts[d->n++] = CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &d->json, .help = "the verdicts as JSON");
    d->opts[d->n++] = CLI_OPT(.name = "report", .kind = CLI_STRING, .out = &d->dir, .metavar = "DIR",
                              .help = "write report.md and heatmap.svg there");
    int k = find_opt(d, "steps", 5);
    if (k >= 0) d->opts[k].defval = "20"; /* the doctor's own, in --help too */
    cli_parse_out po = {.seen = d->seen};
    int rc = cli_parse_or_exit("ampc doctor", usage, d->opts, (size_t)d->n, argc, argv, 0, NULL, &po);
    if (rc >= 0) return rc;
    if (find_opt(d, "steps", 5) >= 0 && !d->seen[find_opt(d, "steps", 5)] && !d->seen[find_opt(d, "epochs", 6)])
        d->cfg.steps = 20;
    return run_finish_options("ampc doctor", &d->cfg, d->opts, d->n, d->seen);
}

static int make_dir(const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    }
    fprintf(stderr, "ampc doctor: --report: cannot create directory '%s': %s\n", dir,
            errno == EEXIST ? "a file of that name exists" : strerror(errno));
    return CLI_EXIT_FAIL;
}

static int finish(const doctor_cli *d, int argc, char **argv, const ampc_stats *st, const run_output *out,
                  const ampc_dataset *ds) {
    static char fp16[8192], bf16[8192], fp8[8192];
    ampc_stats_recommendation rec;
    recommend(d, argc, argv, st, fp16, bf16, fp8, sizeof fp16, &rec);
    char model[160];
    ampc_dataset_info info;
    ampc_dataset_get_info(ds, &info);
    run_describe_model(&d->cfg.model, model, sizeof model);
    double total = 0;
    for (int64_t i = 0; i < out->r.n; i++) total += out->step_seconds[i];
    int64_t steps = out->r.n > 0 ? out->r.n : 1;
    static char command[8192]; /* the doctor's own command line, as given */
    int len = snprintf(command, sizeof command, "ampc doctor");
    for (int i = 0; i < argc && len < (int)sizeof command; i++) {
        char q[4300];
        safety_shell_quote(argv[i], q, sizeof q);
        len += snprintf(command + len, sizeof command - (size_t)len, " %s", q);
    }
    doctor_meta m = {model, info.name, command, out->r.n, total / (double)steps, ampc_stats_seconds(st) / (double)steps,
                     fp16,  bf16,      fp8};
    if (d->json) print_json(st, &m, &rec);
    else {
        printf("ampc doctor: %s on %s, %lld FP32 steps; the statistics added %.1f%% to a step\n\n", model, info.name,
               (long long)out->r.n, 100 * doctor_stats_overhead(&m));
        print_table(st);
        printf("\nFP16: %d unsafe site%s; ", rec.unsafe_sites, rec.unsafe_sites == 1 ? "" : "s");
        if (rec.normal_fraction > 0.999)
            printf("gradients need a loss scale of 2^%d (%.2f%% of their non-zero values normal)\n", rec.scale_log2,
                   100 * rec.normal_fraction);
        else
            printf("no single loss scale keeps 99.9%% of the gradients normal: the largest without overflow, 2^%d, "
                   "keeps %.2f%%\n",
                   rec.scale_log2, 100 * rec.normal_fraction);
        printf("recommended:\n  %s\nor BF16 (FP32's range, no scaling):\n  %s\n", fp16, bf16);
        int bad8 = fp8_unsafe_sites(st);
        printf("or FP8 (linear layers in E4M3, E5M2 gradients, delayed per-tensor scaling): %d linear/matmul site%s "
               "out of its range%s\n  %s\n",
               bad8, bad8 == 1 ? "" : "s", bad8 ? ": prefer BF16" : "", fp8);
    }
    char err[512];
    if (d->dir && doctor_write_report(d->dir, &m, st, err, sizeof err) != 0) {
        fprintf(stderr, "ampc doctor: --report: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    if (d->dir) fprintf(stderr, "ampc doctor: report written to %s/report.md\n", d->dir);
    return 0;
}

int cmd_doctor(int argc, char **argv) {
    static doctor_cli d;
    memset(&d, 0, sizeof d);
    int rc = parse(&d, argc, argv);
    if (rc >= 0) return rc;
    if (d.dir && (rc = make_dir(d.dir))) return rc;
    d.cfg.prec = PREC_FP32;
    d.cfg.label = "doctor";
    d.cfg.no_eval = true;
    d.cfg.quiet |= d.json;
    ampc_stats *st = NULL;
    if (ampc_stats_new(&st) != AMPC_OK) {
        fprintf(stderr, "ampc doctor: %s\n", ampc_last_error());
        return CLI_EXIT_FAIL;
    }
    d.cfg.stats = st;
    safety_install_signals();
    ampc_dataset *ds = NULL;
    run_output out = {0};
    if (!(rc = run_open_data("ampc doctor", &d.cfg, &ds))) rc = run_training("ampc doctor", &d.cfg, ds, NULL, &out);
    if (!rc && out.r.n == 0) rc = CLI_EXIT_FAIL;
    if (!rc) rc = finish(&d, argc, argv, st, &out, ds);
    run_output_free(&out);
    ampc_dataset_free(ds);
    ampc_stats_free(st);
    return rc;
}
