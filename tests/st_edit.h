/* st_edit.h: a checkpoint file rewritten with one change (a tensor left out, added or stored as F16, or
 * a metadata value replaced) and its checksum recomputed, so that the loader's checks behind the checksum
 * are reached; for the bad-file tests of test_checkpoint and test_fp8_checkpoint. */
#ifndef AMPC_TEST_ST_EDIT_H
#define AMPC_TEST_ST_EDIT_H

#include "test_util.h"

/* Copies src to dst, leaving out tensor `drop`, adding an extra F32 tensor `add`, storing tensor `as_f16`
 * as F16, and setting metadata key to value (each NULL = no change); the checksum is recomputed. */
typedef struct edit {
    const char *drop, *add, *as_f16, *key, *value;
} edit;

static inline void rewrite(const char *src, const char *dst, edit e) {
    ampc_safetensors *st;
    ampc_safetensors_writer *w;
    if (ampc_safetensors_read(src, &st) != AMPC_OK || ampc_safetensors_writer_new(&w) != AMPC_OK)
        FAILF("rewrite: %s", ampc_last_error());
    static uint16_t half[1 << 16];
    static const float one[4] = {1, 2, 3, 4};
    for (int i = 0; i < ampc_safetensors_count(st); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(st, i);
        if (e.drop && !strcmp(t->name, e.drop)) continue;
        bool conv = e.as_f16 && !strcmp(t->name, e.as_f16);
        if (conv) ampc_convert(half, AMPC_DTYPE_F16, t->data, AMPC_DTYPE_F32, (size_t)t->numel);
        ampc_safetensors_add(w, t->name, conv ? AMPC_DTYPE_F16 : t->dtype, t->ndim, t->shape, conv ? half : t->data);
    }
    if (e.add) ampc_safetensors_add(w, e.add, AMPC_DTYPE_F32, 1, (int64_t[]){4}, one);
    for (int i = 0; i < ampc_safetensors_metadata_count(st); i++) {
        const char *k, *v;
        ampc_safetensors_metadata_at(st, i, &k, &v);
        ampc_safetensors_set_metadata(w, k, e.key && !strcmp(k, e.key) ? e.value : v);
    }
    ampc_safetensors_set_checksum_key(w, "ampc.payload_crc32");
    if (ampc_safetensors_write(w, dst) != AMPC_OK) FAILF("rewrite: %s", ampc_last_error());
    ampc_safetensors_writer_free(w);
    ampc_safetensors_free(st);
}

#endif
