/* conv_ref.c: the reference kernels behind conv2d and max_pool2d: im2row (each output pixel's input
 * window copied into one row, in the input dtype, so the convolution becomes one GEMM in that dtype),
 * its adjoint col2im in F32, and max pooling forward (value and argmax) and backward. Each works on a
 * range of rows or planes handed to it by the op, and every output element is produced by one call in a
 * fixed order, so results do not depend on how the op splits the range over threads. */
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

/* im2row for one element type: a copy of T values (0 bits = +0 in F32, F16 and BF16). */
#define IM2ROW(NAME, T)                                                                                                \
    void NAME(void *colv, const void *xv, const ampci_conv_geom *g, int64_t r0, int64_t r1) {                          \
        T *col = colv;                                                                                                 \
        const T *x = xv;                                                                                               \
        int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW;                                                       \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            int64_t n = r / ohw, oh = r % ohw / g->OW, ow = r % g->OW;                                                 \
            T *row = col + r * ckk;                                                                                    \
            for (int64_t c = 0; c < g->C; c++) {                                                                       \
                const T *plane = x + (n * g->C + c) * g->H * g->W;                                                     \
                for (int64_t kh = 0; kh < g->KH; kh++) {                                                               \
                    int64_t h = oh * g->sh - g->ph + kh;                                                               \
                    for (int64_t kw = 0; kw < g->KW; kw++) {                                                           \
                        int64_t w = ow * g->sw - g->pw + kw;                                                           \
                        *row++ = (h >= 0 && h < g->H && w >= 0 && w < g->W) ? plane[h * g->W + w] : (T)0;              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

IM2ROW(ampc_k_im2col_f32__ref, uint32_t)
IM2ROW(ampc_k_im2col_f16__ref, uint16_t)
IM2ROW(ampc_k_im2col_bf16__ref, uint16_t) /* the F16 kernel's code; an entry of its own per dtype */

void ampc_k_col2im_f32__ref(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t p0, int64_t p1) {
    int64_t ckk = g->C * g->KH * g->KW;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / g->C, c = p % g->C;
        float *plane = gx + p * g->H * g->W;
        memset(plane, 0, (size_t)(g->H * g->W) * sizeof *plane);
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                const float *row = gcol + ((n * g->OH + oh) * g->OW + ow) * ckk + c * g->KH * g->KW;
                for (int64_t kh = 0; kh < g->KH; kh++) {
                    int64_t h = oh * g->sh - g->ph + kh;
                    if (h < 0 || h >= g->H) continue;
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        int64_t w = ow * g->sw - g->pw + kw;
                        if (w >= 0 && w < g->W) plane[h * g->W + w] += row[kh * g->KW + kw];
                    }
                }
            }
    }
}

/* The op guarantees every window holds at least one in-plane position (pad <= kernel / 2). */
void ampc_k_maxpool_f32__ref(float *y, int32_t *arg, const float *x, const ampci_conv_geom *g, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = x + p * g->H * g->W;
        float *yp = y + p * g->OH * g->OW;
        int32_t *ap = arg + p * g->OH * g->OW;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float best = -INFINITY;
                int64_t at = -1;
                for (int64_t kh = 0; kh < g->KH; kh++) {
                    int64_t h = oh * g->sh - g->ph + kh;
                    if (h < 0 || h >= g->H) continue;
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        int64_t w = ow * g->sw - g->pw + kw;
                        if (w < 0 || w >= g->W) continue;
                        float v = plane[h * g->W + w];
                        /* PyTorch's rule: strictly greater replaces (so the first maximum wins), NaN always */
                        if (at < 0 || v > best || isnan(v)) best = v, at = h * g->W + w;
                    }
                }
                yp[oh * g->OW + ow] = best;
                ap[oh * g->OW + ow] = (int32_t)at;
            }
    }
}

void ampc_k_maxpool_bw_f32__ref(float *gx, const float *gy, const int32_t *arg, const ampci_conv_geom *g, int64_t p0,
                                int64_t p1) {
    int64_t ohw = g->OH * g->OW;
    for (int64_t p = p0; p < p1; p++) {
        float *plane = gx + p * g->H * g->W;
        memset(plane, 0, (size_t)(g->H * g->W) * sizeof *plane);
        for (int64_t o = 0; o < ohw; o++) plane[arg[p * ohw + o]] += gy[p * ohw + o];
    }
}
