/* doctor_report_util.h: what the two files of the doctor's report share (doctor_report.c: the files and
 * heatmap.svg; doctor_markdown.c: report.md): the formats' windows the picture draws and the text
 * explains, and the statistics read per binade. Private to them; the doctor sees doctor_report.h. */
#ifndef AMPC_CLI_DOCTOR_REPORT_UTIL_H
#define AMPC_CLI_DOCTOR_REPORT_UTIL_H

#include "doctor_report.h"

#include <stdbool.h>

/* A format's window of representable magnitudes, as the ruler draws it. */
typedef struct doctor_window {
    ampc_format fmt;
    const char *color, *color_name;
    double sub, lo, hi; /* log2 of the smallest subnormal, the smallest normal, the largest finite */
    double max;
} doctor_window;
#define DOCTOR_NWIN 4
/* The windows' formats, in ruler order: FP16, BF16, FP8-E4M3, FP8-E5M2. */
extern const ampc_format doctor_win_fmt[DOCTOR_NWIN];
/* Window j (0 .. DOCTOR_NWIN - 1). */
doctor_window doctor_get_window(int j);
/* "FP16", "BF16", ... ("?" for an unknown format). */
const char *doctor_fmt_name(ampc_format fmt);
/* A format's largest finite value, printed: "%.6g" below 1e6, else "%.3g". */
void doctor_fmt_max(char *buf, size_t n, double v);

/* Values of e in the binade [2^k, 2^(k+1)); k = -127 stands for the F32 subnormals below 2^-126. */
uint64_t doctor_in_binade(const ampc_stats_entry *e, int k);
/* The smallest and largest binade holding a non-zero finite value of any site; false when none does. */
bool doctor_data_range(const ampc_stats *st, int *lo, int *hi);

/* report.md (doctor_markdown.c); write errors show in ferror(f). */
void doctor_write_markdown(FILE *f, const doctor_meta *m, const ampc_stats *st);

#endif
