/* busy.c: the machine's load from others over an interval (busy.h). */
#include "busy.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static int read_stat(unsigned long long *busy, unsigned long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[8] = {0}; /* user nice system idle iowait irq softirq steal */
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(f);
    if (n < 4) return 0;
    *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    *total = *busy + v[3] + v[4];
    return 1;
}

static double self_seconds(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

void busy_begin(busy_probe *p) {
    p->ok = read_stat(&p->busy, &p->total);
    p->self = self_seconds();
}

double busy_others(const busy_probe *p) {
    unsigned long long busy, total;
    if (!p->ok || !read_stat(&busy, &total) || total <= p->total) return -1;
    double hz = (double)sysconf(_SC_CLK_TCK), dt = (double)(total - p->total);
    double others = (double)(busy - p->busy) - (self_seconds() - p->self) * hz;
    others = others < 0 ? 0 : others / dt;
    return others > 1 ? 1 : others;
}
