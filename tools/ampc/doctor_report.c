/* doctor_report.c: the files of `ampc doctor --report DIR`. heatmap.svg shows every site (tensor) as a
 * row of binades of |x|, shaded by the share of its non-zero values there, under a ruler of the FP16,
 * BF16 and FP8 windows whose edges run down over the rows: forward values sit inside FP16's window,
 * gradients left of it, and an arrow shows how far the loss scale moves them. report.md gives the
 * recommended command lines, a verdict table per group of sites (every verdict from ampc_stats_advise,
 * never re-derived here) and how to read the picture (written by doctor_markdown.c). Everything is
 * computed from the statistics and printed with fixed formats, so the bytes depend only on the input. */
#include "doctor_report_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_H 11.0     /* one site */
#define GROUP_H 22.0   /* the "Forward" / "Backward" header rows */
#define RULER_H 17.0   /* one format's window in the ruler */
#define CHAR_W 5.9     /* a safe average glyph width of 10px sans-serif, for margins */
#define CELL_W 12.0    /* a binade's width, unless there are too many to show */
#define MIN_CELL_W 4.0 /* ... never narrower than this */
#define MAX_PLOT_W 840.0
#define VERDICT_W 60.0
#define LABEL_MAX 60 /* characters of a row label before its start is cut */
#define MINUS "\xe2\x88\x92"
#define PARTIAL "\xe2\x88\x82"
#define ELLIPSIS "\xe2\x80\xa6"

/* The windows, in ruler order; FP16 first: it is the one the picture is about. */
const ampc_format doctor_win_fmt[DOCTOR_NWIN] = {AMPC_FORMAT_FP16, AMPC_FORMAT_BF16, AMPC_FORMAT_FP8_E4M3,
                                                 AMPC_FORMAT_FP8_E5M2};
static const char *const win_color[DOCTOR_NWIN] = {"#d62728", "#1a9850", "#ff7f0e", "#9467bd"};
static const char *const win_color_name[DOCTOR_NWIN] = {"red", "green", "orange", "purple"};

doctor_window doctor_get_window(int j) {
    ampc_format_info info;
    ampc_format_get_info(doctor_win_fmt[j], &info);
    return (doctor_window){doctor_win_fmt[j],     win_color[j],          win_color_name[j], log2(info.min_subnormal),
                           log2(info.min_normal), log2(info.max_finite), info.max_finite};
}

const char *doctor_fmt_name(ampc_format fmt) {
    ampc_format_info info;
    return ampc_format_get_info(fmt, &info) == AMPC_OK ? info.name : "?";
}

/* ---- sites ---- */

static uint64_t nonzero(const ampc_stats_entry *e) { return e->count - e->zeros - e->nonfinite; }

/* Values of e in the binade [2^k, 2^(k+1)); k = -127 stands for the F32 subnormals below 2^-126. */
uint64_t doctor_in_binade(const ampc_stats_entry *e, int k) {
    int b = k + 127;
    if (b < 0 || b > 254) return 0;
    if (b == 0) return e->hist[0] > e->zeros ? e->hist[0] - e->zeros : 0;
    return e->hist[b];
}

/* "module op out", "module op grad", "module op ∂weight" (the parameter's name less the module's). */
static void site_label(const ampc_stats_entry *e, char *buf, size_t n) {
    const char *m = e->module, *sep = m[0] ? " " : "";
    if (e->role != AMPC_STATS_PARAM_GRAD) {
        snprintf(buf, n, "%s%s%s %s", m, sep, e->op, e->role == AMPC_STATS_OUTPUT ? "out" : "grad");
        return;
    }
    const char *p = e->param;
    size_t ml = strlen(m);
    if (ml && strncmp(p, m, ml) == 0 && p[ml] == '.') p += ml + 1;
    snprintf(buf, n, "%s%s%s " PARTIAL "%s", m, sep, e->op, p[0] ? p : "param");
}

/* Characters, not bytes: UTF-8 continuation bytes do not count. */
static int chars(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* A label for the picture: at most LABEL_MAX characters, the start cut to an ellipsis (the end names the
 * op and the role). Returns label itself, or buf. */
static const char *short_label(const char *label, char *buf, size_t n) {
    int drop = chars(label) - (LABEL_MAX - 1);
    if (drop <= 0) return label;
    const char *s = label;
    for (; *s && drop > 0; drop--)
        for (s++; ((unsigned char)*s & 0xC0) == 0x80; s++) {}
    snprintf(buf, n, ELLIPSIS "%s", s);
    return buf;
}

/* Sites in the picture's order: forward (outputs) first, then backward, each in statistics order. */
static int *row_order(const ampc_stats *st, int n, int *nfwd) {
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order), k = 0;
    if (!order) return NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++)
            if ((ampc_stats_get(st, i)->role == AMPC_STATS_OUTPUT) == (pass == 0)) order[k++] = i;
        if (pass == 0) *nfwd = k;
    }
    return order;
}

/* The smallest and largest binade holding a non-zero finite value of any site; false when none does. */
bool doctor_data_range(const ampc_stats *st, int *lo, int *hi) {
    bool any = false;
    for (int i = 0; i < ampc_stats_count(st); i++)
        for (int k = -127; k <= 127; k++)
            if (doctor_in_binade(ampc_stats_get(st, i), k)) {
                if (!any || k < *lo) *lo = k;
                if (!any || k > *hi) *hi = k;
                any = true;
            }
    return any;
}

/* ---- text ---- */

static void xml_text_n(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc((unsigned char)s[i] < 0x20 ? '?' : s[i], f); /* control characters are not XML */
        }
    }
}
static void xml_text(FILE *f, const char *s) { xml_text_n(f, s, strlen(s)); }

/* Text in which "^k" (k: an optional '-' and letters or digits) is set as a superscript: the picture
 * speaks in powers of two. The baseline comes back down with the text that follows. */
static void xml_rich(FILE *f, const char *s, double size) {
    bool raised = false;
    while (*s) {
        const char *q = s[0] == '^' ? s + 1 + (s[1] == '-') : NULL;
        if (q && isalnum((unsigned char)*q)) {
            fprintf(f, "<tspan dy=\"%.1f\" font-size=\"%.1f\">", raised ? 0.0 : -0.4 * size, 0.75 * size);
            if (s[1] == '-') fputs(MINUS, f);
            for (s = q; isalnum((unsigned char)*s); s++) fputc(*s, f);
            fputs("</tspan>", f);
            raised = true;
            continue;
        }
        size_t n = strcspn(s + 1, "^") + 1;
        if (raised) fprintf(f, "<tspan dy=\"%.1f\">", 0.4 * size);
        xml_text_n(f, s, n);
        if (raised) fputs("</tspan>", f);
        raised = false;
        s += n;
    }
}

/* size > 0: rich text of that font size; 0: plain (labels are shown as they are). */
static void text(FILE *f, double x, double y, const char *anchor, const char *attrs, const char *s, double size) {
    /* preserve: some renderers (librsvg) drop the space that starts the text after a superscript */
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y, anchor, attrs,
            size > 0 && strchr(s, '^') ? " xml:space=\"preserve\"" : "");
    if (size > 0) xml_rich(f, s, size);
    else xml_text(f, s);
    fputs("</text>\n", f);
}

/* A format's largest value as people know it: 65504, 448, 3.39e+38. */
void doctor_fmt_max(char *buf, size_t n, double v) { snprintf(buf, n, v < 1e6 ? "%.6g" : "%.3g", v); }

/* ---- colours ---- */

/* Shades: a share in (0, 1] is placed on log10 from 0.01% to 100% and cut into LEVELS steps (four per
 * decade, finer than the eye tells apart), so a row draws one path per step instead of one rect per cell. */
#define LEVELS 17
static int shade_level(double frac) {
    double t = (log10(frac) + 4.0) / 4.0;
    return (int)lround((t < 0 ? 0 : t > 1 ? 1 : t) * (LEVELS - 1));
}

/* A single-hue ramp (ColorBrewer Blues) whose lightest step is still far from white, so a tail of a few
 * values shows. */
static void shade_color(int level, char out[8]) {
    static const unsigned ramp[] = {0xc6dbef, 0x9ecae1, 0x6baed6, 0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
    const int last = (int)(sizeof ramp / sizeof ramp[0]) - 1;
    double t = (double)level / (LEVELS - 1) * last;
    int i = (int)t < last ? (int)t : last - 1;
    double u = t - i;
    unsigned c[3];
    for (int k = 0; k < 3; k++) {
        int a = (int)(ramp[i] >> (16 - 8 * k)) & 0xff, b = (int)(ramp[i + 1] >> (16 - 8 * k)) & 0xff;
        c[k] = (unsigned)lround(a + (b - a) * u);
    }
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static const char *const verdict_fill[AMPC_VERDICT_COUNT] = {"#e5f5e0", "#fee6ce", "#fcbba1", "#eeeeee"};
static const char *const verdict_ink[AMPC_VERDICT_COUNT] = {"#1b7837", "#a63603", "#a50f15", "#737373"};

/* ---- layout ---- */

typedef struct layout {
    int n, nfwd, *order; /* rows: forward sites first */
    int lo, hi;          /* binades shown, inclusive */
    int tick;            /* a labelled tick every `tick` binades */
    double cw;           /* width of a binade */
    double x0, x1;       /* the plot's left and right */
    double xnf;          /* the inf/NaN column (0: none) */
    double xv;           /* the verdict columns */
    double w, h;
    double y_ruler, y_map, y_end;
    doctor_window win[DOCTOR_NWIN];
} layout;

static double lx(const layout *L, double log2v) { return L->x0 + (log2v - L->lo) * L->cw; }
static double clip_x(const layout *L, double x) { return x < L->x0 ? L->x0 : x > L->x1 ? L->x1 : x; }

static double row_y(const layout *L, int r) {
    return L->y_map + (L->nfwd > 0 ? GROUP_H : 0) + (r >= L->nfwd ? GROUP_H : 0) + r * ROW_H;
}

/* Binades from two below the data to two above, always including FP16's whole window. */
static void columns(const ampc_stats *st, layout *L) {
    const doctor_window *h = &L->win[0];
    int lo = (int)floor(h->sub) - 1, hi = (int)floor(h->hi) + 1, dlo, dhi;
    if (doctor_data_range(st, &dlo, &dhi)) {
        if (dlo - 2 < lo) lo = dlo - 2;
        if (dhi + 2 > hi) hi = dhi + 2;
    }
    L->lo = lo, L->hi = hi;
    int ncols = hi - lo + 1;
    L->cw = fmax(MIN_CELL_W, fmin(CELL_W, MAX_PLOT_W / ncols));
    static const int steps[] = {1, 2, 4, 5, 10, 20, 50};
    L->tick = 50;
    for (int k = (int)(sizeof steps / sizeof steps[0]) - 1; k >= 0; k--)
        if (steps[k] * L->cw >= 30) L->tick = steps[k];
}

static int layout_make(const ampc_stats *st, layout *L) {
    memset(L, 0, sizeof *L);
    for (int j = 0; j < DOCTOR_NWIN; j++) L->win[j] = doctor_get_window(j);
    L->n = ampc_stats_count(st);
    if (!(L->order = row_order(st, L->n, &L->nfwd))) return -1;
    columns(st, L);
    int label_chars = 14; /* the ruler's labels */
    bool nonfinite = false;
    for (int i = 0; i < L->n; i++) {
        char label[512];
        site_label(ampc_stats_get(st, i), label, sizeof label);
        char cut[512];
        int c = chars(short_label(label, cut, sizeof cut));
        if (c > label_chars) label_chars = c;
        nonfinite |= ampc_stats_get(st, i)->nonfinite > 0;
    }
    L->x0 = 24 + label_chars * CHAR_W;
    L->x1 = L->x0 + (L->hi - L->lo + 1) * L->cw;
    L->xnf = nonfinite ? L->x1 + 8 : 0;
    L->xv = (nonfinite ? L->xnf + CELL_W : L->x1) + 12;
    L->w = fmax(L->xv + 2 * VERDICT_W + 16, 960);
    L->y_ruler = 104;
    L->y_map = L->y_ruler + DOCTOR_NWIN * RULER_H + 26;
    L->y_end = row_y(L, L->n) + (L->n == 0 ? 3 * ROW_H : 0);
    L->h = L->y_end + 48;
    return 0;
}

/* ---- the picture ---- */

/* The key of the lines over the rows, and of the grey labels. */
static void draw_line_key(FILE *f, const layout *L, double y) {
    static const char *const what[3] = {"FP16 normal range", "FP16 smallest subnormal (zero below)", "FP8 edges"};
    static const char *const dash[3] = {"", " stroke-dasharray=\"4,3\"", " stroke-dasharray=\"1,3\""};
    static const char *const width[3] = {"1.8", "1.4", "1.4"};
    double x = 16;
    for (int k = 0; k < 3; k++) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\"%s/>\n", x,
                y + 5, x + 20, y + 5, L->win[k == 2 ? 2 : 0].color, width[k], dash[k]);
        text(f, x + 24, y + 9, "start", " font-size=\"11\"", what[k], 11);
        x += 24 + chars(what[k]) * 6.0 + 16;
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\"><tspan fill=\"#999999\" font-style=\"italic\">grey "
            "label</tspan>: stays FP32 under autocast</text>\n",
            x, y + 9);
}

static void draw_header(FILE *f, const layout *L, const ampc_stats *st, const doctor_meta *m) {
    char buf[768];
    text(f, 16, 26, "start", " font-size=\"17\" font-weight=\"bold\"",
         "Where the values live: |x| of every tensor, one column per binade", 17);
    long long steps = m ? (long long)m->steps : (long long)ampc_stats_steps(st);
    snprintf(buf, sizeof buf,
             "%lld FP32 step%s%s%s with range statistics; %d tensors in the order they were first seen", steps,
             steps == 1 ? "" : "s", m && m->model ? " of " : "", m && m->model ? m->model : "", L->n);
    text(f, 16, 46, "start", " font-size=\"12\" fill=\"#555555\"", buf, 12);
    /* the colour key: one swatch per decade of share */
    double x = 16, y = 66;
    const char *key = "Shade: share of the tensor's non-zero values in the binade (white: none)";
    text(f, x, y + 9, "start", " font-size=\"11\"", key, 11);
    x += chars(key) * 6.0 + 12;
    static const char *const pct[] = {"0.01%", "0.1%", "1%", "10%", "100%"};
    for (int k = 0; k < 5; k++) {
        char c[8];
        shade_color(shade_level(pow(10.0, k - 4)), c);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>\n", x, y, c);
        text(f, x + 17, y + 9, "start", " font-size=\"10\"", pct[k], 10);
        x += 17 + chars(pct[k]) * CHAR_W + 10;
    }
    draw_line_key(f, L, 84);
}

/* One format's window: subnormals light, normals dark, clipped to the plot, with its numbers. */
static void draw_ruler_row(FILE *f, const layout *L, const doctor_window *w, double y) {
    char buf[256], mx[32], lo_s[32];
    text(f, L->x0 - 8, y + 11, "end", " font-size=\"11\" font-weight=\"bold\"", doctor_fmt_name(w->fmt), 11);
    double xs = clip_x(L, lx(L, w->sub)), xl = clip_x(L, lx(L, w->lo)), xh = clip_x(L, lx(L, w->hi));
    if (xl > xs)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"13\" fill=\"%s\" fill-opacity=\"0.3\"/>\n", xs,
                y + 1, xl - xs, w->color);
    if (xh > xl)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"13\" fill=\"%s\" fill-opacity=\"0.85\"/>\n", xl,
                y + 1, xh - xl, w->color);
    doctor_fmt_max(mx, sizeof mx, w->max);
    snprintf(lo_s, sizeof lo_s, "2^%d", (int)lround(w->lo));
    bool all = lx(L, w->sub) <= L->x0 && lx(L, w->hi) >= L->x1;
    if (all) snprintf(buf, sizeof buf, "normal %s to %s: covers every column", lo_s, mx);
    else snprintf(buf, sizeof buf, "normal %s to %s", lo_s, mx);
    if (chars(buf) * CHAR_W + 8 > xh - xl) snprintf(buf, sizeof buf, "normal");
    if (chars(buf) * CHAR_W + 8 <= xh - xl)
        text(f, (xl + xh) / 2, y + 11, "middle", " font-size=\"10\" fill=\"#ffffff\" font-weight=\"bold\"", buf, 10);
    snprintf(buf, sizeof buf, "subnormal");
    if (xl - xs >= chars(buf) * CHAR_W + 6)
        text(f, (xs + xl) / 2, y + 11, "middle", " font-size=\"10\" fill=\"#333333\"", buf, 10);
    snprintf(buf, sizeof buf, "2^%d", (int)lround(w->sub));
    if (xs > L->x0 + 30) text(f, xs - 3, y + 11, "end", " font-size=\"10\" fill=\"#333333\"", buf, 10);
    if (xh < L->x1 - 40) text(f, xh + 3, y + 11, "start", " font-size=\"10\" fill=\"#333333\"", mx, 10);
}

static void draw_ticks(FILE *f, const layout *L, double y) {
    char buf[16];
    for (int k = L->lo; k <= L->hi + 1; k++) {
        if (k % L->tick) continue;
        snprintf(buf, sizeof buf, "2^%d", k);
        text(f, lx(L, k), y, "middle", " font-size=\"10\" fill=\"#333333\"", buf, 10);
    }
}

/* Grid lines at the ticks, the plot's frame and the column headers, under the cells. */
static void draw_frame(FILE *f, const layout *L) {
    fputs("<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n", f);
    for (int k = L->lo; k <= L->hi + 1; k++)
        if (k % L->tick == 0)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", lx(L, k), L->y_map, lx(L, k),
                    L->y_end);
    fputs("</g>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#bbbbbb\"/>\n", L->x0,
            L->y_map, L->x1 - L->x0, L->y_end - L->y_map);
    draw_ticks(f, L, L->y_map - 5);
    draw_ticks(f, L, L->y_end + 14);
    text(f, (L->x0 + L->x1) / 2, L->y_end + 34, "middle", " font-size=\"12\"",
         "|x|: the column right of the tick 2^k holds 2^k \xe2\x89\xa4 |x| < 2\xc2\xb7"
         "2^k",
         12);
    double hy = L->y_map - 5;
    if (L->xnf) text(f, L->xnf + CELL_W / 2, hy, "middle", " font-size=\"9\" fill=\"#a50f15\"", "inf/NaN", 9);
    text(f, L->xv + VERDICT_W / 2, hy, "middle", " font-size=\"11\" font-weight=\"bold\"", "FP16", 11);
    text(f, L->xv + 1.5 * VERDICT_W, hy, "middle", " font-size=\"11\" font-weight=\"bold\"", "BF16", 11);
}

/* A verdict as a coloured tag ("?" in the colours of unsafe when there is none). */
static void verdict_cell(FILE *f, double x, const ampc_stats_advice *a) {
    char buf[32];
    int v = a->verdict < AMPC_VERDICT_COUNT ? (int)a->verdict : AMPC_VERDICT_UNSAFE;
    fprintf(f, "<rect x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"%.1f\" rx=\"2\" fill=\"%s\"/>\n", x + 3, VERDICT_W - 6,
            ROW_H - 1, verdict_fill[v]);
    if (v == AMPC_VERDICT_NEEDS_SCALING) snprintf(buf, sizeof buf, "scale 2^%d", a->scale_log2);
    else snprintf(buf, sizeof buf, "%s", v == AMPC_VERDICT_KEPT_FP32 ? "fp32" : ampc_stats_verdict_name(a->verdict));
    char attrs[64];
    snprintf(attrs, sizeof attrs, " font-size=\"8.5\" fill=\"%s\"", verdict_ink[v]);
    text(f, x + VERDICT_W / 2, ROW_H - 3, "middle", attrs, buf, 8.5);
}

/* The row's tooltip: the numbers behind it. */
static void row_title(FILE *f, const ampc_stats_entry *e, const char *label, const ampc_stats_advice *fp16) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s: amax %.3g, smallest non-zero %.3g, %.1f%% zeros; FP16 %s (%s)", label, e->amax,
             e->min_nonzero, e->count ? 100.0 * (double)e->zeros / (double)e->count : 0.0,
             ampc_stats_verdict_name(fp16->verdict), fp16->why);
    fputs("<title>", f);
    xml_text(f, buf);
    fputs("</title>\n", f);
}

/* A row's cells (binades -129..129: index k + 130), in a frame where x is the binade's exponent and a
 * binade is 1 wide, one path per shade with a rectangle per run of equal cells: the file stays small with
 * hundreds of rows. */
static void draw_cells(FILE *f, const layout *L, const ampc_stats_entry *e) {
    uint64_t nz = nonzero(e);
    if (!nz) return;
    int level[264], used[LEVELS] = {0};
    for (int k = L->lo; k <= L->hi; k++) {
        uint64_t v = doctor_in_binade(e, k);
        level[k + 130] = v ? shade_level((double)v / (double)nz) : -1;
        if (v) used[level[k + 130]] = 1;
    }
    fprintf(f, "<g transform=\"translate(%.2f,0.5) scale(%.4g,1)\">\n", lx(L, 0), L->cw);
    for (int s = 0; s < LEVELS; s++) {
        if (!used[s]) continue;
        char c[8];
        shade_color(s, c);
        fprintf(f, "<path fill=\"%s\" d=\"", c);
        for (int k = L->lo; k <= L->hi; k++) {
            if (level[k + 130] != s) continue;
            int run = 1;
            while (k + run <= L->hi && level[k + run + 130] == s) run++;
            fprintf(f, "M%d 0h%dv%.0fh-%dz", k, run, ROW_H - 1, run);
            k += run - 1;
        }
        fputs("\"/>\n", f);
    }
    fputs("</g>\n", f);
}

static void draw_row(FILE *f, const ampc_stats *st, const layout *L, int r) {
    int i = L->order[r];
    const ampc_stats_entry *e = ampc_stats_get(st, i);
    char label[512], cut[512];
    site_label(e, label, sizeof label);
    ampc_stats_advice a16, a_bf;
    if (ampc_stats_advise(st, i, AMPC_FORMAT_FP16, &a16) != AMPC_OK)
        a16 = (ampc_stats_advice){.verdict = AMPC_VERDICT_COUNT};
    if (ampc_stats_advise(st, i, AMPC_FORMAT_BF16, &a_bf) != AMPC_OK)
        a_bf = (ampc_stats_advice){.verdict = AMPC_VERDICT_COUNT};
    fprintf(f, "<g class=\"site\" transform=\"translate(0,%.1f)\">\n", row_y(L, r));
    row_title(f, e, label, &a16);
    if (r % 2)
        fprintf(f, "<rect x=\"16\" y=\"0\" width=\"%.1f\" height=\"%.1f\" fill=\"#f5f5f5\"/>\n", L->xv - 16, ROW_H);
    text(f, L->x0 - 8, ROW_H - 2.5, "end",
         e->lowered ? " font-size=\"10\"" : " font-size=\"10\" fill=\"#999999\" font-style=\"italic\"",
         short_label(label, cut, sizeof cut), 0);
    draw_cells(f, L, e);
    if (L->xnf && e->nonfinite)
        fprintf(f, "<rect x=\"%.1f\" y=\"0.5\" width=\"%.1f\" height=\"%.1f\" fill=\"#a50f15\"/>\n", L->xnf, CELL_W,
                ROW_H - 1);
    verdict_cell(f, L->xv, &a16);
    verdict_cell(f, L->xv + VERDICT_W, &a_bf);
    fputs("</g>\n", f);
}

/* A group's header row; the backward one carries the arrow of FP16's loss scale: 2^k moves every
 * gradient k binades right, from 2^(emin-k) onto FP16's smallest normal. */
static void draw_group(FILE *f, const ampc_stats *st, const layout *L, double y, bool backward, int n) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s (%d)", backward ? "Backward: gradients" : "Forward: op outputs", n);
    text(f, 16, y + 15, "start", " font-size=\"12\" font-weight=\"bold\"", buf, 12);
    ampc_stats_recommendation rec;
    if (!backward || ampc_stats_recommend(st, AMPC_FORMAT_FP16, &rec) != AMPC_OK || rec.scale_log2 <= 0) return;
    const doctor_window *h = &L->win[0];
    double x2 = lx(L, h->lo), x1 = clip_x(L, lx(L, h->lo - rec.scale_log2)), ym = y + 11;
    fprintf(f, "<g stroke=\"%s\" fill=\"%s\">\n", h->color, h->color);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"2\"/>\n", x1, ym, x2 - 6, ym);
    fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" stroke=\"none\"/>\n", x2, ym, x2 - 8, ym - 4.5,
            x2 - 8, ym + 4.5);
    fputs("</g>\n", f);
    snprintf(buf, sizeof buf, "FP16 loss scale 2^%d moves every gradient %d binades right", rec.scale_log2,
             rec.scale_log2);
    char attrs[64];
    snprintf(attrs, sizeof attrs, " font-size=\"11\" font-weight=\"bold\" fill=\"%s\"", h->color);
    text(f, x2 + 6, ym + 4, "start", attrs, buf, 11);
}

/* The windows' edges over the rows: FP8 thin and dotted, BF16 (when visible) and FP16 on top. */
static void draw_edges(FILE *f, const layout *L) {
    for (int j = DOCTOR_NWIN - 1; j >= 0; j--) {
        const doctor_window *w = &L->win[j];
        bool fp8 = w->fmt == AMPC_FORMAT_FP8_E4M3 || w->fmt == AMPC_FORMAT_FP8_E5M2;
        double edge[3] = {w->sub, w->lo, w->hi};
        for (int k = 0; k < 3; k++) {
            double x = lx(L, edge[k]);
            if (x < L->x0 || x > L->x1) continue;
            const char *dash = fp8 ? "1,3" : k == 0 ? "4,3" : NULL;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"", x,
                    L->y_ruler + j * RULER_H, x, L->y_end, w->color,
                    fp8      ? 1.0
                    : k == 0 ? 1.4
                             : 1.8);
            if (dash) fprintf(f, " stroke-dasharray=\"%s\"", dash);
            fputs("/>\n", f);
        }
    }
}

static int heatmap(FILE *f, const ampc_stats *st, const doctor_meta *m) {
    layout L;
    if (layout_make(st, &L) != 0) return -1;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
            L.w, L.h, L.w, L.h);
    fprintf(f, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", L.w, L.h);
    draw_header(f, &L, st, m);
    fputs("<g class=\"ruler\">\n", f);
    for (int j = 0; j < DOCTOR_NWIN; j++) draw_ruler_row(f, &L, &L.win[j], L.y_ruler + j * RULER_H);
    fputs("</g>\n", f);
    draw_frame(f, &L);
    if (L.nfwd > 0) draw_group(f, st, &L, L.y_map, false, L.nfwd);
    if (L.n > L.nfwd) draw_group(f, st, &L, row_y(&L, L.nfwd) - GROUP_H, true, L.n - L.nfwd);
    fputs("<g class=\"rows\">\n", f);
    for (int r = 0; r < L.n; r++) draw_row(f, st, &L, r);
    fputs("</g>\n", f);
    if (L.n == 0)
        text(f, (L.x0 + L.x1) / 2, L.y_map + 2 * ROW_H, "middle", " fill=\"#555555\"", "no statistics recorded", 12);
    draw_edges(f, &L);
    fputs("</svg>\n", f);
    free(L.order);
    return ferror(f) ? -1 : 0;
}

int doctor_write_heatmap(FILE *f, const ampc_stats *st) { return heatmap(f, st, NULL); }

/* ---- files ---- */

typedef int (*writer)(FILE *f, const doctor_meta *m, const ampc_stats *st);

static int md_writer(FILE *f, const doctor_meta *m, const ampc_stats *st) {
    doctor_write_markdown(f, m, st);
    return ferror(f) ? -1 : 0;
}
static int svg_writer(FILE *f, const doctor_meta *m, const ampc_stats *st) { return heatmap(f, st, m); }

static int write_file(const char *dir, const char *name, writer w, const doctor_meta *m, const ampc_stats *st,
                      char *err, size_t errsize) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(err, errsize, "cannot write %s/%s: path too long", dir, name);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errsize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = w(f, m, st);
    if (fclose(f) != 0) rc = -1;
    if (rc != 0) snprintf(err, errsize, "cannot write %s: write error", path);
    return rc;
}

int doctor_write_report(const char *dir, const doctor_meta *meta, const ampc_stats *st, char *err, size_t errsize) {
    doctor_meta none = {0};
    const doctor_meta *m = meta ? meta : &none;
    if (write_file(dir, "heatmap.svg", svg_writer, m, st, err, errsize) != 0) return -1;
    return write_file(dir, "report.md", md_writer, m, st, err, errsize);
}
