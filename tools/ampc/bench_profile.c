/* bench_profile.c: the per-operation tables of `ampc bench step --profile`: the time a training step
 * spends in each device operation and phase (ampc_ctx_profile_read over the timed steps), per thread
 * count, with what each loses against perfect scaling, so the part of a step that does not scale is
 * named. Host time is the mean step less the time inside device calls: the tape, autocast, the arena,
 * the data loader and anything else the host does between calls. */
#include "bench_profile.h"

#include <stdlib.h>
#include <string.h>

#define NAME_W 44 /* the first column */

typedef struct row {
    const char *kind, *op, *phase;
    double ms[BENCH_MAX_THREADS]; /* per step, per run */
    double calls, regions;        /* per step, in the last run */
    double lost;                  /* ms beyond perfect scaling from the first run to the last */
} row;

/* The row of e's (kind, op, phase) in rows[0..*n), added when missing. */
static row *find_row(row *rows, int *n, const ampc_profile_entry *e) {
    for (int i = 0; i < *n; i++)
        if (strcmp(rows[i].kind, e->kind) == 0 && strcmp(rows[i].op, e->op) == 0 &&
            strcmp(rows[i].phase, e->phase) == 0)
            return &rows[i];
    rows[*n] = (row){.kind = e->kind, .op = e->op, .phase = e->phase};
    return &rows[(*n)++];
}

static double device_ms(const step_profile *p) {
    double s = 0;
    for (int i = 0; i < p->n; i++) s += p->e[i].seconds;
    return 1e3 * s / (double)p->steps;
}

/* What perfect scaling from run 0 to run r would leave of x ms. */
static double ideal(const step_profile *runs, int r, double x0) {
    return x0 * (double)runs[0].threads / (double)runs[r].threads;
}

static int by_lost(const void *a, const void *b) {
    double x = ((const row *)a)->lost, y = ((const row *)b)->lost;
    return (x < y) - (x > y);
}

static void print_row(const char *name, const double *ms, int nruns, const step_profile *runs, const row *r) {
    printf("%-*s", NAME_W, name);
    if (r) printf(" %7.1f %7.1f", r->calls, r->regions);
    else printf(" %7s %7s", "", "");
    for (int k = 0; k < nruns; k++) printf(" %9.2f", ms[k]);
    if (nruns > 1) {
        double last = ms[nruns - 1], gain = last > 0 ? ms[0] / last : 0;
        printf(" %8.2fx %8.2f", gain, last - ideal(runs, nruns - 1, ms[0]));
    }
    printf("\n");
}

int bench_profile_print(const char *label, const step_profile *runs, int nruns) {
    int cap = 0;
    for (int k = 0; k < nruns; k++) cap += runs[k].n;
    row *rows = calloc((size_t)(cap ? cap : 1), sizeof *rows);
    if (!rows) return 1;
    int n = 0;
    for (int k = 0; k < nruns; k++)
        for (int i = 0; i < runs[k].n; i++) {
            const ampc_profile_entry *e = &runs[k].e[i];
            row *r = find_row(rows, &n, e);
            r->ms[k] = 1e3 * e->seconds / (double)runs[k].steps;
            if (k == nruns - 1)
                r->calls = (double)e->calls / (double)runs[k].steps,
                r->regions = (double)e->regions / (double)runs[k].steps;
        }
    for (int i = 0; i < n; i++)
        rows[i].lost = nruns > 1 ? rows[i].ms[nruns - 1] - ideal(runs, nruns - 1, rows[i].ms[0]) : rows[i].ms[0];
    qsort(rows, (size_t)n, sizeof *rows, by_lost);

    const step_profile *last = &runs[nruns - 1];
    printf("\n%s: ms per step in each device operation, by the op it works for and the phase (mean of %lld timed "
           "steps);\ncalls and parallel regions per step at %d thread%s\n",
           label, (long long)last->steps, last->threads, last->threads == 1 ? "" : "s");
    printf("%-*s %7s %7s", NAME_W, "op kind, phase: device operation", "calls", "regions");
    for (int k = 0; k < nruns; k++) printf(" %6d thr", runs[k].threads);
    if (nruns > 1) printf(" %9s %8s", "speed-up", "lost ms");
    printf("\n");
    for (int i = 0; i < n; i++) {
        char name[128];
        if (strcmp(rows[i].kind, rows[i].phase) == 0) snprintf(name, sizeof name, "%s: %s", rows[i].kind, rows[i].op);
        else snprintf(name, sizeof name, "%s %s: %s", rows[i].kind, rows[i].phase, rows[i].op);
        print_row(name, rows[i].ms, nruns, runs, &rows[i]);
    }
    double host[BENCH_MAX_THREADS] = {0}, total[BENCH_MAX_THREADS] = {0};
    for (int k = 0; k < nruns; k++) total[k] = 1e3 * runs[k].mean_s, host[k] = total[k] - device_ms(&runs[k]);
    print_row("host, between device calls", host, nruns, runs, NULL);
    print_row("step (mean)", total, nruns, runs, NULL);
    if (nruns > 1)
        printf("speed-up: %d -> %d threads; lost ms: the time at %d threads beyond perfect scaling from %d (rows "
               "sorted by it)\n",
               runs[0].threads, last->threads, last->threads, runs[0].threads);
    free(rows);
    return 0;
}

void bench_profile_json(json_writer *w, const step_profile *p) {
    json_key(w, "profile");
    json_arr_begin(w);
    for (int i = 0; i < p->n; i++) {
        const ampc_profile_entry *e = &p->e[i];
        json_obj_begin(w);
        json_kstr(w, "kind", e->kind);
        json_kstr(w, "op", e->op);
        json_kstr(w, "phase", e->phase);
        json_knum(w, "calls_per_step", (double)e->calls / (double)p->steps);
        json_knum(w, "regions_per_step", (double)e->regions / (double)p->steps);
        json_knum(w, "ms_per_step", 1e3 * e->seconds / (double)p->steps);
        json_obj_end(w);
    }
    json_arr_end(w);
    json_knum(w, "mean_ms_per_step", 1e3 * p->mean_s);
    json_knum(w, "host_ms_per_step", 1e3 * p->mean_s - device_ms(p));
}
