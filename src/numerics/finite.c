/* finite.c: finiteness read from the bit patterns (an all-ones exponent is inf or NaN), so the check
 * survives any compiler flag and treats every NaN payload alike. Integers are always finite. */
#include "numerics.h"

int64_t ampci_first_nonfinite(ampc_dtype dt, const void *p, int64_t n) {
    /* p: (n) elements of dt */
    switch (dt) {
    case AMPC_DTYPE_F32:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint32_t *)p)[i] & 0x7f800000u) == 0x7f800000u) return i;
        return -1;
    case AMPC_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint16_t *)p)[i] & 0x7c00u) == 0x7c00u) return i;
        return -1;
    case AMPC_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint16_t *)p)[i] & 0x7f80u) == 0x7f80u) return i;
        return -1;
    case AMPC_DTYPE_F64:
        for (int64_t i = 0; i < n; i++)
            if ((((const uint64_t *)p)[i] & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return i;
        return -1;
    default: return -1;
    }
}
