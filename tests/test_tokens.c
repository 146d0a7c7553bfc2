/* test_tokens.c: token files as data sets (tokens.c). The test writes nanoGPT's raw uint16 files and
 * llm.c's headered ones itself, in a temporary directory, and reads them back through the public API: the
 * ids as stored, the default vocabulary (largest id + 1 rounded up to 64, GPT-2's 50257 -> 50304), the
 * validation split from a second file or from the last 10% of one (no window crosses the boundary, as for
 * text), the batches (x and y shifted by one, uint16 ids past 255 included). Every bad file is refused with
 * one line naming it: empty, odd length, a truncated header, another llm.c version or magic (Llama 3's
 * uint32 format named), a count that does not match the length, no tokens, an id outside a given vocab
 * (its file and position), a vocab below 256 for bytes; and the parser on every prefix of a valid file. */
#include "test_dir.h"

#include "data/data.h"

#include <stdlib.h>
#include <sys/stat.h>

TU_CONTEXT(11, 2)

/* ---- writing token files ---- */

static void put_file(const char *name, const void *data, size_t n) {
    FILE *f = fopen(tu_path(name), "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) FAILF("writing %s", name);
}

/* n ids as little-endian bytes (caller frees). */
static uint8_t *le_ids(const uint16_t *ids, size_t n) {
    uint8_t *b = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) b[2 * i] = (uint8_t)ids[i], b[2 * i + 1] = (uint8_t)(ids[i] >> 8);
    return b;
}

static void write_raw(const char *name, const uint16_t *ids, size_t n) {
    uint8_t *b = le_ids(ids, n);
    put_file(name, b, 2 * n);
    free(b);
}

/* An llm.c file: header {magic, version, count, 0...}, then the n ids (count may lie). */
static void write_llmc(const char *name, uint32_t magic, uint32_t version, uint32_t count, const uint16_t *ids,
                       size_t n) {
    uint8_t *b = calloc(1, 1024 + 2 * n + 1);
    uint32_t h[3] = {magic, version, count};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(h[i] >> (8 * k));
    uint8_t *t = le_ids(ids, n);
    memcpy(b + 1024, t, 2 * n);
    put_file(name, b, 1024 + 2 * n);
    free(t), free(b);
}

/* Token i of the test sequence: ids across both bytes (past 255), largest `max` at position 7. */
static uint16_t tok(size_t i, unsigned max) {
    return i == 7 ? (uint16_t)max : (uint16_t)((i * 2654435761u >> 7) % max);
}

static uint16_t *make_ids(size_t n, unsigned max) {
    uint16_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = tok(i, max);
    return t;
}

/* Opens "A" or "A,B" (names in the test's directory) as token data with the given vocab. */
static ampc_status open_tokens(const char *files, int vocab, ampc_dataset **ds) {
    char spec[1200], first[200];
    const char *comma = strchr(files, ',');
    snprintf(first, sizeof first, "%.*s", comma ? (int)(comma - files) : (int)strlen(files), files);
    snprintf(spec, sizeof spec, "%s", tu_path(first));
    if (comma) snprintf(spec + strlen(spec), sizeof spec - strlen(spec), ",%s", tu_path(comma + 1));
    return ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_TOKENS, .path = spec, .vocab = vocab}, ds);
}

static unsigned id_of(const uint8_t *ids, size_t i) { return ids[2 * i] | (unsigned)ids[2 * i + 1] << 8; }

/* Every window of a split through an in-order loader: x = ids [w*T, w*T + T), y = the same shifted by one. */
static void check_windows(const ampc_dataset *ds, ampc_split split, const uint16_t *want, int64_t T) {
    size_t n;
    ampc_loader *ld;
    ampc_dataset_ids(ds, split, &n, NULL);
    ASSERT_OK(ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = split, .batch = 5, .context = T}, &ld));
    assert_int_equal(ampc_loader_num_samples(ld), (int64_t)((n - 1) / (size_t)T));
    int64_t w = 0;
    for (;;) {
        ampc_tensor *x, *y;
        bool end;
        ASSERT_OK(ampc_loader_next(ld, &x, &y, &end));
        if (end) break;
        const int64_t *xv = ampc_tensor_data(x), *yv = ampc_tensor_data(y);
        for (int64_t b = 0; b < ampc_tensor_dim(x, 0); b++, w++)
            for (int64_t t = 0; t < T; t++)
                if (xv[b * T + t] != want[w * T + t] || yv[b * T + t] != want[w * T + t + 1])
                    FAILF("split %d window %lld t %lld: x %lld y %lld, want %u %u", (int)split, (long long)w,
                          (long long)t, (long long)xv[b * T + t], (long long)yv[b * T + t], want[w * T + t],
                          want[w * T + t + 1]);
        ampc_ctx_step_end(g_ctx);
    }
    assert_int_equal(w, ampc_loader_num_samples(ld));
    ampc_loader_free(ld);
}

/* ---- reading back ---- */

static void test_two_files(void **state) {
    (void)state;
    tu_dir_make("tokens");
    enum { NT = 1500, NV = 333 };
    uint16_t *tr = make_ids(NT, 50256), *va = make_ids(NV, 1000);
    write_raw("train.bin", tr, NT);
    write_llmc("val.bin", AMPC_TOKENS_LLMC_MAGIC, 1, NV, va, NV);
    ampc_dataset *ds;
    ASSERT_OK(open_tokens("train.bin,val.bin", 0, &ds));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.kind, AMPC_DATA_TOKENS);
    assert_int_equal(info.task, AMPC_TASK_CHAR_LM);
    assert_int_equal(info.num_classes, 50304); /* llm.c's padded GPT-2 vocabulary */
    assert_int_equal(info.max_id, 50256);
    assert_int_equal(info.split_size[AMPC_SPLIT_TRAIN], NT);
    assert_int_equal(info.split_size[AMPC_SPLIT_EVAL], NV);
    assert_true(!strncmp(info.name, "tokens:", 7) && strstr(info.name, "train.bin,") && strstr(info.name, "val.bin"));
    const char *want[] = {"train.bin (raw uint16, 1500 tokens) for training", "val.bin (llm.c, 333 tokens)",
                          "largest id 50256", "vocab 50304 (largest id + 1, rounded up to a multiple of 64)"};
    for (int i = 0; i < 4; i++)
        if (!strstr(info.summary, want[i])) FAILF("summary \"%s\" lacks \"%s\"", info.summary, want[i]);
    assert_null(ampc_dataset_text(ds, AMPC_SPLIT_TRAIN, NULL));
    size_t n;
    int wb;
    const uint8_t *ids = ampc_dataset_ids(ds, AMPC_SPLIT_TRAIN, &n, &wb);
    assert_true(n == NT && wb == 2);
    for (size_t i = 0; i < n; i++)
        if (id_of(ids, i) != tr[i]) FAILF("train id %zu: %u, want %u", i, id_of(ids, i), tr[i]);
    ids = ampc_dataset_ids(ds, AMPC_SPLIT_EVAL, &n, &wb);
    assert_true(n == NV && wb == 2);
    for (size_t i = 0; i < n; i++)
        if (id_of(ids, i) != va[i]) FAILF("val id %zu: %u, want %u", i, id_of(ids, i), va[i]);
    check_windows(ds, AMPC_SPLIT_TRAIN, tr, 16);
    check_windows(ds, AMPC_SPLIT_EVAL, va, 7);
    ampc_dataset_free(ds);
    /* a vocabulary given that holds the ids is kept */
    ASSERT_OK(open_tokens("train.bin,val.bin", 50257, &ds));
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.num_classes, 50257);
    assert_non_null(strstr(info.summary, "vocab 50257 (given)"));
    ampc_dataset_free(ds);
    free(tr), free(va);
    tu_dir_remove();
}

/* One file: the last round(10%) of its tokens validate, as text's bytes do, and no window crosses over. */
static void test_one_file_split(void **state) {
    (void)state;
    tu_dir_make("tokens");
    enum { N = 1005 };
    uint16_t *t = make_ids(N, 700);
    write_llmc("all.bin", AMPC_TOKENS_LLMC_MAGIC, 1, N, t, N);
    write_raw("all.raw", t, N);
    const char *names[] = {"all.bin", "all.raw"};
    size_t split = N - 101; /* round(1005 * 0.1) = round(100.5) = 101 */
    for (int k = 0; k < 2; k++) {
        ampc_dataset *ds;
        ASSERT_OK(open_tokens(names[k], 0, &ds));
        ampc_dataset_info info;
        ASSERT_OK(ampc_dataset_get_info(ds, &info));
        assert_int_equal(info.split_size[AMPC_SPLIT_TRAIN], split);
        assert_int_equal(info.split_size[AMPC_SPLIT_EVAL], N - split);
        assert_int_equal(info.num_classes, 704);
        assert_non_null(strstr(info.summary, "the last 101 for validation"));
        size_t n;
        const uint8_t *tr = ampc_dataset_ids(ds, AMPC_SPLIT_TRAIN, &n, NULL),
                      *ev = ampc_dataset_ids(ds, AMPC_SPLIT_EVAL, NULL, NULL);
        assert_ptr_equal(ev, tr + 2 * split);
        check_windows(ds, AMPC_SPLIT_TRAIN, t, 9);
        check_windows(ds, AMPC_SPLIT_EVAL, t + split, 9);
        /* val_fraction applies as for text */
        ampc_dataset_free(ds);
        char spec[600];
        snprintf(spec, sizeof spec, "%s", tu_path(names[k]));
        ASSERT_OK(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_TOKENS, .path = spec, .val_fraction = 0.5},
                                    &ds));
        ampc_dataset_ids(ds, AMPC_SPLIT_EVAL, &n, NULL);
        assert_int_equal(n, 503);
        ampc_dataset_free(ds);
    }
    free(t);
    tu_dir_remove();
}

static void test_vocab_default(void **state) {
    (void)state;
    tu_dir_make("tokens");
    static const unsigned cases[][2] = {{0, 64},    {62, 64},       {63, 64},       {64, 128},
                                        {255, 256}, {50256, 50304}, {50303, 50304}, {65535, 65536}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint16_t *t = make_ids(40, cases[c][0] ? cases[c][0] : 1);
        if (!cases[c][0]) memset(t, 0, 40 * sizeof *t);
        write_raw("v.bin", t, 40);
        ampc_dataset *ds;
        ASSERT_OK(open_tokens("v.bin", 0, &ds));
        ampc_dataset_info info;
        ASSERT_OK(ampc_dataset_get_info(ds, &info));
        if (info.num_classes != (int64_t)cases[c][1] || info.max_id != (int64_t)cases[c][0])
            FAILF("largest id %u: vocab %lld (largest %lld), want %u", cases[c][0], (long long)info.num_classes,
                  (long long)info.max_id, cases[c][1]);
        ampc_dataset_free(ds);
        free(t);
    }
    tu_dir_remove();
}

/* ---- refused ---- */

/* Opening `files` fails with status s, no data set, one line mentioning every needle. */
#define EXPECT_BAD(files, vocab, s, ...)                                                                               \
    do {                                                                                                               \
        ampc_dataset *ds_ = (ampc_dataset *)1;                                                                         \
        ampc_clear_error();                                                                                            \
        assert_int_equal(open_tokens(files, vocab, &ds_), s);                                                          \
        assert_null(ds_);                                                                                              \
        assert_null(strchr(ampc_last_error(), '\n'));                                                                  \
        ASSERT_ERROR_MENTIONS(__VA_ARGS__);                                                                            \
    } while (0)

static void test_bad_files(void **state) {
    (void)state;
    tu_dir_make("tokens");
    uint16_t *t = make_ids(600, 300);
    write_raw("good.bin", t, 600);
    put_file("empty.bin", "", 0);
    EXPECT_BAD("empty.bin", 0, AMPC_STATUS_FORMAT, "empty.bin", "is empty");
    EXPECT_BAD("good.bin,empty.bin", 0, AMPC_STATUS_FORMAT, "empty.bin", "is empty");
    put_file("odd.bin", "abcde", 5);
    EXPECT_BAD("odd.bin", 0, AMPC_STATUS_FORMAT, "odd.bin", "odd length, 5 bytes", "uint16");
    EXPECT_BAD("missing.bin", 0, AMPC_STATUS_IO, "missing.bin", "cannot open");
    mkdir(tu_path("dir.bin"), 0700);
    EXPECT_BAD("dir.bin", 0, AMPC_STATUS_IO, "dir.bin", "directory");
    write_llmc("v2.bin", AMPC_TOKENS_LLMC_MAGIC, 2, 600, t, 600);
    EXPECT_BAD("v2.bin", 0, AMPC_STATUS_UNSUPPORTED, "v2.bin", "version 2", "expected version 1");
    write_llmc("llama3.bin", 20240801, 7, 600, t, 600);
    EXPECT_BAD("llama3.bin", 0, AMPC_STATUS_UNSUPPORTED, "llama3.bin", "Llama 3", "20240801", "uint32");
    write_llmc("magic.bin", 20240521, 1, 600, t, 600);
    EXPECT_BAD("magic.bin", 0, AMPC_STATUS_UNSUPPORTED, "magic.bin", "magic 20240521", "20240520");
    write_llmc("more.bin", AMPC_TOKENS_LLMC_MAGIC, 1, 601, t, 600);
    EXPECT_BAD("more.bin", 0, AMPC_STATUS_FORMAT, "more.bin", "counts 601 tokens", "2226 bytes", "2224 bytes");
    write_llmc("fewer.bin", AMPC_TOKENS_LLMC_MAGIC, 1, 599, t, 600);
    EXPECT_BAD("fewer.bin", 0, AMPC_STATUS_FORMAT, "fewer.bin", "counts 599 tokens", "has 2224 bytes");
    write_llmc("none.bin", AMPC_TOKENS_LLMC_MAGIC, 1, 0, t, 0);
    EXPECT_BAD("none.bin", 0, AMPC_STATUS_FORMAT, "none.bin", "no tokens");
    uint8_t head[100] = {0};
    for (int k = 0; k < 4; k++) head[k] = (uint8_t)(AMPC_TOKENS_LLMC_MAGIC >> (8 * k));
    put_file("short.bin", head, sizeof head);
    EXPECT_BAD("short.bin", 0, AMPC_STATUS_FORMAT, "short.bin", "truncated", "100 bytes", "1024-byte header");
    /* an id outside a given vocabulary: the first one, with its file and position */
    EXPECT_BAD("good.bin", 300, AMPC_STATUS_INVALID_ARG, "good.bin", "token 7 (byte offset 14) is 300",
               "outside vocab 300", "at least 301");
    write_llmc("val.bin", AMPC_TOKENS_LLMC_MAGIC, 1, 600, t, 600);
    uint16_t *v = make_ids(50, 200);
    v[33] = 4000;
    write_llmc("val2.bin", AMPC_TOKENS_LLMC_MAGIC, 1, 50, v, 50);
    EXPECT_BAD("good.bin,val2.bin", 1000, AMPC_STATUS_INVALID_ARG, "val2.bin", "token 33 (byte offset 1090) is 4000",
               "largest id of the data is 4000");
    /* too short to split: 1 token */
    write_raw("one.bin", t, 1);
    EXPECT_BAD("one.bin", 0, AMPC_STATUS_FORMAT, "one.bin", "too short", "1 tokens");
    /* more than two files, or an empty name */
    EXPECT_BAD("good.bin,val.bin,val.bin", 0, AMPC_STATUS_INVALID_ARG, "TRAIN or TRAIN,VAL");
    free(t), free(v);
    tu_dir_remove();
}

/* Bytes need 256 ids: a smaller vocab is refused for text and the built-in corpus, a larger one kept. */
static void test_vocab_bytes(void **state) {
    (void)state;
    ampc_dataset *ds = (ampc_dataset *)1;
    assert_int_equal(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_BUILTIN, .vocab = 255}, &ds),
                     AMPC_STATUS_INVALID_ARG);
    assert_null(ds);
    ASSERT_ERROR_MENTIONS("vocab 255", "256");
    ASSERT_OK(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_BUILTIN, .vocab = 320}, &ds));
    ampc_dataset_info info;
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.num_classes, 320);
    assert_true(info.max_id > '0' && info.max_id < 256);
    ampc_dataset_free(ds);
    ASSERT_OK(ampc_dataset_open(NULL, &ds));
    ASSERT_OK(ampc_dataset_get_info(ds, &info));
    assert_int_equal(info.num_classes, 256);
    size_t n;
    int w;
    assert_non_null(ampc_dataset_ids(ds, AMPC_SPLIT_TRAIN, &n, &w));
    assert_true(w == 1 && (int64_t)n == info.split_size[AMPC_SPLIT_TRAIN]);
    ampc_dataset_free(ds);
    ds = (ampc_dataset *)1;
    assert_int_equal(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_FASHION_MNIST, .vocab = 300}, &ds),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("vocab 300", "fashion-mnist");
    assert_int_equal(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_BUILTIN, .vocab = -1}, &ds),
                     AMPC_STATUS_INVALID_ARG);
}

static void test_parse(void **state) {
    (void)state;
    ampc_dataset_params p = {.vocab = 7};
    ASSERT_OK(ampc_dataset_parse("tokens:a.bin", &p));
    assert_true(p.kind == AMPC_DATA_TOKENS && !strcmp(p.path, "a.bin") && p.vocab == 7);
    ASSERT_OK(ampc_dataset_parse("tokens:d/train.bin,d/val.bin", &p));
    assert_string_equal(p.path, "d/train.bin,d/val.bin");
    const char *bad[] = {"tokens:", "tokens", "tokens:,v.bin", "tokens:t.bin,", "tokens:a,b,c", "tokens:a,,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ampc_dataset_parse(bad[i], &p), AMPC_STATUS_INVALID_ARG);
        ASSERT_ERROR_MENTIONS("tokens:TRAIN[,VAL]");
    }
    assert_string_equal(ampc_data_kind_name(AMPC_DATA_TOKENS), "tokens");
}

/* The parser on every prefix of valid files of both formats, and on headers with every field changed:
 * a status and a message, never a read outside the buffer (ASan runs of the suite check that). */
static void test_parse_prefixes(void **state) {
    (void)state;
    enum { N = 40 };
    uint8_t buf[1024 + 2 * N];
    memset(buf, 0, sizeof buf);
    uint32_t h[3] = {AMPC_TOKENS_LLMC_MAGIC, 1, N};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) buf[4 * i + k] = (uint8_t)(h[i] >> (8 * k));
    for (int i = 0; i < 2 * N; i++) buf[1024 + i] = (uint8_t)(i * 37);
    ampci_token_file f;
    ASSERT_OK(ampci_tokens_parse("t", "p", buf, sizeof buf, &f));
    assert_true(f.format == AMPCI_TOKENS_LLMC && f.count == N && f.ids == buf + 1024);
    for (size_t len = 0; len < sizeof buf; len++) {
        uint8_t *copy = malloc(len + 1); /* exactly len bytes readable (+1: malloc(0)) */
        memcpy(copy, buf, len);
        ampc_status s = ampci_tokens_parse("t", "p", copy, len, &f);
        /* short of the header or of the count; 2 bytes are one raw id (too short to hold the magic) */
        assert_int_equal(s, len == 2 ? AMPC_OK : AMPC_STATUS_FORMAT);
        free(copy);
    }
    /* raw: every even length parses, every odd one does not */
    uint8_t raw[64];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)(i * 11 + 1);
    for (size_t len = 1; len <= sizeof raw; len++) {
        ampc_status s = ampci_tokens_parse("t", "p", raw, len, &f);
        assert_int_equal(s, len % 2 ? AMPC_STATUS_FORMAT : AMPC_OK);
        if (s == AMPC_OK) assert_true(f.format == AMPCI_TOKENS_RAW && f.count == len / 2 && f.ids == raw);
    }
    /* another date-like magic with ints 3..255 zero is an llm.c header ampc does not read; with any of
     * them not zero, raw ids that happen to start alike */
    uint32_t m = 20240801;
    for (int k = 0; k < 4; k++) buf[k] = (uint8_t)(m >> (8 * k));
    buf[4] = 7;
    assert_int_equal(ampci_tokens_parse("t", "p", buf, sizeof buf, &f), AMPC_STATUS_UNSUPPORTED);
    ASSERT_ERROR_MENTIONS("Llama 3");
    buf[1000] = 1;
    ASSERT_OK(ampci_tokens_parse("t", "p", buf, sizeof buf, &f));
    assert_true(f.format == AMPCI_TOKENS_RAW && f.count == sizeof buf / 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_files),      cmocka_unit_test(test_one_file_split),
        cmocka_unit_test(test_vocab_default),  cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_vocab_bytes),    cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_prefixes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
