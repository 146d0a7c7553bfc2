/* run_tokens.c: batches of random tokens for `ampc bench step` without data (--data none, or a vocabulary
 * larger than bytes with no --data): a step's cost does not depend on which ids it sees, so a model meant
 * for token data is timed without a token file. Token t of row r of global batch i is word t % 4 of
 * ampc_rng_block(seed, RUN_TOKENS_STREAM, (i << 32) + r * ceil((T + 1) / 4) + t / 4), mapped to
 * [0, vocab) as word * vocab >> 32 (Lemire's multiply-shift: a bias below vocab / 2^32, nothing a timing
 * can see); each row is T + 1 tokens, x its first T and y its last T. The seed is the run's --seed (1337
 * unless given), so two runs time the same batches, and a row's ids do not depend on the rank that draws
 * it. */
#include "run_state.h"

#include <stdlib.h>

#define RUN_TOKENS_STREAM 0x746f6b73u /* "toks": a stream of its own, apart from dropout's and the data's */

void run_random_tokens(ampc_ctx *ctx, uint64_t seed, int64_t index, int64_t first_row, int64_t rows, int64_t T,
                       int64_t vocab, ampc_tensor **x, ampc_tensor **y) {
    int64_t *ids = malloc((size_t)(2 * rows * T) * sizeof *ids), blocks = (T + 1 + 3) / 4;
    *x = *y = NULL;
    if (!ids) return;
    for (int64_t r = 0; r < rows; r++) {
        uint32_t w[4];
        uint64_t base = ((uint64_t)index << 32) + (uint64_t)((first_row + r) * blocks);
        for (int64_t t = 0; t <= T; t++) {
            if (t % 4 == 0) ampc_rng_block(seed, RUN_TOKENS_STREAM, base + (uint64_t)(t / 4), w);
            int64_t id = (int64_t)(((uint64_t)w[t % 4] * (uint64_t)vocab) >> 32);
            if (t < T) ids[r * T + t] = id;                /* x */
            if (t > 0) ids[rows * T + r * T + t - 1] = id; /* y */
        }
    }
    int64_t shape[2] = {rows, T};
    *x = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, 2, shape, ids, AMPC_DTYPE_I64);
    *y = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, 2, shape, ids + rows * T, AMPC_DTYPE_I64);
    free(ids);
}
