/* safety.c: the signal flag and the up-front write checks of safety.h. The handler only stores the
 * signal number (nothing else is async-signal-safe enough to do there) and is installed with
 * SA_RESETHAND, so the first Ctrl-C asks for a clean stop and the second one gets the default action and
 * ends the process at once. The write check creates and removes a probe file next to the destination,
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
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

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
