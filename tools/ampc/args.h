/* args.h: the long-option parser every `ampc` subcommand shares. A subcommand describes its options in a
 * constant table (name, kind, accepted values or range, help text, where the value goes); the parser
 * fills the outputs, collects positional arguments, answers --help, and on any mistake produces exactly
 * one message line that names the offending option or value and lists what is accepted. Nothing is
 * printed by the parser itself, so the caller decides the prefix ("ampc train: ...") and the stream. */
#ifndef AMPC_CLI_ARGS_H
#define AMPC_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of the CLI: success, a library/runtime failure, a usage mistake. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

typedef enum cli_kind {
    CLI_FLAG,   /* no value; out: bool* set to true */
    CLI_STRING, /* any non-empty value; out: const char** (points into argv) */
    CLI_CHOICE, /* one of `choices` (exact match); out: int* index into choices */
    CLI_INT,    /* decimal integer in [imin, imax]; out: int64_t* */
    CLI_DOUBLE, /* finite number in [dmin, dmax]; out: double* */
    CLI_CUSTOM, /* parsed by `parse`; for lists and other shapes the kinds above do not cover */
} cli_kind;

/* A CLI_CUSTOM parser: returns false and writes what it expected into why (one short phrase, e.g.
 * "a comma-separated list of fp32, bf16, fp16") when value is not acceptable. */
typedef bool (*cli_parse_fn)(const char *value, void *out, char *why, size_t why_size);

typedef struct cli_opt {
    const char *name; /* without the dashes: "threads" for --threads */
    cli_kind kind;
    void *out;
    const char *metavar;        /* value placeholder in --help ("T"); NULL = "VALUE" */
    const char *help;           /* one line for --help */
    const char *defval;         /* default shown in --help, or NULL */
    const char *const *choices; /* CLI_CHOICE: NULL-terminated list */
    int64_t imin, imax;         /* CLI_INT range, inclusive */
    double dmin, dmax;          /* CLI_DOUBLE range, inclusive */
    cli_parse_fn parse;         /* CLI_CUSTOM */
    const char *accepts;        /* CLI_CUSTOM: what is accepted, for error messages */
} cli_opt;

/* One row of an option table, as a compound literal: CLI_OPT(.name = "threads", .kind = CLI_INT, ...). */
#define CLI_OPT(...) ((cli_opt){__VA_ARGS__})

typedef enum cli_result { CLI_PARSED = 0, CLI_HELP, CLI_ERROR } cli_result;

typedef struct cli_parse_out {
    int npos;         /* positional arguments found, in order */
    char **pos;       /* points into a caller array of at least max_pos entries */
    bool *seen;       /* optional (NULL): seen[i] set when opts[i] was given */
    char error[1600]; /* the one-line message when CLI_ERROR (no prefix, no newline) */
} cli_parse_out;

/* Parses argv[0..argc) (argv[0] is the first argument, not the program). --help and -h anywhere give
 * CLI_HELP; "--" ends the options. At most max_pos positionals are accepted; pos_what names them in
 * the error for one too many ("arguments", "the benchmark kind"). Repeated options: the last wins. */
cli_result cli_parse(const cli_opt *opts, size_t nopts, int argc, char **argv, int max_pos, const char *pos_what,
                     cli_parse_out *out);

/* The option list of a --help text: one aligned line per option, with its accepted values and default,
 * then --help itself. */
void cli_print_options(FILE *f, const cli_opt *opts, size_t nopts);

/* "--json, --threads, --help": the option names of a table, for "accepted: ..." messages. */
void cli_list_options(const cli_opt *opts, size_t nopts, char *buf, size_t size);

/* Replaces control characters in s by '?', so that a message quoting user text stays one line. */
void cli_one_line(char *s);

/* "a, b, c" from a NULL-terminated list. */
void cli_join(const char *const *items, char *buf, size_t size);

#endif
