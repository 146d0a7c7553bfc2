/* slow_rename.c: a test shim, loaded with LD_PRELOAD, that makes every rename(2) onto a path ending in
 * ".st" (a checkpoint taking its place) wait SLOW_RENAME_MS milliseconds first. dist_stop.sh uses it to
 * have a save outlast Open MPI's kill timeout on any machine, without a model large enough to be slow. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "rename");
    const char *ms = getenv("SLOW_RENAME_MS");
    size_t n = to ? strlen(to) : 0;
    if (ms && n >= 3 && !strcmp(to + n - 3, ".st")) {
        long v = strtol(ms, NULL, 10);
        struct timespec d = {v / 1000, (v % 1000) * 1000000L};
        while (nanosleep(&d, &d) != 0) {} /* a signal handler may interrupt it: sleep the rest */
    }
    return real ? real(from, to) : -1;
}
