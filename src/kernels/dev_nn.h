/* dev_nn.h: the device operations of the nn family (src/ops/norm.c, loss.c, embedding.c, dropout.c):
 * row softmax and layer norm with their gradients, the range check of integer ids and class targets,
 * cross-entropy and mean squared error reduced to a 0-dim loss on the device, the embedding gather and
 * its scatter-add, the sinusoidal positional encoding and dropout's counter-based mask. Operands are F32
 * unless a dtype says otherwise; rows are contiguous. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_NN_H
#define AMPC_KERNELS_DEV_NN_H

#include "kernels.h"

/* y (rows, cols) = softmax (log: log_softmax) of each row of x (rows, cols). */
typedef struct ampci_softmax_args {
    float *y;
    const float *x;
    int64_t rows, cols;
    bool log;
} ampci_softmax_args;

/* gx (rows, cols) = J^T gy (rows, cols) per row, from the forward's output y (rows, cols). */
typedef struct ampci_softmax_bw_args {
    float *gx;
    const float *gy, *y;
    int64_t rows, cols;
    bool log;
} ampci_softmax_bw_args;

/* y (rows, cols) = (x - mean) * rstd * w + b per row of x (rows, cols); w, b (cols) or NULL; mean and
 * rstd (rows each) are written for the backward. */
typedef struct ampci_layer_norm_args {
    float *y, *mean, *rstd;
    const float *x, *w, *b;
    int64_t rows, cols;
    float eps;
} ampci_layer_norm_args;

/* gx (rows, cols) from gy and x (rows, cols each), the forward's mean and rstd (rows each) and w (cols,
 * or NULL); gw, gb (cols each, or NULL when not wanted) = the weight and bias gradients summed over the
 * rows: per fixed chunk of rows (a cut that depends only on rows and cols), then the chunks added in
 * chunk order in double. */
typedef struct ampci_layer_norm_bw_args {
    float *gx, *gw, *gb;
    const float *gy, *x, *mean, *rstd, *w;
    int64_t rows, cols;
} ampci_layer_norm_bw_args;

/* Checks ids (n int64) against [0, limit), skipping the value ignore_index when has_ignore. result (3
 * int64) = {the first position whose value is out of range or -1, that value (0 when none), how many
 * values are not ignore_index (meaningful when none is out of range)}. */
typedef struct ampci_index_check_args {
    const int64_t *ids;
    int64_t n, limit;
    bool has_ignore;
    int64_t ignore_index;
    int64_t *result;
} ampci_index_check_args;

/* Cross-entropy over logits (rows, cols) with class targets (rows int64, validated: in [0, cols) or
 * ignore_index): lse (rows) = each row's log-sum-exp; loss (0-dim, loss_dt) = the per-row losses summed
 * in double in row order (ignored rows add 0) divided by kept (NaN when kept is 0), in F32, rounded once
 * to loss_dt. */
typedef struct ampci_cross_entropy_args {
    void *loss;
    ampc_dtype loss_dt;
    float *lse;
    const float *logits;
    const int64_t *targets;
    int64_t rows, cols, ignore_index, kept;
} ampci_cross_entropy_args;

/* gx (rows, cols) = (softmax(logits) - onehot(target)) * fl(g[0] / kept) on kept rows, 0 on ignored rows
 * (all rows when kept is 0); logits (rows, cols), lse and targets (rows) as the forward had them; g (1)
 * is the loss's gradient, read here. */
typedef struct ampci_cross_entropy_bw_args {
    float *gx;
    const float *logits, *lse;
    const int64_t *targets;
    const float *g;
    int64_t rows, cols, ignore_index, kept;
} ampci_cross_entropy_bw_args;

/* loss (0-dim, loss_dt) = mean of (x - t)^2 over x, t (n each): squares summed in double per fixed chunk,
 * chunks added in chunk order, divided by n (NaN when n is 0), in F32, rounded once to loss_dt. */
typedef struct ampci_mse_loss_args {
    void *loss;
    ampc_dtype loss_dt;
    const float *x, *t;
    int64_t n;
} ampci_mse_loss_args;

/* gx (n) = (x - t) * fl(2 g[0] / n) for x, t (n each) and the loss's gradient g (1, read here); gt (n,
 * or NULL) = -gx. */
typedef struct ampci_mse_loss_bw_args {
    float *gx, *gt;
    const float *x, *t, *g;
    int64_t n;
} ampci_mse_loss_bw_args;

/* out (n, cols of dt) = the rows of w (V, cols of dt, contiguous) that ids (n int64, validated) pick:
 * an exact copy. */
typedef struct ampci_embedding_args {
    void *out;
    const void *w;
    ampc_dtype dt;
    const int64_t *ids;
    int64_t n, cols;
} ampci_embedding_args;

/* gw (rows, cols) = 0, then gw[ids[i], :] += gy[i, :] for gy (n, cols) and ids (n int64, validated), in
 * order i = 0..n-1 within each column (so repeated ids sum the same way on any split). */
typedef struct ampci_embedding_bw_args {
    float *gw;
    const float *gy;
    const int64_t *ids;
    int64_t n, rows, cols;
} ampci_embedding_bw_args;

/* y (n) = x (n) + PE[i mod T*D] with the sinusoidal table PE (T, D) of "Attention is all you need":
 * PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(...), evaluated in double, rounded to F32. */
typedef struct ampci_positional_encoding_args {
    float *y;
    const float *x;
    int64_t n, T, D;
} ampci_positional_encoding_args;

/* y (n) = x (n) * scale where u_i >= p, else 0: u_i is element i of the uniform [0, 1) fill
 * ampc_rng_uniform(rng, ...) would make (rng is not advanced), so the mask is a pure function of rng. */
typedef struct ampci_dropout_args {
    float *y;
    const float *x;
    int64_t n;
    ampc_rng rng;
    double p;
    float scale;
} ampci_dropout_args;

#define AMPCI_DEVOPS_NN(X)                                                                                             \
    X(softmax)                                                                                                         \
    X(softmax_bw)                                                                                                      \
    X(layer_norm)                                                                                                      \
    X(layer_norm_bw)                                                                                                   \
    X(index_check)                                                                                                     \
    X(cross_entropy)                                                                                                   \
    X(cross_entropy_bw)                                                                                                \
    X(mse_loss)                                                                                                        \
    X(mse_loss_bw)                                                                                                     \
    X(embedding)                                                                                                       \
    X(embedding_bw)                                                                                                    \
    X(positional_encoding)                                                                                             \
    X(dropout)

#endif
