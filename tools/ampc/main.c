/* main.c: the `ampc` command-line tool's entry point. It answers --help and --version, finds the
 * subcommand in a constant table and hands it the remaining arguments; it also holds the helpers that
 * give every subcommand the same contract (README, "Exit status everywhere"): --help on stdout with status 0, usage
 * mistakes as one stderr line with status 2, library failures as `ampc <cmd>: <message>` with status 1,
 * and a refusal to run anything while AMPC_ISA holds a value the library does not know. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"train", cmd_train, "train one model in one precision (fp32, bf16, fp16 autocast, or fp8)"},
    {"compare", cmd_compare, "the same run in several precisions, side by side, with a report"},
    {"doctor", cmd_doctor, "FP32 steps with range statistics: what is safe in FP16, BF16, FP8, and the command to use"},
    {"info", cmd_info, "CPU features, AMX permission, kernel level, native/emulated precision support"},
    {"formats", cmd_formats, "FP32, TF32, BF16, FP16, FP8-E4M3, FP8-E5M2: bits, range, precision"},
    {"inspect", cmd_inspect, "a safetensors file or checkpoint: tensors, dtypes, shapes, step, scaler, options"},
    {"sample", cmd_sample, "text from a trained GPT checkpoint: a prompt continued, sampled with a seed"},
    {"bench", cmd_bench, "kernel throughput against this machine's memory bandwidth"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc <command> [options]\n"
               "       ampc <command> --help\n\n"
               "Automatic mixed-precision training in C: what this machine's CPU offers each precision,\n"
               "and how fast ampc's kernels run on it.\n\n"
               "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nOptions:\n"
               "  --help     show this help and exit\n"
               "  --version  print the library version and exit\n\n"
               "Environment:\n"
               "  AMPC_ISA=ref|avx2|avx512|amx  cap the kernel level (it can lower the level, never raise it)\n\n"
               "Exit status: 0 success, 1 failure, 2 usage error (unknown command, option or value).\n");
}

static void command_list(char *buf, size_t size) {
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++) names[i] = commands[i].name;
    names[NCOMMANDS] = NULL;
    cli_join(names, buf, size);
}

/* Copies s for a one-line message: control characters become '?'. */
static void printable(const char *s, char *buf, size_t size) {
    size_t n = 0;
    for (; *s && n + 1 < size; s++) buf[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    buf[n] = '\0';
}

/* AMPC_ISA with an unknown value is ignored by the library (with a warning); a tool run by a script
 * must instead stop, or a typo would silently benchmark the wrong level. */
static bool isa_env_ok(const char *prog) {
    const ampc_cpu_info *cpu = ampc_cpu();
    if (cpu->isa_env_valid) return true;
    char v[64];
    printable(cpu->isa_env, v, sizeof v);
    fprintf(stderr, "%s: AMPC_ISA='%s' is not a kernel level; accepted: ref, avx2, avx512, amx, auto (or unset)\n",
            prog, v);
    return false;
}

int cli_parse_or_exit(const char *prog, void (*usage_fn)(FILE *), const cli_opt *opts, size_t nopts, int argc,
                      char **argv, int max_pos, const char *pos_what, cli_parse_out *out) {
    switch (cli_parse(opts, nopts, argc, argv, max_pos, pos_what, out)) {
    case CLI_HELP:
        usage_fn(stdout);
        cli_print_options(stdout, opts, nopts);
        return CLI_EXIT_OK;
    case CLI_ERROR: fprintf(stderr, "%s: %s\n", prog, out->error); return CLI_EXIT_USAGE;
    default: return isa_env_ok(prog) ? -1 : CLI_EXIT_USAGE;
    }
}

int cli_parse_json_only(const char *prog, void (*usage_fn)(FILE *), int argc, char **argv, bool *json) {
    *json = false;
    const cli_opt opts[] = {
        CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = json, .help = "print one JSON object instead of tables"),
    };
    cli_parse_out po = {0};
    return cli_parse_or_exit(prog, usage_fn, opts, 1, argc, argv, 0, NULL, &po);
}

int cli_fail_lib(const char *prog, ampc_status s) {
    const char *msg = ampc_last_error();
    fprintf(stderr, "%s: %s\n", prog, msg && *msg ? msg : ampc_status_str(s));
    return CLI_EXIT_FAIL;
}

static int top_level_option(const char *arg) {
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(arg, "--version") == 0) {
        printf("ampc %s\n", ampc_version());
        return CLI_EXIT_OK;
    }
    char q[64];
    printable(arg, q, sizeof q);
    fprintf(stderr, "ampc: unknown option '%s'; accepted: --help, --version\n", q);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
    char list[128];
    command_list(list, sizeof list);
    if (argc < 2) {
        fprintf(stderr, "ampc: missing command; expected one of: %s (see ampc --help)\n", list);
        return CLI_EXIT_USAGE;
    }
    if (argv[1][0] == '-') return top_level_option(argv[1]);
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    char q[64];
    printable(argv[1], q, sizeof q);
    fprintf(stderr, "ampc: unknown command '%s'; expected one of: %s\n", q, list);
    return CLI_EXIT_USAGE;
}
