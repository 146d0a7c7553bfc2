/* safetensors_seeds.c: writes the valid seed files of fuzz/corpus/safetensors with the library's own
 * writer (ampc_safetensors_serialize), so the seeds have exactly the layout ampc and the reference
 * writer produce: F32/BF16/F16/I64/U8 tensors, a scalar, an empty tensor, metadata, a CRC-32 checksum
 * under "ampc.payload_crc32", and a file with no tensors. Run it from the fuzz build:
 *   build-fuzz/fuzz/safetensors_seeds fuzz/corpus/safetensors
 * The invalid seeds in that folder were made by hand from these (see the names). */
#include "ampc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int save(const char *dir, const char *name, ampc_safetensors_writer *w) {
    void *bytes = NULL;
    size_t len = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = NULL;
    if (ampc_safetensors_serialize(w, &bytes, &len) != AMPC_OK || !(f = fopen(path, "wb")) ||
        fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "safetensors_seeds: %s: %s\n", path, ampc_last_error());
        free(bytes);
        return 1;
    }
    free(bytes);
    ampc_safetensors_writer_free(w);
    return 0;
}

static ampc_safetensors_writer *writer(void) {
    ampc_safetensors_writer *w = NULL;
    if (ampc_safetensors_writer_new(&w) != AMPC_OK) exit(1);
    return w;
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: safetensors_seeds DIR\n"), 2;
    const char *dir = argv[1];
    float f32[6] = {1, -2, 0.5f, 3e38f, -0.0f, 1e-40f};
    uint16_t b16[4] = {0x3f80, 0xc000, 0x7f80, 0x7fc0}, h16[3] = {0x3c00, 0x7bff, 0x0001};
    int64_t i64[2] = {-1, 1ll << 53};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    int rc = 0;

    ampc_safetensors_writer *w = writer();
    ampc_safetensors_add(w, "weight", AMPC_DTYPE_F32, 2, (int64_t[]){2, 3}, f32);
    rc |= save(dir, "valid-one-f32", w);

    w = writer();
    ampc_safetensors_add(w, "layer.0.w", AMPC_DTYPE_BF16, 2, (int64_t[]){2, 2}, b16);
    ampc_safetensors_add(w, "layer.0.b", AMPC_DTYPE_F16, 1, (int64_t[]){3}, h16);
    ampc_safetensors_add(w, "step", AMPC_DTYPE_I64, 0, NULL, i64);
    ampc_safetensors_add(w, "labels", AMPC_DTYPE_U8, 1, (int64_t[]){5}, u8);
    ampc_safetensors_add(w, "empty", AMPC_DTYPE_F32, 2, (int64_t[]){0, 4}, f32);
    ampc_safetensors_set_metadata(w, "format", "pt");
    ampc_safetensors_set_metadata(w, "ampc.note", "caf\xc3\xa9 \"quoted\" \\ tab\t");
    ampc_safetensors_set_checksum_key(w, "ampc.payload_crc32");
    rc |= save(dir, "valid-mixed-checksum", w);

    w = writer();
    ampc_safetensors_add(w, "x", AMPC_DTYPE_I64, 1, (int64_t[]){2}, i64);
    ampc_safetensors_add(w, "y", AMPC_DTYPE_F32, 4, (int64_t[]){1, 1, 1, 6}, f32);
    ampc_safetensors_set_checksum_key(w, "ampc.payload_crc32");
    rc |= save(dir, "valid-4d-checksum", w);

    w = writer();
    ampc_safetensors_set_metadata(w, "only", "metadata");
    rc |= save(dir, "valid-no-tensors", w);
    return rc;
}
