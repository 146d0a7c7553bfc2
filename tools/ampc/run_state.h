/* run_state.h: what the files of the run engine share (run.c: setup, the step loop, evaluation, progress;
 * run_resume.c: the checkpoints of a run and --resume): the state a run owns and the few helpers both
 * call. Private to run.c and run_resume.c; the commands see run.h. */
#ifndef AMPC_CLI_RUN_STATE_H
#define AMPC_CLI_RUN_STATE_H

#include "run.h"

/* Everything a run owns. */
typedef struct run_state {
    const char *prog;
    const run_config *cfg;
    ampc_ctx *ctx;
    ampc_model *model;
    ampc_optim *opt;
    ampc_grad_scaler *scaler;
    ampc_loader *train, *eval;
    ampc_dataset_info info;
    bool lm;
    int64_t steps, per_step; /* optimizer steps; samples (or tokens) per step, every micro-batch counted */
    uint64_t fp8_saturated;  /* FP8 saturations of the step's micro-batches before its last */
    int64_t start;           /* the first step of this process (> 0 after --resume) */
    run_schedule sched;      /* the learning rate's, resolved */
    int64_t saved_step;      /* the step of the newest checkpoint this process wrote (-1: none) */
    bool save_failed;        /* that checkpoint is not at --checkpoint (see out->saved_to) */
    int line_len;            /* columns of the live progress line on a terminal (0: none open) */
    ampc_dist *dist;         /* data parallel: NULL for one process */
    int rank, world;         /* 0 and 1 for one process */
    int64_t rows, first_row; /* this rank's rows of each global batch */
    bool hinted;             /* the doctor hint was printed (after a skip that is not routine) */
    int64_t last_skip;       /* the last skipped step (-1: none yet) */
    bool kill_checked;       /* run_check_kill_budget has looked at the first periodic save */
    int64_t random_batches;  /* cfg->random_vocab: batches drawn so far (the next one's index) */
} run_state;

/* run.c */
/* `prog: what: <the library's last error>` on stderr; returns 1. */
int run_fail(const char *prog, const char *what);
/* A schedule's length in steps: given, or its run's (in epochs of this data). */
run_schedule run_resolve_schedule(const run_state *s, run_schedule sc, int64_t run_steps);
/* The learning rate of step `step` (0-based) under sc. */
double run_lr_at(const run_schedule *sc, int64_t step);
/* Blanks a live progress line, so that whatever is printed next starts a clean line. */
void run_status_clear(run_state *s);

/* run_tokens.c */
/* Global batch number `index` of uniform random token ids in [0, vocab): this rank's rows
 * [first_row, first_row + rows) as x (rows, T) and y (rows, T), y being x shifted left by one, arena tensors
 * of ctx (NULL after a failure, with the library's error). A function of (seed, index) alone, whatever the
 * ranks and threads. */
void run_random_tokens(ampc_ctx *ctx, uint64_t seed, int64_t index, int64_t first_row, int64_t rows, int64_t T,
                       int64_t vocab, ampc_tensor **x, ampc_tensor **y);

/* run_resume.c */
/* --resume (cfg->resume): restores the checkpoint into the run and sets s->start; 0, or 1 after a message.
 * A run already complete (s->start >= s->steps) returns 0: run_training says so. */
int run_resume(run_state *s);
/* Saves the checkpoint after `step` steps at --checkpoint, or a rescue file (out->saved_to says where). */
void run_save(run_state *s, int64_t step, run_output *out);
/* Rank 0: the line the signal handler prints first (safety_set_stop_line), naming step + 1 (in progress),
 * the checkpoint it will save and what a kill before the save ends would keep. Set before each step. */
void run_set_stop_line(const run_state *s, int64_t step);
/* Under mpirun, after the first periodic save (rank 0's time for it, and for the step before it): one
 * warning line when a Ctrl-C could not be saved before Open MPI's kill, with the mpirun flag that fixes it
 * and what a Ctrl-C would lose. */
void run_check_kill_budget(run_state *s, double save_s, double step_s);

#endif
