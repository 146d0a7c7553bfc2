/* report.h: what `ampc compare` hands to the report writer: one summary and one per-step series per
 * precision, and the writers: report.md + loss.svg + scale.svg into a directory, and the same table as
 * aligned text on a stream. Every number printed is computed from these inputs; nothing is typed in. */
#ifndef AMPC_CLI_REPORT_H
#define AMPC_CLI_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct run_result {
    const char *label; /* "fp32", "bf16", "fp16" */
    /* per optimizer step (n entries) */
    int64_t n;
    const double *loss;  /* unscaled training loss */
    const double *scale; /* loss scale used for the step's backward (1 when the scaler is off) */
    const bool *skipped; /* the step was skipped (non-finite gradient) */
    /* summary */
    double final_train_loss; /* mean of the last min(n, 20) training losses */
    double eval_loss;        /* NaN when not evaluated */
    double eval_accuracy;    /* fraction in [0, 1]; NaN for language models */
    double max_abs_dloss;    /* max over steps of |loss - loss_fp32| (NaN for the FP32 run or without one) */
    double final_abs_dloss;  /* |final_train_loss - fp32's final_train_loss| */
    int64_t skipped_steps;
    double final_scale;
    size_t peak_bytes;           /* peak memory of the run */
    size_t state_bytes;          /* held before the first step: parameters, gradients, optimizer state and
                                    masters (what every step keeps); peak_bytes - state_bytes is the peak
                                    of a step's activations and scratch */
    double throughput;           /* samples/s or tokens/s over the whole run */
    const char *throughput_unit; /* "samples/s" or "tokens/s" */
    double seconds;              /* wall time of the training loop */
    double eval_seconds;         /* and of the final evaluation (the time column shows both) */
    double others_load;          /* share of the machine's CPU time other processes used meanwhile (-1: unknown) */
    double speedup;              /* FP32's seconds / this run's seconds (NaN without an FP32 run) */
    const char *log_file;        /* the run's JSONL, relative to the report folder (linked from report.md),
                                     or NULL */
} run_result;

typedef struct report_meta {
    const char *model;   /* "gpt (2 layers, d 128, 4 heads, context 64)" */
    const char *data;    /* "builtin: arithmetic (300000 bytes)" */
    const char *command; /* the command line that produced it */
    int64_t steps;
    int threads;
    uint64_t seed;
} report_meta;

/* The comparison table (one row per run) as aligned text. timing = false omits the timing columns
 * (throughput, seconds, speed-up) so two runs with the same flags print identical text. */
void report_print_table(FILE *f, const report_meta *meta, const run_result *runs, int nruns, bool timing);
/* The same, fitted to columns (0: no limit, as report_print_table): a table wider than that gets short
 * headers with a key under it, and is split into blocks of columns (each led by the precision) where it
 * still does not fit; the prose lines are wrapped. Values are the same in every form. */
void report_print_table_fit(FILE *f, const report_meta *meta, const run_result *runs, int nruns, bool timing,
                            int columns);
/* Writes dir/report.md, dir/loss.svg and dir/scale.svg (dir must exist). Returns 0, or -1 with a message in
 * err naming the file that could not be written. */
int report_write_dir(const char *dir, const report_meta *meta, const run_result *runs, int nruns, char *err,
                     size_t errsize);

#endif
