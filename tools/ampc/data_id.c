/* data_id.c: absolute data specs and data fingerprints (data_id.h). A language-modelling set is
 * fingerprinted from the ids the library loaded, the training split followed by the validation split (for
 * a text, the whole file; for token files, their ids without the llm.c header, so the same tokens in
 * either format are the same data), so what is checked is exactly what is trained on; Fashion-MNIST's
 * images are decoded by the library, so its four files are read again here, in the library's order and
 * with its choice of NAME.gz over NAME. */
#include "data_id.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* One path of len bytes, absolute, appended at buf + *n. */
static void put_absolute(const char *path, size_t len, const char *cwd, char *buf, size_t size, size_t *n) {
    if (*n >= size) return; /* truncated already */
    while (len >= 2 && path[0] == '.' && path[1] == '/') path += 2, len -= 2;
    bool rel = len && path[0] != '/' && cwd;
    int k = snprintf(buf + *n, size - *n, "%s%s%.*s", rel && strcmp(cwd, "/") ? cwd : "", rel ? "/" : "", (int)len,
                     path);
    *n += k > 0 ? (size_t)k : 0;
}

void data_id_absolute(const char *spec, char *buf, size_t size) {
    const char *colon = strchr(spec, ':');
    const char *path = colon ? colon + 1 : NULL;
    char cwd[4096];
    const char *dir = getcwd(cwd, sizeof cwd);
    if (!path || !*path) {
        snprintf(buf, size, "%s", spec);
        return;
    }
    size_t n = (size_t)snprintf(buf, size, "%.*s", (int)(path - spec), spec);
    /* tokens:TRAIN,VAL names two files: each is made absolute */
    bool two = !strncmp(spec, "tokens:", 7) && strchr(path, ',');
    size_t first = two ? (size_t)(strchr(path, ',') - path) : strlen(path);
    put_absolute(path, first, dir, buf, size, &n);
    if (two && n < size) {
        n += (size_t)snprintf(buf + n, size - n, ",");
        put_absolute(path + first + 1, strlen(path + first + 1), dir, buf, size, &n);
    }
}

static void add(data_id *id, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t done = 0; done < n;) { /* zlib takes a uInt length */
        uInt k = n - done > (1u << 30) ? 1u << 30 : (uInt)(n - done);
        id->crc32 = (uint32_t)crc32(id->crc32, b + done, k);
        done += k;
    }
    id->size += n;
}

static bool add_file(data_id *id, const char *path, char *why, size_t why_size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_size, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    unsigned char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) add(id, buf, n);
    bool ok = !ferror(f);
    fclose(f);
    if (!ok) snprintf(why, why_size, "cannot read %s", path);
    return ok;
}

static bool add_fashion(data_id *id, const char *dir, char *why, size_t why_size) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s.gz", dir, names[i]);
        if (access(path, F_OK) != 0) snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (!add_file(id, path, why, why_size)) return false;
    }
    return true;
}

bool data_id_make(const char *spec, const ampc_dataset *ds, data_id *id, char *why, size_t why_size) {
    memset(id, 0, sizeof *id);
    data_id_absolute(spec, id->spec, sizeof id->spec);
    id->crc32 = (uint32_t)crc32(0, NULL, 0);
    size_t n;
    int w;
    const void *ids = ampc_dataset_ids(ds, AMPC_SPLIT_TRAIN, &n, &w);
    if (ids) {
        add(id, ids, n * (size_t)w);
        ids = ampc_dataset_ids(ds, AMPC_SPLIT_EVAL, &n, &w);
        if (ids) add(id, ids, n * (size_t)w);
        return true;
    }
    const char *colon = strchr(id->spec, ':');
    return add_fashion(id, colon && colon[1] ? colon + 1 : AMPC_FASHION_MNIST_DIR, why, why_size);
}
