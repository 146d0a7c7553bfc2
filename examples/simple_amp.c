/* simple_amp.c: the tutorials' SimpleModel (Linear 5->4, ReLU, Linear 4->3, MSE loss, SGD lr 0.1, 20
 * steps) trained with automatic mixed precision: FP16 with a GradScaler, then BF16 without one.
 * Build against the installed library: cc simple_amp.c $(pkg-config --cflags --libs ampc) */
#include <ampc.h>

#include <stdio.h>

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != AMPC_OK) {                                                                                       \
            fprintf(stderr, "%s: %s\n", #call, ampc_last_error());                                                     \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)

static ampc_tensor *param(ampc_ctx *ctx, int64_t rows, int64_t cols, int ndim) {
    ampc_tensor *t = ampc_tensor_new(ctx, AMPC_DTYPE_F32, ndim, (int64_t[]){rows, cols});
    ampc_tensor_fill_uniform(t, -0.4, 0.4); /* FP32 parameters: the master weights */
    ampc_tensor_set_requires_grad(t, true);
    return t;
}

static double train_in_amp(ampc_dtype low_dtype) {
    ampc_ctx *ctx;
    CHECK(ampc_ctx_new(&(ampc_ctx_params){.seed = 0}, &ctx));
    ampc_tensor *p[4] = {param(ctx, 4, 5, 2), param(ctx, 4, 1, 1), param(ctx, 3, 4, 2), param(ctx, 3, 1, 1)};
    ampc_optim *opt;
    CHECK(ampc_optim_new(ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 0.1}, &opt));
    CHECK(ampc_optim_add_group(opt, "model", p, 4, NULL));
    /* loss scaling for FP16 only: BF16 has FP32's range and needs none */
    ampc_grad_scaler *scaler;
    ampc_grad_scaler_params sp = ampc_grad_scaler_defaults(); /* start from the defaults, change what you need */
    sp.enabled = low_dtype == AMPC_DTYPE_F16;
    CHECK(ampc_grad_scaler_new(ctx, &sp, &scaler));
    ampc_autocast_params ap = ampc_autocast_defaults(); /* torch.autocast("cpu", dtype=low_dtype) */
    ap.dtype = low_dtype;
    ampc_tensor *inputs = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, (int64_t[]){6, 5});
    ampc_tensor *targets = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, (int64_t[]){6, 3});
    ampc_tensor_fill_normal(inputs, 0, 1);
    ampc_tensor_fill_normal(targets, 0, 1);
    float loss_value = 0;
    for (int step = 0; step < 20; step++) {
        ampc_optim_zero_grad(opt);
        CHECK(ampc_autocast_begin(ctx, &ap));
        ampc_tensor *outputs = ampc_linear(ctx, ampc_relu(ctx, ampc_linear(ctx, inputs, p[0], p[1])), p[2], p[3]);
        if (ampc_tensor_dtype(outputs) != low_dtype) { /* the tutorials' assert outputs.dtype == low_dtype */
            fprintf(stderr, "outputs are %s, expected %s\n", ampc_dtype_name(ampc_tensor_dtype(outputs)),
                    ampc_dtype_name(low_dtype));
            return -1;
        }
        ampc_tensor *loss = ampc_mse_loss(ctx, outputs, targets); /* runs in FP32 under autocast */
        CHECK(ampc_autocast_end(ctx));
        CHECK(ampc_backward(ctx, ampc_grad_scaler_scale(scaler, loss)));
        CHECK(ampc_grad_scaler_step(scaler, opt, NULL)); /* skipped if a gradient overflowed */
        CHECK(ampc_grad_scaler_update(scaler));
        CHECK(ampc_tensor_copy_to(loss, &loss_value, AMPC_DTYPE_F32));
        ampc_ctx_step_end(ctx); /* frees activations and the graph */
    }
    printf("%-4s final loss %.4f, loss scale %g\n", ampc_dtype_name(low_dtype), loss_value,
           ampc_grad_scaler_get_scale(scaler));
    ampc_grad_scaler_free(scaler);
    ampc_optim_free(opt);
    for (int i = 0; i < 4; i++) ampc_tensor_free(p[i]);
    ampc_tensor_free(inputs), ampc_tensor_free(targets);
    ampc_ctx_free(ctx);
    return loss_value;
}

int main(void) {
    double fp16 = train_in_amp(AMPC_DTYPE_F16), bf16 = train_in_amp(AMPC_DTYPE_BF16);
    return fp16 >= 0 && bf16 >= 0 ? 0 : 1;
}
