/* test_dir.h: a private temporary directory for a test program's files (under $TMPDIR, else /tmp),
 * removed with its entries at the end, and paths inside it. */
#ifndef AMPC_TEST_DIR_H
#define AMPC_TEST_DIR_H

#include "test_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

static char g_dir[256];

/* Makes g_dir = $TMPDIR/ampc_test_TAG_XXXXXX. */
static inline void tu_dir_make(const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ampc_test_%s_XXXXXX", tmp && tmp[0] ? tmp : "/tmp", tag);
    if (!mkdtemp(g_dir)) FAILF("mkdtemp %s failed", g_dir);
}

/* Removes the directory's entries (files, or empty directories standing in for files) and the directory. */
static inline void tu_dir_remove(void) {
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            if (unlink(p) != 0) rmdir(p);
        }
    closedir(d);
    rmdir(g_dir);
}

/* g_dir/name, in a static buffer (valid until the next call). */
static inline const char *tu_path(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

#endif
