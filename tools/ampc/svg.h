/* svg.h: a small writer of line charts as standalone SVG 1.1 files, for the charts of `ampc compare`
 * (loss per step, loss scale per step). A chart has a title, an optional subtitle, axis labels, "nice"
 * 1-2-5 ticks with grid lines, a linear or log10 y axis, any number of series (colour, width, opacity,
 * dash patterns, optional staircase drawing, optional markers at given points) and a legend to the right of the
 * plot, where it never covers data. A log axis over data that never changes gets a tick at its value,
 * so a flat curve can be read. Non-finite points (and points <= 0 on a log axis) leave a gap in
 * their curve. The output depends on nothing but the input: fixed number formats, no dates, no locale. */
#ifndef AMPC_CLI_SVG_H
#define AMPC_CLI_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct svg_series {
    const char *label; /* legend text; NULL = not in the legend */
    const double *x;   /* NULL = 0, 1, ..., n-1 */
    const double *y;
    int64_t n;
    const char *color; /* "#rrggbb"; NULL = svg_color(index of the series) */
    double width;      /* stroke width in px; 0 = 2 */
    double opacity;    /* stroke opacity; 0 = 1 */
    const char *dash;  /* stroke-dasharray, e.g. "8,4"; NULL = solid */
    bool steps;        /* draw as a staircase: y holds until the next x (a loss scale) */
    /* markers (small circles drawn over the curve), e.g. the skipped steps */
    const double *marker_x;
    const double *marker_y;
    int64_t nmarkers;
} svg_series;

typedef struct svg_chart {
    const char *title;
    const char *subtitle; /* one smaller line under the title, or NULL */
    const char *xlabel;
    const char *ylabel;
    int width, height; /* whole picture in px; 0 = 900 x 480 */
    bool log_y;        /* log10 y axis */
    bool pow2_y;       /* with log_y: ticks at powers of two (a loss scale moves by factors of 2) */
    const svg_series *series;
    int nseries;
    const char *legend_title; /* a line above the legend entries (e.g. the smoothing weight), or NULL */
    const char *marker_label; /* legend text for the markers (shown when any series has one), or NULL */
    const char *empty_note;   /* written across the plot when no series has a drawable point */
} svg_chart;

/* The i-th colour of a palette of distinct colours that avoids red (red is the markers' colour). */
const char *svg_color(int i);
/* Writes the chart to f. Returns 0, or -1 when f reports a write error. */
int svg_write(FILE *f, const svg_chart *c);
/* Writes the chart to path. Returns 0, or -1 with a message in err naming path. */
int svg_write_file(const char *path, const svg_chart *c, char *err, size_t errsize);

#endif
