/* make_tokens.c: writes a token file for the CLI tests (tokens_cli.sh) without Python: nanoGPT's raw
 * uint16 ids or llm.c's headered format (256 int32 little-endian: magic, version, count, zeros; then the
 * ids), and on request a header that lies (another magic or version, a wrong count) to test refusals.
 * The ids follow a short cycle, so a few steps of training lower the loss, and the largest id, MAX, comes
 * once every 50 ids (first at position 49), so the default vocabulary is known. Deterministic: the same
 * bytes every time, on every host.
 *
 *   make_tokens FILE raw|llmc N MAX [MAGIC VERSION COUNT]   (llmc: header fields default to 20240520, 1, N) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put(FILE *f, uint32_t v, int bytes) {
    unsigned char b[4];
    for (int k = 0; k < bytes; k++) b[k] = (unsigned char)(v >> (8 * k));
    return fwrite(b, 1, (size_t)bytes, f) == (size_t)bytes ? 0 : -1;
}

int main(int argc, char **argv) {
    if ((argc != 5 && argc != 8) || (strcmp(argv[2], "raw") && strcmp(argv[2], "llmc"))) {
        fprintf(stderr, "usage: make_tokens FILE raw|llmc N MAX [MAGIC VERSION COUNT]\n");
        return 2;
    }
    long n = strtol(argv[3], NULL, 10), max = strtol(argv[4], NULL, 10);
    if (n < 0 || max < 1 || max > 65535) {
        fprintf(stderr, "make_tokens: N >= 0 and MAX in 1..65535\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    int rc = 0;
    if (!strcmp(argv[2], "llmc")) {
        uint32_t h[3] = {20240520u, 1u, (uint32_t)n};
        for (int i = 0; argc == 8 && i < 3; i++) h[i] = (uint32_t)strtoul(argv[5 + i], NULL, 10);
        for (int i = 0; i < 256 && !rc; i++) rc = put(f, i < 3 ? h[i] : 0, 4);
    }
    for (long i = 0; i < n && !rc; i++) {
        long id = i % 50 == 49 ? max : (i % 17) * 13 % max; /* a cycle of 17 ids, and MAX */
        rc = put(f, (uint32_t)id, 2);
    }
    if (fclose(f) != 0 || rc) {
        fprintf(stderr, "make_tokens: writing %s failed\n", argv[1]);
        return 1;
    }
    return 0;
}
