/* fuzz_idx.c: libFuzzer target for the IDX reader of src/data/idx.c, the code between a Fashion-MNIST
 * file on disk and the pixels a model trains on. The first input byte picks the mode, the rest is the
 * file content: bit 0 clear = plain bytes, straight into the parsers; bit 0 set = the bytes are put in a
 * memfd and read back by ampci_read_file, the reader the data set uses (zlib's gzread: gzip members,
 * or plain data passed through, capped at READ_MAX bytes), so truncated and corrupt gzip streams are
 * fuzzed too. Bit 1 clear = one IDX image through ampci_idx_parse; bit 1 set = a Fashion-MNIST split:
 * the next two bytes (big-endian) say how many of the remaining bytes are the image file, the rest is
 * the label file, both through ampci_fashion_parse_split (IDX checks, N x 28 x 28 images, N labels in
 * 0..9). On success every data byte is read and the result checked against the buffer; on failure the
 * status must be FORMAT (IO/OOM only from reading) with a message that names the file. Any violation
 * traps, so libFuzzer saves the input. */
#define _GNU_SOURCE
#include "data/data.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define READ_MAX ((size_t)256 << 10)

static int g_fd = -1;
static char g_path[64];

static void check_error(ampc_status s, const char *name) {
    if (s != AMPC_STATUS_FORMAT && s != AMPC_STATUS_IO && s != AMPC_STATUS_OOM) __builtin_trap();
    const char *msg = ampc_last_error();
    if (!msg || !strstr(msg, name)) __builtin_trap();
}

/* The bytes as a file would give them: as is, or through the memfd and the zlib reader. NULL (with the
 * error checked) when reading fails; *owned is the buffer to free. */
static const uint8_t *load(bool gz, const uint8_t *data, size_t size, size_t *len, uint8_t **owned) {
    *owned = NULL;
    if (!gz) {
        *len = size;
        return data;
    }
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    uint8_t *buf;
    ampc_status s = ampci_read_file("fuzz_idx", g_path, READ_MAX, &buf, len);
    if (s != AMPC_OK) {
        check_error(s, g_path);
        return NULL;
    }
    if (*len > READ_MAX) __builtin_trap();
    *owned = buf;
    return buf;
}

static unsigned touch(const uint8_t *p, size_t n) {
    unsigned x = 0;
    for (size_t i = 0; i < n; i++) x ^= p[i];
    return x;
}

static void one_image(const uint8_t *buf, size_t len, const char *name) {
    ampci_idx idx;
    ampc_status s = ampci_idx_parse("fuzz_idx", name, buf, len, &idx);
    if (s != AMPC_OK) {
        if (s != AMPC_STATUS_FORMAT) __builtin_trap();
        check_error(s, name);
        return;
    }
    if (idx.ndim < 1 || idx.ndim > AMPC_MAX_DIMS) __builtin_trap();
    uint64_t n = 1;
    for (int i = 0; i < idx.ndim; i++) n *= idx.dims[i];
    size_t hdr = 4 + 4 * (size_t)idx.ndim;
    if (n != idx.bytes || idx.data != buf + hdr || hdr + idx.bytes != len) __builtin_trap();
    volatile unsigned sink = touch(idx.data, idx.bytes);
    (void)sink;
}

static void split(const uint8_t *ibuf, size_t ilen, const uint8_t *lbuf, size_t llen, const char *iname,
                  const char *lname) {
    int64_t count = -1;
    const uint8_t *pixels = NULL, *labels = NULL;
    ampc_status s = ampci_fashion_parse_split("fuzz_idx", iname, ibuf, ilen, lname, lbuf, llen, &count, &pixels,
                                              &labels);
    if (s != AMPC_OK) {
        if (s != AMPC_STATUS_FORMAT || count != -1 || pixels || labels) __builtin_trap();
        const char *msg = ampc_last_error();
        if (!msg || (!strstr(msg, iname) && !strstr(msg, lname))) __builtin_trap();
        return;
    }
    size_t px = (size_t)count * AMPCI_IMAGE_SIDE * AMPCI_IMAGE_SIDE;
    if (count < 1 || pixels != ibuf + 16 || px != ilen - 16 || labels != lbuf + 8 || (size_t)count != llen - 8)
        __builtin_trap();
    for (int64_t i = 0; i < count; i++)
        if (labels[i] >= AMPCI_IMAGE_CLASSES) __builtin_trap();
    volatile unsigned sink = touch(pixels, px);
    (void)sink;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_fd = memfd_create("fuzz_idx", MFD_CLOEXEC);
    if (g_fd < 0) abort();
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool gz = data[0] & 1, pair = data[0] & 2;
    data++, size--;
    uint8_t *own1 = NULL, *own2 = NULL;
    if (!pair) {
        size_t len;
        const uint8_t *buf = load(gz, data, size, &len, &own1);
        if (buf) one_image(buf, len, gz ? g_path : "train-labels-idx1-ubyte");
    } else {
        if (size < 2) return 0;
        size_t ilen = (size_t)data[0] << 8 | data[1];
        data += 2, size -= 2;
        if (ilen > size) ilen = size;
        /* copies, so ASan sees reads past either part (the parts are adjacent in the input) */
        uint8_t *im = malloc(ilen), *lb = malloc(size - ilen);
        if ((!im && ilen) || (!lb && size > ilen)) abort();
        memcpy(im, data, ilen);
        memcpy(lb, data + ilen, size - ilen);
        size_t l1, l2;
        const uint8_t *b1 = load(gz, im, ilen, &l1, &own1);
        if (b1 && gz) {
            /* the second read reuses the memfd: keep the first result */
            const uint8_t *b2 = load(gz, lb, size - ilen, &l2, &own2);
            if (b2) split(b1, l1, b2, l2, "images.gz", "labels.gz");
        } else if (b1) {
            split(im, ilen, lb, size - ilen, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");
        }
        free(im);
        free(lb);
    }
    free(own1);
    free(own2);
    return 0;
}
