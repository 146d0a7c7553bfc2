/* doctor_report.h: what `ampc doctor --report DIR` writes: report.md (the verdict table per site and
 * format, the recommended command lines, how to read the picture) and heatmap.svg (rows: the sites,
 * columns: binades of |x|, shaded by the fraction of the site's values there, with the FP16, BF16 and FP8
 * representable windows drawn over it). Everything printed is computed from the statistics. */
#ifndef AMPC_CLI_DOCTOR_REPORT_H
#define AMPC_CLI_DOCTOR_REPORT_H

#include "ampc.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct doctor_meta {
    const char *model;        /* "gpt (6 layers, d 384, 6 heads, context 256)" */
    const char *data;         /* "builtin: arithmetic (300000 bytes)" */
    const char *command;      /* the doctor's own command line */
    int64_t steps;            /* FP32 steps run with statistics on */
    double step_seconds;      /* mean wall time of a step, statistics included */
    double stats_seconds;     /* of which summarising (ampc_stats_seconds / steps) */
    const char *recommended;  /* the recommended `ampc train ...` command line (FP16) */
    const char *bf16_command; /* the BF16 alternative's command line */
    const char *fp8_command;  /* the FP8 alternative's (--precision fp8), or NULL */
} doctor_meta;

/* Writes dir/report.md and dir/heatmap.svg (dir must exist). Returns 0, or -1 with a message in err
 * naming the file that could not be written. */
int doctor_write_report(const char *dir, const doctor_meta *meta, const ampc_stats *st, char *err, size_t errsize);
/* The heat map alone, to a stream (0, or -1 on a write error). */
int doctor_write_heatmap(FILE *f, const ampc_stats *st);

/* What the statistics add to a step without them, stats / (step - stats): the one figure the terminal, the
 * JSON and the report give. */
static inline double doctor_stats_overhead(const doctor_meta *m) {
    return m->step_seconds > m->stats_seconds ? m->stats_seconds / (m->step_seconds - m->stats_seconds) : 0;
}

#endif
