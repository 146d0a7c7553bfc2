/* stats.h: what the range-statistics files share: the statistics object (sites in first-seen order, a
 * hash index over (module, op, role, param), the formats' thresholds on |x|'s bit pattern) and the
 * format list the counts cover. stats.c records; stats_advice.c turns counts into the doctor's verdicts. */
#ifndef AMPC_STATS_H
#define AMPC_STATS_H

#include "amp.h"

/* The formats a site counts, in ampc_format order; three thresholds each (ge[3 * j + k]): the smallest
 * |x| bit pattern that does not round to zero (k = 0), that rounds to a normal (1), that overflows (2). */
#define AMPCI_STATS_NFMT 4
extern const ampc_format ampci_stats_formats[AMPCI_STATS_NFMT]; /* BF16, FP16, FP8-E4M3, FP8-E5M2 */

typedef struct ampci_site {
    ampc_stats_entry e;
    char module[256];
    char op[32];
    char param[64];
    int grad;         /* the GRAD site of an OUTPUT site, plus one (0: not made yet) */
    bool casts;       /* OUTPUT: the op casts its float inputs down under autocast (LOWER) */
    int *cast_inputs; /* OUTPUT: sites whose F32 values this op would cast down */
    int ncast, capcast;
    uint64_t ge[3 * AMPCI_STATS_NFMT];
} ampci_site;

struct ampc_stats {
    ampci_site **site;
    int n, cap;
    int *index; /* open addressing over site ids + 1 (0: empty), size a power of two */
    size_t index_size;
    uint32_t thr[3 * AMPCI_STATS_NFMT];
    double seconds;
    int64_t steps;
    ampc_ctx *ctx; /* attached to, or NULL */
};

/* Index into ampci_stats_formats of fmt, or -1 when a site does not count it (FP32, TF32). */
AMPCI_HIDDEN int ampci_stats_format_index(ampc_format fmt);

#endif
