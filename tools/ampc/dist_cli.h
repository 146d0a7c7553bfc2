/* dist_cli.h: `ampc train` under mpirun. Ranks are numbered by the launcher before MPI starts; rank 0
 * speaks for the job: the others keep what they would print during the phases every rank goes through
 * alike (options, files, data) and show it only when they alone failed, so a bad flag gives one message,
 * not one per rank. Decisions that must be taken together (go on or not) are agreed. */
#ifndef AMPC_CLI_DIST_H
#define AMPC_CLI_DIST_H

#include "ampc.h"

#include <stdio.h>

typedef struct dist_quiet {
    bool on;         /* this rank's output is held */
    FILE *err, *out; /* the real streams */
    char *buf;
    size_t len;
} dist_quiet;

/* Ranks > 0 of a launched job hold their stdout and stderr from here on. */
void dist_quiet_begin(dist_quiet *q);
/* Restores the streams and returns the phase's exit status for this rank (-1 or 0: go on). Without d (MPI
 * not started yet) the held text is dropped: the phase went the same way on rank 0, which said it. With
 * d, every rank learns the outcome: all go on only when all can; the lowest failing rank shows what it
 * held (rank 0 printed already); a rank that did not fail exits with the failing one's status, silently. */
int dist_quiet_end(dist_quiet *q, ampc_dist *d, int rc);

/* Joins the job when the launcher started more than one rank: *d stays NULL for one process. 0, or an
 * exit status after a message (MPI missing from this build, MPI failing to start). */
int dist_join(const char *prog, double timeout, ampc_dist **d);

#endif
