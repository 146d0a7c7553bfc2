/* data_id.c: absolute data specs and data fingerprints (data_id.h). A char-LM set is fingerprinted from
 * the bytes the library loaded (the training split followed by the validation split is the whole file),
 * so what is checked is exactly what is trained on; Fashion-MNIST's images are decoded by the library, so
 * its four files are read again here, in the library's order and with its choice of NAME.gz over NAME. */
#include "data_id.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

void data_id_absolute(const char *spec, char *buf, size_t size) {
    const char *colon = strchr(spec, ':');
    const char *path = colon ? colon + 1 : NULL;
    char cwd[4096];
    if (!path || !*path || path[0] == '/' || !getcwd(cwd, sizeof cwd)) {
        snprintf(buf, size, "%s", spec);
        return;
    }
    while (path[0] == '.' && path[1] == '/') path += 2;
    snprintf(buf, size, "%.*s%s/%s", (int)(path - spec), spec, strcmp(cwd, "/") ? cwd : "", path);
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
    const uint8_t *text = ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, &n);
    if (text) {
        add(id, text, n);
        text = ampc_dataset_text(ds, AMPC_SPLIT_EVAL, &n);
        if (text) add(id, text, n);
        return true;
    }
    const char *colon = strchr(id->spec, ':');
    return add_fashion(id, colon && colon[1] ? colon + 1 : AMPC_FASHION_MNIST_DIR, why, why_size);
}
