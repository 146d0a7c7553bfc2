/* bench.c: `ampc bench <kind>`, the command-line face of the benchmarks in bench/. This file only
 * parses options and prints: the measuring lives in bench/ so other front ends (CI scripts, a future
 * report writer) time things the same way. Kinds are a table; each kind has its own options. The exit
 * status is 1 when a benchmarked kernel's output differs from the reference, so a benchmark run also
 * guards correctness. */
#include "cli.h"
#include "json.h"

#include "bench_cli.h"
#include "bench_convert.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

typedef struct bench_kind {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} bench_kind;

static int run_convert(int argc, char **argv);

static const bench_kind kinds[] = {
    {"convert", run_convert, "F32/F16/BF16 conversion kernels against memcpy bandwidth"},
    {"gemm", bench_gemm_main, "GEMM kernels: GFLOP/s and the fraction of this machine's measured peak"},
    {"step", bench_step_main, "whole training steps: ms per step, throughput, peak memory per precision"},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static void kind_list(char *buf, size_t size) {
    const char *names[NKINDS + 1];
    for (size_t i = 0; i < NKINDS; i++) names[i] = kinds[i].name;
    names[NKINDS] = NULL;
    cli_join(names, buf, size);
}

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc bench <kind> [options]\n"
               "       ampc bench <kind> --help\n\n"
               "Measures ampc's kernels on this machine against its own measured limits.\n\n"
               "Kinds:\n");
    for (size_t i = 0; i < NKINDS; i++) fprintf(f, "  %-9s %s\n", kinds[i].name, kinds[i].summary);
}

int cmd_bench(int argc, char **argv) {
    char list[128], q[64];
    kind_list(list, sizeof list);
    if (argc < 1) {
        fprintf(stderr, "ampc bench: missing benchmark kind; expected one of: %s\n", list);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        usage(stdout);
        printf("\nOptions:\n  --help  show this help and exit\n");
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < NKINDS; i++)
        if (strcmp(argv[0], kinds[i].name) == 0) return kinds[i].run(argc - 1, argv + 1);
    snprintf(q, sizeof q, "%s", argv[0]);
    for (char *c = q; *c; c++)
        if ((unsigned char)*c < 0x20) *c = '?';
    if (q[0] == '-')
        fprintf(stderr, "ampc bench: unknown option '%s' before the kind; accepted: --help, or a kind: %s\n", q, list);
    else fprintf(stderr, "ampc bench: unknown benchmark kind '%s'; expected one of: %s\n", q, list);
    return CLI_EXIT_USAGE;
}

/* ---- convert ---- */

static void usage_convert(FILE *f) {
    fprintf(f, "Usage: ampc bench convert [--json] [--threads T] [--mib N]\n\n"
               "Times every F32/F16/BF16 conversion kernel compiled into ampc (each ISA level, not only the\n"
               "one ampc_convert picks) on arrays of N MiB of F32 source (the same element count for 16-bit\n"
               "sources), next to memcpy of N MiB. GB/s counts bytes read + bytes written, for memcpy too.\n"
               "Each result is the median of at least 5 runs (and 0.3 s) after a warm-up. Every output is\n"
               "checked bit for bit against the ref kernel; a mismatch makes the exit status 1.\n\n");
}

/* A progress line on a terminal only: logs and pipes get the results, not the ticker. */
static void progress(void *user, int done, int total, const char *what) {
    (void)user;
    fprintf(stderr, "\r[%d/%d] %-40s", done + 1, total, what);
}

static void json_row(const bench_cvt_report *rep, const bench_cvt_row *r) {
    json_writer w;
    json_init(&w, stdout, false);
    json_obj_begin(&w);
    json_kstr(&w, "kind", "convert");
    json_kstr(&w, "kernel", r->kernel);
    json_kstr(&w, "dst", ampc_dtype_name(r->dst));
    json_kstr(&w, "src", ampc_dtype_name(r->src));
    json_kint(&w, "n", (int64_t)r->n);
    json_kint(&w, "threads", r->threads);
    json_knum(&w, "bytes", r->bytes);
    json_knum(&w, "gbps", r->gbps);
    json_knum(&w, "gbps_min", r->gbps_min);
    json_knum(&w, "gbps_max", r->gbps_max);
    json_knum(&w, "median_s", r->t.median_s);
    json_kint(&w, "runs", r->t.runs);
    json_knum(&w, "memcpy_gbps", rep->memcpy_row.gbps);
    json_knum(&w, "fraction_of_memcpy", r->fraction_of_memcpy);
    json_kbool(&w, "baseline", r == &rep->memcpy_row);
    json_kbool(&w, "active", r->active);
    json_kbool(&w, "matches_ref", r->matches_ref);
    json_kstr(&w, "isa_level", ampc_isa_name(rep->chosen));
    json_obj_end(&w);
    json_finish(&w);
}

static void print_json(const bench_cvt_report *rep) {
    json_row(rep, &rep->memcpy_row);
    for (size_t i = 0; i < rep->nrows; i++)
        if (rep->rows[i].usable) json_row(rep, &rep->rows[i]);
}

static void print_row(const bench_cvt_row *r, int kw) {
    printf("%-5s %-5s %-*s %c ", ampc_dtype_name(r->src), ampc_dtype_name(r->dst), kw, r->kernel,
           r->active ? '*' : ' ');
    if (!r->usable) {
        printf("not usable on this CPU (needs %s)\n", r->missing ? r->missing : "?");
        return;
    }
    printf("%8.2f %7.1f%% %8.2f %8.2f %5d  %s\n", r->gbps, 100.0 * r->fraction_of_memcpy, r->gbps_min, r->gbps_max,
           r->t.runs, r->matches_ref ? "ok" : "MISMATCH");
}

static void print_human(const bench_cvt_report *rep) {
    int kw = 6;
    for (size_t i = 0; i < rep->nrows; i++)
        if ((int)strlen(rep->rows[i].kernel) > kw) kw = (int)strlen(rep->rows[i].kernel);
    printf("convert: n = %zu elements (%zu MiB of F32 source), %d thread%s, kernel level %s\n", rep->n, rep->mib,
           rep->threads, rep->threads == 1 ? "" : "s", ampc_isa_name(rep->chosen));
    printf("memcpy of %zu MiB: %.2f GB/s (bytes read + written; min %.2f, max %.2f, %d runs)\n\n", rep->mib,
           rep->memcpy_row.gbps, rep->memcpy_row.gbps_min, rep->memcpy_row.gbps_max, rep->memcpy_row.t.runs);
    printf("%-5s %-5s %-*s   %8s %8s %8s %8s %5s  %s\n", "src", "dst", kw, "kernel", "GB/s", "memcpy", "min", "max",
           "runs", "check");
    for (size_t i = 0; i < rep->nrows; i++) print_row(&rep->rows[i], kw);
    printf("\n* the kernel ampc_convert uses in this process. GB/s: (bytes read + written) / median time,\n"
           "1 GB = 1e9 B; min/max: slowest/fastest run. check: output bit-identical to the ref kernel on\n"
           "the same data (random values with specials: zeros, subnormals, inf, NaN, FP16 overflow).\n"
           "Conversions write with ordinary stores, which read each destination line first; memcpy of\n"
           "large blocks may use non-temporal stores that skip that read, so 100%% is rarely reachable.\n");
}

/* The first kernel whose output differs from the ref kernel's, or NULL. */
static const bench_cvt_row *first_mismatch(const bench_cvt_report *rep) {
    for (size_t i = 0; i < rep->nrows; i++)
        if (rep->rows[i].usable && !rep->rows[i].matches_ref) return &rep->rows[i];
    return NULL;
}

static int run_convert(int argc, char **argv) {
    const char *prog = "ampc bench convert";
    bool json = false;
    int64_t threads = 1, mib = 64;
    const cli_opt opts[] = {
        CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &json,
                .help = "one JSON object per measurement, one per line"),
        CLI_OPT(.name = "threads", .kind = CLI_INT, .out = &threads, .metavar = "T", .imin = 1, .imax = 1024,
                .defval = "1", .help = "split each array into T contiguous parts run in parallel"),
        CLI_OPT(.name = "mib", .kind = CLI_INT, .out = &mib, .metavar = "N", .imin = 1, .imax = 4096, .defval = "64",
                .help = "MiB of F32 source per array"),
    };
    cli_parse_out po = {0};
    int rc = cli_parse_or_exit(prog, usage_convert, opts, sizeof opts / sizeof opts[0], argc, argv, 0, NULL, &po);
    if (rc >= 0) return rc;
    bench_cvt_params p = {.mib = (size_t)mib, .threads = (int)threads};
    if (isatty(STDERR_FILENO)) p.progress = progress;
    bench_cvt_report rep;
    ampc_clear_error();
    ampc_status s = bench_convert_run(&p, &rep);
    if (p.progress) fprintf(stderr, "\r%60s\r", "");
    if (s == AMPC_STATUS_OOM && ampc_last_status() == AMPC_OK) {
        fprintf(stderr, "%s: out of memory for the arrays of %" PRId64 " MiB (try a smaller --mib)\n", prog, mib);
        return CLI_EXIT_FAIL;
    }
    if (s != AMPC_OK) return cli_fail_lib(prog, s);
    if (json) print_json(&rep);
    else print_human(&rep);
    fflush(stdout);
    const bench_cvt_row *bad = first_mismatch(&rep);
    if (bad)
        fprintf(stderr, "%s: %s output differs from the ref kernel (%s -> %s)\n", prog, bad->kernel,
                ampc_dtype_name(bad->src), ampc_dtype_name(bad->dst));
    bench_convert_report_free(&rep);
    return bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
