/* idx.c: reading files and the IDX format, and the Fashion-MNIST data set built on them. Every file is
 * read whole through zlib (which passes plain files through), into a buffer that grows only with the
 * bytes actually read, so a header claiming huge dims or a gzip bomb costs at most AMPC_DATA_MAX_BYTES.
 * The IDX parser then works on memory and checks every size against the buffer before trusting it:
 * the reader will be fuzzed, and malformed input must give a message, never a crash. */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define READ_CHUNK ((size_t)1 << 20)

/* Opens path for gzread, with a message naming the file (and why) on failure. */
static ampc_status open_gz(const char *fn, const char *path, gzFile *out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ampci_fail(AMPC_STATUS_IO, "%s: cannot open %s: %s", fn, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return ampci_fail(AMPC_STATUS_IO, "%s: %s is a directory, expected a file", fn, path);
    }
    gzFile g = gzdopen(fd, "rb");
    if (!g) {
        close(fd);
        return ampci_fail(AMPC_STATUS_OOM, "%s: cannot start reading %s (out of memory)", fn, path);
    }
    *out = g;
    return AMPC_OK;
}

/* Makes room for at least one more byte, growing geometrically but never past max + 1 (the one byte past
 * the cap is how "too large" is detected). */
static ampc_status grow(const char *fn, const char *path, uint8_t **buf, size_t *cap, size_t max) {
    size_t want = *cap ? *cap * 2 : READ_CHUNK;
    if (want > max + 1 || want < *cap) want = max + 1;
    uint8_t *nb = realloc(*buf, want);
    if (!nb) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory reading %s (%zu bytes)", fn, path, want);
    *buf = nb, *cap = want;
    return AMPC_OK;
}

/* The read loop proper: fills *buf until end of data, an error, or more than max bytes. */
static ampc_status read_all(const char *fn, const char *path, gzFile g, size_t max, uint8_t **buf, size_t *len) {
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            if (cap > max) break;
            ampc_status s = grow(fn, path, buf, &cap, max);
            if (s != AMPC_OK) return s;
        }
        size_t want = cap - n < READ_CHUNK ? cap - n : READ_CHUNK;
        int r = gzread(g, *buf + n, (unsigned)want);
        if (r < 0) {
            int err;
            const char *msg = gzerror(g, &err);
            if (err == Z_ERRNO) msg = strerror(errno);
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s: truncated or corrupt gzip data after %zu bytes: %s", fn,
                              path, n, msg);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (n > max)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is larger than the limit of %zu bytes (uncompressed)", fn, path,
                          max);
    /* A gzip stream cut short reads as end of data with a pending "unexpected end of file". */
    int err = Z_OK;
    const char *msg = gzerror(g, &err);
    if (err != Z_OK && err != Z_STREAM_END)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s: truncated or corrupt gzip data after %zu bytes: %s", fn, path, n,
                          msg);
    *len = n;
    return AMPC_OK;
}

ampc_status ampci_read_file(const char *fn, const char *path, size_t max, uint8_t **buf, size_t *len) {
    *buf = NULL, *len = 0;
    gzFile g;
    ampc_status s = open_gz(fn, path, &g);
    if (s != AMPC_OK) return s;
    s = read_all(fn, path, g, max, buf, len);
    gzclose(g);
    if (s != AMPC_OK) free(*buf), *buf = NULL, *len = 0;
    return s;
}

static const char *idx_type_name(unsigned t) {
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    }
    return "not an IDX type";
}

/* "60000 x 28 x 28" */
static const char *dims_str(char *b, size_t size, const uint32_t *dims, int ndim) {
    size_t o = 0;
    b[0] = '\0';
    for (int i = 0; i < ndim && o < size; i++) o += (size_t)snprintf(b + o, size - o, i ? " x %u" : "%u", dims[i]);
    return b;
}

ampc_status ampci_idx_parse(const char *fn, const char *path, const uint8_t *buf, size_t len, ampci_idx *out) {
    memset(out, 0, sizeof *out);
    if (len < 4)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is truncated: %zu bytes, an IDX header needs at least 4", fn,
                          path, len);
    if (buf[0] != 0 || buf[1] != 0)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s is not an IDX file: bad magic %02x%02x%02x%02x (expected 0000 "
                          "then type and ndim, e.g. 00000803)",
                          fn, path, buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != 0x08)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s has IDX element type 0x%02x (%s); expected 0x08 (unsigned "
                          "byte)",
                          fn, path, buf[2], idx_type_name(buf[2]));
    int ndim = buf[3];
    if (ndim < 1 || ndim > AMPC_MAX_DIMS)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s has an IDX ndim of %d; expected 1 to %d", fn, path, ndim,
                          AMPC_MAX_DIMS);
    size_t hdr = 4 + 4 * (size_t)ndim;
    if (len < hdr)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is truncated: %zu bytes, its IDX header of %d dims needs %zu", fn,
                          path, len, ndim, hdr);
    uint64_t need = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        out->dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        /* dims are < 2^32 each; stop multiplying once past any possible file size */
        if (!overflow && __builtin_mul_overflow(need, (uint64_t)out->dims[i], &need)) overflow = true;
    }
    char d[96];
    dims_str(d, sizeof d, out->dims, ndim);
    size_t have = len - hdr;
    if (overflow || need > have)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s is truncated: its dims %s need %s%llu data bytes, the file has "
                          "%zu",
                          fn, path, d, overflow ? "more than " : "", (unsigned long long)(overflow ? UINT64_MAX : need),
                          have);
    if (need < have)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s has %zu data bytes but its dims %s account for %llu (trailing "
                          "data: not an IDX file, or wrong dims)",
                          fn, path, have, d, (unsigned long long)need);
    out->ndim = ndim;
    out->data = buf + hdr;
    out->bytes = (size_t)need;
    return AMPC_OK;
}

/* ---- Fashion-MNIST ---- */

static const char *const FASHION_FILES[AMPC_SPLIT_COUNT][2] = {
    {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
    {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
};

/* Reads dir/NAME.gz, or dir/NAME when the .gz does not exist; *path receives the name used. */
static ampc_status read_named(const char *fn, const char *dir, const char *name, char *path, size_t psize,
                              uint8_t **buf, size_t *len) {
    if ((size_t)snprintf(path, psize, "%s/%s.gz", dir, name) >= psize)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: Fashion-MNIST directory name too long (%zu bytes)", fn,
                          strlen(dir));
    if (access(path, F_OK) != 0) {
        snprintf(path, psize, "%s/%s", dir, name);
        if (access(path, F_OK) != 0)
            return ampci_fail(AMPC_STATUS_IO,
                              "%s: Fashion-MNIST: cannot find %s/%s.gz (nor %s): install it with "
                              "`apt-get install dataset-fashion-mnist` (files in %s), or give the directory that "
                              "holds the files (--data fashion-mnist:DIR)",
                              fn, dir, name, path, AMPC_FASHION_MNIST_DIR);
    }
    return ampci_read_file(fn, path, AMPC_DATA_MAX_BYTES, buf, len);
}

/* Shape checks of one split's pair of files, after both parsed as IDX. */
static ampc_status check_pair(const char *fn, const char *ipath, const ampci_idx *im, const char *lpath,
                              const ampci_idx *lb) {
    char d[96];
    if (im->ndim != 3 || im->dims[1] != AMPCI_IMAGE_SIDE || im->dims[2] != AMPCI_IMAGE_SIDE)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s holds %s; expected images of N x 28 x 28", fn, ipath,
                          dims_str(d, sizeof d, im->dims, im->ndim));
    if (lb->ndim != 1)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s holds %s; expected a 1-dim list of N labels", fn, lpath,
                          dims_str(d, sizeof d, lb->dims, lb->ndim));
    if (im->dims[0] == 0) return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s holds no images", fn, ipath);
    if (im->dims[0] != lb->dims[0])
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s has %u images but %s has %u labels; expected equal counts", fn,
                          ipath, im->dims[0], lpath, lb->dims[0]);
    for (uint32_t i = 0; i < lb->dims[0]; i++)
        if (lb->data[i] >= AMPCI_IMAGE_CLASSES)
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s: label %u at index %u is out of range; expected 0..%d", fn,
                              lpath, lb->data[i], i, AMPCI_IMAGE_CLASSES - 1);
    return AMPC_OK;
}

ampc_status ampci_fashion_parse_split(const char *fn, const char *ipath, const uint8_t *ibuf, size_t ilen,
                                      const char *lpath, const uint8_t *lbuf, size_t llen, int64_t *count,
                                      const uint8_t **pixels, const uint8_t **labels) {
    ampci_idx im, lb;
    ampc_status st = ampci_idx_parse(fn, ipath, ibuf, ilen, &im);
    if (st == AMPC_OK) st = ampci_idx_parse(fn, lpath, lbuf, llen, &lb);
    if (st == AMPC_OK) st = check_pair(fn, ipath, &im, lpath, &lb);
    if (st != AMPC_OK) return st;
    *count = im.dims[0];
    *pixels = im.data;
    *labels = lb.data;
    return AMPC_OK;
}

static ampc_status open_split(const char *fn, const char *dir, int s, ampc_dataset *ds) {
    char ipath[4096], lpath[4096];
    size_t ilen, llen;
    ampc_status st = read_named(fn, dir, FASHION_FILES[s][0], ipath, sizeof ipath, &ds->img_buf[s], &ilen);
    if (st == AMPC_OK) st = read_named(fn, dir, FASHION_FILES[s][1], lpath, sizeof lpath, &ds->lbl_buf[s], &llen);
    if (st != AMPC_OK) return st;
    return ampci_fashion_parse_split(fn, ipath, ds->img_buf[s], ilen, lpath, ds->lbl_buf[s], llen, &ds->count[s],
                                     &ds->pixels[s], &ds->labels[s]);
}

ampc_status ampci_fashion_open(const char *fn, const char *dir, ampc_dataset *ds) {
    if (!dir || !dir[0]) dir = AMPC_FASHION_MNIST_DIR;
    struct stat st;
    int err = stat(dir, &st) != 0 ? errno : 0;
    if (err || !S_ISDIR(st.st_mode))
        return ampci_fail(AMPC_STATUS_IO,
                          "%s: Fashion-MNIST: cannot use directory %s (%s): install the data with "
                          "`apt-get install dataset-fashion-mnist` (files in %s), or give the directory that holds "
                          "train-images-idx3-ubyte.gz and the other three files (--data fashion-mnist:DIR)",
                          fn, dir, err ? strerror(err) : "not a directory", AMPC_FASHION_MNIST_DIR);
    ds->kind = AMPC_DATA_FASHION_MNIST;
    ds->task = AMPC_TASK_IMAGE_CLASSIFICATION;
    for (int s = 0; s < AMPC_SPLIT_COUNT; s++) {
        ampc_status r = open_split(fn, dir, s, ds);
        if (r != AMPC_OK) return r;
    }
    return AMPC_OK;
}
