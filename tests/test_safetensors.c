/* test_safetensors.c: the safetensors reader and writer. Round trips of every dtype, scalars and empty
 * tensors; the exact header text of a small file; metadata escapes and UTF-8; atomic writes and their
 * failures; the CRC-32 checksum; one table of malformed headers per class of rejection, each asserting
 * FORMAT and the words of the message; every prefix and many byte flips of a valid file (must never
 * crash); a header of 100k tensors (no quadratic work); and golden files written by Python's safetensors
 * (tests/fixtures, made by make_safetensors_golden.py), which must read back with the right values and
 * which our writer must reproduce byte for byte from the same tensors. */
#include "test_dir.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

TU_CONTEXT(11, 1)

#ifndef AMPC_FIXTURES_DIR
#error "AMPC_FIXTURES_DIR must name tests/fixtures"
#endif

/* ---- helpers ---- */

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) FAILF("cannot open %s", path);
    unsigned char *b = malloc(1 << 16);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

/* A file made of an 8-byte length, hdr as given, then data_len bytes of a pattern. */
static unsigned char *make_file(const char *hdr, size_t data_len, size_t *len) {
    size_t n = strlen(hdr);
    *len = 8 + n + data_len;
    unsigned char *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < data_len; i++) b[8 + n + i] = (unsigned char)(i * 7 + 1);
    return b;
}

/* The header must be refused with FORMAT and a message naming the file and containing `needle`. */
static void expect_reject(const char *hdr, size_t data_len, const char *needle) {
    size_t len;
    unsigned char *b = make_file(hdr, data_len, &len);
    ampc_safetensors *st = (ampc_safetensors *)1;
    ampc_status s = ampc_safetensors_parse(b, len, "bad.safetensors", &st);
    free(b);
    if (s != AMPC_STATUS_FORMAT)
        FAILF("header %s: expected FORMAT, got %s (%s)", hdr, ampc_status_str(s), ampc_last_error());
    assert_null(st);
    const char *msg = ampc_last_error();
    if (strncmp(msg, "bad.safetensors: ", 17) || !strstr(msg, needle))
        FAILF("header %s: message \"%s\" lacks \"%s\"", hdr, msg, needle);
}

static ampc_safetensors *parse_ok(const void *b, size_t len) {
    ampc_safetensors *st = NULL;
    ASSERT_OK(ampc_safetensors_parse(b, len, "ok.safetensors", &st));
    return st;
}

static ampc_safetensors *serialize_parse(ampc_safetensors_writer *w) {
    void *b;
    size_t len;
    ASSERT_OK(ampc_safetensors_serialize(w, &b, &len));
    ampc_safetensors *st = parse_ok(b, len);
    free(b);
    return st;
}

static void check_tensor(const ampc_safetensors *st, const char *name, const char *dtype, int ndim,
                         const int64_t *shape, const void *data, size_t bytes) {
    const ampc_st_tensor *t = ampc_safetensors_find(st, name);
    if (!t) FAILF("tensor %s not found", name);
    assert_string_equal(t->name, name);
    assert_string_equal(t->dtype_name, dtype);
    assert_int_equal(t->ndim, ndim);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]), numel *= shape[i];
    assert_int_equal(t->numel, numel);
    assert_int_equal(t->end - t->begin, bytes);
    assert_int_equal((size_t)numel * (size_t)(t->bits / 8), bytes);
    if (bytes && memcmp(t->data, data, bytes)) FAILF("tensor %s: data differs", name);
}

/* ---- round trips ---- */

static void test_roundtrip_every_dtype(void **state) {
    (void)state;
    static const float f32[6] = {1.5f, -2.0f, 0.0f, 1e-30f, INFINITY, 3.0f};
    static const uint16_t f16[4] = {0x3c00, 0xb800, 0x7bff, 0x0001}, bf16[3] = {0x3f80, 0xc020, 0x7fc0};
    static const double f64[2] = {0.1, -1e300};
    static const int32_t i32[3] = {7, -8, INT32_MAX};
    static const int64_t i64[2] = {INT64_MIN, 1ll << 53};
    static const uint8_t u8[5] = {0, 1, 127, 128, 255};
    static const float scalar = 65536.0f;
    static const int64_t s23[] = {2, 3}, s4[] = {4}, s3[] = {3}, s2[] = {2}, s5[] = {5}, s30[] = {3, 0};
    static const int64_t s111[] = {1, 1, 1, 1, 1, 1, 1, 1};
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "u8", AMPC_DTYPE_U8, 1, s5, u8));
    ASSERT_OK(ampc_safetensors_add(w, "f32", AMPC_DTYPE_F32, 2, s23, f32));
    ASSERT_OK(ampc_safetensors_add(w, "f16", AMPC_DTYPE_F16, 1, s4, f16));
    ASSERT_OK(ampc_safetensors_add(w, "bf16", AMPC_DTYPE_BF16, 1, s3, bf16));
    ASSERT_OK(ampc_safetensors_add(w, "f64", AMPC_DTYPE_F64, 1, s2, f64));
    ASSERT_OK(ampc_safetensors_add(w, "i32", AMPC_DTYPE_I32, 1, s3, i32));
    ASSERT_OK(ampc_safetensors_add(w, "i64", AMPC_DTYPE_I64, 1, s2, i64));
    ASSERT_OK(ampc_safetensors_add(w, "scalar", AMPC_DTYPE_F32, 0, NULL, &scalar));
    ASSERT_OK(ampc_safetensors_add(w, "empty", AMPC_DTYPE_F64, 2, s30, NULL));
    ASSERT_OK(ampc_safetensors_add(w, "eight_dims", AMPC_DTYPE_U8, 8, s111, u8));
    ampc_safetensors *st = serialize_parse(w);
    assert_int_equal(ampc_safetensors_count(st), 10);
    check_tensor(st, "u8", "U8", 1, s5, u8, 5);
    check_tensor(st, "f32", "F32", 2, s23, f32, 24);
    check_tensor(st, "f16", "F16", 1, s4, f16, 8);
    check_tensor(st, "bf16", "BF16", 1, s3, bf16, 6);
    check_tensor(st, "f64", "F64", 1, s2, f64, 16);
    check_tensor(st, "i32", "I32", 1, s3, i32, 12);
    check_tensor(st, "i64", "I64", 1, s2, i64, 16);
    check_tensor(st, "scalar", "F32", 0, NULL, &scalar, 4);
    check_tensor(st, "empty", "F64", 2, s30, NULL, 0);
    check_tensor(st, "eight_dims", "U8", 8, s111, u8, 1);
    assert_int_equal(ampc_safetensors_find(st, "f16")->dtype, AMPC_DTYPE_F16);
    assert_int_equal(ampc_safetensors_find(st, "bf16")->dtype, AMPC_DTYPE_BF16);
    /* offset order, tiling, and every tensor aligned to its element size (the header is padded to 8) */
    uint64_t at = 0;
    for (int i = 0; i < ampc_safetensors_count(st); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(st, i);
        assert_int_equal(t->begin, at);
        at = t->end;
        assert_int_equal((uintptr_t)t->data % (uintptr_t)(t->bits / 8), 0);
    }
    size_t dl;
    assert_non_null(ampc_safetensors_data(st, &dl));
    assert_int_equal(dl, at);
    assert_null(ampc_safetensors_tensor(st, 10));
    assert_null(ampc_safetensors_tensor(st, -1));
    assert_null(ampc_safetensors_find(st, "nope"));
    assert_int_equal(ampc_safetensors_metadata_count(st), 0);
    assert_null(ampc_safetensors_metadata(st, "k"));
    assert_string_equal(ampc_safetensors_name(st), "ok.safetensors");
    ampc_safetensors_free(st);
    ampc_safetensors_writer_free(w);
}

static void test_add_tensor(void **state) {
    (void)state;
    ampc_tensor *t = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, SHAPE(2, 3));
    float v[6] = {1, 2, 3, 4, 5, 6};
    ASSERT_OK(ampc_tensor_copy_from(t, v, AMPC_DTYPE_F32));
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add_tensor(w, "t", t));
    ampc_tensor *tt = ampc_tensor_transpose(t, 0, 1);
    assert_int_equal(ampc_safetensors_add_tensor(w, "tt", tt), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("\"tt\"", "not contiguous");
    ampc_safetensors *st = serialize_parse(w);
    check_tensor(st, "t", "F32", 2, (int64_t[]){2, 3}, v, 24);
    ampc_safetensors_free(st);
    ampc_safetensors_writer_free(w);
    ampc_tensor_free(t);
    ampc_ctx_step_end(g_ctx);
}

static void test_writer_rejects(void **state) {
    (void)state;
    float x = 1;
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "x", AMPC_DTYPE_F32, 0, NULL, &x));
    assert_int_equal(ampc_safetensors_add(w, "x", AMPC_DTYPE_F32, 0, NULL, &x), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("duplicate", "\"x\"");
    assert_int_equal(ampc_safetensors_add(w, "", AMPC_DTYPE_F32, 0, NULL, &x), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_add(w, "__metadata__", AMPC_DTYPE_F32, 0, NULL, &x), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_add(w, "bad\xff", AMPC_DTYPE_F32, 0, NULL, &x), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("UTF-8");
    assert_int_equal(ampc_safetensors_add(w, "neg", AMPC_DTYPE_F32, SHAPE(2, -1), &x), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_add(w, "nodata", AMPC_DTYPE_F32, SHAPE(2), NULL), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_add(w, "dt", AMPC_DTYPE_COUNT, 0, NULL, &x), AMPC_STATUS_DTYPE);
    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(ampc_safetensors_add(w, "nine", AMPC_DTYPE_U8, 9, big, &x), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_set_metadata(w, "k", "\xc0\x80"), AMPC_STATUS_INVALID_ARG);
    /* many names: the duplicate check is a hash set */
    for (int i = 0; i < 5000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "blocks.%d.weight", i);
        ASSERT_OK(ampc_safetensors_add(w, nm, AMPC_DTYPE_F32, 0, NULL, &x));
    }
    assert_int_equal(ampc_safetensors_add(w, "blocks.4321.weight", AMPC_DTYPE_F32, 0, NULL, &x),
                     AMPC_STATUS_INVALID_ARG);
    ampc_safetensors_writer_free(w);
    ampc_safetensors_writer_free(NULL);
    ampc_safetensors_free(NULL);
}

/* ---- exact bytes ---- */

static void test_exact_header_text(void **state) {
    (void)state;
    static const float w6[6] = {0}, b3[3] = {0};
    static const int64_t step = 5;
    static const uint16_t h2[2] = {0};
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "w", AMPC_DTYPE_F32, SHAPE(2, 3), w6));
    ASSERT_OK(ampc_safetensors_add(w, "h", AMPC_DTYPE_BF16, SHAPE(2), h2));
    ASSERT_OK(ampc_safetensors_add(w, "e", AMPC_DTYPE_F32, SHAPE(0, 4), NULL));
    ASSERT_OK(ampc_safetensors_add(w, "b", AMPC_DTYPE_F32, SHAPE(3), b3));
    ASSERT_OK(ampc_safetensors_add(w, "step", AMPC_DTYPE_I64, 0, NULL, &step));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "z", "old"));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "a", "q\"\\\n\x01\xc3\xa9\x7f/"));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "z", "1")); /* replaces */
    const char *json = "{\"__metadata__\":{\"a\":\"q\\\"\\\\\\n\\u0001\xc3\xa9\x7f/\",\"z\":\"1\"},"
                       "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]},"
                       "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[20,20]},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[20,44]},"
                       "\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[44,48]}}";
    char expect[512];
    size_t n = strlen(json);
    memcpy(expect, json, n);
    while (n % 8) expect[n++] = ' ';
    void *b;
    size_t len;
    ASSERT_OK(ampc_safetensors_serialize(w, &b, &len));
    const unsigned char *u = b;
    assert_int_equal(len, 8 + n + 48);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | u[i];
    assert_int_equal(hl, n);
    if (memcmp(u + 8, expect, n)) FAILF("header\n%.*s\nexpected\n%.*s", (int)n, (const char *)u + 8, (int)n, expect);
    assert_memory_equal(u + 8 + n, &step, 8);
    ampc_safetensors *st = parse_ok(b, len);
    assert_string_equal(ampc_safetensors_metadata(st, "a"), "q\"\\\n\x01\xc3\xa9\x7f/");
    const char *k, *v;
    ASSERT_OK(ampc_safetensors_metadata_at(st, 1, &k, &v));
    assert_string_equal(k, "z");
    assert_string_equal(v, "1");
    assert_int_equal(ampc_safetensors_metadata_at(st, 2, &k, &v), AMPC_STATUS_INVALID_ARG);
    assert_null(k);
    ampc_safetensors_free(st);
    free(b);
    ampc_safetensors_writer_free(w);

    /* an empty writer: "{}" and six spaces, as the reference writes it */
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_serialize(w, &b, &len));
    assert_int_equal(len, 16);
    assert_memory_equal(b, "\x08\0\0\0\0\0\0\0{}      ", 16);
    st = parse_ok(b, len);
    assert_int_equal(ampc_safetensors_count(st), 0);
    ampc_safetensors_free(st);
    free(b);
    ampc_safetensors_writer_free(w);
}

static void test_parse_accepts_valid_json_forms(void **state) {
    (void)state;
    /* whitespace between tokens, fields in any order, metadata last, escaped names, surrogate pairs */
    const char *hdr =
        "{ \"a\\u00e9\\ud83d\\ude00\\/\" :\n\t{ \"shape\" : [ 2 ] ,\r\n \"data_offsets\" : [ 0 , 2 ] ,"
        " \"dtype\" : \"I8\" } , \"__metadata__\" : { \"k\\\"\" : \"\\b\\f\\n\\r\\t\" , \"\" : \"\" } }   ";
    size_t len;
    unsigned char *b = make_file(hdr, 2, &len);
    ampc_safetensors *st = parse_ok(b, len);
    const ampc_st_tensor *t = ampc_safetensors_find(st, "a\xc3\xa9\xf0\x9f\x98\x80/");
    assert_non_null(t);
    assert_string_equal(t->dtype_name, "I8");
    assert_int_equal(t->dtype, AMPC_DTYPE_COUNT);
    assert_int_equal(t->bits, 8);
    assert_string_equal(ampc_safetensors_metadata(st, "k\""), "\b\f\n\r\t");
    assert_string_equal(ampc_safetensors_metadata(st, ""), "");
    ampc_safetensors_free(st);
    free(b);
    /* every dtype of the reference list that is whole bytes */
    static const char *const names[] = {"BOOL",        "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
                                        "F8_E5M2FNUZ", "I16", "U16", "F16",     "BF16",    "I32",     "U32",
                                        "F32",         "C64", "F64", "I64",     "U64"};
    static const int bits[] = {8, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 64};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char h[160];
        snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%d]}}", names[i],
                 3 * bits[i] / 8);
        b = make_file(h, (size_t)(3 * bits[i] / 8), &len);
        st = parse_ok(b, len);
        assert_int_equal(ampc_safetensors_tensor(st, 0)->bits, bits[i]);
        assert_string_equal(ampc_safetensors_tensor(st, 0)->dtype_name, names[i]);
        ampc_safetensors_free(st);
        free(b);
    }
}

/* ---- rejections, one table per class ---- */

#define T(dt, sh, b, e) "{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":[" #b "," #e "]}"

static void test_reject_header_length(void **state) {
    (void)state;
    ampc_safetensors *st;
    assert_int_equal(ampc_safetensors_parse("\x02\0\0\0", 4, "short.st", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("short.st: ", "too short");
    assert_int_equal(ampc_safetensors_parse(NULL, 0, NULL, &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("<memory>");
    assert_int_equal(ampc_safetensors_parse("\0\0\0\0\0\0\0\0{}", 10, "x.safetensors", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("x.safetensors: header length is 0");
    unsigned char b[1024] = {0};
    b[4] = 1; /* 2^32 */
    assert_int_equal(ampc_safetensors_parse(b, sizeof b, "x.safetensors", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("x.safetensors: not a safetensors file: header length 4294967296 exceeds the limit");
    memset(b, 0, 8);
    b[0] = 0x00, b[1] = 0xe1, b[2] = 0xf5, b[3] = 0x05; /* 10^8: allowed by the limit, not by the file */
    assert_int_equal(ampc_safetensors_parse(b, sizeof b, "x.safetensors", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS(
        "x.safetensors: not a safetensors file: header length 100000000 exceeds the file (1024 bytes)");
    b[8] = '{'; /* a header that starts but is cut short: a damaged safetensors file */
    assert_int_equal(ampc_safetensors_parse(b, sizeof b, "x.safetensors", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("x.safetensors: header length 100000000 exceeds the file (1024 bytes)");
    assert_null(strstr(ampc_last_error(), "not a safetensors file"));
    memset(b, 0xff, 8);
    assert_int_equal(ampc_safetensors_parse(b, sizeof b, "x.safetensors", &st), AMPC_STATUS_FORMAT);
    assert_null(st);
}

static void test_reject_json_syntax(void **state) {
    (void)state;
    expect_reject("[]      ", 0, "must start with '{', found an array");
    expect_reject(" {}     ", 0, "must start with '{'");
    expect_reject("{}x     ", 0, "'x' after the closing '}'");
    expect_reject("{}\n     ", 0, "after the closing '}'");
    expect_reject("{}{}    ", 0, "after the closing '}'");
    expect_reject("{", 0, "expected a string, found the end of the header");
    expect_reject("{\"a\":" T("U8", "[1]", 0, 1), 1, "expected ',' or '}', found the end of the header");
    expect_reject("{\"a\":" T("U8", "[1]", 0, 1) ",}", 1, "expected a string, found '}'");
    expect_reject("{\"a\"" T("U8", "[1]", 0, 1) "}", 1, "expected ':', found an object");
    expect_reject("{\"a\":" T("U8", "[1]", 0, 1) " \"b\":1}", 1, "expected ',' or '}', found a string");
    expect_reject("{'a':1}", 0, "expected a string, found '''");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,],\"data_offsets\":[0,1]}}", 1,
                  "shape: expected a non-negative integer, found ']'");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1 1],\"data_offsets\":[0,1]}}", 1,
                  "expected ',' or ']', found a number");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}}", 1, "found an array");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":{},\"data_offsets\":[0,1]}}", 1,
                  "shape: expected '[', found an object");
    expect_reject("{\"a\":[]}", 0, "tensor \"a\": entry: expected an object");
    expect_reject("{\"a\":true}", 0, "found a boolean");
    expect_reject("{\"a\":null}", 0, "found null");
    expect_reject("{\"a\":{\"dtype\":{\"x\":{\"y\":[]}}}}", 0, "dtype: expected a string, found an object");
}

static void test_reject_strings(void **state) {
    (void)state;
    expect_reject("{\"a\x01\":1}", 0, "raw control character 0x01");
    expect_reject("{\"a\nb\":1}", 0, "raw control character 0x0a");
    expect_reject("{\"\xff\":1}", 0, "invalid UTF-8");
    expect_reject("{\"\xc0\xaf\":1}", 0, "invalid UTF-8");         /* overlong '/' */
    expect_reject("{\"\xed\xa0\x80\":1}", 0, "invalid UTF-8");     /* an encoded surrogate */
    expect_reject("{\"\xf4\x90\x80\x80\":1}", 0, "invalid UTF-8"); /* past U+10FFFF */
    expect_reject("{\"\xe2\x9c\":1}", 0, "invalid UTF-8");         /* truncated */
    expect_reject("{\"\\ud83d\":1}", 0, "high surrogate \\ud83d is not followed by a low surrogate");
    expect_reject("{\"\\ud83d\\u0041\":1}", 0, "not a low surrogate");
    expect_reject("{\"\\ude00\":1}", 0, "lone low surrogate \\ude00");
    expect_reject("{\"\\u12g4\":1}", 0, "4 hex digits");
    expect_reject("{\"\\u12", 0, "4 hex digits");
    expect_reject("{\"\\u0000\":1}", 0, "NUL");
    expect_reject("{\"\\x\":1}", 0, "invalid escape \\x");
    expect_reject("{\"\\", 0, "unterminated string");
    expect_reject("{\"abc", 0, "unterminated string");
}

static void test_reject_integers(void **state) {
    (void)state;
    expect_reject("{\"a\":" T("U8", "[-1]", 0, 1) "}", 1, "tensor \"a\": shape: negative numbers are not allowed");
    expect_reject("{\"a\":" T("U8", "[1.0]", 0, 1) "}", 1,
                  "shape: expected an integer, found a number with a fraction");
    expect_reject("{\"a\":" T("U8", "[1e0]", 0, 1) "}", 1, "fraction or exponent");
    expect_reject("{\"a\":" T("U8", "[01]", 0, 1) "}", 1, "shape: integers must not have leading zeros");
    expect_reject("{\"a\":" T("U8", "[\"1\"]", 0, 1) "}", 1, "expected a non-negative integer, found a string");
    expect_reject("{\"a\":" T("U8", "[1]", 0, 9007199254740993) "}", 1, "data_offsets: integer exceeds 2^53");
    expect_reject("{\"a\":" T("U8", "[1]", 0, 99999999999999999999999999999) "}", 1, "integer exceeds 2^53");
    expect_reject("{\"a\":" T("U8", "[1]", -0, 1) "}", 1, "negative numbers");
}

static void test_reject_schema(void **state) {
    (void)state;
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "tensor \"a\": entry: missing field \"data_offsets\"");
    expect_reject("{\"a\":{}}", 0, "missing field \"dtype\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "missing field \"shape\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"extra\":1}}", 1,
                  "unknown field \"extra\"");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                  "duplicate field \"dtype\"");
    expect_reject("{\"a\":" T("F128", "[1]", 0, 16) "}", 16, "tensor \"a\": unknown dtype \"F128\"");
    expect_reject("{\"a\":" T("f32", "[1]", 0, 4) "}", 4, "unknown dtype \"f32\"");
    expect_reject("{\"a\":" T("F4", "[2]", 0, 1) "}", 1, "dtype F4 (4-bit, packed) is not supported");
    expect_reject("{\"a\":" T("F6_E2M3", "[4]", 0, 3) "}", 3, "F6_E2M3 (6-bit, packed) is not supported");
    expect_reject("{\"a\":" T("U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1, "shape: more dims than AMPC_ST_MAX_DIMS (8)");
    expect_reject("{\"a\":"
                  "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}",
                  1, "data_offsets: more than 2 values");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", 1,
                  "data_offsets: 1 value (expected");
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[]}}", 0, "data_offsets: 0 values");
    expect_reject("{\"a\":" T("U8", "[4294967296,4294967296,4294967296]", 0, 1) "}", 1, "too many elements (overflow)");
    expect_reject("{\"a\":" T("U64", "[2147483648,2147483648]", 0, 1) "}", 1, "byte size overflows");
}

static void test_reject_offsets(void **state) {
    (void)state;
    expect_reject(
        "{\"blocks.0.attn.qkv.weight\":" T("F32", "[3,4]", 0, 100) "}", 100,
        "tensor \"blocks.0.attn.qkv.weight\": data_offsets [0, 100] hold 100 bytes, shape [3, 4] of F32 needs 48");
    expect_reject("{\"a\":" T("U8", "[0]", 4, 0) "}", 4, "data_offsets [4, 0] begin after they end");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) "}", 3, "data_offsets [0, 4] run past the data buffer (3 bytes)");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) ",\"b\":" T("U8", "[4]", 2, 6) "}", 6,
                  "tensor \"b\": data_offsets [2, 6] overlap tensor \"a\" [0, 4]");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) ",\"b\":" T("U8", "[0]", 2, 2) "}", 4, "overlap tensor \"a\"");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) ",\"b\":" T("U8", "[4]", 0, 4) "}", 4, "overlap");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) ",\"b\":" T("U8", "[2]", 6, 8) "}", 8,
                  "tensor \"b\": data_offsets [6, 8] leave a gap: bytes [4, 6) of the data belong to no tensor");
    expect_reject("{\"a\":" T("U8", "[4]", 2, 6) "}", 6, "bytes [0, 2) of the data belong to no tensor");
    expect_reject("{\"a\":" T("U8", "[4]", 0, 4) "}", 7,
                  "the data buffer has 7 bytes but the tensors end at 4 (3 trailing bytes)");
    expect_reject("{}      ", 1, "the data buffer has 1 bytes but the tensors end at 0");
}

static void test_reject_duplicates_and_metadata(void **state) {
    (void)state;
    expect_reject("{\"a\":" T("U8", "[1]", 0, 1) ",\"a\":" T("U8", "[1]", 1, 2) "}", 2, "duplicate tensor name \"a\"");
    expect_reject("{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0, "__metadata__: duplicate key \"k\"");
    expect_reject("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__: appears twice");
    expect_reject("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__: value of \"k\" must be a string, found a number");
    expect_reject("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, "value of \"k\" must be a string, found an object");
    expect_reject("{\"__metadata__\":[\"k\"]}", 0, "__metadata__: must be an object of string values, found an array");
    expect_reject("{\"__metadata__\":null}", 0, "found null");
    expect_reject("{\"__metadata__\":{\"k\":\"v\",}}", 0, "__metadata__ key: expected a string, found '}'");
    /* a hostile name is cut and its control characters shown escaped */
    char hdr[800] = "{\"", *p = hdr + 2;
    for (int i = 0; i < 300; i++) *p++ = i % 50 ? 'n' : '\\', *p++ = i % 50 ? 'n' : 't';
    strcpy(p, "\":" T("U8", "[1]", 0, 2) "}");
    expect_reject(hdr, 2, "...\": data_offsets [0, 2] hold 2 bytes");
    expect_reject(hdr, 2, "\\x09nnnn");
}

/* ---- robustness ---- */

static void test_prefixes_and_byte_flips(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = slurp(AMPC_FIXTURES_DIR "/golden_basic.safetensors", &len);
    ampc_safetensors *st;
    for (size_t n = 0; n < len; n++) {
        assert_int_equal(ampc_safetensors_parse(b, n, "prefix", &st), AMPC_STATUS_FORMAT);
        assert_null(st);
    }
    int ok = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (unsigned char)(1u << bit);
            ampc_status s = ampc_safetensors_parse(b, len, "flip", &st);
            if (s != AMPC_OK && s != AMPC_STATUS_FORMAT) FAILF("byte %zu bit %d: %s", i, bit, ampc_status_str(s));
            if (s == AMPC_OK) ok++, ampc_safetensors_free(st);
            b[i] ^= (unsigned char)(1u << bit);
        }
    assert_true(ok > 0); /* the data bytes may change freely */
    free(b);
}

static void test_many_tensors(void **state) {
    (void)state;
    enum { N = 100000 };
    size_t cap = (size_t)N * 80, o = 0;
    char *h = malloc(cap);
    o += (size_t)snprintf(h, cap, "{");
    for (int i = N - 1; i >= 0; i--) /* reverse order: the reader sorts by offset */
        o += (size_t)snprintf(h + o, cap - o, "%s\"layer.%d\":" T("U8", "[1]", % d, % d), i == N - 1 ? "" : ",", i, i,
                              i + 1);
    snprintf(h + o, cap - o, "}");
    size_t len;
    unsigned char *b = make_file(h, N, &len);
    ampc_safetensors *st = parse_ok(b, len);
    assert_int_equal(ampc_safetensors_count(st), N);
    assert_string_equal(ampc_safetensors_tensor(st, 12345)->name, "layer.12345");
    assert_int_equal(ampc_safetensors_find(st, "layer.99999")->begin, 99999);
    ampc_safetensors_free(st);
    free(b);
    /* a duplicate far apart in the file */
    memcpy(strstr(h, "\"layer.7\":"), "\"layer.8\"", 9);
    b = make_file(h, N, &len);
    assert_int_equal(ampc_safetensors_parse(b, len, "dup", &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("duplicate tensor name \"layer.8\"");
    free(b);
    free(h);
}

/* ---- files ---- */

static void test_write_atomic(void **state) {
    (void)state;
    tu_dir_make("st");
    const char *p = tu_path("model.safetensors");
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s", p);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    float a[2] = {1, 2}, c[3] = {3, 4, 5};
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "a", AMPC_DTYPE_F32, SHAPE(2), a));
    ASSERT_OK(ampc_safetensors_write(w, path));
    ampc_safetensors_writer_free(w);
    ASSERT_OK(ampc_safetensors_writer_new(&w)); /* over the existing file */
    ASSERT_OK(ampc_safetensors_add(w, "c", AMPC_DTYPE_F32, SHAPE(3), c));
    ASSERT_OK(ampc_safetensors_write(w, path));
    assert_false(exists(tmp));
    ampc_safetensors *st;
    ASSERT_OK(ampc_safetensors_read(path, &st));
    assert_string_equal(ampc_safetensors_name(st), path);
    assert_int_equal(ampc_safetensors_count(st), 1);
    check_tensor(st, "c", "F32", 1, (int64_t[]){3}, c, 12);
    assert_int_equal((uintptr_t)ampc_safetensors_data(st, NULL) % 8, 0);
    ampc_safetensors_free(st);
    /* a missing directory: IO naming the path and the system error, nothing created */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", g_dir);
    assert_int_equal(ampc_safetensors_write(w, bad), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS(bad, "No such file or directory");
    /* rename onto a directory fails after the temp file was written: it must be removed, the target kept */
    const char *dp = tu_path("adir");
    char dpath[512], dtmp[520];
    snprintf(dpath, sizeof dpath, "%s", dp);
    snprintf(dtmp, sizeof dtmp, "%s.tmp", dpath);
    assert_int_equal(mkdir(dpath, 0755), 0);
    assert_int_equal(ampc_safetensors_write(w, dpath), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS(dpath);
    assert_false(exists(dtmp));
    struct stat sb;
    assert_int_equal(stat(dpath, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    ampc_safetensors_writer_free(w);
    /* reading: missing file, a directory, a bad file */
    assert_int_equal(ampc_safetensors_read(tu_path("missing.safetensors"), &st), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS("missing.safetensors", "No such file");
    assert_int_equal(ampc_safetensors_read(dpath, &st), AMPC_STATUS_IO);
    ASSERT_ERROR_MENTIONS("directory");
    FILE *f = fopen(path, "wb");
    fwrite("\x04\0\0\0\0\0\0\0{}", 1, 10, f);
    fclose(f);
    assert_int_equal(ampc_safetensors_read(path, &st), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS(path, "header length 4 exceeds the file (10 bytes)");
    tu_dir_remove();
}

static void test_checksum(void **state) {
    (void)state;
    double d[3] = {1, 2, 3};
    uint8_t u[3] = {9, 8, 7};
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "u", AMPC_DTYPE_U8, SHAPE(3), u));
    ASSERT_OK(ampc_safetensors_add(w, "d", AMPC_DTYPE_F64, SHAPE(3), d));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "crc", "set by hand, replaced"));
    ASSERT_OK(ampc_safetensors_set_checksum_key(w, "crc"));
    void *b;
    size_t len;
    ASSERT_OK(ampc_safetensors_serialize(w, &b, &len));
    ampc_safetensors *st = parse_ok(b, len);
    size_t dl;
    const unsigned char *data = ampc_safetensors_data(st, &dl);
    assert_int_equal(dl, 27);
    char want[16];
    snprintf(want, sizeof want, "%08lx", crc32(crc32(0, Z_NULL, 0), data, (uInt)dl));
    assert_string_equal(ampc_safetensors_metadata(st, "crc"), want);
    assert_int_equal(ampc_safetensors_metadata_count(st), 1);
    ASSERT_OK(ampc_safetensors_verify_checksum(st, "crc"));
    assert_int_equal(ampc_safetensors_verify_checksum(st, "other"), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("ok.safetensors", "no checksum \"other\"");
    ampc_safetensors_free(st);
    ((unsigned char *)b)[len - 1] ^= 1; /* one bit of the data */
    st = parse_ok(b, len);
    assert_int_equal(ampc_safetensors_verify_checksum(st, "crc"), AMPC_STATUS_FORMAT);
    ASSERT_ERROR_MENTIONS("ok.safetensors", "checksum mismatch", "\"crc\"", want);
    ampc_safetensors_free(st);
    free(b);
    ampc_safetensors_writer_free(w);
}

/* ---- golden files from Python's safetensors ---- */

/* Our writer's bytes for w must equal the file. */
static void expect_same_bytes(ampc_safetensors_writer *w, const char *file) {
    size_t flen, len;
    unsigned char *f = slurp(file, &flen);
    void *b;
    ASSERT_OK(ampc_safetensors_serialize(w, &b, &len));
    if (len != flen || memcmp(b, f, len))
        FAILF("%s: our writer gives %zu bytes, Python's %zu; header ours:\n%.*s\npython:\n%.*s", file, len, flen,
              (int)(len - 8), (const char *)b + 8, (int)(flen - 8), (const char *)f + 8);
    free(b);
    free(f);
}

static void test_golden_basic(void **state) {
    (void)state;
    static const float weight[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 65504.0f}, scale = 65536.0f;
    static const uint16_t half[4] = {0x3c00, 0xb800, 0x7bff, 0x0001};
    static const int64_t steps[3] = {0, -1, 1ll << 53};
    static const uint8_t bytes[5] = {0, 1, 127, 128, 255};
    const char *file = AMPC_FIXTURES_DIR "/golden_basic.safetensors";
    ampc_safetensors *st;
    ASSERT_OK(ampc_safetensors_read(file, &st));
    assert_int_equal(ampc_safetensors_count(st), 6);
    check_tensor(st, "weight", "F32", 2, (int64_t[]){2, 3}, weight, 24);
    check_tensor(st, "half", "F16", 1, (int64_t[]){4}, half, 8);
    check_tensor(st, "steps", "I64", 1, (int64_t[]){3}, steps, 24);
    check_tensor(st, "bytes", "U8", 1, (int64_t[]){5}, bytes, 5);
    check_tensor(st, "scale", "F32", 0, NULL, &scale, 4);
    check_tensor(st, "empty", "F32", 2, (int64_t[]){0, 3}, NULL, 0);
    assert_string_equal(ampc_safetensors_metadata(st, "format"), "pt");
    ampc_safetensors_free(st);
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "bytes", AMPC_DTYPE_U8, SHAPE(5), bytes));
    ASSERT_OK(ampc_safetensors_add(w, "empty", AMPC_DTYPE_F32, SHAPE(0, 3), NULL));
    ASSERT_OK(ampc_safetensors_add(w, "half", AMPC_DTYPE_F16, SHAPE(4), half));
    ASSERT_OK(ampc_safetensors_add(w, "scale", AMPC_DTYPE_F32, 0, NULL, &scale));
    ASSERT_OK(ampc_safetensors_add(w, "steps", AMPC_DTYPE_I64, SHAPE(3), steps));
    ASSERT_OK(ampc_safetensors_add(w, "weight", AMPC_DTYPE_F32, SHAPE(2, 3), weight));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "format", "pt"));
    expect_same_bytes(w, file);
    ampc_safetensors_writer_free(w);
}

static void test_golden_mixed_and_escapes(void **state) {
    (void)state;
    static const uint16_t b[3] = {0x3f80, 0xc020, 0x4049};
    static const double d[2] = {0.1, -1e300};
    static const int32_t i[2] = {7, -8}, answer = 42;
    const char *file = AMPC_FIXTURES_DIR "/golden_mixed.safetensors";
    ampc_safetensors *st;
    ASSERT_OK(ampc_safetensors_read(file, &st));
    check_tensor(st, "b", "BF16", 1, (int64_t[]){3}, b, 6);
    check_tensor(st, "d", "F64", 1, (int64_t[]){2}, d, 16);
    check_tensor(st, "i", "I32", 2, (int64_t[]){1, 2}, i, 8);
    assert_int_equal(ampc_safetensors_metadata_count(st), 0);
    ampc_safetensors_free(st);
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, "i", AMPC_DTYPE_I32, SHAPE(1, 2), i));
    ASSERT_OK(ampc_safetensors_add(w, "b", AMPC_DTYPE_BF16, SHAPE(3), b));
    ASSERT_OK(ampc_safetensors_add(w, "d", AMPC_DTYPE_F64, SHAPE(2), d));
    expect_same_bytes(w, file);
    ampc_safetensors_writer_free(w);

    const char *name = "caf\xc3\xa9/\xe2\x9c\x93";
    const char *note = "tab\t quote\" backslash\\ newline\n ctl\x01 \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 /";
    file = AMPC_FIXTURES_DIR "/golden_escapes.safetensors";
    ASSERT_OK(ampc_safetensors_read(file, &st));
    check_tensor(st, name, "I32", 1, (int64_t[]){1}, &answer, 4);
    assert_string_equal(ampc_safetensors_metadata(st, "note"), note);
    ampc_safetensors_free(st);
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    ASSERT_OK(ampc_safetensors_add(w, name, AMPC_DTYPE_I32, SHAPE(1), &answer));
    ASSERT_OK(ampc_safetensors_set_metadata(w, "note", note));
    expect_same_bytes(w, file);
    ampc_safetensors_writer_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_dtype),
        cmocka_unit_test(test_add_tensor),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_exact_header_text),
        cmocka_unit_test(test_parse_accepts_valid_json_forms),
        cmocka_unit_test(test_reject_header_length),
        cmocka_unit_test(test_reject_json_syntax),
        cmocka_unit_test(test_reject_strings),
        cmocka_unit_test(test_reject_integers),
        cmocka_unit_test(test_reject_schema),
        cmocka_unit_test(test_reject_offsets),
        cmocka_unit_test(test_reject_duplicates_and_metadata),
        cmocka_unit_test(test_prefixes_and_byte_flips),
        cmocka_unit_test(test_many_tensors),
        cmocka_unit_test(test_write_atomic),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_golden_basic),
        cmocka_unit_test(test_golden_mixed_and_escapes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
