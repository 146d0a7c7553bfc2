/* ckpt.c: saving with rotation (see ckpt.h). The library writes one file atomically; this adds the
 * numbered copies: the checkpoint is written as its numbered name, then linked to FILE through a
 * temporary name and a rename (link() cannot replace a file), and old numbered copies are pruned by
 * scanning the directory, so copies left by an earlier, interrupted process are counted too. A save that
 * fails can fall back to a rescue file in the temporary directory, so a run outlives its destination. */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directory part of path ("." when none) and the file name part. */
static void split_path(const char *path, char *dir, size_t dsize, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, dsize, ".");
    else snprintf(dir, dsize, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* Length of the stem of a file name: up to its last '.', unless the name has none (or starts with it). */
static size_t stem_len(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? (size_t)(dot - name) : strlen(name);
}

void ckpt_step_name(const char *path, int64_t step, char *buf, size_t size) {
    const char *dir_end = strrchr(path, '/');
    const char *name = dir_end ? dir_end + 1 : path;
    size_t stem = (size_t)(name - path) + stem_len(name);
    snprintf(buf, size, "%.*s-step%08lld%s", (int)stem, path, (long long)step, path + stem);
}

static int sync_dir(const char *prog, const char *path) {
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        fprintf(stderr, "%s: --checkpoint: cannot sync directory '%s': %s\n", prog, dir, strerror(e));
        return 1;
    }
    close(fd);
    return 0;
}

/* FILE becomes a second name of the numbered checkpoint. */
static int link_newest(const char *prog, const char *numbered, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.link", path);
    unlink(tmp);
    if (link(numbered, tmp) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: --checkpoint: cannot make '%s' name the newest checkpoint '%s': %s\n", prog, path,
                numbered, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return sync_dir(prog, path);
}

/* Is name STEM-step<digits>EXT for this path? Its step in *step. */
static bool numbered_copy(const char *name, const char *base, int64_t *step) {
    size_t stem = stem_len(base), ext = strlen(base) - stem, n = strlen(name);
    if (n < stem + 5 + 1 + ext || strncmp(name, base, stem) || strncmp(name + stem, "-step", 5) ||
        strcmp(name + n - ext, base + stem))
        return false;
    int64_t s = 0;
    for (size_t i = stem + 5; i < n - ext; i++) {
        if (name[i] < '0' || name[i] > '9' || s > INT64_MAX / 10 - 10) return false;
        s = s * 10 + (name[i] - '0');
    }
    *step = s;
    return true;
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The steps of path's numbered copies, newest first (malloc'd, *n of them; NULL when none). */
static int64_t *numbered_steps(const char *path, size_t *n) {
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int64_t *steps = NULL, s;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!numbered_copy(e->d_name, base, &s)) continue;
        if (*n == cap) {
            int64_t *g = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *g);
            if (!g) break;
            steps = g;
        }
        steps[(*n)++] = s;
    }
    closedir(d);
    if (*n) qsort(steps, *n, sizeof *steps, cmp_desc);
    return steps;
}

size_t ckpt_numbered_count(const char *path, int64_t *newest) {
    size_t n;
    int64_t *steps = numbered_steps(path, &n);
    if (n && newest) *newest = steps[0];
    free(steps);
    return n;
}

/* Deletes all but the newest keep numbered copies. Failures only warn: the checkpoint is saved. */
static void prune(const char *prog, const char *path, int64_t keep) {
    char victim[4200];
    size_t n;
    int64_t *steps = numbered_steps(path, &n);
    for (size_t i = (size_t)keep; i < n; i++) {
        ckpt_step_name(path, steps[i], victim, sizeof victim);
        if (unlink(victim) != 0 && errno != ENOENT)
            fprintf(stderr, "%s: warning: cannot delete old checkpoint '%s': %s\n", prog, victim, strerror(errno));
    }
    free(steps);
}

static ampc_dist *g_dist;

void ckpt_set_dist(ampc_dist *d) { g_dist = d; }

static ampc_status write_file(const char *path, const ampc_checkpoint_state *state) {
    return g_dist ? ampc_dist_checkpoint_save(g_dist, path, state) : ampc_checkpoint_save(path, state);
}

int ckpt_save(const char *prog, const char *path, int64_t keep, const ampc_checkpoint_state *state) {
    char numbered[4200];
    bool root = ampc_dist_rank(g_dist) == 0;
    if (keep > 1) ckpt_step_name(path, state->step, numbered, sizeof numbered);
    if (write_file(keep > 1 ? numbered : path, state) != AMPC_OK) {
        if (root) fprintf(stderr, "%s: --checkpoint: %s\n", prog, ampc_last_error());
        return 1;
    }
    if (keep <= 1) return 0;
    int rc = root ? link_newest(prog, numbered, path) : 0;
    if (!rc && root) prune(prog, path, keep);
    if (g_dist && ampc_dist_agree(g_dist, rc ? AMPC_STATUS_IO : AMPC_OK) != AMPC_OK) rc = 1;
    return rc;
}

int ckpt_save_or_rescue(const char *prog, const char *path, int64_t keep, const ampc_checkpoint_state *state,
                        char *rescue, size_t size) {
    if (ckpt_save(prog, path, keep, state) == 0) return 0;
    const char *tmp = getenv("TMPDIR"), *slash = strrchr(path, '/');
    snprintf(rescue, size, "%s/ampc-rescue-%ld-%s", tmp && *tmp ? tmp : "/tmp", (long)getpid(),
             slash ? slash + 1 : path);
    if (write_file(rescue, state) == AMPC_OK) return 1;
    if (ampc_dist_rank(g_dist) == 0)
        fprintf(stderr, "%s: --checkpoint: the rescue copy failed too: %s\n", prog, ampc_last_error());
    rescue[0] = '\0';
    return 2;
}
