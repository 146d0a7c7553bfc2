/* doctor_report_test.c: checks the report writer of `ampc doctor` (doctor_report.c) on statistics of a real
 * tiny computation through the public API: two FP32 steps of linear -> relu -> linear -> mul_scalar ->
 * linear -> cross-entropy with range statistics attached, where the middle linear ("big") has outputs
 * beyond FP16's 65504, the gradients need a loss scale, and the last module's name holds XML specials.
 * The test asserts that both files are written, the SVG is well-formed enough (one root, balanced groups,
 * texts and tspans, every row label present and escaped), the overflowing site is called unsafe in
 * report.md, the recommended commands appear, the bytes are the same on a second write, and a folder that
 * does not exist is an error naming it. Usage: ampc_doctor_report_test OUTDIR (created if missing). */
#include "doctor_report.h"

#include "test_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MUST(x)                                                                                                        \
    do {                                                                                                               \
        if (!(x)) {                                                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, ampc_last_error());                        \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define HEAD "head<&>" /* a module name that must be escaped in the SVG */

/* ---- helpers ---- */

static char *path_of(char *buf, const char *dir, const char *name) {
    snprintf(buf, 4096, "%s/%s", dir, name);
    return buf;
}

/* s with & < > " written as entities. */
static void xml_escape(const char *s, char *out, size_t size) {
    size_t o = 0;
    for (; *s && o + 7 < size; s++) {
        const char *rep = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '"' ? "&quot;" : NULL;
        if (rep) o += (size_t)snprintf(out + o, size - o, "%s", rep);
        else out[o++] = *s;
    }
    out[o] = '\0';
}

/* The row label the picture must show for a site (doctor_report.c's rule, restated). */
static void expected_label(const ampc_stats_entry *e, char *buf, size_t n) {
    const char *sep = e->module[0] ? " " : "";
    if (e->role != AMPC_STATS_PARAM_GRAD) {
        snprintf(buf, n, "%s%s%s %s", e->module, sep, e->op, e->role == AMPC_STATS_OUTPUT ? "out" : "grad");
        return;
    }
    const char *p = e->param;
    size_t ml = strlen(e->module);
    if (ml && strncmp(p, e->module, ml) == 0 && p[ml] == '.') p += ml + 1;
    snprintf(buf, n, "%s%s%s \xe2\x88\x82%s", e->module, sep, e->op, p[0] ? p : "param");
}

/* ---- the computation ---- */

static ampc_tensor *param(ampc_ctx *ctx, const char *name, int ndim, const int64_t *shape, double lo, double hi) {
    ampc_tensor *t = ampc_tensor_new(ctx, AMPC_DTYPE_F32, ndim, shape);
    MUST(t);
    MUST(ampc_tensor_fill_uniform(t, lo, hi) == AMPC_OK);
    MUST(ampc_tensor_set_requires_grad(t, true) == AMPC_OK);
    MUST(ampc_tensor_set_name(t, name) == AMPC_OK);
    return t;
}

static ampc_tensor *scoped_linear(ampc_ctx *ctx, const char *scope, ampc_tensor *x, ampc_tensor *w, ampc_tensor *b) {
    MUST(ampc_scope_push(ctx, scope) == AMPC_OK);
    ampc_tensor *y = ampc_linear(ctx, x, w, b);
    ampc_scope_pop(ctx);
    MUST(y);
    return y;
}

/* fc1 (4 -> 16) and relu give values around 2; big (16 -> 4, weights 1e4) lifts them past 3e5, beyond
 * FP16; a mul_scalar by 1e-6 brings them back, and head (4 -> 3, weights about 1e-4) makes the logits and
 * so every gradient below it small: the gradients need a loss scale in FP16. */
static void run_steps(ampc_ctx *ctx, int steps) {
    int64_t s_x[2] = {8, 4}, s_w1[2] = {16, 4}, s_b1[1] = {16}, s_w2[2] = {4, 16}, s_w3[2] = {3, 4}, s_t[1] = {8};
    ampc_tensor *w1 = param(ctx, "fc1.weight", 2, s_w1, 0.5, 1.0), *b1 = param(ctx, "fc1.bias", 1, s_b1, 0.0, 0.1);
    ampc_tensor *w2 = param(ctx, "big.weight", 2, s_w2, 1e4, 2e4);
    ampc_tensor *w3 = param(ctx, HEAD ".weight", 2, s_w3, -1e-4, 1e-4);
    const int64_t targets[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    for (int step = 0; step < steps; step++) {
        ampc_tensor *x = ampc_tensor_uniform(ctx, AMPC_DTYPE_F32, 2, s_x, 1.0, 2.0);
        ampc_tensor *t = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, 1, s_t, targets, AMPC_DTYPE_I64);
        MUST(x && t);
        ampc_tensor *h = ampc_relu(ctx, scoped_linear(ctx, "fc1", x, w1, b1));
        MUST(h);
        ampc_tensor *y = ampc_mul_scalar(ctx, scoped_linear(ctx, "big", h, w2, NULL), 1e-6);
        MUST(y);
        ampc_tensor *loss = ampc_cross_entropy(ctx, scoped_linear(ctx, HEAD, y, w3, NULL), t, AMPC_IGNORE_INDEX);
        MUST(loss);
        MUST(ampc_backward(ctx, loss) == AMPC_OK);
        ampc_ctx_step_end(ctx);
    }
    ampc_tensor_free(w1), ampc_tensor_free(b1), ampc_tensor_free(w2), ampc_tensor_free(w3);
}

static int find_site(const ampc_stats *st, const char *module, const char *op, ampc_stats_role role) {
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (!strcmp(e->module, module) && !strcmp(e->op, op) && e->role == role) return i;
    }
    return -1;
}

/* ---- checks ---- */

static void check_svg(const char *svg, const ampc_stats *st) {
    CHECK(!strncmp(svg, "<svg ", 5) || !strncmp(svg, "<?xml", 5), "heatmap.svg does not start with <svg or <?xml");
    size_t n = strlen(svg);
    CHECK(n > 7 && !strcmp(svg + n - 7, "</svg>\n"), "heatmap.svg does not end with </svg>");
    CHECK(count(svg, "<svg") == 1 && count(svg, "</svg>") == 1, "more than one root element");
    int open_g = count(svg, "<g ") + count(svg, "<g>"), close_g = count(svg, "</g>");
    CHECK(open_g == close_g, "unbalanced groups: %d <g> against %d </g>", open_g, close_g);
    CHECK(count(svg, "<text") == count(svg, "</text>"), "unbalanced <text>");
    CHECK(count(svg, "<tspan") == count(svg, "</tspan>"), "unbalanced <tspan>");
    CHECK(count(svg, "<title>") == count(svg, "</title>"), "unbalanced <title>");
    CHECK(!strstr(svg, HEAD), "the module name %s is not escaped", HEAD);
    CHECK(!strstr(svg, "nan") && !strstr(svg, "inf\""), "a non-finite coordinate");
    for (int i = 0; i < ampc_stats_count(st); i++) {
        char label[512], esc[1024], want[1100];
        expected_label(ampc_stats_get(st, i), label, sizeof label);
        xml_escape(label, esc, sizeof esc);
        snprintf(want, sizeof want, ">%s</text>", esc);
        CHECK(strstr(svg, want), "row label '%s' missing from heatmap.svg", esc);
    }
    CHECK(strstr(svg, "FP16 loss scale 2<tspan"), "no loss-scale arrow, though big's gradient needs one");
}

/* The table row of a site: "| `module` | `op` | role |" up to its end of line (NULL when absent). */
static char *table_row(const char *md, const char *module, const char *op, const char *role) {
    char head[256];
    snprintf(head, sizeof head, "| `%s` | `%s` | %s |", module, op, role);
    const char *p = strstr(md, head);
    if (!p) return NULL;
    size_t n = strcspn(p, "\n");
    char *row = malloc(n + 1);
    memcpy(row, p, n), row[n] = '\0';
    return row;
}

static void check_report(const char *md, const doctor_meta *m, const ampc_stats *st) {
    int big = find_site(st, "big", "linear", AMPC_STATS_OUTPUT);
    ampc_stats_advice a;
    MUST(big >= 0 && ampc_stats_advise(st, big, AMPC_FORMAT_FP16, &a) == AMPC_OK);
    CHECK(a.verdict == AMPC_VERDICT_UNSAFE, "big's outputs (amax %g) should be unsafe in FP16",
          ampc_stats_get(st, big)->amax);
    char *row = table_row(md, "big", "linear", "out");
    CHECK(row, "report.md has no table row for big linear out");
    CHECK(row && strstr(row, "unsafe") && strstr(row, "overflow"), "big's row does not say unsafe: %s", row ? row : "");
    free(row);
    row = table_row(md, "fc1", "linear", "out");
    CHECK(row && strstr(row, "| safe"), "fc1's outputs are not called safe: %s", row ? row : "");
    free(row);
    CHECK(strstr(md, m->recommended), "the recommended command is missing");
    CHECK(strstr(md, m->bf16_command), "the BF16 command is missing");
    CHECK(strstr(md, m->model) && strstr(md, m->data) && strstr(md, m->command), "what was run is missing");
    CHECK(strstr(md, "1 ms a step, on top of 19 ms without them (5.3% more)"), "the cost of the statistics is missing");
    CHECK(strstr(md, "![Where the values live](heatmap.svg)"), "the heat map is not embedded");
    CHECK(strstr(md, "| `" HEAD "` |"), "the module " HEAD " is not shown as a code span");
    CHECK(!strstr(md, " nan") && !strstr(md, "-nan"), "a NaN in report.md");
}

static void check_same(const char *dir_a, const char *dir_b, const char *name) {
    char pa[4096], pb[4096];
    char *a = read_file(path_of(pa, dir_a, name), NULL), *b = read_file(path_of(pb, dir_b, name), NULL);
    CHECK(a && b && !strcmp(a, b), "%s differs between two writes", name);
    free(a), free(b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    make_dir(dir);
    ampc_ctx_params cp = {.seed = 7, .threads = 1};
    ampc_ctx *ctx;
    ampc_stats *st;
    MUST(ampc_ctx_new(&cp, &ctx) == AMPC_OK);
    MUST(ampc_stats_new(&st) == AMPC_OK);
    MUST(ampc_stats_attach(ctx, st) == AMPC_OK);
    run_steps(ctx, 2);
    MUST(ampc_stats_attach(ctx, NULL) == AMPC_OK);
    CHECK(ampc_stats_count(st) >= 12, "only %d sites recorded", ampc_stats_count(st));

    doctor_meta m = {.model = "mlp (4-16-4-3, test)",
                     .data = "synthetic: 8 samples",
                     .command = "ampc doctor --model mlp --steps 2",
                     .steps = 2,
                     .step_seconds = 0.02,
                     .stats_seconds = 0.001,
                     .recommended = "ampc train --precision fp16 --fp32-modules big --loss-scale 4096",
                     .bf16_command = "ampc train --precision bf16"};
    char err[512] = "", path[4096], again[4096];
    CHECK(doctor_write_report(dir, &m, st, err, sizeof err) == 0, "doctor_write_report: %s", err);
    char *svg = read_file(path_of(path, dir, "heatmap.svg"), NULL),
         *md = read_file(path_of(path, dir, "report.md"), NULL);
    CHECK(svg && svg[0], "heatmap.svg missing or empty");
    CHECK(md && md[0], "report.md missing or empty");
    if (svg) check_svg(svg, st);
    if (md) check_report(md, &m, st);

    /* the same bytes again, and the stream writer agrees with itself */
    make_dir(path_of(again, dir, "again"));
    CHECK(doctor_write_report(again, &m, st, err, sizeof err) == 0, "second write: %s", err);
    check_same(dir, again, "heatmap.svg");
    check_same(dir, again, "report.md");
    FILE *f1 = tmpfile(), *f2 = tmpfile();
    MUST(f1 && f2);
    CHECK(doctor_write_heatmap(f1, st) == 0 && doctor_write_heatmap(f2, st) == 0, "doctor_write_heatmap failed");
    char *s1 = read_stream(f1, NULL), *s2 = read_stream(f2, NULL);
    CHECK(s1 && s2 && !strcmp(s1, s2) && s1[0], "doctor_write_heatmap is not deterministic");
    if (s1) check_svg(s1, st);
    fclose(f1), fclose(f2), free(s1), free(s2);

    /* a folder that does not exist: an error that names it */
    err[0] = '\0';
    CHECK(doctor_write_report("/nonexistent-ampc-dir/x", &m, st, err, sizeof err) == -1, "no error for a bad folder");
    CHECK(strstr(err, "/nonexistent-ampc-dir/x"), "the error does not name the folder: %s", err);

    free(svg), free(md);
    ampc_stats_free(st);
    ampc_ctx_free(ctx);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("doctor report: all checks passed (%s)\n", dir);
    return failures ? 1 : 0;
}
