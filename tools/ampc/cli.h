/* cli.h: what the subcommand files of the `ampc` tool share: their entry points (called by main.c
 * with the arguments after the subcommand name) and the few helpers that give every subcommand the
 * same exit statuses and one-line error messages (see args.h for the statuses). */
#ifndef AMPC_CLI_H
#define AMPC_CLI_H

#include "args.h"

#include "ampc.h"

/* argv[0..argc) are the arguments after the subcommand's name. Each returns an exit status. */
int cmd_info(int argc, char **argv);
int cmd_formats(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_sample(int argc, char **argv);

/* Parses a subcommand's options, then checks AMPC_ISA. Returns -1 when the caller should go on;
 * otherwise the exit status to return now: 0 after printing help (usage(stdout), then the option list),
 * 2 after printing one line `prog: <error>` on stderr. */
int cli_parse_or_exit(const char *prog, void (*usage)(FILE *), const cli_opt *opts, size_t nopts, int argc, char **argv,
                      int max_pos, const char *pos_what, cli_parse_out *out);

/* The whole option handling of a command whose only option is --json: -1 to go on (with *json set),
 * else the exit status to return now, as cli_parse_or_exit. */
int cli_parse_json_only(const char *prog, void (*usage)(FILE *), int argc, char **argv, bool *json);

/* Reports a library failure as `prog: <ampc_last_error()>` (or the status name when there is no
 * message) and returns CLI_EXIT_FAIL. */
int cli_fail_lib(const char *prog, ampc_status s);

#endif
