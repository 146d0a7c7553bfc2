/* test_params.h: the library's parameter structs as the tests write them, field by field, stamped with
 * AMPC_PARAMS_INIT (the library refuses a struct without it: ampc.h). Zero numeric fields still take
 * their defaults; the flags are literal, as written:
 *     ampc_autocast_begin(ctx, TU_AC(.dtype = AMPC_DTYPE_F16, .enabled = true));
 *     ampc_grad_scaler_new(ctx, TU_SP(.enabled = true, .init_scale = 1024), &gs); */
#ifndef AMPC_TEST_PARAMS_H
#define AMPC_TEST_PARAMS_H

#include "ampc.h"

static inline ampc_autocast_params tu_ac(ampc_autocast_params p) {
    p.init = AMPC_PARAMS_INIT;
    return p;
}
static inline ampc_grad_scaler_params tu_sp(ampc_grad_scaler_params p) {
    p.init = AMPC_PARAMS_INIT;
    return p;
}
/* Pointers to the stamped structs (one-element array literals, alive to the end of the enclosing block). */
#define TU_AC(...) ((const ampc_autocast_params[]){tu_ac((ampc_autocast_params){__VA_ARGS__})})
#define TU_SP(...) ((const ampc_grad_scaler_params[]){tu_sp((ampc_grad_scaler_params){__VA_ARGS__})})

#endif
