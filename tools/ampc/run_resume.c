/* run_resume.c: the checkpoints of a training run (run.c runs it). What a checkpoint holds of the run;
 * --resume, checked before anything is loaded, which continues the run where the checkpoint left it (on
 * data of another length with --allow-data-change, at the recorded epoch and position) and says when the
 * new options change the learning rate from what the checkpoint's own would give; and the save after a
 * step, which never ends the run: a checkpoint that cannot be written at --checkpoint goes to a rescue
 * file (ckpt_save_or_rescue) and training goes on. And what a stop promises: the line the signal handler
 * prints first (which step, which file, what a kill would keep), and under mpirun the warning, after the
 * first periodic save, when a save would not fit in Open MPI's kill timeout. */
#include "run_state.h"

#include "ckpt.h"
#include "safety.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a checkpoint holds of this run. */
static ampc_checkpoint_state ck_state(run_state *s, int64_t step) {
    return (ampc_checkpoint_state){.model = s->model,
                                   .optim = s->opt,
                                   .scaler = s->scaler,
                                   .rng = ampc_ctx_rng(s->ctx),
                                   .loader = s->train,
                                   .step = step,
                                   .extra = s->cfg->ck_meta,
                                   .n_extra = s->cfg->n_ck_meta};
}

/* A resumed run whose learning rate differs from the one its checkpoint's own options give (a new --steps
 * stretches the cosine, a new --lr or --warmup moves it) says so, and how to keep the recorded one. */
static void note_schedule_change(const run_state *s) {
    const run_config *cfg = s->cfg;
    if (!cfg->has_recorded_schedule) return;
    run_schedule was = run_resolve_schedule(s, cfg->recorded_schedule, s->steps);
    double old_lr = run_lr_at(&was, s->start), new_lr = run_lr_at(&s->sched, s->start);
    if (old_lr == new_lr) return;
    fprintf(stderr,
            "%s: note: the learning-rate schedule changes here: lr %.3g at step %lld, where the schedule "
            "recorded in the checkpoint (over %lld steps) gives %.3g",
            s->prog, new_lr, (long long)s->start, (long long)was.steps, old_lr);
    char warmup[48] = "";
    if (was.warmup != run_default_warmup(cfg->model.kind, was.steps))
        snprintf(warmup, sizeof warmup, " --warmup %lld", (long long)was.warmup);
    if (was.steps != s->sched.steps) {
        fprintf(stderr, "; --schedule-steps %lld%s keeps it", (long long)was.steps, warmup);
        if (was.steps >= was.warmup)
            fprintf(stderr, " (and holds the lr at %.3g after step %lld)", run_lr_at(&was, was.steps),
                    (long long)was.steps);
    }
    fputc('\n', stderr);
}

/* A checkpoint's integer metadata (0 when absent). */
static int64_t meta_int(const ampc_safetensors *ck, const char *key) {
    const char *v = ampc_safetensors_metadata(ck, key);
    return v ? strtoll(v, NULL, 10) : 0;
}

/* --allow-data-change on data of another length: the library refuses a cursor made for another number of
 * samples, so the loader is left out of the restore and continues at the recorded epoch and position
 * (cut to the new length), which is as close to the recorded run as other data can get. */
static bool other_length(const run_state *s) {
    const ampc_safetensors *ck = s->cfg->resume;
    return s->cfg->allow_data_change && s->train && ampc_safetensors_metadata(ck, "ampc.data.samples") &&
           meta_int(ck, "ampc.data.samples") != ampc_loader_num_samples(s->train);
}

static int take_cursor(run_state *s) {
    const ampc_safetensors *ck = s->cfg->resume;
    int64_t n = ampc_loader_num_samples(s->train), pos = meta_int(ck, "ampc.data.position");
    ampc_loader_cursor c = {meta_int(ck, "ampc.data.epoch"), pos < n ? pos : n};
    if (c.epoch < 0) c.epoch = 0;
    if (c.position < 0) c.position = 0;
    if (ampc_loader_set_cursor(s->train, &c) != AMPC_OK) return run_fail(s->prog, "--resume");
    fprintf(stderr,
            "%s: note: the data has %lld samples per epoch, the checkpoint's had %lld; it goes on at epoch "
            "%lld, sample %lld\n",
            s->prog, (long long)n, (long long)meta_int(ck, "ampc.data.samples"), (long long)c.epoch,
            (long long)c.position);
    return 0;
}

/* The GPT's vocabulary against the checkpoint's, before the library's model check: a mismatch comes from
 * --vocab or from token data whose largest id moved, so the message says which and what would resume. */
static int check_vocab(const run_state *s) {
    const ampc_safetensors *ck = s->cfg->resume;
    const char *kind = ampc_safetensors_metadata(ck, "ampc.model.kind");
    int have = ampc_model_get_config(s->model).vocab;
    int64_t was = meta_int(ck, "ampc.model.vocab");
    if (!s->lm || !kind || strcmp(kind, "gpt") || !was || was == have) return 0;
    const char *why = s->cfg->model.vocab ? "--vocab"
                      : s->info.kind == AMPC_DATA_TOKENS
                          ? "the default for this token data: largest id + 1, rounded up to a multiple of 64"
                          : "the default for bytes";
    fprintf(stderr, "%s: --resume: %s was trained with a vocabulary of %lld ids, this run has %d (%s); ", s->prog,
            ampc_safetensors_name(ck), (long long)was, have, why);
    if (was > s->info.max_id) fprintf(stderr, "pass --vocab %lld to resume it\n", (long long)was);
    else fprintf(stderr, "the data has ids up to %lld, which it cannot hold\n", (long long)s->info.max_id);
    return 1;
}

/* --resume: everything is checked before anything is loaded, so a refused file leaves the fresh run. */
int run_resume(run_state *s) {
    if (!s->cfg->resume) return 0;
    if (check_vocab(s)) return 1;
    ampc_checkpoint_state st = ck_state(s, 0);
    bool own_cursor = other_length(s);
    if (own_cursor) st.loader = NULL;
    if (ampc_checkpoint_restore(s->cfg->resume, &st) != AMPC_OK) return run_fail(s->prog, "--resume");
    if (own_cursor && take_cursor(s)) return 1;
    s->start = st.step;
    if (s->start >= s->steps) return 0; /* complete: run_training says so */
    if (!s->cfg->quiet)
        fprintf(stderr, "%s: resumed from %s after %lld of %lld steps%s\n", s->cfg->label,
                ampc_safetensors_name(s->cfg->resume), (long long)s->start, (long long)s->steps,
                s->cfg->resume_note ? s->cfg->resume_note : "");
    note_schedule_change(s);
    return 0;
}

/* A checkpoint that cannot be written at --checkpoint does not end the run: the state is still in memory,
 * so it goes to a rescue file (named), training goes on, and the next save tries --checkpoint again. */
void run_save(run_state *s, int64_t step, run_output *out) {
    ampc_checkpoint_state st = ck_state(s, step);
    char rescue[sizeof out->saved_to];
    run_status_clear(s); /* a failure is reported on a line of its own */
    int r = ckpt_save_or_rescue(s->prog, s->cfg->checkpoint, s->cfg->keep, &st, rescue, sizeof rescue);
    s->saved_step = step;
    s->save_failed = r != 0;
    out->saved_elsewhere = r != 0;
    snprintf(out->saved_to, sizeof out->saved_to, "%s", r == 0 ? s->cfg->checkpoint : rescue);
    if (s->rank) return; /* rank 0 says it */
    if (r == 1)
        fprintf(stderr,
                "%s: the checkpoint after %lld steps is saved to %s instead; training goes on (resume from "
                "it with --resume %s --checkpoint %s)\n",
                s->prog, (long long)step, rescue, rescue, s->cfg->checkpoint);
    else if (r == 2)
        fprintf(stderr, "%s: the checkpoint after %lld steps could not be saved anywhere; training goes on\n", s->prog,
                (long long)step);
}

/* The line the signal handler prints first (rank 0), naming the step in progress and what a kill before
 * the save ends would keep: set before each step. */
void run_set_stop_line(const run_state *s, int64_t step) {
    if (s->rank) return;
    char line[1024], kept[300];
    const run_config *cfg = s->cfg;
    int64_t last = s->saved_step >= 0 ? s->saved_step : s->cfg->resume ? s->start : -1;
    if (s->save_failed) snprintf(kept, sizeof kept, "only its last checkpoint that could be written");
    else if (last >= 0) snprintf(kept, sizeof kept, "the checkpoint of step %lld", (long long)last);
    else snprintf(kept, sizeof kept, "no checkpoint");
    if (cfg->checkpoint)
        snprintf(line, sizeof line,
                 "%s: stopping after step %lld (in progress), then saving %.500s; if killed before that, the "
                 "run keeps %s",
                 s->prog, (long long)step + 1, cfg->checkpoint, kept);
    else
        snprintf(line, sizeof line, "%s: stopping after step %lld (in progress); no --checkpoint, nothing is saved",
                 s->prog, (long long)step + 1);
    safety_set_stop_line(line);
}

/* Open MPI turns a Ctrl-C into SIGCONT for the ranks, SIGTERM odls_base_sigkill_timeout seconds later and
 * SIGKILL as long again (default 1 s; mpirun passes --mca values to the ranks as OMPI_MCA_ variables): the
 * step in progress and the final save must fit between the last two. Other launchers: -1, unknown. */
static double kill_timeout(void) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) return -1;
    const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
    char *end;
    double t = v && *v ? strtod(v, &end) : 1;
    return v && *v && (*end || t < 0) ? 1 : t; /* 0: SIGKILL right after SIGTERM */
}

void run_check_kill_budget(run_state *s, double save_s, double step_s) {
    if (s->kill_checked || s->world < 2) return;
    s->kill_checked = true;
    double limit = kill_timeout(), need = save_s + step_s;
    if (s->rank || limit < 0 || need <= 0.8 * limit) return; /* a fifth for the stop agreement and noise */
    run_status_clear(s);
    const run_config *cfg = s->cfg;
    fprintf(stderr,
            "%s: warning: a checkpoint takes %.1f s to save and a step %.1f s, but Open MPI kills the ranks %g s "
            "after a Ctrl-C (odls_base_sigkill_timeout): a Ctrl-C would lose the steps since the last periodic "
            "checkpoint (up to %lld); to have it saved, pass mpirun --mca odls_base_sigkill_timeout %.0f\n",
            s->prog, save_s, step_s, limit, (long long)cfg->checkpoint_every, ceil(2 * need + 1));
}
