/* convert.c: ampc_convert, the public row conversion: validates, then runs the kernel-table slot of the
 * process's chosen level for the dtype pair (or the generic path for pairs without a fast slot). */
#include "kernels.h"

#include <string.h>

ampc_status ampci_convert_with(const struct ampc_kernels *k, void *dst, ampc_dtype dst_dtype, const void *src,
                               ampc_dtype src_dtype, size_t n) {
    if ((unsigned)dst_dtype >= AMPC_DTYPE_COUNT || (unsigned)src_dtype >= AMPC_DTYPE_COUNT)
        return ampci_fail(AMPC_STATUS_DTYPE, "ampc_convert: dtype out of range (dst %d, src %d; expected 0..%d)",
                          (int)dst_dtype, (int)src_dtype, AMPC_DTYPE_COUNT - 1);
    if (n == 0) return AMPC_OK;
    if (!dst || !src)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_convert: %s is NULL for %zu elements %s -> %s",
                          !dst ? "dst" : "src", n, ampc_dtype_name(src_dtype), ampc_dtype_name(dst_dtype));
    if (dst_dtype == src_dtype) {
        if (dst != src) memmove(dst, src, n * ampc_dtype_size(dst_dtype));
        return AMPC_OK;
    }
    ampc_k_cvt_fn fn = k->cvt[dst_dtype][src_dtype];
    if (fn) fn(dst, src, n);
    else ampci_convert_generic(dst, dst_dtype, src, src_dtype, n);
    return AMPC_OK;
}

ampc_status ampc_convert(void *dst, ampc_dtype dst_dtype, const void *src, ampc_dtype src_dtype, size_t n) {
    return ampci_convert_with(ampci_kernels(AMPC_ISA_AUTO), dst, dst_dtype, src, src_dtype, n);
}
