/* consumer.c: a program outside the ampc tree, built against an installed copy of the library (the
 * install test builds it through the CMake package and through pkg-config, shared and static). */
#include <ampc.h>

#include <stdio.h>

int main(void) {
    ampc_ctx *ctx;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &ctx) != AMPC_OK) {
        fprintf(stderr, "ampc_ctx_new: %s\n", ampc_last_error());
        return 1;
    }
    ampc_tensor *t = ampc_tensor_full(ctx, AMPC_DTYPE_BF16, 2, (int64_t[]){2, 3}, 65504.0);
    float back[6];
    int ok = t && ampc_tensor_copy_to(t, back, AMPC_DTYPE_F32) == AMPC_OK && back[5] == 65536.0f &&
             ampc_f16_from_f32(65520.0f) == 0x7c00;
    /* the data module links zlib: a static consumer must get it from the package files */
    ampc_dataset *ds = NULL;
    ok = ok && ampc_dataset_open(NULL, &ds) == AMPC_OK;
    ampc_dataset_free(ds);
    printf("ampc %s, kernel level %s: %s\n", ampc_version(), ampc_isa_name(ampc_ctx_isa(ctx)), ok ? "ok" : "WRONG");
    ampc_ctx_free(ctx);
    return ok ? 0 : 1;
}
