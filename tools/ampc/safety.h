/* safety.h: what keeps a run from being lost to an interrupt or a destination it cannot write. SIGINT and
 * SIGTERM only raise a flag that the training loop reads between steps (it then saves and stops); a
 * second signal ends the process at once. Every file a run will write is tried before the first step, so
 * a typo in a path costs a second, not the run. */
#ifndef AMPC_CLI_SAFETY_H
#define AMPC_CLI_SAFETY_H

#include <stdbool.h>
#include <stddef.h>

/* Installs the SIGINT/SIGTERM handlers (once; SIGINT only when it is not ignored, as a shell ignores it
 * for a script's background jobs). */
void safety_install_signals(void);
/* The signal that asked the run to stop, or 0. */
int safety_stop_signal(void);
/* The line the signal handler writes to stderr first thing (a newline is added; NULL: none), e.g.
 * "ampc train: stopping after step 63, saving z.st ...": set before each step, so that a kill after
 * the signal still leaves a trace of what was going on. */
void safety_set_stop_line(const char *line);
/* Seconds since the stop signal arrived (monotonic clock), or -1 when none did. */
double safety_seconds_since_stop(void);
/* "SIGINT", "SIGTERM", "signal N". */
const char *safety_signal_name(int sig);

/* Can path be written? replace: the file appears by rename in its directory (a checkpoint), so only the
 * directory must take new files and path must not be a directory; otherwise the file is opened in place
 * (a log, a report), so an existing one must be a writable regular file. A probe file is created in the
 * directory and removed. 0, or 1 after one line `prog: --opt: cannot write 'path': why` on stderr. */
int safety_check_writable(const char *prog, const char *opt, const char *path, bool replace);

/* path quoted for a shell command line, when it needs it. */
void safety_shell_quote(const char *path, char *buf, size_t size);

#endif
