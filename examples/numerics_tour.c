/* numerics_tour.c: what FP16 and BF16 do to a few familiar numbers, and how to convert whole arrays.
 * Build against the installed library:  cc numerics_tour.c $(pkg-config --cflags --libs ampc)
 * The numbers printed here are the ones the tutorials argue about: FP16 overflows just above 65504 and
 * flushes tiny gradients to zero; BF16 keeps FP32's range but only ~2.4 decimal digits. */
#include <ampc.h>

#include <math.h>
#include <stdio.h>

static void show(const char *label, float x) {
    uint16_t h = ampc_f16_from_f32(x), b = ampc_bf16_from_f32(x);
    printf("%-26s %-14.8g fp16 0x%04x = %-14.8g bf16 0x%04x = %.8g\n", label, x, h, ampc_f16_to_f32(h), b,
           ampc_bf16_to_f32(b));
}

int main(void) {
    show("0.1", 0.1f);
    show("pi", 3.14159265f);
    show("fp16 max", 65504.0f);
    show("65519.99 (rounds down)", 65519.99f);
    show("65520 (fp16 overflow)", 65520.0f);
    show("1e-8 (a small gradient)", 1e-8f);
    show("1e-8 * 65536 (scaled)", 1e-8f * 65536.0f);
    show("3e38", 3e38f);

    /* Whole arrays: one call, the fastest path this CPU has, bit-identical to the scalar calls. */
    float src[5] = {1.0f, -2.5f, 1e-6f, 70000.0f, NAN}, back[5];
    uint16_t half[5];
    if (ampc_convert(half, AMPC_DTYPE_F16, src, AMPC_DTYPE_F32, 5) != AMPC_OK ||
        ampc_convert(back, AMPC_DTYPE_F32, half, AMPC_DTYPE_F16, 5) != AMPC_OK) {
        fprintf(stderr, "convert failed: %s\n", ampc_last_error());
        return 1;
    }
    for (int i = 0; i < 5; i++) printf("f32 %-10g -> f16 0x%04x -> f32 %g\n", src[i], half[i], back[i]);
    for (int i = 0; i < 5; i++)
        if (half[i] != ampc_f16_from_f32(src[i])) return 1; /* the vector path must match the scalar one */
    return 0;
}
