/* make_fashion.c: writes a small Fashion-MNIST look-alike (the four IDX files, plain, 28x28 images with
 * labels 0-9) into a folder, for CLI tests of the image models on machines without Debian's
 * dataset-fashion-mnist. Each class is a bright bar at its own place on a noisy background, so a few
 * steps of training lower the loss. Deterministic: the same files every time.
 *
 *   make_fashion DIR [TRAIN [TEST]]     (defaults 512 and 128 images) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t g_state = 12345u;
static uint32_t next(void) { /* xorshift32: the same bytes on every machine */
    g_state ^= g_state << 13, g_state ^= g_state >> 17, g_state ^= g_state << 5;
    return g_state;
}

static int put32(FILE *f, uint32_t v) {
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int write_split(const char *dir, const char *images, const char *labels, int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, images);
    FILE *fi = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    FILE *fl = fopen(path, "wb");
    int rc = !fi || !fl;
    if (!rc) rc = put32(fi, 0x00000803u) || put32(fi, (uint32_t)n) || put32(fi, 28) || put32(fi, 28) ||
                  put32(fl, 0x00000801u) || put32(fl, (uint32_t)n);
    for (int i = 0; i < n && !rc; i++) {
        unsigned char label = (unsigned char)(next() % 10), px[28 * 28];
        for (int p = 0; p < 28 * 28; p++) px[p] = (unsigned char)(next() % 64);
        for (int r = 2 + 2 * label; r < 5 + 2 * label; r++)
            for (int c = 4; c < 24; c++) px[r * 28 + c] = (unsigned char)(180 + next() % 76);
        rc = fwrite(px, 1, sizeof px, fi) != sizeof px || fwrite(&label, 1, 1, fl) != 1;
    }
    if (fi && fclose(fi)) rc = 1;
    if (fl && fclose(fl)) rc = 1;
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: make_fashion DIR [TRAIN [TEST]]\n");
        return 2;
    }
    int ntrain = argc > 2 ? atoi(argv[2]) : 512, ntest = argc > 3 ? atoi(argv[3]) : 128;
    if (write_split(argv[1], "train-images-idx3-ubyte", "train-labels-idx1-ubyte", ntrain) ||
        write_split(argv[1], "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", ntest)) {
        fprintf(stderr, "make_fashion: cannot write the files in %s\n", argv[1]);
        return 1;
    }
    return 0;
}
