/* bench_profile.h: `ampc bench step`'s thread-count lists and the per-operation profile tables
 * (bench_profile.c). */
#ifndef AMPC_CLI_BENCH_PROFILE_H
#define AMPC_CLI_BENCH_PROFILE_H

#include "json.h"

#include "ampc.h"

#define BENCH_MAX_THREADS 16 /* thread counts in one --threads list */

/* The profile of one run: its thread count, timed steps, mean step time and the entries over them. */
typedef struct step_profile {
    int threads;
    int64_t steps;
    double mean_s;
    const ampc_profile_entry *e;
    int n;
} step_profile;

/* The table of one precision over runs[0..nruns) (thread counts in list order): 0, or 1 out of memory. */
int bench_profile_print(const char *label, const step_profile *runs, int nruns);
/* "profile": [...], "mean_ms_per_step", "host_ms_per_step" into an open JSON object. */
void bench_profile_json(json_writer *w, const step_profile *p);

#endif
