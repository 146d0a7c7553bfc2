/* dtype.c: the tensor dtype table (names, sizes, kinds) and the public scalar FP16/BF16 conversions,
 * thin wrappers over the inline bit-pattern versions in half.h that the kernels use directly. */
#include "numerics.h"

#include <strings.h>

typedef struct dtype_def {
    const char *name;
    size_t size;
    bool is_float;
    const char *aliases[3];
} dtype_def;

static const dtype_def dtypes[AMPC_DTYPE_COUNT] = {
    [AMPC_DTYPE_F32] = {"F32", 4, true, {"fp32", "float32", "float"}},
    [AMPC_DTYPE_F16] = {"F16", 2, true, {"fp16", "float16", "half"}},
    [AMPC_DTYPE_BF16] = {"BF16", 2, true, {"bfloat16", NULL, NULL}},
    [AMPC_DTYPE_F64] = {"F64", 8, true, {"fp64", "float64", "double"}},
    [AMPC_DTYPE_I32] = {"I32", 4, false, {"int32", NULL, NULL}},
    [AMPC_DTYPE_I64] = {"I64", 8, false, {"int64", NULL, NULL}},
    [AMPC_DTYPE_U8] = {"U8", 1, false, {"uint8", NULL, NULL}},
};

const char *ampc_dtype_name(ampc_dtype dt) { return (unsigned)dt < AMPC_DTYPE_COUNT ? dtypes[dt].name : "?"; }
size_t ampc_dtype_size(ampc_dtype dt) { return (unsigned)dt < AMPC_DTYPE_COUNT ? dtypes[dt].size : 0; }
bool ampc_dtype_is_float(ampc_dtype dt) { return (unsigned)dt < AMPC_DTYPE_COUNT && dtypes[dt].is_float; }

ampc_status ampc_dtype_parse(const char *name, ampc_dtype *out) {
    if (!name || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dtype_parse: name and out must not be NULL");
    for (int i = 0; i < AMPC_DTYPE_COUNT; i++) {
        bool hit = strcasecmp(name, dtypes[i].name) == 0;
        for (int a = 0; a < 3 && !hit && dtypes[i].aliases[a]; a++) hit = strcasecmp(name, dtypes[i].aliases[a]) == 0;
        if (hit) {
            *out = (ampc_dtype)i;
            return AMPC_OK;
        }
    }
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "unknown dtype '%s': expected one of f32, f16, bf16, f64, i32, i64, u8",
                      name);
}

uint16_t ampc_f16_from_f32(float x) { return ampci_f16_from_f32_bits(ampci_f32_bits(x)); }
float ampc_f16_to_f32(uint16_t h) { return ampci_f32_from_bits(ampci_f16_to_f32_bits(h)); }
uint16_t ampc_bf16_from_f32(float x) { return ampci_bf16_from_f32_bits(ampci_f32_bits(x)); }
float ampc_bf16_to_f32(uint16_t h) { return ampci_f32_from_bits(ampci_bf16_to_f32_bits(h)); }
