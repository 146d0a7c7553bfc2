/* data_fixtures.h: the data set fixtures test_data.c and test_loader.c share: files written into the
 * test's directory (test_dir.h), a small Fashion-MNIST in IDX (train gzipped, test plain) whose first
 * pixel of image i is i, so a batch row says which sample it is, and text files opened as data sets. */
#ifndef AMPC_TEST_DATA_FIXTURES_H
#define AMPC_TEST_DATA_FIXTURES_H

#include "test_dir.h"

#include <stdlib.h>
#include <zlib.h>

enum { NTRAIN = 37, NTEST = 11, PX = 28 * 28 };

static inline void write_file(const char *name, const void *data, size_t n, bool gz) {
    const char *p = tu_path(name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        if (!g || (n && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) FAILF("gzwrite %s", p);
    } else {
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) FAILF("fwrite %s", p);
    }
}

/* An IDX file image: header (type, dims) then `data_bytes` bytes from data. Caller frees. */
static inline uint8_t *idx_image(uint8_t type, int ndim, const uint32_t *dims, const uint8_t *data, size_t data_bytes,
                                 size_t *len) {
    size_t hdr = 4 + 4 * (size_t)ndim;
    uint8_t *b = malloc(hdr + data_bytes + 1);
    b[0] = 0, b[1] = 0, b[2] = type, b[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        for (int k = 0; k < 4; k++) b[4 + 4 * i + k] = (uint8_t)(dims[i] >> (24 - 8 * k));
    if (data_bytes) memcpy(b + hdr, data, data_bytes);
    *len = hdr + data_bytes;
    return b;
}

/* Pixel j of image i: the first pixel is the image's index, so a batch row says which sample it is. */
static inline uint8_t pixel(int split, int i, int j) {
    return j == 0 ? (uint8_t)i : (uint8_t)(i * 7 + j * 3 + split * 101);
}
static inline uint8_t label_of(int split, int i) { return (uint8_t)((i * 3 + split) % 10); }

static const char *const NAMES[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                                        {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};

/* Writes one split's two files; train gzipped, test plain (both spellings are accepted). */
static inline void write_split(int split, int n) {
    uint8_t *px = malloc((size_t)n * PX), lb[256];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < PX; j++) px[(size_t)i * PX + j] = pixel(split, i, j);
        lb[i] = label_of(split, i);
    }
    size_t len;
    char name[64];
    bool gz = split == 0;
    uint8_t *f = idx_image(0x08, 3, (uint32_t[]){(uint32_t)n, 28, 28}, px, (size_t)n * PX, &len);
    snprintf(name, sizeof name, "%s%s", NAMES[split][0], gz ? ".gz" : "");
    write_file(name, f, len, gz);
    free(f);
    f = idx_image(0x08, 1, (uint32_t[]){(uint32_t)n}, lb, (size_t)n, &len);
    snprintf(name, sizeof name, "%s%s", NAMES[split][1], gz ? ".gz" : "");
    write_file(name, f, len, gz);
    free(f);
    free(px);
}

static inline void write_fashion(void) {
    write_split(0, NTRAIN);
    write_split(1, NTEST);
}

static inline ampc_status open_fashion(ampc_dataset **ds) {
    return ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_FASHION_MNIST, .path = g_dir}, ds);
}

static inline float norm_px(uint8_t p) { return (float)(((double)p / 255.0 - 0.2860) / 0.3530); }

/* The sample index of image batch row b (its first pixel). */
static inline int row_id(const ampc_tensor *x, int64_t b) {
    float v = ((const float *)ampc_tensor_data(x))[b * PX];
    for (int i = 0; i < 256; i++)
        if (norm_px((uint8_t)i) == v) return i;
    FAILF("row %lld has no known first pixel", (long long)b);
    return -1;
}

static inline ampc_status open_text(const char *name, double frac, ampc_dataset **ds) {
    return ampc_dataset_open(
        &(ampc_dataset_params){.kind = AMPC_DATA_TEXT, .path = tu_path(name), .val_fraction = frac}, ds);
}

#endif
