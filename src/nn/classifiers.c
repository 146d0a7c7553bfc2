/* classifiers.c: the image and toy models: the tutorials' SimpleModel (5-4-3), an MLP with ReLU between
 * its layers, and the CNN (two conv 3x3 + ReLU + 2x2 max-pool stages, FC 128, FC classes). Weights and
 * biases use PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)) initialisation. */
#include "nn.h"

/* A Linear(in, out) layer's two parameters; returns the weight's index. */
static int declare_linear(ampc_model *m, const char *name, int64_t in, int64_t out) {
    ampci_model_module(m, "%s", name);
    int w = ampci_model_declare(m, AMPCI_INIT_FAN_IN, (double)in, false, 2, (int64_t[]){out, in}, "%s.weight", name);
    ampci_model_declare(m, AMPCI_INIT_FAN_IN, (double)in, true, 1, (int64_t[]){out}, "%s.bias", name);
    return w;
}

static int declare_conv(ampc_model *m, const char *name, int64_t in, int64_t out) {
    ampci_model_module(m, "%s", name);
    int w = ampci_model_declare(m, AMPCI_INIT_FAN_IN, (double)(in * 9), false, 4, (int64_t[]){out, in, 3, 3},
                                "%s.weight", name);
    ampci_model_declare(m, AMPCI_INIT_FAN_IN, (double)(in * 9), true, 1, (int64_t[]){out}, "%s.bias", name);
    return w;
}

ampc_status ampci_simple_declare(ampc_model *m) {
    declare_linear(m, "fc1", 5, 4);
    declare_linear(m, "fc2", 4, 3);
    return AMPC_OK;
}

ampc_status ampci_mlp_declare(ampc_model *m) {
    int64_t in = m->cfg.in_features;
    char name[24];
    int i = 0;
    for (; i < AMPC_MODEL_MAX_HIDDEN && m->cfg.hidden[i]; i++) {
        snprintf(name, sizeof name, "layers.%d", i);
        declare_linear(m, name, in, m->cfg.hidden[i]);
        in = m->cfg.hidden[i];
    }
    snprintf(name, sizeof name, "layers.%d", i);
    declare_linear(m, name, in, m->cfg.classes);
    return AMPC_OK;
}

ampc_status ampci_cnn_declare(ampc_model *m) {
    int64_t s = m->cfg.image_size / 4;
    declare_conv(m, "conv1", m->cfg.in_channels, 32);
    declare_conv(m, "conv2", 32, 64);
    declare_linear(m, "fc1", 64 * s * s, 128);
    declare_linear(m, "fc2", 128, m->cfg.classes);
    return AMPC_OK;
}

ampc_tensor *ampci_simple_forward(ampc_model *m, const ampc_tensor *x) {
    x = ampci_model_input(m, x);
    ampc_tensor *h = ampc_relu(m->ctx, ampci_model_linear(m, "fc1", x, 0, true));
    return ampci_model_linear(m, "fc2", h, 2, true);
}

ampc_tensor *ampci_mlp_forward(ampc_model *m, const ampc_tensor *x) {
    x = ampci_model_input(m, x);
    if (x && ampc_tensor_ndim(x) > 2) /* images: flatten (B, C, H, W) to (B, C*H*W) */
        x = ampc_tensor_reshape(x, 2, (int64_t[]){ampc_tensor_dim(x, 0), -1});
    ampc_tensor *h = (ampc_tensor *)x;
    int layers = m->n / 2;
    char name[24];
    for (int i = 0; i < layers && h; i++) {
        snprintf(name, sizeof name, "layers.%d", i);
        h = ampci_model_linear(m, name, h, 2 * i, true);
        if (i + 1 < layers) h = ampc_relu(m->ctx, h);
    }
    return h;
}

static ampc_tensor *conv_stage(ampc_model *m, const char *name, const ampc_tensor *x, int w) {
    ampc_ctx *ctx = m->ctx;
    if (ampc_scope_push(ctx, name) != AMPC_OK) return NULL;
    ampc_tensor *y = ampc_conv2d(ctx, x, m->params[w], m->params[w + 1], &(ampc_conv2d_params){.pad_h = 1, .pad_w = 1});
    y = ampc_max_pool2d(ctx, ampc_relu(ctx, y), &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2});
    ampc_scope_pop(ctx);
    return y;
}

ampc_tensor *ampci_cnn_forward(ampc_model *m, const ampc_tensor *x) {
    x = ampci_model_input(m, x);
    ampc_tensor *h = conv_stage(m, "conv2", conv_stage(m, "conv1", x, 0), 2);
    h = h ? ampc_tensor_reshape(h, 2, (int64_t[]){ampc_tensor_dim(h, 0), -1}) : NULL;
    h = ampc_relu(m->ctx, ampci_model_linear(m, "fc1", h, 4, true));
    return ampci_model_linear(m, "fc2", h, 6, true);
}
