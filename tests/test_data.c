/* test_data.c: data sets. Small IDX fixtures (gzip and plain, data_fixtures.h) written to a temp directory
 * and read back through the public API; every malformed variant (missing files, truncation, bad magic,
 * type, ndim, dims against the data and against each other, labels out of range, corrupt gzip) must fail
 * with a message naming the file; the IDX parser on every prefix of a valid file; text splits and
 * windows; the built-in corpus regenerated independently line by line; and, when Debian's package is
 * installed, the real Fashion-MNIST files. The loaders' order, shards and cursor are test_loader.c's. */
#include "data_fixtures.h"

#include "data/data.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TU_CONTEXT(7, 2)

/* ---- Fashion-MNIST fixtures read back ---- */

static void test_idx_read_back(void **state) {
    (void)state;
    tu_dir_make("data");
    write_fashion();
    ampc_dataset *ds;
    ASSERT_OK(open_fashion(&ds));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.task, AMPC_TASK_IMAGE_CLASSIFICATION);
    assert_int_equal(info.kind, AMPC_DATA_FASHION_MNIST);
    assert_int_equal(info.num_classes, 10);
    assert_int_equal(info.input_ndim, 3);
    assert_true(info.input_shape[0] == 1 && info.input_shape[1] == 28 && info.input_shape[2] == 28);
    assert_int_equal(info.split_size[AMPC_SPLIT_TRAIN], NTRAIN);
    assert_int_equal(info.split_size[AMPC_SPLIT_EVAL], NTEST);
    assert_string_equal(info.name, "fashion-mnist");
    assert_string_equal(ampc_dataset_class_name(ds, 9), "Ankle boot");
    assert_null(ampc_dataset_class_name(ds, 10));
    assert_null(ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, NULL));
    for (int split = 0; split < 2; split++) {
        ampc_loader *ld;
        ASSERT_OK(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = (ampc_split)split, .batch = 8}, &ld));
        int n = split ? NTEST : NTRAIN, seen = 0;
        assert_int_equal(ampc_loader_num_batches(ld), (n + 7) / 8);
        for (;;) {
            ampc_tensor *x, *y;
            bool end;
            ASSERT_OK(ampc_loader_next(ld, &x, &y, &end));
            if (end) break;
            int64_t B = ampc_tensor_dim(x, 0);
            assert_int_equal(B, seen + 8 <= n ? 8 : n - seen);
            assert_int_equal(ampc_tensor_ndim(x), 4);
            assert_int_equal(ampc_tensor_dtype(x), AMPC_DTYPE_F32);
            assert_int_equal(ampc_tensor_dtype(y), AMPC_DTYPE_I64);
            assert_true(ampc_tensor_dim(x, 1) == 1 && ampc_tensor_dim(x, 2) == 28 && ampc_tensor_dim(x, 3) == 28);
            const float *xv = ampc_tensor_data(x);
            const int64_t *yv = ampc_tensor_data(y);
            for (int64_t b = 0; b < B; b++, seen++) {
                assert_int_equal(yv[b], label_of(split, seen));
                for (int j = 0; j < PX; j++)
                    if (xv[b * PX + j] != norm_px(pixel(split, seen, j)))
                        FAILF("split %d image %d pixel %d: %g", split, seen, j, xv[b * PX + j]);
            }
            ampc_ctx_step_end(g_ctx);
        }
        assert_int_equal(seen, n);
        ampc_loader_free(ld);
    }
    ampc_dataset_free(ds);
    tu_dir_remove();
}

/* ---- malformed IDX files ---- */

/* Replaces the training images (gzipped) by `f`, opens the directory, expects status s. */
static void expect_bad_images(const uint8_t *f, size_t len, ampc_status s) {
    write_file("train-images-idx3-ubyte.gz", f, len, true);
    ampc_dataset *ds = (ampc_dataset *)1;
    ampc_clear_error();
    assert_int_equal(open_fashion(&ds), s);
    assert_null(ds);
    ASSERT_ERROR_MENTIONS("ampc_dataset_open", "train-images-idx3-ubyte.gz");
}

static void test_idx_malformed_images(void **state) {
    (void)state;
    tu_dir_make("data");
    write_fashion();
    static uint8_t px[NTRAIN * PX];
    size_t len;
    uint8_t *f = idx_image(0x08, 3, (uint32_t[]){NTRAIN, 28, 28}, px, sizeof px, &len);
    expect_bad_images(f, 3, AMPC_STATUS_FORMAT); /* shorter than the magic */
    ASSERT_ERROR_MENTIONS("truncated", "3 bytes");
    expect_bad_images(f, 10, AMPC_STATUS_FORMAT); /* header cut inside the dims */
    ASSERT_ERROR_MENTIONS("truncated", "needs 16");
    expect_bad_images(f, len - 100, AMPC_STATUS_FORMAT); /* data cut short */
    ASSERT_ERROR_MENTIONS("truncated", "37 x 28 x 28", "29008 data bytes");
    f[0] = 1;
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("bad magic", "01000803");
    f[0] = 0, f[2] = 0x0D;
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("0x0d", "float", "expected 0x08");
    f[2] = 0x08, f[3] = 0;
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("ndim of 0", "expected 1 to 4");
    f[3] = 7;
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("ndim of 7");
    free(f);
    /* more data than the dims say */
    static uint8_t more[NTRAIN * PX + 5];
    f = idx_image(0x08, 3, (uint32_t[]){NTRAIN, 28, 28}, more, sizeof more, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("29013 data bytes", "trailing");
    free(f);
    /* dims claiming 2^128 bytes: refused without allocating */
    f = idx_image(0x08, 4, (uint32_t[]){~0u, ~0u, ~0u, ~0u}, px, 64, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("truncated", "4294967295 x 4294967295");
    free(f);
    /* well-formed IDX, wrong image size */
    f = idx_image(0x08, 3, (uint32_t[]){NTRAIN, 27, 28}, px, NTRAIN * 27 * 28, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("37 x 27 x 28", "N x 28 x 28");
    free(f);
    f = idx_image(0x08, 2, (uint32_t[]){NTRAIN, PX}, px, sizeof px, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("37 x 784", "N x 28 x 28");
    free(f);
    f = idx_image(0x08, 3, (uint32_t[]){0, 28, 28}, px, 0, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("no images");
    free(f);
    /* images and labels disagree */
    f = idx_image(0x08, 3, (uint32_t[]){NTRAIN - 1, 28, 28}, px, (NTRAIN - 1) * PX, &len);
    expect_bad_images(f, len, AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("36 images", "train-labels-idx1-ubyte.gz", "37 labels");
    free(f);
    tu_dir_remove();
}

static void expect_bad_labels(const uint8_t *f, size_t len, bool gz) {
    write_file(gz ? "t10k-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte", f, len, gz);
    ampc_dataset *ds;
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS(gz ? "t10k-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte");
}

static void test_idx_malformed_labels_and_files(void **state) {
    (void)state;
    tu_dir_make("data");
    write_fashion();
    uint8_t lb[NTEST] = {0, 1, 2, 3, 4, 12, 6, 7, 8, 9, 0};
    size_t len;
    uint8_t *f = idx_image(0x08, 1, (uint32_t[]){NTEST}, lb, NTEST, &len);
    expect_bad_labels(f, len, false);
    ASSERT_ERROR_MENTIONS("label 12 at index 5", "0..9");
    free(f);
    f = idx_image(0x08, 3, (uint32_t[]){NTEST, 1, 1}, lb, NTEST, &len);
    expect_bad_labels(f, len, false);
    ASSERT_ERROR_MENTIONS("11 x 1 x 1", "1-dim");
    free(f);
    /* a gzip stream cut in half, and garbage after a gzip magic: the .gz is preferred over the plain file */
    lb[5] = 5;
    f = idx_image(0x08, 1, (uint32_t[]){NTEST}, lb, NTEST, &len);
    write_file("t10k-labels-idx1-ubyte.gz", f, len, true);
    FILE *g = fopen(tu_path("t10k-labels-idx1-ubyte.gz"), "rb");
    uint8_t gzb[256];
    size_t gzn = fread(gzb, 1, sizeof gzb, g);
    fclose(g);
    write_file("t10k-labels-idx1-ubyte.gz", gzb, gzn / 2, false);
    ampc_dataset *ds;
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("t10k-labels-idx1-ubyte.gz", "truncated or corrupt gzip");
    const uint8_t junk[] = {0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x03,
                            0xff, 0xff, 0xff, 0xff, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc};
    write_file("t10k-labels-idx1-ubyte.gz", junk, sizeof junk, false);
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("t10k-labels-idx1-ubyte.gz", "gzip");
    free(f);
    /* a missing file, a directory where a file should be, a missing directory */
    unlink(tu_path("t10k-labels-idx1-ubyte.gz"));
    unlink(tu_path("t10k-labels-idx1-ubyte"));
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS("t10k-labels-idx1-ubyte.gz", "apt-get install dataset-fashion-mnist", "fashion-mnist:DIR");
    mkdir(tu_path("t10k-labels-idx1-ubyte"), 0700);
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS("t10k-labels-idx1-ubyte", "is a directory");
    tu_dir_remove();
    assert_int_equal(open_fashion(&ds), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS(g_dir, "apt-get install dataset-fashion-mnist");
}

/* The parser on memory: every proper prefix and every single-byte header corruption of a valid file
 * fails cleanly (ASan watches the reads); the whole file parses. */
static void test_idx_parse_prefixes(void **state) {
    (void)state;
    uint8_t data[2 * 3 * 5];
    for (int i = 0; i < 30; i++) data[i] = (uint8_t)i;
    size_t len;
    uint8_t *f = idx_image(0x08, 3, (uint32_t[]){2, 3, 5}, data, sizeof data, &len);
    ampci_idx idx;
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so an overread is an ASan error */
        memcpy(copy, f, n);
        assert_int_equal(ampci_idx_parse("t", "mem", copy, n, &idx), AMPC_STATUS_FORMAT);
        free(copy);
    }
    ASSERT_OK(ampci_idx_parse("t", "mem", f, len, &idx));
    assert_int_equal(idx.ndim, 3);
    assert_true(idx.dims[0] == 2 && idx.dims[1] == 3 && idx.dims[2] == 5 && idx.bytes == 30);
    assert_memory_equal(idx.data, data, 30);
    for (size_t pos = 0; pos < 16; pos++)
        for (int v = 0; v < 256; v += 17) {
            uint8_t saved = f[pos];
            f[pos] = (uint8_t)v;
            ampc_status s = ampci_idx_parse("t", "mem", f, len, &idx);
            if (s == AMPC_OK) assert_true(idx.bytes == len - 4 - 4 * (size_t)idx.ndim);
            f[pos] = saved;
        }
    free(f);
}

/* ---- text data sets ---- */

static void test_text_splits_and_windows(void **state) {
    (void)state;
    tu_dir_make("data");
    uint8_t text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (uint8_t)(i * 37 + i / 256);
    write_file("a.txt", text, sizeof text, false);
    write_file("a.txt.gz", text, sizeof text, true);
    ampc_dataset *ds;
    ASSERT_OK(open_text("a.txt", 0, &ds));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.task, AMPC_TASK_CHAR_LM);
    assert_int_equal(info.num_classes, 256);
    assert_int_equal(info.split_size[0], 900);
    assert_int_equal(info.split_size[1], 100);
    assert_non_null(strstr(info.name, "a.txt"));
    size_t n;
    assert_ptr_equal(ampc_dataset_text(ds, AMPC_SPLIT_EVAL, &n), ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, NULL) + 900);
    assert_int_equal(n, 100);
    assert_memory_equal(ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, NULL), text, 1000);
    ampc_dataset_free(ds);
    ASSERT_OK(open_text("a.txt.gz", 0.25, &ds));
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.split_size[0], 750);
    assert_int_equal(info.split_size[1], 250);
    assert_memory_equal(ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, NULL), text, 1000);
    for (int split = 0; split < 2; split++) {
        const int64_t T = 10, L = split ? 250 : 750, off = split ? 750 : 0;
        ampc_loader *ld;
        ASSERT_OK(ampc_loader_new(g_ctx, ds,
                                  &(ampc_loader_params){.split = (ampc_split)split, .batch = 4, .context = T}, &ld));
        assert_int_equal(ampc_loader_num_samples(ld), (L - 1) / T);
        int64_t w = 0;
        ampc_tensor *x, *y;
        bool end;
        for (;;) {
            ASSERT_OK(ampc_loader_next(ld, &x, &y, &end));
            if (end) break;
            assert_int_equal(ampc_tensor_dim(x, 1), T);
            assert_int_equal(ampc_tensor_dtype(x), AMPC_DTYPE_I64);
            const int64_t *xv = ampc_tensor_data(x), *yv = ampc_tensor_data(y);
            for (int64_t b = 0; b < ampc_tensor_dim(x, 0); b++, w++)
                for (int64_t t = 0; t < T; t++) {
                    assert_int_equal(xv[b * T + t], text[off + w * T + t]);
                    assert_int_equal(yv[b * T + t], text[off + w * T + t + 1]);
                    if (t + 1 < T) assert_int_equal(yv[b * T + t], xv[b * T + t + 1]);
                }
            ampc_ctx_step_end(g_ctx);
        }
        assert_int_equal(w, (L - 1) / T); /* every start i*T with i*T + T + 1 <= L */
        ampc_loader_free(ld);
    }
    ampc_dataset_free(ds);
    tu_dir_remove();
}

static void test_text_errors(void **state) {
    (void)state;
    tu_dir_make("data");
    ampc_dataset *ds = (ampc_dataset *)1;
    write_file("empty.txt", "", 0, false);
    assert_int_equal(open_text("empty.txt", 0, &ds), AMPC_STATUS_FORMAT);
    assert_null(ds);
    ASSERT_ERROR_MENTIONS("empty.txt", "empty");
    write_file("three.txt", "abc", 3, false);
    assert_int_equal(open_text("three.txt", 0, &ds), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("three.txt", "too short", "val_fraction 0.1");
    assert_int_equal(open_text("missing.txt", 0, &ds), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS("missing.txt", "No such file");
    for (int i = 0; i < 3; i++) {
        double bad[] = {-0.1, 1.0, 1.5};
        assert_int_equal(open_text("three.txt", bad[i], &ds), AMPC_STATUS_INVALID_ARG);
        ASSERT_ERROR_MENTIONS("val_fraction", "(0, 1)");
    }
    assert_int_equal(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_TEXT}, &ds), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("needs a file");
    assert_int_equal(ampc_dataset_open(&(ampc_dataset_params){.kind = (ampc_data_kind)9}, &ds),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("kind 9");
    /* loader parameters against a 100-byte text: 90 train, 10 eval bytes */
    char t[100];
    memset(t, 'x', sizeof t);
    write_file("t.txt", t, sizeof t, false);
    ASSERT_OK(open_text("t.txt", 0, &ds));
    ampc_loader *ld = (ampc_loader *)1;
    assert_int_equal(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = AMPC_SPLIT_EVAL, .context = 10}, &ld),
                     AMPC_STATUS_INVALID_ARG);
    assert_null(ld);
    ASSERT_ERROR_MENTIONS("eval split", "10 bytes", "context 10 + 1 = 11");
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = AMPC_SPLIT_EVAL, .context = 9}, &ld));
    assert_int_equal(ampc_loader_num_samples(ld), 1);
    ampc_loader_free(ld);
    assert_int_equal(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.batch = -1}, &ld), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("batch -1", ">= 1");
    assert_int_equal(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.context = -3}, &ld), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("context -3", ">= 1");
    assert_int_equal(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = (ampc_split)2}, &ld),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("split 2");
    /* 90 bytes, T = 8: 11 windows, fewer than a drop_last batch of 12 */
    assert_int_equal(
        ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.batch = 12, .context = 8, .drop_last = true}, &ld),
        AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("11 samples", "batch of 12", "drop_last");
    ampc_dataset_free(ds);
    /* context on an image set */
    write_fashion();
    ASSERT_OK(open_fashion(&ds));
    assert_int_equal(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.context = 5}, &ld), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("context 5", "text only");
    ampc_dataset_free(ds);
    tu_dir_remove();
}

static void test_parse_spec(void **state) {
    (void)state;
    ampc_dataset_params p = {.val_fraction = 0.2};
    ASSERT_OK(ampc_dataset_parse("builtin", &p));
    assert_true(p.kind == AMPC_DATA_BUILTIN && !p.path && p.val_fraction == 0.2);
    ASSERT_OK(ampc_dataset_parse("fashion-mnist", &p));
    assert_true(p.kind == AMPC_DATA_FASHION_MNIST && !p.path);
    ASSERT_OK(ampc_dataset_parse("fashion-mnist:/data/fm", &p));
    assert_true(p.kind == AMPC_DATA_FASHION_MNIST && strcmp(p.path, "/data/fm") == 0);
    ASSERT_OK(ampc_dataset_parse("text:a:b.txt", &p));
    assert_true(p.kind == AMPC_DATA_TEXT && strcmp(p.path, "a:b.txt") == 0);
    const char *bad[] = {"", "text:", "text", "fashion-mnist:", "mnist", "Builtin", "builtin:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ampc_dataset_parse(bad[i], &p), AMPC_STATUS_INVALID_ARG);
        ASSERT_ERROR_MENTIONS("builtin, fashion-mnist, fashion-mnist:DIR, text:FILE or tokens:TRAIN[,VAL]");
    }
    assert_string_equal(ampc_data_kind_name(AMPC_DATA_FASHION_MNIST), "fashion-mnist");
    assert_string_equal(ampc_split_name(AMPC_SPLIT_EVAL), "eval");
}

/* ---- the built-in corpus ---- */

/* Parses "a<op>b=c\n" at s; returns the line length, or 0 when malformed. */
static int parse_line(const char *s, size_t left, unsigned *a, char *op, unsigned *b, unsigned *c) {
    unsigned *num[3] = {a, b, c};
    const char seps[3] = {0, '=', '\n'};
    size_t i = 0;
    for (int f = 0; f < 3; f++) {
        size_t start = i;
        *num[f] = 0;
        while (i < left && s[i] >= '0' && s[i] <= '9' && i - start < 5)
            *num[f] = *num[f] * 10 + (unsigned)(s[i++] - '0');
        if (i == start || (s[start] == '0' && i - start > 1) || i >= left) return 0; /* no leading zeros */
        if (f == 0) {
            *op = s[i];
            if (*op != '+' && *op != '-' && *op != '*') return 0;
        } else if (s[i] != seps[f]) {
            return 0;
        }
        i++;
    }
    return (int)i;
}

static void test_builtin_corpus(void **state) {
    (void)state;
    ampc_dataset *d1, *d2;
    ASSERT_OK(ampc_dataset_open(NULL, &d1));
    ASSERT_OK(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_BUILTIN, .val_fraction = 0.5}, &d2));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(d1, &info));
    assert_int_equal(info.kind, AMPC_DATA_BUILTIN);
    assert_int_equal(info.task, AMPC_TASK_CHAR_LM);
    assert_int_equal(info.num_classes, 256);
    assert_true(info.input_ndim == 1 && info.input_shape[0] == 0);
    assert_int_equal(info.split_size[0] + info.split_size[1], AMPC_BUILTIN_BYTES);
    assert_int_equal(info.split_size[1], 32224); /* round(322243 * 0.1) */
    size_t n1, n2;
    const char *t = (const char *)ampc_dataset_text(d1, AMPC_SPLIT_TRAIN, &n1);
    const char *t2 = (const char *)ampc_dataset_text(d2, AMPC_SPLIT_TRAIN, &n2);
    assert_int_equal(n2, AMPC_BUILTIN_BYTES / 2);   /* round(161121.5) = 161122 validation bytes */
    assert_memory_equal(t, t2, AMPC_BUILTIN_BYTES); /* deterministic: two generations agree */
    /* every line: correct arithmetic, and exactly the documented recipe */
    size_t pos = 0;
    int counts[3] = {0};
    for (uint64_t k = 0; k < AMPC_BUILTIN_LINES; k++) {
        unsigned a, b, c;
        char op;
        int len = parse_line(t + pos, AMPC_BUILTIN_BYTES - pos, &a, &op, &b, &c);
        if (!len) FAILF("line %llu at byte %zu is malformed: %.16s", (unsigned long long)k, pos, t + pos);
        unsigned want = op == '+' ? a + b : op == '-' ? a - b : a * b;
        if (c != want || (op == '-' && a < b))
            FAILF("line %llu: %u%c%u=%u is wrong", (unsigned long long)k, a, op, b, c);
        uint32_t w[4];
        ampc_rng_block(AMPC_BUILTIN_SEED, 0, k, w);
        unsigned wa = w[1] % (w[0] % 3 == 2 ? 100 : 1000), wb = w[2] % (w[0] % 3 == 2 ? 10 : 1000);
        if (w[0] % 3 == 1 && wa < wb) {
            unsigned s = wa;
            wa = wb, wb = s;
        }
        assert_int_equal(op, "+-*"[w[0] % 3]);
        assert_true(a == wa && b == wb);
        counts[w[0] % 3]++;
        pos += (size_t)len;
    }
    assert_int_equal(pos, AMPC_BUILTIN_BYTES);
    for (int i = 0; i < 3; i++) assert_true(counts[i] > 9000);
    /* it loads like any text */
    ampc_loader *ld;
    ASSERT_OK(ampc_loader_new(g_ctx, d1, &(ampc_loader_params){.split = AMPC_SPLIT_EVAL}, &ld));
    assert_int_equal(ampc_loader_num_samples(ld), (32224 - 1) / 64);
    ampc_loader_free(ld);
    ampc_dataset_free(d1);
    ampc_dataset_free(d2);
}

/* ---- the real files, when Debian's package is installed ---- */

static void test_fashion_mnist_installed(void **state) {
    (void)state;
    if (access(AMPC_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        print_message("note: %s not installed (apt-get install dataset-fashion-mnist); skipping\n",
                      AMPC_FASHION_MNIST_DIR);
        skip();
    }
    ampc_dataset *ds;
    ASSERT_OK(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_FASHION_MNIST}, &ds));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.split_size[AMPC_SPLIT_TRAIN], 60000);
    assert_int_equal(info.split_size[AMPC_SPLIT_EVAL], 10000);
    /* the normalisation constants are the training set's: mean ~0, std ~1 after it */
    ampc_loader *ld;
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.batch = 1000}, &ld));
    double s = 0, s2 = 0;
    int64_t first_label = -1, n = 0;
    ampc_tensor *x, *y;
    bool end;
    for (;;) {
        ASSERT_OK(ampc_loader_next(ld, &x, &y, &end));
        if (end) break;
        if (first_label < 0) first_label = ((const int64_t *)ampc_tensor_data(y))[0];
        const float *v = ampc_tensor_data(x);
        for (int64_t i = 0; i < ampc_tensor_numel(x); i++) s += v[i], s2 += (double)v[i] * v[i];
        n += ampc_tensor_numel(x);
        ampc_ctx_step_end(g_ctx);
    }
    assert_int_equal(n, 60000LL * PX);
    double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
    if (fabs(mean) > 0.01 || fabs(sd - 1) > 0.01) FAILF("normalised mean %g std %g", mean, sd);
    assert_int_equal(first_label, 9); /* the first training image is an ankle boot */
    ampc_loader_free(ld);
    ampc_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_read_back),
        cmocka_unit_test(test_idx_malformed_images),
        cmocka_unit_test(test_idx_malformed_labels_and_files),
        cmocka_unit_test(test_idx_parse_prefixes),
        cmocka_unit_test(test_text_splits_and_windows),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_parse_spec),
        cmocka_unit_test(test_builtin_corpus),
        cmocka_unit_test(test_fashion_mnist_installed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
