/* bench_step.c: `ampc bench step`: the wall time of whole training steps (zero_grad, forward, loss,
 * backward, unscale and clipping, optimizer step) through the same run engine as `ampc train`, so the
 * figure is what a user's run gets. Warm-up steps (first-touch memory, thread start) are run and
 * dropped; the figure is the median of the timed steps. No evaluation is run. The matrix products' FLOPs
 * of a step (ampc_ctx_matmul_flops over the timed steps) give its GFLOP/s, shown as a fraction of the
 * peak of the unit the precision's large GEMMs run on, measured on this machine before the runs. */
#include "bench_cli.h"
#include "bench_peak.h"
#include "bench_profile.h"
#include "cli.h"
#include "dist_cli.h"
#include "json.h"
#include "run.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 96

static void usage(FILE *f) {
    fprintf(f,
            "Usage: ampc bench step [train options] [--precisions LIST] [--threads T,...] [--profile] [--untimed W]\n"
            "                       [--json]\n\n"
            "Times training steps of a model in each precision: W untimed warm-up steps, then --steps timed\n"
            "ones (default 5); prints the median ms per step, tokens or samples per second, GFLOP/s and the\n"
            "fraction of this machine's peak, and peak memory, split into the state every step keeps\n"
            "(parameters, gradients, optimizer state, masters) and the step's own activations and scratch.\n"
            "GFLOP/s counts the FLOPs of the step's matrix products (GEMMs, convolutions, attention; a\n"
            "backward counts twice its forward) over the median step time; %% peak divides it by the peak of\n"
            "the unit the precision's large GEMMs run on (F32 FMA, BF16 dot, AMX), measured first, once.\n"
            "Under mpirun the FLOPs and GFLOP/s are rank 0's (each rank does its share of the batch).\n"
            "With a list of thread counts (--threads 1,2,4,8,16) each precision runs at each count, and the\n"
            "table adds the speed-up over the first count and the parallel efficiency (speed-up over the\n"
            "ratio of thread counts). --profile adds, per precision, the time of each device operation and\n"
            "phase (forward, backward, optimizer: GEMMs, attention, norms, the scaler, the optimizer's\n"
            "update, fills and copies), the parallel regions they start, and the host's time between them,\n"
            "at each thread count, sorted by the time each loses against perfect scaling.\n"
            "Defaults as `ampc train`, except batch 8 for gpt (the PyTorch anchor's configuration).\n"
            "With --data none, or a vocabulary above 256 (--vocab, --preset) and no --data, the GPT trains on\n"
            "uniform random token ids in [0, vocab) drawn from --seed (1337 unless given): a step costs the\n"
            "same whatever the ids, so a token model is timed without a token file.\n\n"
            "Examples:\n"
            "  ampc bench step\n"
            "  ampc bench step --model cnn --data fashion-mnist --batch 128 --json\n"
            "  ampc bench step --precisions bf16 --threads 1,2,4,8,16 --profile\n"
            "  ampc bench step --preset gpt2-small --batch 1 --precisions bf16 --steps 2 --untimed 1\n\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --threads: one count or a list (0: all online CPUs) */
typedef struct thread_list {
    int n, v[BENCH_MAX_THREADS];
} thread_list;

static bool parse_threads(const char *v, void *out, char *why, size_t why_size) {
    thread_list *l = out;
    l->n = 0;
    for (const char *p = v;;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || t < 0 || t > 1024 || (*end && *end != ',')) {
            snprintf(why, why_size, "a thread count from 0 to 1024, or a comma-separated list of them");
            return false;
        }
        if (l->n == BENCH_MAX_THREADS) {
            snprintf(why, why_size, "at most %d thread counts", BENCH_MAX_THREADS);
            return false;
        }
        l->v[l->n++] = t ? (int)t : ampc_cpu()->online_cpus;
        if (!*end) return true;
        p = end + 1;
    }
}

typedef struct step_figures {
    double ms, ms_min, mean_s, per_s;
    int64_t per_step;   /* tokens or samples of one step */
    size_t peak, state; /* peak memory; of it, the state held across steps (the rest: the step's activations) */
    /* data parallel: ranks, gradient bytes reduced per step, the reductions' time alone and the wait per
     * step that backward did not hide */
    int ranks;
    int64_t reduced;
    double alone, exposed;
    double syncs[AMPC_SYNC_POINT_COUNT], syncs_total; /* host synchronisation points per timed step */
    /* matrix-product FLOPs per timed step (this rank's), over the median step time; the peak of the unit
     * the precision's GEMMs run on (0: unknown) and its name */
    double flops, gflops, peak_gflops;
    const char *unit;
} step_figures;

/* The fraction of the reductions' own time that backward hid (0 when nothing was hidden). */
static double hidden(const step_figures *f) {
    double h = f->alone > 0 ? 1.0 - f->exposed / f->alone : 0;
    return h < 0 ? 0 : h > 1 ? 1 : h;
}

static step_figures figures(const run_output *o, int64_t warmup) {
    int64_t n = o->r.n - warmup;
    double *t = malloc((size_t)n * sizeof *t);
    step_figures f = {0};
    if (!t) return f;
    memcpy(t, o->step_seconds + warmup, (size_t)n * sizeof *t);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += t[i];
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    f = (step_figures){.ms = 1e3 * med,
                       .ms_min = 1e3 * t[0],
                       .mean_s = sum / (double)n,
                       .per_s = (double)o->per_step / med,
                       .per_step = o->per_step,
                       .peak = o->r.peak_bytes,
                       .state = o->r.state_bytes};
    for (int p = 0; p < AMPC_SYNC_POINT_COUNT; p++) f.syncs_total += f.syncs[p] = (double)o->syncs[p] / (double)n;
    f.flops = (double)o->matmul_flops / (double)n; /* counted over the same steps as the syncs */
    f.gflops = f.flops / med / 1e9;
    if (o->dist.steps > 0) {
        f.reduced = o->dist.bytes_reduced, f.alone = o->reduce_alone;
        f.exposed = o->dist.exposed_seconds / (double)o->dist.steps;
    }
    free(t);
    return f;
}

/* The GEMM slot whose large products bound a precision: the BF16 GEMM for bf16 and fp8 (FP8 operands
 * are multiplied as BF16), the F16 one for fp16; fp32 the F32 one, or the split kernel --fp32-matmul
 * high or medium lets it use where the process chose one for large products. */
static const char *gemm_slot(const run_config *cfg) {
    switch (cfg->prec) {
    case PREC_BF16:
    case PREC_FP8: return "gemm_bf16";
    case PREC_FP16: return "gemm_f16";
    default:
        return cfg->fp32_matmul == AMPC_FP32_HIGH     ? "gemm_f32_bf16x3"
               : cfg->fp32_matmul == AMPC_FP32_MEDIUM ? "gemm_f32_bf16x1"
                                                      : "gemm_f32";
    }
}

/* The kernel in a slot at the process's kernel level (large products), or NULL ("-": none chosen). */
static const char *slot_kernel(const char *slot) {
    for (int i = 0; ampc_kernel_slot_name(i); i++)
        if (strcmp(ampc_kernel_slot_name(i), slot) == 0) {
            const char *k = ampc_kernel_slot_impl(i);
            return k && strcmp(k, "-") != 0 ? k : NULL;
        }
    return NULL;
}

/* f's peak: of the unit the kernel of cfg's GEMM slot runs on (bench_peak_for). */
static void set_peak(step_figures *f, const run_config *cfg, const bench_peaks *peaks) {
    const char *k = slot_kernel(gemm_slot(cfg));
    if (!k) k = slot_kernel("gemm_f32"); /* a split F32 slot left empty: the F32 GEMM runs */
    f->unit = NULL, f->peak_gflops = 0;
    if (k) f->peak_gflops = bench_peak_for(peaks, k, &f->unit);
    if (!(f->peak_gflops > 0)) f->peak_gflops = 0, f->unit = NULL;
}

/* "41% bf16dp", or "-" when the peak is unknown. */
static const char *peak_text(const step_figures *f, char *buf, size_t size) {
    if (f->peak_gflops > 0) snprintf(buf, size, "%.0f%% %s", 100 * f->gflops / f->peak_gflops, f->unit);
    else snprintf(buf, size, "-");
    return buf;
}

/* "cpu: ..., kernel level amx, 2 threads; peaks measured now (GFLOP/s): F32 FMA 150, ..." (a line of peaks
 * per thread count of a list) and what GFLOP/s counts. */
static void print_machine(const run_config *cfg, const thread_list *tl, const bench_peaks *peaks) {
    const ampc_cpu_info *cpu = ampc_cpu();
    printf("\ncpu: %s, kernel level %s", cpu->brand, ampc_isa_name(cpu->chosen));
    for (int k = 0; k < tl->n; k++) {
        const bench_peaks *p = &peaks[k];
        printf("%s%d thread%s; ", tl->n > 1 ? "\n  " : ", ", tl->v[k], tl->v[k] == 1 ? "" : "s");
        if (p->fma32 <= 0 && p->bf16dp <= 0 && p->amx <= 0) printf("no peak measured (it needs AVX-512)");
        else {
            const char *sep = "peaks measured now (GFLOP/s): ";
            if (p->fma32 > 0) printf("%sF32 FMA %.0f", sep, p->fma32), sep = ", ";
            if (p->bf16dp > 0) printf("%sBF16 dot %.0f", sep, p->bf16dp), sep = ", ";
            if (p->amx > 0) printf("%sAMX %.0f", sep, p->amx);
        }
    }
    printf("\nGFLOP/s: the FLOPs of the step's matrix products (GEMMs, convolutions, attention; a backward\n"
           "counts twice its forward) over the median step time; %% peak: of the peak of the unit the\n"
           "precision's large GEMMs run on (fma32, bf16dp: vdpbf16ps, amx).\n");
    if (tl->n > 1)
        printf("speed-up: the median step at %d thread%s over this one; efficiency: the speed-up over the ratio of "
               "thread counts.\n",
               tl->v[0], tl->v[0] == 1 ? "" : "s");
    if (ampc_dist_world_size(cfg->dist) > 1) /* every rank measured its peaks at once, as it trains */
        printf("Data parallel: both are rank 0's, its share of the batch on its threads.\n");
}

/* "          host syncs per step: 3 (found_inf 1, read 1, ...)": where a device would wait for the host. */
static void print_syncs(const step_figures *f) {
    printf("          host syncs per step: %g", f->syncs_total);
    const char *sep = " (";
    for (int p = 0; p < AMPC_SYNC_POINT_COUNT; p++)
        if (f->syncs[p] > 0) printf("%s%s %g", sep, ampc_sync_point_name(p), f->syncs[p]), sep = ", ";
    printf("%s\n", f->syncs_total > 0 ? ")" : "");
}

/* The speed-up of f over the first thread count's figures f0, and the parallel efficiency. */
static double speedup(const step_figures *f0, const step_figures *f) { return f->ms > 0 ? f0->ms / f->ms : 0; }
static double efficiency(const step_figures *f0, const step_figures *f, int t0, int t) {
    return speedup(f0, f) * (double)t0 / (double)t;
}

typedef struct run_row {
    const run_config *cfg;
    const step_figures *f, *f0; /* this run's, and the first thread count's (NULL: no list) */
    int t0;                     /* the first thread count */
    const step_profile *prof;   /* --profile, or NULL */
    int64_t steps, warmup;
    bool lm;
} run_row;

static void print_json(const run_row *r) {
    const run_config *cfg = r->cfg;
    const step_figures *f = r->f;
    bool lm = r->lm;
    json_writer w;
    json_init(&w, stdout, false);
    json_obj_begin(&w);
    json_kstr(&w, "kind", "step");
    json_kstr(&w, "model", ampc_model_kind_name(cfg->model.kind));
    json_kstr(&w, "precision", cfg->label);
    json_kint(&w, "batch", cfg->batch);
    json_kint(&w, "threads", cfg->threads);
    json_kint(&w, "steps", r->steps);
    json_kint(&w, "warmup", r->warmup);
    json_knum(&w, "ms_per_step", f->ms);
    json_knum(&w, "ms_min", f->ms_min);
    if (r->f0) { /* a --threads list: against its first count */
        json_kint(&w, "speedup_over_threads", r->t0);
        json_knum(&w, "speedup", speedup(r->f0, f));
        json_knum(&w, "efficiency", efficiency(r->f0, f, r->t0, cfg->threads));
    }
    json_knum(&w, lm ? "tokens_per_s" : "samples_per_s", f->per_s);
    json_kint(&w, "peak_bytes", (int64_t)f->peak);
    json_kint(&w, "state_bytes", (int64_t)f->state);
    json_kint(&w, "activation_bytes", (int64_t)(f->peak - f->state));
    json_knum(&w, lm ? "peak_bytes_per_token" : "peak_bytes_per_sample", (double)f->peak / (double)f->per_step);
    json_kstr(&w, "data", cfg->random_vocab ? "random tokens" : cfg->data_spec);
    /* per rank: under mpirun rank 0's FLOPs (its share of the batch) and their rate */
    json_knum(&w, "matmul_flops_per_step", f->flops);
    json_knum(&w, "gflops", f->gflops);
    if (f->peak_gflops > 0) {
        json_knum(&w, "peak_gflops", f->peak_gflops);
        json_kstr(&w, "peak_unit", f->unit);
        json_knum(&w, "peak_fraction", f->gflops / f->peak_gflops);
    } else {
        json_knull(&w, "peak_gflops");
        json_knull(&w, "peak_unit");
        json_knull(&w, "peak_fraction");
    }
    json_kstr(&w, "cpu", ampc_cpu()->brand);
    json_kstr(&w, "kernel_level", ampc_isa_name(ampc_cpu()->chosen));
    json_knum(&w, "syncs_per_step", f->syncs_total);
    json_key(&w, "syncs");
    json_obj_begin(&w);
    for (int p = 0; p < AMPC_SYNC_POINT_COUNT; p++) json_knum(&w, ampc_sync_point_name(p), f->syncs[p]);
    json_obj_end(&w);
    if (f->ranks > 1) {
        json_kint(&w, "ranks", f->ranks);
        json_kint(&w, "bytes_reduced_per_step", f->reduced);
        json_knum(&w, "reduce_alone_ms", 1e3 * f->alone);
        json_knum(&w, "reduce_exposed_ms", 1e3 * f->exposed);
        json_knum(&w, "reduce_hidden_fraction", hidden(f));
    }
    if (r->prof) bench_profile_json(&w, r->prof);
    json_obj_end(&w);
    json_finish(&w);
}

/* The table's header: the model, the batch, the thread counts, the columns. */
static void print_header(const run_config *cfg, const thread_list *tl, int w, const char *unit, bool lm,
                         int64_t warmup) {
    char desc[160], threads[96] = "";
    run_describe_model(&cfg->model, desc, sizeof desc);
    for (int k = 0, at = 0; k < tl->n && at < (int)sizeof threads; k++)
        at += snprintf(threads + at, sizeof threads - (size_t)at, "%s%d", k ? "," : "", tl->v[k]);
    printf("%s%s, batch %lld, %s thread%s: median of %lld steps after %lld warm-up\n\n", desc,
           cfg->random_vocab ? " on random tokens" : "", (long long)cfg->batch, threads,
           tl->n == 1 && tl->v[0] == 1 ? "" : "s", (long long)(cfg->steps - warmup), (long long)warmup);
    printf("%-*s  %sms/step   min ms  %11s   GFLOP/s  %-11s  peak MiB  state MiB  activations MiB  %11s  vs %s%s\n", w,
           "precision", tl->n > 1 ? "threads  " : "", unit, "% peak", lm ? "MiB/token" : "MiB/sample", cfg->label,
           tl->n > 1 ? "  speed-up  efficiency" : "");
}

static void print_row(const run_row *r, int w, const step_figures *base, bool list) {
    const step_figures *f = r->f;
    char pct[32], thr[16] = "";
    if (list) snprintf(thr, sizeof thr, "%7d  ", r->cfg->threads);
    printf("%-*s %s%8.1f %8.1f %12.0f %9.1f  %-11s %9.1f %10.1f %16.1f %12.4f  %.2fx", w, r->cfg->label, thr, f->ms,
           f->ms_min, f->per_s, f->gflops, peak_text(f, pct, sizeof pct), (double)f->peak / 1048576.0,
           (double)f->state / 1048576.0, (double)(f->peak - f->state) / 1048576.0,
           (double)f->peak / 1048576.0 / (double)f->per_step, base->ms / f->ms);
    if (list) printf("  %7.2fx  %9.0f%%", speedup(r->f0, f), 100 * efficiency(r->f0, f, r->t0, r->cfg->threads));
    printf("\n");
    print_syncs(f);
    if (f->ranks > 1)
        printf("          %d ranks: %.2f MiB reduced per step; the reductions alone take %.2f ms, %.2f ms of "
               "them were not hidden by backward (%.0f%% hidden)\n",
               f->ranks, (double)f->reduced / 1048576.0, 1e3 * f->alone, 1e3 * f->exposed, 100 * hidden(f));
}

typedef struct bench_plan {
    const prec_list *pl;
    const thread_list *tl;
    const bench_peaks *peaks; /* one per thread count */
    int64_t warmup;
    bool json;
} bench_plan;

/* One precision at every thread count of the list: rows, then its profile table. base[k]: the first
 * precision's figures at count k (filled while i == 0). 0, or the run's exit status. */
static int run_precision(const char *prog, const bench_plan *bp, int i, const run_config *common, ampc_dataset *ds,
                         int w, step_figures *base) {
    run_config one, *cfg = &one;
    const thread_list *tl = bp->tl;
    step_figures f0 = {0};
    step_profile prof[BENCH_MAX_THREADS] = {{0}};
    ampc_profile_entry *owned[BENCH_MAX_THREADS] = {NULL};
    int rc = 0, k;
    for (k = 0; k < tl->n && !rc; k++) {
        run_prec_apply(bp->pl, i, common, cfg);
        cfg->threads = tl->v[k];
        run_output out;
        if ((rc = run_training(prog, cfg, ds, NULL, &out))) break;
        step_figures f = figures(&out, bp->warmup);
        f.ranks = ampc_dist_world_size(cfg->dist);
        set_peak(&f, cfg, &bp->peaks[k]);
        bool lm = strcmp(out.r.throughput_unit, "tokens/s") == 0;
        if (k == 0) f0 = f;
        if (i == 0) base[k] = f;
        prof[k] = (step_profile){.threads = cfg->threads,
                                 .steps = cfg->steps - bp->warmup,
                                 .mean_s = f.mean_s,
                                 .e = out.prof,
                                 .n = out.nprof};
        owned[k] = out.prof, out.prof = NULL; /* kept for the table after the last count */
        run_row r = {.cfg = cfg,
                     .f = &f,
                     .f0 = tl->n > 1 ? &f0 : NULL,
                     .t0 = tl->v[0],
                     .prof = common->profile ? &prof[k] : NULL,
                     .steps = cfg->steps - bp->warmup,
                     .warmup = bp->warmup,
                     .lm = lm};
        if (ampc_dist_rank(cfg->dist) > 0) { /* rank 0 reports for the job */
        } else if (bp->json) print_json(&r);
        else {
            if (k == 0 && (i == 0 || common->profile)) print_header(cfg, tl, w, out.r.throughput_unit, lm, bp->warmup);
            print_row(&r, w, &base[k], tl->n > 1);
        }
        run_output_free(&out);
    }
    if (!rc && common->profile && !bp->json && ampc_dist_rank(cfg->dist) == 0 &&
        bench_profile_print(cfg->label, prof, tl->n))
        fprintf(stderr, "%s: out of memory for the profile table\n", prog), rc = CLI_EXIT_FAIL;
    for (int j = 0; j < k; j++) free(owned[j]);
    return rc;
}

static int run_all(const char *prog, const run_config *common, const bench_plan *bp) {
    ampc_dataset *ds = NULL;
    int rc = common->random_vocab ? 0 : run_open_data(prog, common, &ds);
    step_figures base[BENCH_MAX_THREADS] = {{0}};
    int w = 9; /* the precision column: as wide as the longest label (a named policy may be long) */
    for (int i = 0; i < bp->pl->n; i++) w = (int)strlen(bp->pl->label[i]) > w ? (int)strlen(bp->pl->label[i]) : w;
    for (int i = 0; i < bp->pl->n && !rc; i++) {
        if (i > 0 && common->profile && !bp->json && ampc_dist_rank(common->dist) == 0) printf("\n");
        rc = run_precision(prog, bp, i, common, ds, w, base);
    }
    if (!rc && !bp->json && ampc_dist_rank(common->dist) == 0) print_machine(common, bp->tl, bp->peaks);
    ampc_dataset_free(ds);
    return rc;
}

/* --data none, or a vocabulary beyond bytes and no --data: random token ids (run_tokens.c). 0, or 2 after a
 * message. */
static int random_tokens(const char *prog, run_config *cfg, bool data_given) {
    bool none = strcmp(cfg->data_spec, "none") == 0;
    if (!none && (data_given || cfg->model.vocab <= 256)) return 0;
    if (cfg->model.kind != AMPC_MODEL_GPT) {
        fprintf(stderr, "%s: --data none (random token ids) is for --model gpt; --model %s needs its data\n", prog,
                ampc_model_kind_name(cfg->model.kind));
        return CLI_EXIT_USAGE;
    }
    cfg->random_vocab = cfg->model.vocab ? cfg->model.vocab : 256;
    return 0;
}

/* The shared --data and --threads rows, with what only this command takes (tl: the thread counts). */
static void own_options(cli_opt *opts, int n, thread_list *tl) {
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].name, "data") == 0)
            opts[i].help = "builtin | fashion-mnist[:DIR] | text:FILE | none (random token ids; the default when "
                           "the vocabulary exceeds 256)";
        else if (strcmp(opts[i].name, "threads") == 0)
            opts[i] = CLI_OPT(.name = "threads", .kind = CLI_CUSTOM, .out = tl, .parse = parse_threads,
                              .metavar = "T[,T...]", .accepts = "a thread count from 0 to 1024, or a list: 1,2,4,8,16",
                              .defval = "0",
                              .help = "worker threads (0 = all online CPUs); a list runs each precision at each count");
}

int bench_step_main(int argc, char **argv) {
    const char *prog = "ampc bench step";
    run_config cfg = {0};
    prec_list pl;
    run_prec_list_init(&pl, (const precision[]){PREC_FP32, PREC_BF16, PREC_FP16}, 3);
    int64_t warmup = 2;
    bool json = false;
    thread_list tl = {.n = 1, .v = {ampc_cpu()->online_cpus}};
    cli_opt opts[MAX_OPTS];
    int n = run_dist_options(&cfg, opts, run_options(&cfg, opts, MAX_OPTS - 8), MAX_OPTS - 4);
    opts[n++] = CLI_OPT(.name = "precisions", .kind = CLI_CUSTOM, .out = &pl, .parse = run_parse_precisions,
                        .metavar = "LIST", .accepts = "a comma-separated list of fp32, bf16, fp16, fp8",
                        .defval = "fp32,bf16,fp16", .help = "the precisions to time, in order");
    opts[n++] = CLI_OPT(.name = "untimed", .kind = CLI_INT, .out = &warmup, .imin = 0, .imax = 1000, .defval = "2",
                        .help = "untimed steps first");
    opts[n++] = CLI_OPT(.name = "profile", .kind = CLI_FLAG, .out = &cfg.profile,
                        .help = "time each device operation of the timed steps, per phase and thread count");
    opts[n++] = CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &json,
                        .help = "one JSON object per precision and thread count");
    own_options(opts, n, &tl);
    bool seen[MAX_OPTS] = {false};
    cli_parse_out po = {.seen = seen};
    int rc = cli_parse_or_exit(prog, usage, opts, (size_t)n, argc, argv, 0, NULL, &po);
    bool steps_given = false, batch_given = false, data_given = false;
    for (int i = 0; i < n; i++) {
        steps_given |= seen[i] && strcmp(opts[i].name, "steps") == 0;
        batch_given |= seen[i] && strcmp(opts[i].name, "batch") == 0;
        data_given |= seen[i] && strcmp(opts[i].name, "data") == 0;
    }
    if (rc < 0) rc = run_finish_options(prog, &cfg, opts, n, seen);
    if (rc >= 0) return rc;
    if ((rc = random_tokens(prog, &cfg, data_given))) return rc;
    if (cfg.epochs) {
        fprintf(stderr, "%s: --epochs is not for benchmarks; give --steps\n", prog);
        return CLI_EXIT_USAGE;
    }
    if ((rc = run_check_precs(prog, &pl, &cfg))) return rc;
    if (!batch_given && cfg.model.kind == AMPC_MODEL_GPT) cfg.batch = 8;
    cfg.steps = (steps_given ? cfg.steps : 5) + warmup;
    cfg.quiet = cfg.no_eval = true;
    cfg.untimed = warmup, cfg.measure_comm = true;
    for (int k = 0; k < tl.n; k++) {
        cfg.threads = tl.v[k];
        run_warn_threads(prog, &cfg);
    }
    if ((rc = dist_join(prog, cfg.dist_timeout, &cfg.dist))) return rc; /* under mpirun: the job's steps */
    /* the peaks once per thread count, before the runs; under mpirun every rank measures at once, as they
     * then train, so the peak rank 0 divides by is what its threads get while the others compute too */
    bench_peaks peaks[BENCH_MAX_THREADS];
    for (int k = 0; k < tl.n; k++)
        if (bench_peak_measure(tl.v[k], &peaks[k]) != AMPC_OK) memset(&peaks[k], 0, sizeof peaks[k]);
    rc = run_all(prog, &cfg, &(bench_plan){.pl = &pl, .tl = &tl, .peaks = peaks, .warmup = warmup, .json = json});
    ampc_dist_free(cfg.dist);
    return rc;
}
