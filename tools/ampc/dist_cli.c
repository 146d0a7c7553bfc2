/* dist_cli.c: see dist_cli.h. */
#include "dist_cli.h"

#include "args.h"

#include <stdlib.h>

void dist_quiet_begin(dist_quiet *q) {
    *q = (dist_quiet){0};
    if (ampc_dist_launch_size() < 2 || ampc_dist_launch_rank() == 0) return;
    FILE *mem = open_memstream(&q->buf, &q->len);
    if (!mem) return;
    fflush(stdout), fflush(stderr);
    q->on = true, q->err = stderr, q->out = stdout;
    stderr = mem, stdout = mem;
}

int dist_quiet_end(dist_quiet *q, ampc_dist *d, int rc) {
    if (q->on) {
        fclose(stderr);
        stderr = q->err, stdout = q->out;
    }
    int mine = rc > 0 ? rc : 0;
    if (d) {
        int64_t v[2] = {mine ? ampc_dist_rank(d) : ampc_dist_world_size(d), -mine}; /* first failing rank, -max rc */
        if (ampc_dist_allreduce(d, v, 2, AMPC_DTYPE_I64, AMPC_DIST_MIN) != AMPC_OK) {
            fprintf(stderr, "ampc train: rank %d: %s\n", ampc_dist_rank(d), ampc_last_error());
            v[0] = ampc_dist_rank(d), v[1] = -CLI_EXIT_FAIL;
        }
        if (v[0] < ampc_dist_world_size(d)) {
            if (q->on && v[0] == ampc_dist_rank(d) && q->buf) fputs(q->buf, stderr);
            rc = (int)-v[1];
        }
    }
    free(q->buf);
    *q = (dist_quiet){0};
    return rc;
}

int dist_join(const char *prog, double timeout, ampc_dist **d) {
    *d = NULL;
    if (ampc_dist_launch_size() < 2) return 0;
    if (!ampc_dist_available()) {
        if (ampc_dist_launch_rank() == 0)
            fprintf(stderr,
                    "%s: started by mpirun with %d ranks, but this ampc was built without MPI (install "
                    "libopenmpi-dev and rebuild)\n",
                    prog, ampc_dist_launch_size());
        return CLI_EXIT_FAIL;
    }
    if (ampc_dist_new(&(ampc_dist_params){.timeout_s = timeout}, d) != AMPC_OK) {
        fprintf(stderr, "%s: rank %d: %s\n", prog, ampc_dist_launch_rank(), ampc_last_error());
        return CLI_EXIT_FAIL;
    }
    return 0;
}
