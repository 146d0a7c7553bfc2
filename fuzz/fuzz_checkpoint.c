/* fuzz_checkpoint.c: libFuzzer target for the checkpoint loader: the bytes are parsed as a safetensors
 * file and, when accepted, restored (ampc_checkpoint_model_config, then ampc_checkpoint_restore) into a
 * fixed small run built once: a 1-layer GPT (d 4, 1 head, context 4) with AdamW, an enabled GradScaler,
 * the context RNG and a loader over the built-in corpus (batch 2) - the run of the seed in
 * corpus/checkpoint, made by `ampc train --layers 1 --d-model 4 --heads 1 --context 4 --batch 2
 * --steps 2 --precision fp16 --checkpoint tiny.st`. Whatever the metadata and tensors say, the loader
 * must not crash, and a refusal (FORMAT, SHAPE or DTYPE, with a message naming the file) must leave
 * every parameter, the optimizer step count, the RNG and the data cursor exactly as they were: a
 * checkpoint is never half-loaded. The payload checksum is not required here (it would hide the
 * metadata paths from the fuzzer); ampc_checkpoint_open adds it on top of this same code. */
#include "ampc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz"
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) __builtin_trap();                                                                                    \
    } while (0)

static ampc_ctx *g_ctx;
static ampc_dataset *g_ds;
static ampc_checkpoint_state g_run;
static unsigned char *g_snapshot;
static size_t g_bytes;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ampc_model_config mc = {.kind = AMPC_MODEL_GPT, .layers = 1, .d_model = 4, .heads = 1, .context = 4, .seed = 1337};
    CHECK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1337, .threads = 1}, &g_ctx) == AMPC_OK);
    CHECK(ampc_dataset_open(NULL, &g_ds) == AMPC_OK);
    CHECK(ampc_model_new(g_ctx, &mc, &g_run.model) == AMPC_OK);
    CHECK(ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .beta2 = 0.95}, &g_run.optim) ==
          AMPC_OK);
    CHECK(ampc_model_add_to_optim(g_run.model, g_run.optim) == AMPC_OK);
    CHECK(ampc_grad_scaler_new(g_ctx, NULL, &g_run.scaler) == AMPC_OK);
    CHECK(
        ampc_loader_new(g_ctx, g_ds,
                        &(ampc_loader_params){
                            .batch = 2, .context = 4, .seed = 1337, .shuffle = true, .drop_last = true, .repeat = true},
                        &g_run.loader) == AMPC_OK);
    g_run.rng = ampc_ctx_rng(g_ctx);
    g_bytes = (size_t)ampc_model_param_count(g_run.model) * 4;
    g_snapshot = malloc(g_bytes);
    CHECK(g_snapshot);
    return 0;
}

static const void *params(void) { return ampc_tensor_data(ampc_model_param(g_run.model, 0)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_safetensors *st = NULL;
    if (ampc_safetensors_parse(data, size, NAME, &st) != AMPC_OK) return 0; /* fuzz_safetensors covers it */
    ampc_model_config mc;
    if (ampc_checkpoint_model_config(st, &mc) != AMPC_OK) CHECK(strstr(ampc_last_error(), NAME));
    memcpy(g_snapshot, params(), g_bytes);
    ampc_rng rng = *g_run.rng;
    ampc_loader_cursor cur;
    ampc_loader_get_cursor(g_run.loader, &cur);
    int64_t steps = ampc_optim_steps(g_run.optim);
    double lr = ampc_optim_lr(g_run.optim);
    ampc_checkpoint_state s = g_run;
    ampc_status r = ampc_checkpoint_restore(st, &s);
    if (r != AMPC_OK) {
        CHECK(r == AMPC_STATUS_FORMAT || r == AMPC_STATUS_SHAPE || r == AMPC_STATUS_DTYPE || r == AMPC_STATUS_OOM);
        CHECK(strstr(ampc_last_error(), NAME));
        CHECK(memcmp(g_snapshot, params(), g_bytes) == 0); /* never half-loaded */
        CHECK(g_run.rng->counter == rng.counter && g_run.rng->seed == rng.seed);
        ampc_loader_cursor now;
        ampc_loader_get_cursor(g_run.loader, &now);
        CHECK(now.epoch == cur.epoch && now.position == cur.position);
        CHECK(ampc_optim_steps(g_run.optim) == steps && ampc_optim_lr(g_run.optim) == lr);
    } else {
        CHECK(s.step >= 0);
    }
    ampc_safetensors_free(st);
    return 0;
}
