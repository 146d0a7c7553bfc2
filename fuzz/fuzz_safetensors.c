/* fuzz_safetensors.c: libFuzzer target for the safetensors reader (ampc_safetensors_parse, the code that
 * opens every checkpoint and model file), written against the declarations in include/ampc.h. The input
 * is the whole file. When the reader accepts it, everything it hands out is walked and checked against
 * the contract of the header: every tensor (each data byte read; dtype name, ndim, numel = product of the
 * shape, bits x numel = 8 x (end - begin); tensors sorted by offset, contiguous from 0 to the end of the
 * data buffer, their data pointers inside it), every metadata entry (and ampc_safetensors_metadata of its
 * key gives that value), ampc_safetensors_find of each name returns that entry, and
 * ampc_safetensors_verify_checksum of "ampc.payload_crc32" runs (any status: most inputs carry no
 * checksum). When it refuses, the status must be FORMAT (or OOM) with a message naming the file. Any
 * violation traps, so libFuzzer keeps the input; ASan/UBSan/LSan catch the rest. */
#include "ampc.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NAME "fuzz"

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_safetensors *st = NULL;
    ampc_status s = ampc_safetensors_parse(data, size, NAME, &st);
    if (s != AMPC_OK) {
        CHECK(st == NULL);
        CHECK(s == AMPC_STATUS_FORMAT || s == AMPC_STATUS_OOM);
        const char *msg = ampc_last_error();
        CHECK(msg && strstr(msg, NAME));
        return 0;
    }
    CHECK(st != NULL);
    CHECK(strcmp(ampc_safetensors_name(st), NAME) == 0);

    size_t dlen = 0;
    const uint8_t *buf = ampc_safetensors_data(st, &dlen);
    CHECK(dlen <= size && (dlen == 0 || buf));
    int n = ampc_safetensors_count(st);
    CHECK(n >= 0);
    CHECK(ampc_safetensors_tensor(st, -1) == NULL && ampc_safetensors_tensor(st, n) == NULL);
    uint64_t at = 0;
    unsigned x = 0;
    for (int i = 0; i < n; i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(st, i);
        CHECK(t && t->name && t->dtype_name && t->dtype_name[0]);
        CHECK(t->ndim >= 0 && t->ndim <= AMPC_ST_MAX_DIMS);
        CHECK(t->dtype >= 0 && t->dtype <= AMPC_DTYPE_COUNT);
        if (t->dtype != AMPC_DTYPE_COUNT) {
            CHECK(strcmp(t->dtype_name, ampc_dtype_name(t->dtype)) == 0);
            CHECK((size_t)t->bits == 8 * ampc_dtype_size(t->dtype));
        }
        CHECK(t->bits > 0 && t->bits % 8 == 0);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] >= 0);
            CHECK(!__builtin_mul_overflow(numel, t->shape[d], &numel));
        }
        CHECK(numel == t->numel);
        /* sorted and contiguous: each tensor starts where the previous one ended */
        CHECK(t->begin == at && t->end >= t->begin && t->end <= dlen);
        CHECK((uint64_t)numel * (uint64_t)(t->bits / 8) == t->end - t->begin);
        at = t->end;
        if (t->end > t->begin) {
            const uint8_t *p = t->data;
            CHECK(p == buf + t->begin);
            for (uint64_t k = 0; k < t->end - t->begin; k++) x ^= p[k];
        }
        CHECK(ampc_safetensors_find(st, t->name) == t);
    }
    CHECK(at == dlen); /* no trailing bytes after the last tensor */
    CHECK(ampc_safetensors_find(st, "__metadata__") == NULL);

    int m = ampc_safetensors_metadata_count(st);
    CHECK(m >= 0);
    for (int i = 0; i < m; i++) {
        const char *k = NULL, *v = NULL;
        CHECK(ampc_safetensors_metadata_at(st, i, &k, &v) == AMPC_OK);
        CHECK(k && v);
        x ^= (unsigned)strlen(k) ^ (unsigned)strlen(v);
        const char *again = ampc_safetensors_metadata(st, k);
        CHECK(again && strcmp(again, v) == 0);
    }
    const char *k = NULL, *v = NULL;
    ampc_safetensors_metadata_at(st, m, &k, &v);
    CHECK(k == NULL && v == NULL);

    s = ampc_safetensors_verify_checksum(st, "ampc.payload_crc32");
    CHECK(s == AMPC_OK || s == AMPC_STATUS_FORMAT);
    volatile unsigned sink = x;
    (void)sink;
    ampc_safetensors_free(st);
    return 0;
}
