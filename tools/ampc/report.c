/* report.c: the report of `ampc compare`, the answer to "did mixed precision help, and did it hurt?".
 * One table model (a row of formatted cells per run) is built once and rendered twice, as aligned text
 * for the terminal and as a markdown table for report.md, so both always show the same values. Under the
 * table a verdict line per run says, from the same numbers, how much faster it was and how far its final
 * loss (and accuracy) landed from FP32's; on a narrow terminal the text table gets short headers and
 * splits into blocks, and the prose wraps. The folder also gets two charts: loss.svg (raw loss, faint,
 * and the same smoothed as TensorBoard smooths, for every run) and scale.svg (the loss scale of every run
 * that used a scaler, skipped steps marked). Numbers have fixed formats, so only the timing columns differ between
 * two runs of the same command. */
#include "report.h"

#include "svg.h"
#include "term.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Verdict thresholds: relative final-loss gap and accuracy gap (points) for "matches" and "close". */
#define MATCH_REL 0.01
#define CLOSE_REL 0.05
#define MATCH_PTS 0.5
#define CLOSE_PTS 2.0
/* Speed-ups closer to 1 than this are within the noise of timing: not called faster or slower. */
#define SAME_SPEED 0.03

/* ---- number formats (one place, so the table and the verdicts agree) ---- */

/* x with format f; NaN prints `missing`, infinities "inf"/"-inf" (never glibc's "-nan"). */
static void fmt(char *buf, size_t n, const char *f, double x, const char *missing) {
    if (isnan(x)) snprintf(buf, n, "%s", missing);
    else if (isinf(x)) snprintf(buf, n, "%s", x > 0 ? "inf" : "-inf");
    else snprintf(buf, n, f, x);
}

/* Loss scales are powers of two in practice: print them whole (65536), anything else with 3 digits. */
static void fmt_scale(char *buf, size_t n, double s) {
    if (isfinite(s) && s >= 1 && s < 1e15 && s == floor(s)) snprintf(buf, n, "%.0f", s);
    else fmt(buf, n, "%.3g", s, "-");
}

static void fmt_throughput(char *buf, size_t n, double t) {
    fmt(buf, n, isfinite(t) && fabs(t) >= 100 ? "%.0f" : "%.2f", t, "-");
}

/* A difference that rounds to zero prints as 0, not -0. */
static double unsigned_zero(double x, double half_ulp) { return fabs(x) < half_ulp ? 0.0 : x; }

static bool label_is(const char *s, const char *want) {
    if (!s) return false;
    for (; *s && *want; s++, want++)
        if ((*s | 0x20) != *want) return false;
    return *s == *want;
}

static const run_result *find_ref(const run_result *runs, int n) {
    for (int i = 0; i < n; i++)
        if (label_is(runs[i].label, "fp32")) return &runs[i];
    return NULL;
}

static bool used_scaler(const run_result *r) {
    for (int64_t i = 0; i < r->n; i++)
        if ((r->scale && r->scale[i] != 1.0) || (r->skipped && r->skipped[i])) return true;
    return false;
}

/* ---- a growing string ---- */

typedef struct sbuf {
    char *p;
    size_t size, len;
} sbuf;

static void sb_add(sbuf *b, const char *f, ...) {
    if (b->len >= b->size) return;
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(b->p + b->len, b->size - b->len, f, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

/* ---- the table model ---- */

enum {
    C_LABEL,
    C_LOSS,
    C_EVAL_LOSS,
    C_EVAL_ACC,
    C_MAX_D,
    C_FINAL_D,
    C_SKIPPED,
    C_SCALE,
    C_PEAK,
    C_TPUT,
    C_TIME,
    C_SPEEDUP,
    NCOLS
};
#define CELL 48

typedef struct table {
    bool compact; /* short headers, for narrow terminals */
    int ncols;
    int col[NCOLS]; /* which C_* each shown column is */
    const char *head[NCOLS];
    int nrows;
    char (*cell)[NCOLS][CELL]; /* [row][shown column] */
} table;

/* The Δloss cells: "-" where there is nothing to compare (the reference itself, or no FP32 run), but a
 * NaN of a compared run is shown as "nan", not hidden. */
static void format_dloss(double d, const run_result *r, const run_result *ref, char *b) {
    if (!ref || r == ref) snprintf(b, CELL, "-");
    else fmt(b, CELL, "%.4f", d, "nan");
}

static void format_cell(int c, const run_result *r, const run_result *ref, char *b) {
    switch (c) {
    case C_LABEL: snprintf(b, CELL, "%s", r->label ? r->label : "?"); break;
    case C_LOSS: fmt(b, CELL, "%.4f", r->final_train_loss, "nan"); break;
    case C_EVAL_LOSS: fmt(b, CELL, "%.4f", r->eval_loss, "-"); break;
    case C_EVAL_ACC: fmt(b, CELL, "%.2f%%", r->eval_accuracy * 100, "-"); break;
    case C_MAX_D: format_dloss(r->max_abs_dloss, r, ref, b); break;
    case C_FINAL_D: format_dloss(r->final_abs_dloss, r, ref, b); break;
    case C_SKIPPED: snprintf(b, CELL, "%" PRId64, r->skipped_steps); break;
    case C_SCALE: fmt_scale(b, CELL, r->final_scale); break;
    case C_PEAK: snprintf(b, CELL, "%.1f", (double)r->peak_bytes / (1024.0 * 1024.0)); break;
    case C_TPUT: fmt_throughput(b, CELL, r->throughput); break;
    case C_TIME: fmt(b, CELL, "%.2f", r->seconds + (isnan(r->eval_seconds) ? 0 : r->eval_seconds), "-"); break;
    case C_SPEEDUP: fmt(b, CELL, "%.2fx", r->speedup, "-"); break;
    }
}

/* Columns that hold nothing for any run (eval accuracy of a language model) are left out. */
static bool column_shown(int c, const run_result *runs, int n, bool timing) {
    if (c >= C_TPUT) return timing;
    if (c != C_EVAL_LOSS && c != C_EVAL_ACC) return true;
    for (int i = 0; i < n; i++)
        if (!isnan(c == C_EVAL_LOSS ? runs[i].eval_loss : runs[i].eval_accuracy)) return true;
    return false;
}

static const char *const full_heads[NCOLS] = {"precision",     "final loss", "eval loss",   "eval acc", "max |Δloss|",
                                              "final |Δloss|", "skipped",    "final scale", "peak MiB", NULL,
                                              "time s",        "speed-up"};
/* The compact table's headers and the key printed under it (NULL: nothing to explain). */
static const char *const short_heads[NCOLS] = {"prec", "loss",  "eval", "acc", "max Δ", "end Δ",
                                               "skip", "scale", "MiB",  NULL,  "s",     "speed"};
static const char *const short_keys[NCOLS] = {NULL,
                                              "loss = final train loss",
                                              "eval = eval loss",
                                              "acc = eval accuracy",
                                              "max Δ / end Δ = largest / final |Δloss| "
                                              "against fp32",
                                              NULL,
                                              "skip = skipped steps",
                                              "scale = final loss scale",
                                              "MiB = peak memory",
                                              NULL,
                                              "s = seconds, training and final evaluation",
                                              "speed = training speed-up over fp32"};

static const char *unit_head(const run_result *runs, int n, bool compact) {
    const char *unit = "samples/s";
    for (int i = n - 1; i >= 0; i--)
        if (runs[i].throughput_unit) unit = runs[i].throughput_unit;
    if (!compact) return unit;
    return strcmp(unit, "tokens/s") == 0 ? "tok/s" : "smp/s";
}

static int table_build(table *t, const run_result *runs, int n, bool timing, bool compact) {
    const char *const *heads = compact ? short_heads : full_heads;
    const char *unit = unit_head(runs, n, compact);
    t->compact = compact;
    t->ncols = 0;
    for (int c = 0; c < NCOLS; c++)
        if (column_shown(c, runs, n, timing)) {
            t->col[t->ncols] = c;
            t->head[t->ncols++] = heads[c] ? heads[c] : unit;
        }
    t->nrows = n;
    t->cell = calloc(n > 0 ? (size_t)n : 1, sizeof *t->cell);
    if (!t->cell) return -1;
    const run_result *ref = find_ref(runs, n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < t->ncols; k++) format_cell(t->col[k], &runs[i], ref, t->cell[i][k]);
    return 0;
}

/* Display width: UTF-8 continuation bytes take no column (the Δ of the headers). */
static int text_width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static void pad(FILE *f, int n) {
    for (; n > 0; n--) fputc(' ', f);
}

/* Markdown needs '|' escaped inside a cell. */
static void md_escape(const char *s, char *out, size_t size) {
    size_t o = 0;
    for (; *s && o + 3 < size; s++) {
        if (*s == '|') out[o++] = '\\';
        out[o++] = *s;
    }
    out[o] = '\0';
}

static const char *cell_text(const table *t, int row, int k, bool md, char *tmp) {
    const char *s = row < 0 ? t->head[k] : t->cell[row][k];
    if (!md) return s;
    md_escape(s, tmp, 2 * CELL);
    return tmp;
}

static void column_widths(const table *t, bool md, int *w) {
    char tmp[2 * CELL];
    for (int k = 0; k < t->ncols; k++) {
        w[k] = 3;
        for (int r = -1; r < t->nrows; r++) {
            int tw = text_width(cell_text(t, r, k, md, tmp));
            if (tw > w[k]) w[k] = tw;
        }
    }
}

/* The columns ks[0..nk) of one row (row -1 = the header): text is "a  b  c", markdown "| a | b | c |";
 * labels left, numbers right. */
static void table_row(FILE *f, const table *t, const int *w, int row, bool md, const int *ks, int nk) {
    char tmp[2 * CELL];
    for (int j = 0; j < nk; j++) {
        int k = ks[j];
        const char *s = cell_text(t, row, k, md, tmp);
        int gap = w[k] - text_width(s);
        fputs(md ? "| " : j ? "  " : "", f);
        if (j > 0) pad(f, gap);
        fputs(s, f);
        if (j == 0 && (md || nk > 1)) pad(f, gap);
        if (md) fputc(' ', f);
    }
    fputs(md ? "|\n" : "\n", f);
}

static void table_rule(FILE *f, const int *w, bool md, const int *ks, int nk) {
    for (int j = 0; j < nk; j++) {
        fputs(md ? (j == 0 ? "|:" : "| ") : j ? "  " : "", f);
        for (int i = 0; i < w[ks[j]] - (md ? 1 : 0); i++) fputc('-', f);
        if (md) fputs(j == 0 ? "-" : ":", f);
        if (md) fputc(' ', f);
    }
    fputs(md ? "|\n" : "\n", f);
}

static void table_block(FILE *f, const table *t, const int *w, bool md, const int *ks, int nk) {
    table_row(f, t, w, -1, md, ks, nk);
    table_rule(f, w, md, ks, nk);
    for (int r = 0; r < t->nrows; r++) table_row(f, t, w, r, md, ks, nk);
}

/* The table, split into blocks of columns (each led by the label column) that fit in columns (0: one
 * block, however wide). */
static void table_render(FILE *f, const table *t, bool md, int columns) {
    int w[NCOLS], ks[NCOLS];
    column_widths(t, md, w);
    for (int start = 1, first = 1; first || start < t->ncols; first = 0) {
        int nk = 0, used = w[0];
        ks[nk++] = 0;
        for (; start < t->ncols && (columns <= 0 || nk == 1 || used + 2 + w[start] <= columns); start++)
            ks[nk++] = start, used += 2 + w[start];
        if (!first) fputc('\n', f);
        table_block(f, t, w, md, ks, nk);
    }
}

/* Under a compact table: what its short headers stand for. */
static void table_key(FILE *f, const table *t, int columns) {
    char key[512];
    sbuf b = {key, sizeof key, 0};
    for (int k = 0; k < t->ncols; k++)
        if (short_keys[t->col[k]]) sb_add(&b, "%s%s", b.len ? "; " : "", short_keys[t->col[k]]);
    if (b.len) term_wrap(f, key, columns, 0);
}

/* ---- verdicts ---- */

static int grade(double gap, double match, double close) {
    gap = fabs(gap);
    return gap <= match ? 0 : gap <= close ? 1 : 2;
}

/* Other processes took more than this share of the machine during a run: its time says little. */
#define BUSY_SHARE 0.15

static void verdict_speed(sbuf *b, const run_result *r, const run_result *ref) {
    if (!isfinite(r->speedup) || r->speedup <= 0) return;
    const run_result *busy = r->others_load > BUSY_SHARE ? r : ref->others_load > BUSY_SHARE ? ref : NULL;
    if (busy) { /* not "slower": the machine was shared */
        sb_add(b, "speed not compared (other processes used %.0f%% of the CPUs during the %s run; %.2fx), ",
               100 * busy->others_load, busy->label, r->speedup);
        return;
    }
    if (fabs(r->speedup - 1) < SAME_SPEED) sb_add(b, "about as fast as fp32 (%.2fx), ", r->speedup);
    else if (r->speedup > 1) sb_add(b, "%.2fx faster, ", r->speedup);
    else sb_add(b, "%.2fx slower, ", 1 / r->speedup);
}

static void verdict_skipped(sbuf *b, const run_result *r) {
    if (r->skipped_steps == 0) sb_add(b, "no skipped steps");
    else sb_add(b, "%" PRId64 " of %" PRId64 " steps skipped", r->skipped_steps, r->n);
    if (used_scaler(r)) {
        char s[CELL];
        fmt_scale(s, sizeof s, r->final_scale);
        sb_add(b, ", final loss scale %s", s);
    }
}

/* "the reference — final loss 2.0215, eval accuracy 87.34%, 12346 tokens/s" */
static void verdict_ref(sbuf *b, const run_result *r, bool timing) {
    char s[CELL];
    fmt(s, sizeof s, "%.4f", r->final_train_loss, "nan");
    sb_add(b, "the reference — final loss %s", s);
    if (!isnan(r->eval_accuracy)) sb_add(b, ", eval accuracy %.2f%%", r->eval_accuracy * 100);
    if (!timing) return;
    fmt_throughput(s, sizeof s, r->throughput);
    sb_add(b, ", %s %s", s, r->throughput_unit ? r->throughput_unit : "samples/s");
}

/* Without a (finite) FP32 run there is nothing to compare with: say what there is. */
static void verdict_alone(sbuf *b, const run_result *r) {
    char s[CELL];
    fmt(s, sizeof s, "%.4f", r->final_train_loss, "nan");
    bool ok = isfinite(r->final_train_loss);
    sb_add(b, "%s — final loss %s, ", ok ? "no finite fp32 run to compare with" : "diverged", s);
    verdict_skipped(b, r);
}

/* "matches fp32 — 1.92x faster, final loss within 0.24% of fp32, no skipped steps" */
static void verdict_vs(sbuf *b, const run_result *r, const run_result *ref, bool timing) {
    static const char *const words[] = {"matches fp32", "close to fp32", "differs from fp32", "diverged"};
    bool finite = isfinite(r->final_train_loss);
    double rel = (r->final_train_loss - ref->final_train_loss) / fmax(fabs(ref->final_train_loss), 1e-30);
    bool acc = !isnan(r->eval_accuracy) && !isnan(ref->eval_accuracy);
    double pts = acc ? unsigned_zero((r->eval_accuracy - ref->eval_accuracy) * 100, 0.005) : 0;
    int g = finite ? grade(rel, MATCH_REL, CLOSE_REL) : 3;
    if (acc && finite && grade(pts, MATCH_PTS, CLOSE_PTS) > g) g = grade(pts, MATCH_PTS, CLOSE_PTS);
    sb_add(b, "%s — ", words[g]);
    if (timing) verdict_speed(b, r, ref);
    if (!finite) sb_add(b, "final loss %s, ", isnan(r->final_train_loss) ? "nan" : "inf");
    else if (fabs(rel) <= MATCH_REL) sb_add(b, "final loss within %.2f%% of fp32, ", fabs(rel) * 100);
    else sb_add(b, "final loss %.2f%% %s than fp32, ", fabs(rel) * 100, rel > 0 ? "higher" : "lower");
    if (acc)
        sb_add(b, "eval accuracy %.2f%% vs %.2f%% (%+.2f points), ", r->eval_accuracy * 100, ref->eval_accuracy * 100,
               pts);
    verdict_skipped(b, r);
}

/* One line per run (wrapped to columns, 0: no limit); markdown makes it a list item with the label in bold. */
static void print_verdicts(FILE *f, const run_result *runs, int n, bool timing, bool md, int columns) {
    const run_result *ref = find_ref(runs, n);
    char line[512];
    for (int i = 0; i < n; i++) {
        sbuf b = {line, sizeof line, 0};
        const run_result *r = &runs[i];
        if (r == ref) verdict_ref(&b, r, timing);
        else if (!ref || !isfinite(ref->final_train_loss)) verdict_alone(&b, r);
        else verdict_vs(&b, r, ref, timing);
        const char *label = r->label ? r->label : "?";
        if (md) {
            fprintf(f, "- **%s**: %s\n", label, line);
            continue;
        }
        char full[600];
        snprintf(full, sizeof full, "%s: %s", label, line);
        term_wrap(f, full, columns, text_width(label) + 2);
    }
}

/* 0 threads means "the library's default", which is not a count to print. */
static void threads_text(int threads, char *buf, size_t size) {
    if (threads > 0) snprintf(buf, size, "%d thread%s", threads, threads == 1 ? "" : "s");
    else snprintf(buf, size, "default threads");
}

static void print_meta_line(FILE *f, const report_meta *m, int columns) {
    if (!m) return;
    char threads[32], line[1024];
    threads_text(m->threads, threads, sizeof threads);
    snprintf(line, sizeof line, "%s on %s, %" PRId64 " steps, seed %" PRIu64 ", %s", m->model ? m->model : "?",
             m->data ? m->data : "?", m->steps, m->seed, threads);
    term_wrap(f, line, columns, 2);
    fputc('\n', f);
}

/* Display columns of the whole table on one line. */
static int table_width(const table *t) {
    int w[NCOLS], sum = 0;
    column_widths(t, false, w);
    for (int k = 0; k < t->ncols; k++) sum += w[k] + (k ? 2 : 0);
    return sum;
}

void report_print_table(FILE *f, const report_meta *meta, const run_result *runs, int nruns, bool timing) {
    report_print_table_fit(f, meta, runs, nruns, timing, 0);
}

void report_print_table_fit(FILE *f, const report_meta *meta, const run_result *runs, int nruns, bool timing,
                            int columns) {
    table t;
    if (table_build(&t, runs, nruns, timing, false) != 0) return;
    if (columns > 0 && table_width(&t) > columns) { /* too wide: short headers, then blocks of columns */
        free(t.cell);
        if (table_build(&t, runs, nruns, timing, true) != 0) return;
    }
    print_meta_line(f, meta, columns);
    table_render(f, &t, false, columns);
    if (t.compact) table_key(f, &t, columns);
    fputc('\n', f);
    print_verdicts(f, runs, nruns, timing, false, columns);
    free(t.cell);
}

/* ---- report.md ---- */

static const char how_to_read[] =
    "All runs start from the same seed and the same initial weights and see the same batches in the same "
    "order, so every difference between them comes from the precision.\n\n"
    "- **Δloss** is the absolute difference between a run's training loss and the FP32 run's loss at the "
    "same step. *max |Δloss|* is the largest over all steps; *final |Δloss|* compares the final losses "
    "(each the mean of the last 20 steps).\n"
    "- **Charts**: in the loss chart the faint lines are the loss of each step, the solid (FP32) and dashed "
    "lines the same smoothed by TensorBoard's exponential moving average (its weight is in the legend); "
    "curves on top of each other mean the precision did not change training. The scale chart shows the "
    "loss scale of each run that used one; circles mark skipped steps.\n"
    "- **Loss scale**: FP16 has 5 exponent bits, so small gradients underflow to zero. The loss is "
    "multiplied by a scale before the backward pass and the gradients divided by it before the update. "
    "When a scaled gradient overflows to inf/NaN the step is skipped and the scale backs off; after a run "
    "of good steps it grows again. BF16 keeps FP32's 8 exponent bits (the same range, less precision), so it "
    "needs no scale. A few skipped steps while the scale finds its level are normal; many mean trouble.\n";

/* Last, after the verdict thresholds (printed from the constants above). */
static const char how_to_timing[] =
    "- **Timing** (throughput, time, speed-up) is measured on this machine and varies from run to run; "
    "every other number is the same each time the same command runs.\n";

static void md_meta(FILE *f, const report_meta *m) {
    fputs("# Mixed precision vs FP32\n\n", f);
    if (!m) return;
    fprintf(f, "- Model: %s\n- Data: %s\n", m->model ? m->model : "?", m->data ? m->data : "?");
    char threads[32];
    threads_text(m->threads, threads, sizeof threads);
    fprintf(f, "- Steps: %" PRId64 ", %s, seed: %" PRIu64 "\n", m->steps, threads, m->seed);
    if (m->command) fprintf(f, "- Command:\n\n```\n%s\n```\n", m->command);
    fputc('\n', f);
}

static void md_files(FILE *f, const run_result *runs, int n) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= runs[i].log_file != NULL;
    if (!any) return;
    fputs("## Per-step logs\n\nOne JSON object per optimizer step:", f);
    for (int i = 0, first = 1; i < n; i++)
        if (runs[i].log_file) {
            fprintf(f, "%s [%s](%s)", first ? "" : ",", runs[i].log_file, runs[i].log_file);
            first = 0;
        }
    fputs(".\n\n", f);
}

static void md_write(FILE *f, const report_meta *m, const run_result *runs, int n, const table *t) {
    md_meta(f, m);
    fputs("## Verdict\n\n", f);
    print_verdicts(f, runs, n, true, true, 0);
    fputs("\n## Results\n\n", f);
    table_render(f, t, true, 0);
    fputs("\n## Training loss\n\n![loss](loss.svg)\n\n## Loss scale\n\n![scale](scale.svg)\n\n", f);
    md_files(f, runs, n);
    fputs("## How to read this\n\n", f);
    fputs(how_to_read, f);
    fprintf(f,
            "- **Verdict**: *faster* compares wall time with FP32's (within %g%% it is *about as fast*; when other "
            "processes used more than %g%% of the machine's CPUs during the run or FP32's, the speed is *not "
            "compared*); "
            "*matches fp32* means the final loss is within %g%% of FP32's (and eval accuracy within %g "
            "points), *close to fp32* within %g%% (%g points), *differs from fp32* beyond that; *diverged* "
            "means the final loss is not finite.\n",
            SAME_SPEED * 100, BUSY_SHARE * 100, MATCH_REL * 100, MATCH_PTS, CLOSE_REL * 100, CLOSE_PTS);
    fputs(how_to_timing, f);
}

/* ---- the charts ---- */

/* The smoothing weight of the loss chart: TensorBoard's exponential moving average over an effective
 * window of 10 steps, or 2% of the longest run, so the thick curve reads the same at any run length
 * (weight 1 - 2 / (window + 1), rounded to two digits so the legend shows the weight used). */
static double ema_weight(const run_result *runs, int n) {
    int64_t steps = 0;
    for (int i = 0; i < n; i++)
        if (runs[i].n > steps) steps = runs[i].n;
    double window = (double)steps / 50 > 10 ? (double)steps / 50 : 10;
    return round(100 * (1 - 2 / (window + 1))) / 100;
}

/* TensorBoard's smoothing: s = w s + (1 - w) loss over the finite losses, divided by 1 - w^k after k of
 * them (the debiasing that keeps the first steps from being pulled toward 0). Unlike a fitted line it
 * never anticipates a spike, and it stays within the range of the losses it has seen. A non-finite loss
 * leaves a gap and does not enter the average. */
static void smooth_loss(const double *y, int64_t n, double w, double *out) {
    double avg = 0, wk = 1; /* wk = w^k, kept by multiplication so the bytes do not depend on pow() */
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            out[i] = NAN;
            continue;
        }
        avg = w * avg + (1 - w) * y[i];
        wk *= w;
        out[i] = avg / (1 - wk);
    }
}

/* Runs that agree draw on top of each other: the first (FP32) is wide and solid, the others narrower with
 * their own dashes, so every colour stays visible where the curves coincide. */
static const char *run_dash(int i) {
    static const char *const dashes[] = {NULL, "9,5", "2,5", "12,4,2,4"};
    return i < 4 ? dashes[i] : dashes[1 + i % 3];
}

static int write_loss_chart(const char *path, const run_result *runs, int n, char *err, size_t errsize) {
    svg_series *s = calloc(2 * (size_t)n + 1, sizeof *s);
    double **smooth = calloc((size_t)n + 1, sizeof *smooth);
    double w = ema_weight(runs, n);
    int rc = -1;
    if (!s || !smooth) goto oom;
    for (int i = 0; i < n; i++) {
        if (!(smooth[i] = malloc(((size_t)runs[i].n + 1) * sizeof **smooth))) goto oom;
        smooth_loss(runs[i].loss, runs[i].n, w, smooth[i]);
        s[i] = (svg_series){.y = runs[i].loss, .n = runs[i].n, .color = svg_color(i), .width = 1, .opacity = 0.35};
        s[n + i] = (svg_series){.label = runs[i].label,
                                .y = smooth[i],
                                .n = runs[i].n,
                                .color = svg_color(i),
                                .width = i ? 2 : 3.5,
                                .dash = run_dash(i)};
    }
    char sub[160], legend[40];
    snprintf(sub, sizeof sub,
             "faint: loss of each step; solid and dashed: exponential moving average, weight %.2f "
             "(TensorBoard's smoothing)",
             w);
    snprintf(legend, sizeof legend, "smoothing %.2f", w);
    svg_chart c = {.title = "Training loss",
                   .subtitle = sub,
                   .xlabel = "optimizer step",
                   .ylabel = "training loss",
                   .series = s,
                   .nseries = 2 * n,
                   .legend_title = legend,
                   .empty_note = "no finite loss"};
    rc = svg_write_file(path, &c, err, errsize);
    goto out;
oom:
    snprintf(err, errsize, "cannot write %s: out of memory", path);
out:
    for (int i = 0; smooth && i < n; i++) free(smooth[i]);
    free(smooth), free(s);
    return rc;
}

/* The skipped steps of a run as marker points on its scale curve. */
static int64_t skipped_points(const run_result *r, double *mx, double *my) {
    int64_t k = 0;
    for (int64_t i = 0; r->skipped && i < r->n; i++)
        if (r->skipped[i]) mx[k] = (double)i, my[k++] = r->scale ? r->scale[i] : 1.0;
    return k;
}

static int write_scale_chart(const char *path, const run_result *runs, int n, char *err, size_t errsize) {
    svg_series *s = calloc((size_t)n + 1, sizeof *s);
    double **pts = calloc(2 * (size_t)n + 1, sizeof *pts);
    int rc = -1, ns = 0;
    if (!s || !pts) goto oom;
    for (int i = 0; i < n; i++) {
        if (!used_scaler(&runs[i]) || !runs[i].scale) continue;
        pts[2 * i] = malloc(((size_t)runs[i].n + 1) * sizeof(double));
        pts[2 * i + 1] = malloc(((size_t)runs[i].n + 1) * sizeof(double));
        if (!pts[2 * i] || !pts[2 * i + 1]) goto oom;
        s[ns++] = (svg_series){.label = runs[i].label,
                               .y = runs[i].scale,
                               .n = runs[i].n,
                               .color = svg_color(i),
                               .width = 2,
                               .steps = true,
                               .marker_x = pts[2 * i],
                               .marker_y = pts[2 * i + 1],
                               .nmarkers = skipped_points(&runs[i], pts[2 * i], pts[2 * i + 1])};
    }
    svg_chart c = {.title = "Loss scale",
                   .subtitle = "multiplies the loss before backward; backs off when a step "
                               "is skipped (non-finite gradients), grows after a run of good steps",
                   .xlabel = "optimizer step",
                   .ylabel = "loss scale (log)",
                   .log_y = true,
                   .pow2_y = true,
                   .series = s,
                   .nseries = ns,
                   .marker_label = "skipped step",
                   .empty_note = "No run used a loss scaler: FP32 and BF16 have FP32's range and need none."};
    rc = svg_write_file(path, &c, err, errsize);
    goto out;
oom:
    snprintf(err, errsize, "cannot write %s: out of memory", path);
out:
    for (int i = 0; pts && i < 2 * n; i++) free(pts[i]);
    free(pts);
    free(s);
    return rc;
}

static int join(char *out, size_t size, const char *dir, const char *name, char *err, size_t errsize) {
    if ((size_t)snprintf(out, size, "%s/%s", dir, name) < size) return 0;
    snprintf(err, errsize, "cannot write %s/%s: path too long", dir, name);
    return -1;
}

static int write_md(const char *path, const report_meta *m, const run_result *runs, int n, char *err, size_t errsize) {
    table t;
    if (table_build(&t, runs, n, true, false) != 0) {
        snprintf(err, errsize, "cannot write %s: out of memory", path);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (!f) {
        snprintf(err, errsize, "cannot write %s: %s", path, strerror(errno));
    } else {
        md_write(f, m, runs, n, &t);
        rc = ferror(f) ? -1 : 0;
        if (fclose(f) != 0) rc = -1;
        if (rc != 0) snprintf(err, errsize, "cannot write %s: write error", path);
    }
    free(t.cell);
    return rc;
}

int report_write_dir(const char *dir, const report_meta *meta, const run_result *runs, int nruns, char *err,
                     size_t errsize) {
    char path[4096];
    if (join(path, sizeof path, dir, "report.md", err, errsize) || write_md(path, meta, runs, nruns, err, errsize))
        return -1;
    if (join(path, sizeof path, dir, "loss.svg", err, errsize) || write_loss_chart(path, runs, nruns, err, errsize))
        return -1;
    if (join(path, sizeof path, dir, "scale.svg", err, errsize) || write_scale_chart(path, runs, nruns, err, errsize))
        return -1;
    return 0;
}
