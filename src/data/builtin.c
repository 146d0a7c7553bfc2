/* builtin.c: the built-in corpus, lines of integer arithmetic made from the counter-based RNG with a
 * fixed seed, so `ampc train` has something to learn on a machine without any data installed. The
 * recipe is documented in ampc.h (AMPC_BUILTIN_*) and must not change silently: checkpoints and logs
 * of the default run depend on these exact bytes, which the tests pin down by length and content. */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>

/* Longest line: "999+999=1998\n" is 13 bytes; "a-b" and "a*b" are shorter. */
#define LINE_MAX_BYTES 16

/* Line k into out (no NUL kept); returns its length. */
static int builtin_line(uint64_t k, char *out) {
    uint32_t w[4];
    ampc_rng_block(AMPC_BUILTIN_SEED, 0, k, w);
    unsigned a, b, c;
    char op;
    switch (w[0] % 3) {
    case 0: a = w[1] % 1000, b = w[2] % 1000, op = '+', c = a + b; break;
    case 1:
        a = w[1] % 1000, b = w[2] % 1000, op = '-';
        if (a < b) {
            unsigned t = a;
            a = b, b = t;
        }
        c = a - b;
        break;
    default: a = w[1] % 100, b = w[2] % 10, op = '*', c = a * b; break;
    }
    char tmp[LINE_MAX_BYTES + 8];
    int n = snprintf(tmp, sizeof tmp, "%u%c%u=%u\n", a, op, b, c);
    AMPCI_ASSERT(n > 0 && n <= LINE_MAX_BYTES);
    for (int i = 0; i < n; i++) out[i] = tmp[i];
    return n;
}

ampc_status ampci_builtin_text(const char *fn, uint8_t **text, size_t *len) {
    *text = NULL, *len = 0;
    uint8_t *buf = malloc((size_t)AMPC_BUILTIN_LINES * LINE_MAX_BYTES);
    if (!buf) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory generating the built-in corpus", fn);
    size_t n = 0;
    for (uint64_t k = 0; k < AMPC_BUILTIN_LINES; k++) n += (size_t)builtin_line(k, (char *)buf + n);
    /* The documented size is part of the contract; a mismatch means the recipe changed. */
    AMPCI_ASSERT(n == AMPC_BUILTIN_BYTES);
    *text = buf, *len = n;
    return AMPC_OK;
}
