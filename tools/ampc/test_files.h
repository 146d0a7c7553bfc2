/* test_files.h: the file helpers the report writers' test programs share (report_test.c,
 * doctor_report_test.c): a CHECK that counts failures, read a whole stream or file into a NUL-terminated buffer, count occurrences of
 * a string, make a directory (exit 1 when it cannot be made). */
#ifndef AMPC_CLI_TEST_FILES_H
#define AMPC_CLI_TEST_FILES_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Failed checks so far; CHECK(cond, printf-args) reports one and goes on. */
static int failures;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

/* The rest of f from its start (malloc'd, NUL-terminated; *len its length when len is not NULL). */
static inline char *read_stream(FILE *f, size_t *len) {
    rewind(f);
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) s = realloc(s, cap *= 2);
    }
    if (s) s[n] = '\0';
    if (len) *len = n;
    return s;
}

static inline char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = read_stream(f, len);
    fclose(f);
    return s;
}

static inline int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static inline void make_dir(const char *path) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

#endif
