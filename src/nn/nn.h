/* nn.h: the model struct and the parameter registry the model files share. A model declares its
 * parameters (name, shape, initialiser, weight-decay group) in order; ampci_model_build lays them out in
 * one owned block of the parameter dtype, makes each an owned named view, and initialises it from its own
 * counter-based RNG stream (seed, parameter index), so initial weights depend only on the seed. */
#ifndef AMPC_NN_H
#define AMPC_NN_H

#include "../ops/frame.h"
#include "../tensor/tensor.h"

#include <stdio.h>

typedef enum ampci_init {
    AMPCI_INIT_FAN_IN = 0, /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear/Conv2d default */
    AMPCI_INIT_NORMAL,     /* N(0, a^2) */
    AMPCI_INIT_ZEROS,
    AMPCI_INIT_ONES,
} ampci_init;

typedef struct ampci_param_spec {
    char name[64];
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    ampci_init init;
    double a; /* fan_in for FAN_IN, std for NORMAL */
    bool no_decay;
} ampci_param_spec;

/* Enough for the largest GPT the CLI builds (--layers 100: 12 parameters and 9 modules a block, 4 more of
 * each; GPT-2 medium's 24 blocks need 292 parameters). */
#define AMPCI_MAX_PARAMS 1280
#define AMPCI_MAX_MODULES 1024

struct ampc_model {
    ampc_ctx *ctx;
    ampc_model_config cfg;
    bool training;
    ampc_tensor *block; /* every parameter, contiguous */
    ampc_tensor *params[AMPCI_MAX_PARAMS];
    ampci_param_spec specs[AMPCI_MAX_PARAMS];
    int n;
    char modules[AMPCI_MAX_MODULES][64]; /* the scope paths the forward pushes, in forward order */
    int n_modules;
};

/* Declares a parameter; returns its index. printf-style name. */
AMPCI_HIDDEN int ampci_model_declare(ampc_model *m, ampci_init init, double a, bool no_decay, int ndim,
                                     const int64_t *shape, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Declares a module: a scope path the forward pushes (printf-style). */
AMPCI_HIDDEN void ampci_model_module(ampc_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Allocates the block and initialises every declared parameter. */
AMPCI_HIDDEN ampc_status ampci_model_build(ampc_model *m);

/* Per kind: declare the parameters (config already defaulted and validated) ... */
AMPCI_HIDDEN ampc_status ampci_gpt_declare(ampc_model *m);
AMPCI_HIDDEN ampc_status ampci_mlp_declare(ampc_model *m);
AMPCI_HIDDEN ampc_status ampci_cnn_declare(ampc_model *m);
AMPCI_HIDDEN ampc_status ampci_simple_declare(ampc_model *m);
/* ... and run the forward pass (input already validated to exist). */
AMPCI_HIDDEN ampc_tensor *ampci_gpt_forward(ampc_model *m, const ampc_tensor *ids);
AMPCI_HIDDEN ampc_tensor *ampci_mlp_forward(ampc_model *m, const ampc_tensor *x);
AMPCI_HIDDEN ampc_tensor *ampci_cnn_forward(ampc_model *m, const ampc_tensor *x);
AMPCI_HIDDEN ampc_tensor *ampci_simple_forward(ampc_model *m, const ampc_tensor *x);

/* The input in the parameter dtype when parameters are low precision (O2 / half modes); unchanged else. */
AMPCI_HIDDEN const ampc_tensor *ampci_model_input(ampc_model *m, const ampc_tensor *x);
/* linear(x, params[w], params[w + 1]) inside scope `name`. */
AMPCI_HIDDEN ampc_tensor *ampci_model_linear(ampc_model *m, const char *name, const ampc_tensor *x, int w, bool bias);

#endif
