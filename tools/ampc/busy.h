/* busy.h: how much of the machine other processes used while a run was timed, so that `ampc compare` does
 * not call a precision slower because something else ran beside it. Linux's /proc/stat gives the CPU time
 * of the whole machine (steal included: a VM's noisy neighbours), getrusage this process's own. */
#ifndef AMPC_CLI_BUSY_H
#define AMPC_CLI_BUSY_H

typedef struct busy_probe {
    unsigned long long busy, total; /* machine ticks: not idle, all */
    double self;                    /* this process's CPU seconds */
    int ok;
} busy_probe;

void busy_begin(busy_probe *p);
/* The share of the machine's CPU time that other processes used since busy_begin (0..1), or -1 where it
 * cannot be read. */
double busy_others(const busy_probe *p);

#endif
