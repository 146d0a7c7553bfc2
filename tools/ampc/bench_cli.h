/* bench_cli.h: the `ampc bench` kinds that live in their own files (bench.c dispatches). Each takes the
 * arguments after the kind and returns the exit status. */
#ifndef AMPC_CLI_BENCH_H
#define AMPC_CLI_BENCH_H

int bench_step_main(int argc, char **argv);
int bench_gemm_main(int argc, char **argv);

#endif
