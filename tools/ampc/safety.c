/* safety.c: the signal flag and the up-front write checks of safety.h. The handler stores the signal
 * number and the time (clock_gettime), and writes the stop line the loop prepared (write(2)): all three
 * are async-signal-safe, so the line is on the terminal even when a kill follows before the save ends.
 * The line is kept in two buffers, the loop filling the one the handler does not read and then switching
 * an index, so the handler never reads a half-written line. It is installed with SA_RESETHAND, so the
 * first Ctrl-C asks for a clean stop and the second one gets the default action and ends the process at
 * once. The write check creates and removes a probe file next to the destination,
 * which catches a missing directory, a file where a directory should be, a read-only file system and
 * missing permissions alike, before any work is done. */
#include "safety.h"

#include "args.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;
static struct timespec stop_time;
static char stop_lines[2][1024];
static volatile sig_atomic_t stop_line_index = -1; /* the complete line, or -1: none */

static void on_signal(int sig) {
    clock_gettime(CLOCK_MONOTONIC, &stop_time);
    stop_signal = sig;
    int i = stop_line_index;
    if (i < 0) return;
    const char *line = stop_lines[i];
    size_t n = strlen(line); /* async-signal-safe since POSIX.1-2008 TC2 */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w; /* nothing to do about a stderr that does not take it */
}

void safety_set_stop_line(const char *line) {
    int next = stop_line_index == 0 ? 1 : 0;
    if (!line) {
        stop_line_index = -1;
        return;
    }
    snprintf(stop_lines[next], sizeof stop_lines[next], "%s\n", line);
    stop_line_index = next;
}

double safety_seconds_since_stop(void) {
    if (!stop_signal) return -1;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - stop_time.tv_sec) + 1e-9 * (double)(t.tv_nsec - stop_time.tv_nsec);
}

static void install(int sig) {
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler == SIG_IGN) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* the second signal is not caught: it ends the process */
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

void safety_install_signals(void) {
    static bool done;
    if (done) return;
    done = true;
    install(SIGINT);
    install(SIGTERM);
}

int safety_stop_signal(void) { return stop_signal; }

const char *safety_signal_name(int sig) {
    static char buf[32];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

/* The directory part of path ("." when none). */
static void dir_of(const char *path, char *dir, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, size, ".");
    else snprintf(dir, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static int refuse(const char *prog, const char *opt, const char *path, const char *why) {
    char msg[8600];
    snprintf(msg, sizeof msg, "%s: --%s: cannot write '%s': %s", prog, opt, path, why);
    cli_one_line(msg); /* whatever the path holds */
    fprintf(stderr, "%s\n", msg);
    return 1;
}

/* Creates and removes a file in dir. 0, or the errno. */
static int probe_dir(const char *dir) {
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.ampc-probe-%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    close(fd);
    unlink(probe);
    return 0;
}

int safety_check_writable(const char *prog, const char *opt, const char *path, bool replace) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return refuse(prog, opt, path, "it is a directory");
        if (!replace && (!S_ISREG(st.st_mode) || access(path, W_OK) != 0))
            return refuse(prog, opt, path, S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file");
    }
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    int e = probe_dir(dir);
    if (!e) return 0;
    char why[4300];
    snprintf(why, sizeof why, "cannot create files in '%s': %s", dir, strerror(e));
    return refuse(prog, opt, path, why);
}

void safety_shell_quote(const char *path, char *buf, size_t size) {
    if (path[strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=+,:@%")] == '\0') {
        snprintf(buf, size, "%s", path);
        return;
    }
    size_t n = 0;
    if (size < 3) return;
    buf[n++] = '\'';
    for (const char *p = path; *p && n + 6 < size; p++) {
        if (*p == '\'') memcpy(buf + n, "'\\''", 4), n += 4;
        else buf[n++] = *p;
    }
    buf[n++] = '\'';
    buf[n] = '\0';
}
