/* bench_gemm_cli.c: `ampc bench gemm`: options and printing for bench/bench_gemm.c. The exit status is 1
 * when a kernel's check against the reference failed, so a benchmark run also guards correctness. */
#include "bench_cli.h"
#include "cli.h"
#include "json.h"

#include "bench_gemm.h"

#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc bench gemm [--json] [--threads T] [--max N] [--no-gpt] [--no-pack]\n\n"
               "Times every GEMM kernel ampc could choose at its kernel level, the one it runs for each row's\n"
               "size class marked (F32, BF16, F16 and, where this CPU has them, the split-BF16 F32 kernels of\n"
               "--fp32-matmul high/medium) on squares 256..N and on the GEMMs of the default GPT's training\n"
               "step (2048 tokens, d 384), and reports GFLOP/s and the fraction of this machine's peak for the\n"
               "unit each kernel runs on (AMX tiles, vdpbf16ps or F32 FMAs), measured first by tight\n"
               "instruction loops on the same threads. Then each kernel family's packing of one operand\n"
               "(square, min(N, 1024) on a side, stored four ways) alone on one thread, in GB/s of bytes read\n"
               "and written, as a fraction of memcpy of the same size.\n\n");
}

static void progress(void *user, int done, int total, const char *what) {
    (void)user;
    fprintf(stderr, "\r[%d/%d] %-44s", done + 1, total, what);
}

static void json_row(const bench_gemm_row *r, ampc_isa level) {
    json_writer w;
    json_init(&w, stdout, false);
    json_obj_begin(&w);
    json_kstr(&w, "kind", "gemm");
    json_kstr(&w, "slot", r->slot);
    json_kstr(&w, "kernel", r->kernel);
    json_kbool(&w, "chosen", r->chosen);
    json_kstr(&w, "dtype", ampc_dtype_name(r->dtype));
    json_kstr(&w, "shape", r->shape);
    json_kint(&w, "m", r->m);
    json_kint(&w, "n", r->n);
    json_kint(&w, "k", r->k);
    json_kbool(&w, "ta", r->ta);
    json_kint(&w, "threads", r->threads);
    json_knum(&w, "gflops", r->gflops);
    json_knum(&w, "median_s", r->t.median_s);
    json_kint(&w, "runs", r->t.runs);
    json_kstr(&w, "peak_unit", r->peak_kind);
    json_knum(&w, "peak_gflops", r->peak_gflops);
    json_knum(&w, "peak_fraction", r->peak_fraction);
    json_kbool(&w, "above_peak", r->above_peak);
    json_kbool(&w, "matches_ref", r->matches_ref);
    json_kstr(&w, "isa_level", ampc_isa_name(level));
    json_obj_end(&w);
    json_finish(&w);
}

static void json_pack(const bench_pack_row *r, ampc_isa level) {
    json_writer w;
    json_init(&w, stdout, false);
    json_obj_begin(&w);
    json_kstr(&w, "kind", "pack");
    json_kstr(&w, "packer", r->packer);
    json_kstr(&w, "dtype", ampc_dtype_name(r->dtype));
    json_kstr(&w, "operand", r->operand);
    json_kint(&w, "rows", r->rows);
    json_kint(&w, "cols", r->cols);
    json_kint(&w, "threads", 1);
    json_kint(&w, "src_bytes", (int64_t)r->src_bytes);
    json_kint(&w, "packed_bytes", (int64_t)r->packed_bytes);
    json_knum(&w, "gbps", r->gbps);
    json_knum(&w, "median_s", r->t.median_s);
    json_kint(&w, "runs", r->t.runs);
    json_knum(&w, "memcpy_gbps", r->memcpy_gbps);
    json_knum(&w, "fraction_of_memcpy", r->fraction_of_memcpy);
    json_kstr(&w, "isa_level", ampc_isa_name(level));
    json_obj_end(&w);
    json_finish(&w);
}

/* One line per packer: GB/s and % of memcpy for each stored form of the operand. */
static void print_packs(const bench_gemm_report *rep) {
    if (rep->npacks == 0) return;
    printf("\npacking, one thread, %lld x %lld operands: GB/s (bytes read + written) and %% of memcpy\n",
           (long long)rep->packs[0].rows, (long long)rep->packs[0].cols);
    printf("%-30s %-5s %15s %15s %15s %15s\n", "packer", "dtype", "A", "A^T", "B", "B^T");
    for (size_t i = 0; i < rep->npacks; i += 4) {
        printf("%-30s %-5s", rep->packs[i].packer, ampc_dtype_name(rep->packs[i].dtype));
        for (size_t w = i; w < i + 4 && w < rep->npacks; w++)
            printf(" %7.1f (%4.0f%%)", rep->packs[w].gbps, 100 * rep->packs[w].fraction_of_memcpy);
        printf("\n");
    }
    printf("A: a stored (M, K), A^T: (K, M), B: b stored (K, N), B^T: (N, K). memcpy: the packed size copied\n"
           "on the same thread (%.1f GB/s for the first).\n",
           rep->packs[0].memcpy_gbps);
}

static void print_human(const bench_gemm_report *rep) {
    const bench_peaks *p = &rep->peaks;
    printf("gemm: %d thread%s, kernel level %s\n", p->threads, p->threads == 1 ? "" : "s", ampc_isa_name(rep->level));
    printf("measured peaks (GFLOP/s): F32 FMA %.0f", p->fma32);
    if (p->bf16dp > 0) printf(", vdpbf16ps %.0f", p->bf16dp);
    if (p->amx > 0) printf(", AMX tdpbf16ps %.0f", p->amx);
    printf("\n\n%-16s %-36s %-12s %5s %5s %5s %9s %7s %s\n", "slot", "kernel", "shape", "m", "n", "k", "GFLOP/s",
           "% peak", "check");
    bool busy = false;
    for (size_t i = 0; i < rep->nrows; i++) {
        const bench_gemm_row *r = &rep->rows[i];
        char pct[16];
        if (r->above_peak) snprintf(pct, sizeof pct, "   busy"); /* never "more than 100%" */
        else snprintf(pct, sizeof pct, "%6.1f%%", 100 * r->peak_fraction);
        busy |= r->above_peak;
        printf("%-16s %-34s %s %-12s %5lld %5lld %5lld %9.1f %s %s %s\n", r->slot, r->kernel, r->chosen ? "*" : " ",
               r->shape, (long long)r->m, (long long)r->n, (long long)r->k, r->gflops, pct, r->peak_kind,
               r->matches_ref ? "ok" : "MISMATCH");
    }
    printf("\n*: the kernel ampc runs for the slot at the row's size class (measured once per CPU: `ampc info`);\n"
           "the others are the candidates it was chosen among. A split F32 slot without a mark runs the F32 GEMM\n"
           "there, measured faster.\n"
           "%% peak: GFLOP/s over the peak of the unit named after it (split F32 kernels count the F32 work\n"
           "2mnk, so BF16x3 on AMX can reach at most a third of the AMX peak). check: the kernel agrees with the\n"
           "reference on a 67x45x129 product within twice the F32 summation bound. The peaks are probed before\n"
           "and after the kernels and the higher reading kept.\n");
    if (busy)
        printf("busy: the kernel ran faster than the peak probed for its unit, so another process slowed the\n"
               "probes; run again on an idle machine for a %% peak.\n");
    print_packs(rep);
}

int bench_gemm_main(int argc, char **argv) {
    const char *prog = "ampc bench gemm";
    bool json = false, no_gpt = false, no_pack = false;
    int64_t threads = 1, max = 2048;
    const cli_opt opts[] = {
        CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &json,
                .help = "one JSON object per measurement, one per line"),
        CLI_OPT(.name = "threads", .kind = CLI_INT, .out = &threads, .metavar = "T", .imin = 1, .imax = 1024,
                .defval = "1", .help = "threads for the kernels and the peak loops"),
        CLI_OPT(.name = "max", .kind = CLI_INT, .out = &max, .metavar = "N", .imin = 256, .imax = 8192,
                .defval = "2048", .help = "largest square (powers of two from 256)"),
        CLI_OPT(.name = "no-gpt", .kind = CLI_FLAG, .out = &no_gpt, .help = "leave out the GPT step shapes"),
        CLI_OPT(.name = "no-pack", .kind = CLI_FLAG, .out = &no_pack, .help = "leave out the packing rows"),
    };
    cli_parse_out po = {0};
    int rc = cli_parse_or_exit(prog, usage, opts, sizeof opts / sizeof opts[0], argc, argv, 0, NULL, &po);
    if (rc >= 0) return rc;
    bench_gemm_params p = {.threads = (int)threads, .max_square = max, .no_gpt = no_gpt, .no_pack = no_pack};
    if (isatty(STDERR_FILENO)) p.progress = progress;
    bench_gemm_report rep;
    ampc_clear_error();
    ampc_status s = bench_gemm_run(&p, &rep);
    if (p.progress) fprintf(stderr, "\r%60s\r", "");
    if (s != AMPC_OK) {
        fprintf(stderr, "%s: %s\n", prog, ampc_last_status() != AMPC_OK ? ampc_last_error() : "out of memory");
        bench_gemm_report_free(&rep);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        for (size_t i = 0; i < rep.nrows; i++) json_row(&rep.rows[i], rep.level);
        for (size_t i = 0; i < rep.npacks; i++) json_pack(&rep.packs[i], rep.level);
    } else {
        print_human(&rep);
    }
    rc = CLI_EXIT_OK;
    for (size_t i = 0; i < rep.nrows; i++)
        if (!rep.rows[i].matches_ref) {
            fprintf(stderr, "%s: %s disagrees with the reference\n", prog, rep.rows[i].kernel);
            rc = CLI_EXIT_FAIL;
            break;
        }
    bench_gemm_report_free(&rep);
    return rc;
}
