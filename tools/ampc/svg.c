/* svg.c: the line-chart writer of svg.h. The layout is computed before anything is written: the left
 * margin from the widest y tick label, the right margin from the widest legend entry (the legend sits
 * outside the plot so it never hides a curve), the top from the title lines. Axes get 1-2-5 ticks over a
 * range widened to whole steps (log axes: whole decades). Curves are clipped to the plot and, where more
 * points than pixel columns exist, reduced per column to first/min/max/last, which keeps every spike
 * while keeping the file small. Every coordinate is printed with one decimal, so the bytes depend only
 * on the input. */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define CHAR_W 7.0 /* a safe average glyph width of 12px sans-serif, for margins */
#define MAX_TICKS 64
#define MARKER_COLOR "#d62728"

const char *svg_color(int i) {
    static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                          "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    int n = (int)(sizeof palette / sizeof palette[0]);
    return palette[((i % n) + n) % n];
}

/* ---- text ---- */

static void xml_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Display width in characters: UTF-8 continuation bytes do not count. */
static double text_w(const char *s) {
    size_t n = 0;
    for (; s && *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return (double)n * CHAR_W;
}

static void text(FILE *f, double x, double y, const char *anchor, const char *attrs, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, attrs);
    xml_text(f, s);
    fputs("</text>\n", f);
}

/* ---- axes ---- */

typedef struct axis {
    bool log;
    bool pow2;               /* log ticks at powers of two, labelled 2^k beyond 2^16 */
    double lo, hi;           /* in axis units (log10 of the value on a log axis) */
    double ticks[MAX_TICKS]; /* tick values (not logged) */
    int nticks;
    int decimals; /* for linear tick labels */
} axis;

/* The smallest 1, 2 or 5 times a power of ten that is >= x. */
static double nice_step(double x) {
    double p = pow(10.0, floor(log10(x)));
    double m = x / p;
    return (m <= 1.0 + 1e-9 ? 1.0 : m <= 2.0 + 1e-9 ? 2.0 : m <= 5.0 + 1e-9 ? 5.0 : 10.0) * p;
}

static void axis_linear(axis *a, double lo, double hi, int target) {
    if (!(hi > lo)) { /* one value: give it some room around */
        double pad = lo != 0.0 ? fabs(lo) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
    }
    double step = nice_step((hi - lo) / target);
    double k0 = floor(lo / step + 1e-9), k1 = ceil(hi / step - 1e-9);
    a->log = a->pow2 = false;
    a->lo = k0 * step;
    a->hi = k1 * step;
    a->nticks = 0;
    for (double k = k0; k <= k1 && a->nticks < MAX_TICKS; k++) a->ticks[a->nticks++] = k * step + 0.0;
    a->decimals = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
}

/* Whole decades; within two decades also 2x and 5x ticks, over eight only every k-th decade. */
static void axis_log(axis *a, double lo, double hi) {
    double d0 = floor(log10(lo) + 1e-9), d1 = ceil(log10(hi) - 1e-9);
    if (d1 <= d0) d1 = d0 + 1;
    int every = d1 - d0 > 8 ? (int)ceil((d1 - d0) / 8) : 1;
    d0 = floor(d0 / every) * every, d1 = ceil(d1 / every) * every; /* ticks at both ends */
    a->log = true, a->pow2 = false;
    a->lo = d0;
    a->hi = d1;
    a->nticks = 0;
    for (double d = d0; d <= d1 && a->nticks < MAX_TICKS; d += every) {
        a->ticks[a->nticks++] = pow(10.0, d);
        if (d1 - d0 <= 2 && d < d1) {
            a->ticks[a->nticks++] = 2 * pow(10.0, d);
            a->ticks[a->nticks++] = 5 * pow(10.0, d);
        }
    }
}

/* Powers of two for a quantity that moves by factors of two: every k-th binade, at most about eight. */
static void axis_log2(axis *a, double lo, double hi) {
    double e0 = floor(log2(lo) + 1e-9), e1 = ceil(log2(hi) - 1e-9);
    if (e1 <= e0) e1 = e0 + 1;
    int every = e1 - e0 > 8 ? (int)ceil((e1 - e0) / 8) : 1;
    e0 = floor(e0 / every) * every, e1 = ceil(e1 / every) * every;
    a->log = a->pow2 = true;
    a->lo = e0 * log10(2.0);
    a->hi = e1 * log10(2.0);
    a->nticks = 0;
    for (double e = e0; e <= e1 && a->nticks < MAX_TICKS; e += every) a->ticks[a->nticks++] = ldexp(1.0, (int)e);
}

/* Data with one value (a loss scale that never moved) falls between the ticks: give it its own, and drop
 * the ticks so close to it that their labels would overlap. */
static void axis_log_mark(axis *a, double v) {
    int k = 0;
    for (int i = 0; i < a->nticks; i++)
        if (fabs(log10(a->ticks[i]) - log10(v)) >= 0.1 * (a->hi - a->lo)) a->ticks[k++] = a->ticks[i];
    a->nticks = k;
    if (a->nticks < MAX_TICKS) a->ticks[a->nticks++] = v;
}

static void tick_label(const axis *a, double v, char *buf, size_t size) {
    int e;
    if (a->pow2 && frexp(v, &e) == 0.5 && (e - 1 > 16 || e - 1 < -4)) {
        snprintf(buf, size, "2^%d", e - 1);
        return;
    }
    if (a->log || fabs(v) >= 1e7 || a->decimals > 6) snprintf(buf, size, "%g", v);
    else snprintf(buf, size, "%.*f", a->decimals, v);
}

/* Position of value v in [0, 1] along the axis. */
static double axis_frac(const axis *a, double v) {
    double t = a->log ? log10(v) : v;
    return (t - a->lo) / (a->hi - a->lo);
}

/* ---- data ---- */

static double sx(const svg_series *s, int64_t i) { return s->x ? s->x[i] : (double)i; }

static bool drawable(const svg_chart *c, double x, double y) {
    return isfinite(x) && isfinite(y) && (!c->log_y || y > 0);
}

/* The bounds of all drawable points and markers; false when there are none. */
static bool data_bounds(const svg_chart *c, double b[4]) {
    bool any = false;
    for (int k = 0; k < c->nseries; k++) {
        const svg_series *s = &c->series[k];
        for (int64_t i = 0; i < s->n + s->nmarkers; i++) {
            double x = i < s->n ? sx(s, i) : s->marker_x[i - s->n];
            double y = i < s->n ? s->y[i] : s->marker_y[i - s->n];
            if (!drawable(c, x, y)) continue;
            if (!any) b[0] = b[1] = x, b[2] = b[3] = y;
            b[0] = fmin(b[0], x), b[1] = fmax(b[1], x), b[2] = fmin(b[2], y), b[3] = fmax(b[3], y);
            any = true;
        }
    }
    return any;
}

/* ---- layout ---- */

typedef struct plot {
    double left, right, top, bottom;
    axis x, y;
    bool has_data, has_markers;
} plot;

static double px(const plot *p, double x) { return p->left + axis_frac(&p->x, x) * (p->right - p->left); }
static double py(const plot *p, double y) { return p->bottom - axis_frac(&p->y, y) * (p->bottom - p->top); }

static double legend_width(const svg_chart *c, bool markers) {
    double w = c->legend_title ? text_w(c->legend_title) - 32 : 0; /* the title has no line sample */
    for (int k = 0; k < c->nseries; k++)
        if (c->series[k].label) w = fmax(w, text_w(c->series[k].label));
    if (markers && c->marker_label) w = fmax(w, text_w(c->marker_label));
    return w > 0 ? w + 48 : 0;
}

static void layout(const svg_chart *c, int W, int H, plot *p) {
    double b[4] = {0, 1, 1, 10};
    p->has_data = data_bounds(c, b);
    p->has_markers = false;
    for (int k = 0; k < c->nseries; k++) p->has_markers |= c->series[k].nmarkers > 0;
    p->top = c->subtitle ? 70 : 52;
    p->bottom = H - 52;
    p->right = W - 16 - legend_width(c, p->has_markers);
    p->left = 0; /* the x ticks only need the plot width; the left margin comes after the y ticks */
    if (c->log_y && c->pow2_y) axis_log2(&p->y, b[2], b[3]);
    else if (c->log_y) axis_log(&p->y, b[2], b[3]);
    else axis_linear(&p->y, b[2], b[3], (int)fmax(2, fmin(8, (p->bottom - p->top) / 50)));
    if (c->log_y && p->has_data && b[2] == b[3]) axis_log_mark(&p->y, b[2]);
    double wmax = 0;
    char buf[64];
    for (int i = 0; i < p->y.nticks; i++) {
        tick_label(&p->y, p->y.ticks[i], buf, sizeof buf);
        wmax = fmax(wmax, text_w(buf));
    }
    p->left = 40 + wmax;
    axis_linear(&p->x, b[0], b[1], (int)fmax(2, fmin(8, (p->right - p->left) / 90)));
}

/* ---- drawing ---- */

static void draw_axes(FILE *f, const svg_chart *c, const plot *p) {
    char buf[64];
    fputs("<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n", f);
    for (int i = 0; p->has_data && i < p->y.nticks; i++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p->left, py(p, p->y.ticks[i]), p->right,
                py(p, p->y.ticks[i]));
    for (int i = 0; p->has_data && i < p->x.nticks; i++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px(p, p->x.ticks[i]), p->top,
                px(p, p->x.ticks[i]), p->bottom);
    fputs("</g>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888888\"/>\n",
            p->left, p->top, p->right - p->left, p->bottom - p->top);
    for (int i = 0; p->has_data && i < p->y.nticks; i++) {
        double y = py(p, p->y.ticks[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n", p->left - 5, y,
                p->left, y);
        tick_label(&p->y, p->y.ticks[i], buf, sizeof buf);
        text(f, p->left - 8, y + 4, "end", " fill=\"#333333\"", buf);
    }
    for (int i = 0; p->has_data && i < p->x.nticks; i++) {
        double x = px(p, p->x.ticks[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n", x, p->bottom, x,
                p->bottom + 5);
        tick_label(&p->x, p->x.ticks[i], buf, sizeof buf);
        text(f, x, p->bottom + 19, "middle", " fill=\"#333333\"", buf);
    }
    if (c->xlabel) text(f, (p->left + p->right) / 2, p->bottom + 40, "middle", " font-size=\"13\"", c->xlabel);
    if (c->ylabel) {
        double cy = (p->top + p->bottom) / 2;
        fprintf(f, "<g transform=\"translate(18,%.1f) rotate(-90)\">\n", cy);
        text(f, 0, 0, "middle", " font-size=\"13\"", c->ylabel);
        fputs("</g>\n", f);
    }
}

/* Streams one curve as polylines: a gap ends one, and points sharing a pixel column are reduced to the
 * first, lowest, highest and last of them, in their original order. */
typedef struct pen {
    FILE *f;
    int64_t npts; /* points written in the open polyline */
    bool col_open;
    long col;
    double pt[4][2]; /* first, lowest, highest, last of the open column */
    int64_t order[4];
    int64_t count; /* points seen in the open column */
} pen;

static void pen_emit(pen *p, double x, double y) {
    fprintf(p->f, p->npts ? " %.1f,%.1f" : "<polyline points=\"%.1f,%.1f", x, y);
    p->npts++;
}

static void pen_flush_column(pen *p) {
    if (!p->col_open) return;
    int idx[4] = {0, 1, 2, 3};
    if (p->order[1] > p->order[2]) idx[1] = 2, idx[2] = 1; /* lowest and highest in data order */
    double last[2] = {NAN, NAN};
    for (int k = 0; k < 4; k++) {
        const double *q = p->pt[idx[k]];
        if (q[0] == last[0] && q[1] == last[1]) continue;
        pen_emit(p, q[0], q[1]);
        last[0] = q[0], last[1] = q[1];
    }
    p->col_open = false;
}

static void pen_point(pen *p, double x, double y) {
    long col = (long)floor(x);
    if (p->col_open && col != p->col) pen_flush_column(p);
    if (!p->col_open) {
        p->col_open = true, p->col = col, p->count = 0;
        for (int k = 0; k < 4; k++) p->pt[k][0] = x, p->pt[k][1] = y, p->order[k] = 0;
    }
    if (y > p->pt[1][1]) p->pt[1][0] = x, p->pt[1][1] = y, p->order[1] = p->count; /* lowest on screen */
    if (y < p->pt[2][1]) p->pt[2][0] = x, p->pt[2][1] = y, p->order[2] = p->count;
    p->pt[3][0] = x, p->pt[3][1] = y, p->order[3] = p->count++;
}

static void pen_break(pen *p) {
    pen_flush_column(p);
    if (p->npts == 1) fprintf(p->f, " %.1f,%.1f", p->pt[3][0], p->pt[3][1]); /* a lone point: a dot */
    if (p->npts) fputs("\"/>\n", p->f);
    p->npts = 0;
}

static void stroke_attrs(FILE *f, const svg_series *s, int k) {
    fprintf(f, " stroke=\"%s\" stroke-width=\"%.1f\"", s->color ? s->color : svg_color(k), s->width > 0 ? s->width : 2);
    if (s->opacity > 0 && s->opacity < 1) fprintf(f, " stroke-opacity=\"%.2f\"", s->opacity);
    if (s->dash) fprintf(f, " stroke-dasharray=\"%s\"", s->dash);
}

static void draw_series(FILE *f, const svg_chart *c, const plot *p, int k) {
    const svg_series *s = &c->series[k];
    fputs("<g class=\"series\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\"", f);
    stroke_attrs(f, s, k);
    fputs(" clip-path=\"url(#plot-area)\">\n", f);
    pen pn = {.f = f};
    bool prev = false;
    double prev_y = 0;
    for (int64_t i = 0; i < s->n; i++) {
        double x = sx(s, i), y = s->y[i];
        if (!drawable(c, x, y)) {
            pen_break(&pn);
            prev = false;
            continue;
        }
        if (s->steps && prev) pen_point(&pn, px(p, x), py(p, prev_y));
        pen_point(&pn, px(p, x), py(p, y));
        prev = true, prev_y = y;
    }
    pen_break(&pn);
    fputs("</g>\n", f);
}

static void marker(FILE *f, double x, double y, const char *cls) {
    fprintf(f,
            "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#ffffff\" stroke=\"" MARKER_COLOR
            "\" stroke-width=\"2\"/>\n",
            cls, x, y);
}

static void draw_markers(FILE *f, const svg_chart *c, const plot *p) {
    for (int k = 0; k < c->nseries; k++) {
        const svg_series *s = &c->series[k];
        for (int64_t i = 0; i < s->nmarkers; i++)
            if (drawable(c, s->marker_x[i], s->marker_y[i]))
                marker(f, px(p, s->marker_x[i]), py(p, s->marker_y[i]), "marker");
    }
}

static void draw_legend(FILE *f, const svg_chart *c, const plot *p) {
    double x = p->right + 16, y = p->top + 12;
    if (c->legend_title) {
        text(f, x, y + 4, "start", " fill=\"#555555\"", c->legend_title);
        y += 20;
    }
    for (int k = 0; k < c->nseries; k++) {
        const svg_series *s = &c->series[k];
        if (!s->label) continue;
        fputs("<line class=\"legend\"", f);
        stroke_attrs(f, s, k);
        fprintf(f, " x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, y, x + 24, y);
        text(f, x + 32, y + 4, "start", "", s->label);
        y += 20;
    }
    if (p->has_markers && c->marker_label) {
        marker(f, x + 12, y, "legend-marker");
        text(f, x + 32, y + 4, "start", "", c->marker_label);
    }
}

int svg_write(FILE *f, const svg_chart *c) {
    int W = c->width > 0 ? c->width : 900, H = c->height > 0 ? c->height : 480;
    plot p;
    layout(c, W, H, &p);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f,
            "<defs><clipPath id=\"plot-area\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
            "</clipPath></defs>\n",
            p.left, p.top, p.right - p.left, p.bottom - p.top);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    if (c->title) text(f, p.left, 26, "start", " font-size=\"17\" font-weight=\"bold\"", c->title);
    if (c->subtitle) text(f, p.left, 46, "start", " fill=\"#555555\"", c->subtitle);
    draw_axes(f, c, &p);
    for (int k = 0; p.has_data && k < c->nseries; k++) draw_series(f, c, &p, k);
    if (p.has_data) draw_markers(f, c, &p);
    else if (c->empty_note)
        text(f, (p.left + p.right) / 2, (p.top + p.bottom) / 2, "middle", " font-size=\"14\" fill=\"#555555\"",
             c->empty_note);
    draw_legend(f, c, &p);
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

int svg_write_file(const char *path, const svg_chart *c, char *err, size_t errsize) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errsize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = svg_write(f, c);
    if (fclose(f) != 0) rc = -1;
    if (rc != 0) snprintf(err, errsize, "cannot write %s: write error", path);
    return rc;
}
