/* fuzz_cli.c: libFuzzer target for the option parser of the `ampc` tool (tools/ampc/args.c) driven with
 * the real `ampc train` table (run_options() and run_train_options() from tools/ampc/run_options.c, as
 * train.c builds it). The input is split on NUL bytes into argv (the
 * arguments after `ampc train`); cli_parse runs on it, then run_finish_options when parsing succeeded,
 * and --help output goes to /dev/null. Errors are fine; a crash, an abort, a leak, undefined behaviour or
 * an error message that is empty or not exactly one line (args.h promises one line naming the option)
 * traps. */
#include "args.h"
#include "run.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 96 /* as train.c */

static FILE *g_null;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_null = fopen("/dev/null", "w");
    if (!g_null) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* argv: the NUL-separated pieces of a NUL-terminated copy (a final empty piece is dropped) */
    char *buf = malloc(size + 1);
    char **argv = malloc((size + 1) * sizeof *argv);
    if (!buf || !argv) abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    int argc = 0;
    for (size_t i = 0; i < size; i += strlen(buf + i) + 1) argv[argc++] = buf + i;

    run_config cfg = {0};
    train_only x = {0};
    cli_opt opts[MAX_OPTS];
    int n = run_train_options(&cfg, &x, opts, run_options(&cfg, opts, MAX_OPTS), MAX_OPTS);
    bool seen[MAX_OPTS] = {false};
    cli_parse_out po = {.seen = seen};
    cli_result r = cli_parse(opts, (size_t)n, argc, argv, 0, NULL, &po);
    if (r == CLI_ERROR) {
        size_t len = strnlen(po.error, sizeof po.error);
        if (len == 0 || len == sizeof po.error || strchr(po.error, '\n')) __builtin_trap();
    } else if (r == CLI_HELP) {
        cli_print_options(g_null, opts, (size_t)n);
    } else if (r == CLI_PARSED) {
        if (po.npos != 0) __builtin_trap(); /* train takes no positionals */
        int rc = run_finish_options("ampc train", &cfg, opts, n, seen);
        if (rc != -1 && rc != CLI_EXIT_USAGE) __builtin_trap();
        if (rc == -1) {
            /* what the run would use: exactly one of steps/epochs, a batch and an lr in range */
            if ((cfg.steps > 0) == (cfg.epochs > 0) || cfg.batch < 1 || !(cfg.lr > 0) || !cfg.data_spec)
                __builtin_trap();
            if (x.prec < 0 || x.prec >= PREC_COUNT || (x.log_path && !*x.log_path) ||
                (x.resume_path && !*x.resume_path))
                __builtin_trap();
            char desc[256];
            run_describe_model(&cfg.model, desc, sizeof desc);
        }
    } else {
        __builtin_trap();
    }
    free(argv);
    free(buf);
    return 0;
}
