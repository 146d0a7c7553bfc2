/* launch.c: what the launcher told this process, read from the environment before (or without) MPI:
 * a program started by mpirun can keep ranks > 0 quiet while it parses its options, even in a build
 * without MPI (where it then says that MPI is missing, once). */
#include "../core/core.h"

#include <stdlib.h>

static int env_int(const char *const *names, int dflt) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return dflt;
}

int ampc_dist_launch_rank(void) {
    static const char *const n[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    return env_int(n, 0);
}

int ampc_dist_launch_size(void) {
    static const char *const n[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    return env_int(n, 1);
}
