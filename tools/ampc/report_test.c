/* report_test.c: checks the report writer of `ampc compare` (report.c, svg.c) on synthetic runs, without
 * the library. Scenario A is a language model in fp32/bf16/fp16 over 200 steps, fp16 with a changing
 * loss scale, 3 skipped steps and one infinite loss; B is a classifier in fp32/bf16 without a scaler; C
 * is one long run that exercises the per-pixel reduction of the charts. The expected strings are formatted
 * here from the inputs, so a wrong number, a missing label, a table that differs between stdout and
 * report.md, non-deterministic bytes, timing leaking into timing=false output, malformed SVG or a silent
 * failure on a bad folder all fail the test. D checks the smoothing of the loss chart from the drawn
 * points (it must not rise before a spike nor leave the range of the losses seen so far), E the tick of a
 * loss scale that never moves, and the fitted tables that no line is wider than asked.
 * Usage: ampc_report_test OUTDIR (created if missing). */
#include "report.h"

#include "test_files.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- helpers ---- */

static char *str(const char *f, ...) {
    static char bufs[8][256];
    static int k;
    char *b = bufs[k++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, 256, f, ap);
    va_end(ap);
    return b;
}

/* ---- synthetic runs ---- */

enum { N = 200, NRUNS = 3, LONG_N = 5000 };

typedef struct synth {
    double loss[NRUNS][LONG_N], scale[NRUNS][LONG_N];
    bool skipped[NRUNS][LONG_N];
    run_result runs[NRUNS];
} synth;

static double mean_last(const double *x, int64_t n) {
    int64_t k = n < 20 ? n : 20;
    double s = 0;
    for (int64_t i = n - k; i < n; i++) s += x[i];
    return s / (double)k;
}

/* Losses fall from ~5 to ~2 with deterministic wiggles; each precision adds its own small offset. */
static void fill_loss(double *loss, int64_t n, int run, double offset) {
    for (int64_t i = 0; i < n; i++)
        loss[i] = 2.0 + 3.0 * exp(-(double)i / 40.0) + 0.08 * sin((double)i * 1.7 + run) + offset;
}

/* FP16's scaler: 65536, halved after each skipped step, doubled once at step 180. */
static void fill_fp16_scale(double *scale, bool *skipped, int64_t n) {
    double s = 65536;
    for (int64_t i = 0; i < n; i++) {
        if (i == 180) s *= 2;
        scale[i] = s;
        skipped[i] = i == 10 || i == 50 || i == 120;
        if (skipped[i]) s /= 2;
    }
}

static void summarize(run_result *r, const run_result *ref) {
    r->final_train_loss = mean_last(r->loss, r->n);
    r->max_abs_dloss = NAN;
    if (ref && r != ref) {
        r->max_abs_dloss = 0;
        for (int64_t i = 0; i < r->n; i++)
            if (isfinite(r->loss[i])) r->max_abs_dloss = fmax(r->max_abs_dloss, fabs(r->loss[i] - ref->loss[i]));
    }
    r->final_abs_dloss = ref ? fabs(r->final_train_loss - ref->final_train_loss) : NAN;
    r->skipped_steps = 0;
    for (int64_t i = 0; i < r->n; i++) r->skipped_steps += r->skipped[i];
    r->final_scale = r->scale[r->n - 1];
    r->speedup = ref ? ref->seconds / r->seconds : NAN;
}

static const char *const labels[NRUNS] = {"fp32", "bf16", "fp16"};

/* nruns runs of n steps; with fp16 (run 2) the loss at step 50 is infinite. */
static void make_runs(synth *s, int nruns, int64_t n, bool classifier) {
    static const double offsets[NRUNS] = {0.0, 0.004, 0.05};
    static const double tput[NRUNS] = {12345.678, 23456.7, 21987.6};
    static const double acc[NRUNS] = {0.8734, 0.8712, 0.8650};
    static const double seconds[NRUNS] = {987.654, 456.789, 512.345}; /* strings found nowhere else */
    static const double eval_s[NRUNS] = {12.125, 3.25, 4.5};          /* the time column adds them */
    static const char *const logs[NRUNS] = {"fp32.jsonl", "bf16.jsonl", "fp16.jsonl"};
    for (int k = 0; k < nruns; k++) {
        fill_loss(s->loss[k], n, k, offsets[k]);
        for (int64_t i = 0; i < n; i++) s->scale[k][i] = 1, s->skipped[k][i] = false;
        if (k == 2) fill_fp16_scale(s->scale[k], s->skipped[k], n), s->loss[k][50] = INFINITY;
        s->runs[k] = (run_result){.label = labels[k],
                                  .n = n,
                                  .loss = s->loss[k],
                                  .scale = s->scale[k],
                                  .skipped = s->skipped[k],
                                  .peak_bytes = (size_t)(13107200 - 2621440 * k + 4321),
                                  .throughput = tput[k],
                                  .throughput_unit = classifier ? "samples/s" : "tokens/s",
                                  .seconds = seconds[k],
                                  .eval_seconds = eval_s[k],
                                  .log_file = logs[k]};
        s->runs[k].eval_loss = mean_last(s->loss[k], n) + 0.05;
        s->runs[k].eval_accuracy = classifier ? acc[k] : NAN;
    }
    for (int k = 0; k < nruns; k++) summarize(&s->runs[k], &s->runs[0]);
}

/* ---- checks ---- */

/* Structural XML check: every tag closed in order, quotes balanced, nothing after the root. */
static bool xml_balanced(const char *s, char *why, size_t size) {
    const char *stack[64];
    size_t lens[64];
    int depth = 0, roots = 0;
    for (const char *p = s; (p = strchr(p, '<'));) {
        const char *end = p + 1;
        for (char q = 0; *end && (q || *end != '>'); end++)
            if (*end == '"') q = !q;
        if (!*end) return snprintf(why, size, "unterminated tag at offset %ld", (long)(p - s)), false;
        bool closing = p[1] == '/', self = end[-1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " />\n");
        if (closing) {
            if (depth == 0 || lens[depth - 1] != len || strncmp(stack[depth - 1], name, len) != 0)
                return snprintf(why, size, "unexpected </%.*s>", (int)len, name), false;
            depth--;
        } else if (!self) {
            if (depth == 0 && roots++) return snprintf(why, size, "two root elements"), false;
            if (depth == 64) return snprintf(why, size, "too deep"), false;
            stack[depth] = name, lens[depth++] = len;
        }
        p = end + 1;
    }
    if (depth) return snprintf(why, size, "<%.*s> not closed", (int)lens[depth - 1], stack[depth - 1]), false;
    return true;
}

/* Every points="..." holds only numbers (no nan/inf coordinates). */
static bool points_numeric(const char *svg) {
    for (const char *p = svg; (p = strstr(p, "points=\"")); p++) {
        p += 8;
        size_t n = strcspn(p, "\"");
        if (strspn(p, "0123456789.,- ") != n) return false;
    }
    return true;
}

static void check_svg(const char *path, const char *const *want, int nwant, int series, int markers) {
    size_t len;
    char *s = read_file(path, &len), why[128] = "";
    CHECK(s && len > 0, "%s missing or empty", path);
    if (!s) return;
    CHECK(strncmp(s, "<svg", 4) == 0, "%s does not start with <svg", path);
    CHECK(strstr(s, "xmlns=\"http://www.w3.org/2000/svg\""), "%s has no SVG namespace", path);
    CHECK(xml_balanced(s, why, sizeof why), "%s is not well-formed: %s", path, why);
    CHECK(points_numeric(s), "%s has a non-numeric coordinate", path);
    for (int i = 0; i < nwant; i++) CHECK(strstr(s, want[i]), "%s lacks \"%s\"", path, want[i]);
    CHECK(count(s, "class=\"series\"") == series, "%s: %d series, want %d", path, count(s, "class=\"series\""), series);
    CHECK(count(s, "<polyline") >= series, "%s: fewer polylines than series", path);
    CHECK(count(s, "class=\"marker\"") == markers, "%s: %d markers, want %d", path, count(s, "class=\"marker\""),
          markers);
    free(s);
}

/* The cells of the row of `label` in the text table ("fp32  2.3  ...") or the markdown table
 * ("| fp32 | 2.3 |"), joined by single spaces. */
static bool row_cells(const char *doc, const char *label, bool md, char *out, size_t size) {
    char head[64];
    snprintf(head, sizeof head, md ? "\n| %s " : "\n%s ", label);
    const char *p = strstr(doc, head);
    if (!p) return false;
    p += 1;
    size_t o = 0;
    for (const char *e = strchr(p, '\n'); p < e && o + 1 < size; p++) {
        char c = *p == '|' ? ' ' : *p;
        if (c == ' ' && (o == 0 || out[o - 1] == ' ')) continue;
        out[o++] = c;
    }
    while (o > 0 && out[o - 1] == ' ') o--;
    out[o] = '\0';
    return true;
}

static char *table_text(const report_meta *m, const run_result *runs, int n, bool timing) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    report_print_table(f, m, runs, n, timing);
    char *s = read_stream(f, NULL);
    fclose(f);
    return s;
}

/* Every formatted value of a run, as the report must print it. */
static void check_values(const char *doc, const char *what, const run_result *r, bool timing) {
    CHECK(strstr(doc, str("%.4f", r->final_train_loss)), "%s lacks %s final loss", what, r->label);
    CHECK(strstr(doc, str("%.4f", r->eval_loss)), "%s lacks %s eval loss", what, r->label);
    if (!isnan(r->max_abs_dloss))
        CHECK(strstr(doc, str("%.4f", r->max_abs_dloss)), "%s lacks %s max dloss", what, r->label);
    if (strcmp(r->label, "fp32") != 0)
        CHECK(strstr(doc, str("%.4f", r->final_abs_dloss)), "%s lacks %s final dloss", what, r->label);
    CHECK(strstr(doc, str("%.1f", (double)r->peak_bytes / 1048576.0)), "%s lacks %s peak", what, r->label);
    CHECK(strstr(doc, str(" %.0f", r->final_scale)), "%s lacks %s scale", what, r->label);
    if (!isnan(r->eval_accuracy))
        CHECK(strstr(doc, str("%.2f%%", r->eval_accuracy * 100)), "%s lacks %s accuracy", what, r->label);
    const char *timing_strings[] = {str("%.0f", r->throughput), str("%.2f", r->seconds + r->eval_seconds),
                                    str("%.2fx", r->speedup)};
    for (int i = 0; i < 3; i++)
        CHECK(!timing == !strstr(doc, timing_strings[i]), "%s: timing value %s %s", what, timing_strings[i],
              timing ? "missing" : "present");
}

static void check_same_rows(const char *md, const char *text, const run_result *runs, int n) {
    char a[512], b[512];
    for (int i = 0; i < n; i++) {
        bool ha = row_cells(md, runs[i].label, true, a, sizeof a);
        bool hb = row_cells(text, runs[i].label, false, b, sizeof b);
        CHECK(ha && hb, "no table row for %s", runs[i].label);
        CHECK(!ha || !hb || strcmp(a, b) == 0, "row %s differs:\n  md:   %s\n  text: %s", runs[i].label, a, b);
    }
}

static const char *rel_phrase(const run_result *r, const run_result *ref) {
    double rel = (r->final_train_loss - ref->final_train_loss) / ref->final_train_loss;
    if (fabs(rel) <= 0.01) return str("final loss within %.2f%% of fp32", fabs(rel) * 100);
    return str("final loss %.2f%% %s than fp32", fabs(rel) * 100, rel > 0 ? "higher" : "lower");
}

/* ---- scenarios ---- */

static bool same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = read_file(a, &la), *y = read_file(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static void write_dir(const char *dir, const report_meta *m, const run_result *runs, int n) {
    char err[512] = "";
    make_dir(dir);
    CHECK(report_write_dir(dir, m, runs, n, err, sizeof err) == 0, "report_write_dir(%s): %s", dir, err);
}

static void scenario_lm(const char *out) {
    static synth s;
    make_runs(&s, NRUNS, N, false);
    const run_result *r = s.runs;
    report_meta m = {.model = "gpt (2 layers, d 128, 4 heads, context 64)",
                     .data = "builtin: arithmetic",
                     .command = "ampc compare --steps 200 --seed 42 --report out",
                     .steps = N,
                     .threads = 4,
                     .seed = 42};
    char dir[1024], dir2[1024], path[1100], path2[1100];
    snprintf(dir, sizeof dir, "%s/lm", out);
    snprintf(dir2, sizeof dir2, "%s/lm_again", out);
    write_dir(dir, &m, r, NRUNS);
    write_dir(dir2, &m, r, NRUNS);
    static const char *const names[] = {"report.md", "loss.svg", "scale.svg"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(path2, sizeof path2, "%s/%s", dir2, names[i]);
        CHECK(same_file(path, path2), "%s differs between two identical calls", names[i]);
    }

    const char *loss_want[] = {">fp32<", ">bf16<", ">fp16<", "Training loss", "optimizer step"};
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    check_svg(path, loss_want, 5, 2 * NRUNS, 0);
    const char *scale_want[] = {">fp16<", ">skipped step<", "class=\"legend-marker\"", "Loss scale"};
    snprintf(path, sizeof path, "%s/scale.svg", dir);
    check_svg(path, scale_want, 4, 1, 3);

    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_file(path, NULL), *text = table_text(&m, r, NRUNS, true);
    char *quiet = table_text(&m, r, NRUNS, false);
    CHECK(md && text && quiet, "cannot read the outputs");
    if (!md || !text || !quiet) return;
    const char *md_want[] = {m.model,
                             m.data,
                             m.command,
                             "seed: 42",
                             "4 threads",
                             "Steps: 200",
                             "![loss](loss.svg)",
                             "![scale](scale.svg)",
                             "[fp16.jsonl](fp16.jsonl)",
                             "tokens/s",
                             "max \\|Δloss\\|",
                             "How to read this",
                             "BF16",
                             "loss scale"};
    for (size_t i = 0; i < sizeof md_want / sizeof *md_want; i++)
        CHECK(strstr(md, md_want[i]), "report.md lacks \"%s\"", md_want[i]);
    CHECK(!strstr(md, "| eval acc |"), "report.md shows an accuracy column for a language model");
    for (int k = 0; k < NRUNS; k++) {
        check_values(md, "report.md", &r[k], true);
        check_values(text, "stdout table", &r[k], true);
        check_values(quiet, "timing=false table", &r[k], false);
    }
    check_same_rows(md, text, r, NRUNS);

    const char *verdicts[] = {"fp32: the reference — final loss ",
                              str("bf16: matches fp32 — %.2fx faster, ", r[1].speedup),
                              rel_phrase(&r[1], &r[0]),
                              "fp16: close to fp32 — ",
                              rel_phrase(&r[2], &r[0]),
                              "3 of 200 steps skipped, final loss scale 16384",
                              "bf16: matches fp32 — final loss within"};
    for (int i = 0; i < 6; i++) {
        /* report.md writes the label in bold: look for the rest of the line there */
        const char *colon = strstr(verdicts[i], ": ");
        CHECK(strstr(md, colon ? colon : verdicts[i]), "report.md lacks verdict \"%s\"", verdicts[i]);
        CHECK(strstr(text, verdicts[i]), "stdout lacks verdict \"%s\"", verdicts[i]);
    }
    CHECK(strstr(md, "- **fp16**: close to fp32"), "report.md lacks the bold verdict of fp16");
    CHECK(strstr(quiet, verdicts[6]), "timing=false lacks \"%s\"", verdicts[6]);
    CHECK(!strstr(quiet, "faster") && !strstr(quiet, "tokens/s"), "timing=false output mentions timing");

    /* timing=false must not depend on the timing fields at all */
    run_result other[NRUNS];
    memcpy(other, r, sizeof other);
    for (int k = 0; k < NRUNS; k++) other[k].throughput *= 1.37, other[k].seconds *= 0.71, other[k].speedup *= 1.1;
    char *quiet2 = table_text(&m, other, NRUNS, false);
    CHECK(quiet2 && strcmp(quiet, quiet2) == 0, "timing=false output changes with the timings");
    /* a run while other processes held the machine is not called faster or slower */
    memcpy(other, r, sizeof other);
    other[1].others_load = 0.4;
    char *busy = table_text(&m, other, NRUNS, true);
    CHECK(busy && strstr(busy, "bf16: matches fp32 — speed not compared (other processes used 40% of the CPUs during "
                               "the bf16 run;"),
          "a busy run's verdict: %s", busy ? busy : "");
    CHECK(busy && strstr(busy, "fp16: close to fp32 —") && !strstr(busy, "fp16: close to fp32 — speed not compared"),
          "a quiet run's verdict changed");
    free(md), free(text), free(quiet), free(quiet2), free(busy);
}

static void scenario_classifier(const char *out) {
    static synth s;
    make_runs(&s, 2, N, true);
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/classifier", out);
    report_meta m = {.model = "mlp", .data = "fashion-mnist", .command = "ampc compare", .steps = N, .seed = 1};
    write_dir(dir, &m, s.runs, 2);
    const char *want[] = {"No run used a loss scaler"};
    snprintf(path, sizeof path, "%s/scale.svg", dir);
    check_svg(path, want, 1, 0, 0);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_file(path, NULL);
    CHECK(md, "cannot read %s", path);
    if (!md) return;
    CHECK(strstr(md, "| eval acc |"), "classifier report lacks the accuracy column");
    CHECK(strstr(md, "samples/s"), "classifier report lacks samples/s");
    CHECK(strstr(md, "eval accuracy 87.12% vs 87.34% (-0.22 points)"), "classifier verdict lacks the accuracy gap");
    for (int k = 0; k < 2; k++) check_values(md, "classifier report.md", &s.runs[k], true);
    free(md);
}

static void scenario_long(const char *out) {
    static synth s;
    make_runs(&s, 1, LONG_N, false);
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/long", out);
    report_meta m = {.model = "gpt", .data = "text", .steps = LONG_N};
    write_dir(dir, &m, s.runs, 1);
    const char *want[] = {">fp32<"};
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    check_svg(path, want, 1, 2, 0);
    size_t len = 0;
    free(read_file(path, &len));
    CHECK(len < 100000, "loss.svg of %d steps is %zu bytes: the per-pixel reduction does not work", LONG_N, len);
}

/* The points of the k-th series of an SVG chart (its polylines, in order) into xy (x, y pairs); their
 * count. */
static int series_points(const char *svg, int k, double *xy, int max) {
    const char *p = svg;
    for (int i = 0; i <= k && p; i++) p = strstr(i ? p + 1 : p, "class=\"series\"");
    if (!p) return 0;
    const char *end = strstr(p, "</g>");
    int n = 0;
    for (const char *q = p; (q = strstr(q, "points=\"")) && q < end;) {
        q += 8;
        for (char *e; *q != '"' && n < max; q = e) {
            double x = strtod(q, &e);
            if (e == q || *e != ',') break;
            double y = strtod(e + 1, &e);
            xy[2 * n] = x, xy[2 * n + 1] = y, n++;
            while (*e == ' ') e++;
        }
    }
    return n;
}

/* The smoothed curve of a chart with one run (series 0 raw, series 1 smoothed): it must not move before
 * the data does, and stays within the range (in pixels) of the raw points drawn up to it. */
static void check_smoothing(const char *path, const char *what) {
    static double raw[2 * LONG_N], sm[2 * LONG_N];
    char *svg = read_file(path, NULL);
    CHECK(svg, "cannot read %s", path);
    if (!svg) return;
    int nr = series_points(svg, 0, raw, LONG_N), ns = series_points(svg, 1, sm, LONG_N);
    CHECK(nr > 10 && ns > 10, "%s: %d raw and %d smoothed points", what, nr, ns);
    double raw_move = INFINITY, sm_move = INFINITY, lo = raw[1], hi = raw[1];
    for (int i = 0; i < nr && !isfinite(raw_move); i++)
        if (raw[2 * i + 1] != raw[1]) raw_move = raw[2 * i];
    for (int i = 0; i < ns && !isfinite(sm_move); i++)
        if (sm[2 * i + 1] != sm[1]) sm_move = sm[2 * i];
    CHECK(sm_move >= raw_move, "%s: the smoothed curve moves at x %.1f, before the data (x %.1f)", what, sm_move,
          raw_move);
    for (int i = 0, r = 0; i < ns; i++) {
        for (; r < nr && raw[2 * r] <= sm[2 * i] + 0.05; r++)
            lo = fmin(lo, raw[2 * r + 1]), hi = fmax(hi, raw[2 * r + 1]);
        if (sm[2 * i + 1] < lo - 0.15 || sm[2 * i + 1] > hi + 0.15) {
            CHECK(false, "%s: smoothed point (%.1f, %.1f) outside the data so far (y %.1f..%.1f)", what, sm[2 * i],
                  sm[2 * i + 1], lo, hi);
            break;
        }
    }
    free(svg);
}

/* D: a flat loss with one spike, and the falling loss of A: TensorBoard's smoothing, its weight in the
 * legend. */
static void scenario_smoothing(const char *out) {
    static synth s;
    make_runs(&s, 1, N, false);
    char dir[1024], path[1100];
    report_meta m = {.model = "gpt", .data = "text", .steps = N};
    snprintf(dir, sizeof dir, "%s/smooth_falling", out);
    write_dir(dir, &m, s.runs, 1);
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    const char *want[] = {">smoothing 0.82<", "exponential moving average, weight 0.82"};
    check_svg(path, want, 2, 2, 0);
    check_smoothing(path, "falling loss");
    for (int i = 0; i < N; i++) s.loss[0][i] = i == N / 2 ? 10.0 : 2.0;
    snprintf(dir, sizeof dir, "%s/smooth_spike", out);
    write_dir(dir, &m, s.runs, 1);
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    check_smoothing(path, "spike");
}

/* E: a loss scale that never changes gets a tick at its value. */
static void scenario_flat_scale(const char *out) {
    static synth s;
    make_runs(&s, NRUNS, N, false);
    for (int i = 0; i < N; i++) s.scale[2][i] = 65536, s.skipped[2][i] = false;
    char dir[1024], path[1100];
    report_meta m = {.model = "gpt", .data = "text", .steps = N};
    snprintf(dir, sizeof dir, "%s/flat_scale", out);
    write_dir(dir, &m, s.runs, NRUNS);
    snprintf(path, sizeof path, "%s/scale.svg", dir);
    const char *want[] = {">65536</text>"};
    check_svg(path, want, 1, 1, 0);
}

/* E2: a scale that moves by factors of two has its ticks at powers of two (2^10 .. 2^24 here: labelled
 * 1024 .. 65536, then 2^k), never at the decimal 10000 / 20000 / 50000 of a log10 axis. */
static void scenario_pow2_ticks(const char *out) {
    static synth s;
    make_runs(&s, NRUNS, N, false);
    for (int i = 0; i < N; i++) s.scale[2][i] = ldexp(1.0, 10 + (14 * i) / (N - 1)), s.skipped[2][i] = false;
    char dir[1024], path[1100];
    report_meta m = {.model = "gpt", .data = "text", .steps = N};
    snprintf(dir, sizeof dir, "%s/pow2_scale", out);
    write_dir(dir, &m, s.runs, NRUNS);
    snprintf(path, sizeof path, "%s/scale.svg", dir);
    const char *want[] = {">1024</text>", ">2^24</text>"};
    check_svg(path, want, 2, 1, 0);
    char *svg = read_file(path, NULL);
    CHECK(svg && !strstr(svg, ">10000</text>") && !strstr(svg, ">20000</text>") && !strstr(svg, ">50000</text>"),
          "%s has decimal ticks on a power-of-two scale", path);
    free(svg);
}

/* The widest line of s in display columns. */
static int widest_line(const char *s) {
    int w = 0, cur = 0;
    for (; *s; s++) {
        if (*s == '\n') cur = 0;
        else if (((unsigned char)*s & 0xC0) != 0x80 && ++cur > w) w = cur;
    }
    return w;
}

/* The text table fitted to a width: no line wider, every value still there. */
static void scenario_fit(void) {
    static synth s;
    make_runs(&s, NRUNS, N, true); /* a classifier: the widest table */
    report_meta m = {.model = "cnn (conv32-pool-conv64-pool-fc128-fc10)",
                     .data = "fashion-mnist",
                     .command = "ampc compare",
                     .steps = N,
                     .threads = 2,
                     .seed = 1};
    static const int widths[] = {100, 80, 60, 40};
    for (int i = 0; i < 4; i++) {
        FILE *f = tmpfile();
        if (!f) return;
        report_print_table_fit(f, &m, s.runs, NRUNS, true, widths[i]);
        char *text = read_stream(f, NULL);
        fclose(f);
        if (!text) return;
        CHECK(widest_line(text) <= widths[i], "table at %d columns has a line of %d", widths[i], widest_line(text));
        for (int k = 0; k < NRUNS; k++) check_values(text, str("table at %d columns", widths[i]), &s.runs[k], true);
        free(text);
    }
}

static void scenario_bad_dir(void) {
    static synth s;
    make_runs(&s, NRUNS, N, false);
    const char *bad = "/nonexistent-ampc-report-dir/sub";
    char err[512] = "";
    report_meta m = {.model = "gpt"};
    CHECK(report_write_dir(bad, &m, s.runs, NRUNS, err, sizeof err) == -1, "a missing folder did not fail");
    CHECK(strstr(err, bad), "the message \"%s\" does not name %s", err, bad);
}

int main(int argc, char **argv) {
    const char *out = argc > 1 ? argv[1] : "report_test_out";
    make_dir(out);
    scenario_lm(out);
    scenario_classifier(out);
    scenario_long(out);
    scenario_smoothing(out);
    scenario_flat_scale(out);
    scenario_pow2_ticks(out);
    scenario_fit();
    scenario_bad_dir();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("report test: all checks passed (output in %s)\n", out);
    return 0;
}
