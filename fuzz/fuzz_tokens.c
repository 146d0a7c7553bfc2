/* fuzz_tokens.c: libFuzzer target for the token-file reader of src/data/tokens.c, the code between a
 * nanoGPT or llm.c token file on disk and the ids a GPT trains on. The first input byte picks the mode,
 * the rest is the file content. Always: the bytes, copied to a buffer of exactly their length (so ASan sees
 * any read past the end), through ampci_tokens_parse; on success the ids must lie inside the buffer and
 * the count match the format, on failure the status be FORMAT or UNSUPPORTED with a message naming the
 * file. Then the same bytes go into a memfd that ampc_dataset_open maps as token data (the whole path:
 * mapping, the scan, the vocabulary check, the split, the summary), with a vocabulary from the mode byte
 * (0: the default; else 2 << (mode % 17)); an accepted set must report a vocabulary above its largest id
 * and splits that add up to the file's ids, and an in-order loader reads every window of both splits. Any
 * violation traps, so libFuzzer saves the input. */
#define _GNU_SOURCE
#include "data/data.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int g_fd = -1;
static char g_path[64];
static ampc_ctx *g_ctx;

static void check_error(ampc_status s, const char *name) {
    if (s != AMPC_STATUS_FORMAT && s != AMPC_STATUS_UNSUPPORTED && s != AMPC_STATUS_INVALID_ARG &&
        s != AMPC_STATUS_IO && s != AMPC_STATUS_OOM)
        __builtin_trap();
    const char *msg = ampc_last_error();
    if (!msg || !strstr(msg, name) || strchr(msg, '\n')) __builtin_trap();
}

/* The parser alone: the header's size when it accepts the bytes, -1 when it refuses them. */
static long parse(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    ampci_token_file f;
    long head = -1;
    ampc_status s = ampci_tokens_parse("fuzz_tokens", "tokens.bin", buf, size, &f);
    if (s != AMPC_OK) {
        if (s != AMPC_STATUS_FORMAT && s != AMPC_STATUS_UNSUPPORTED) __builtin_trap();
        check_error(s, "tokens.bin");
    } else {
        head = f.format == AMPCI_TOKENS_LLMC ? 1024 : 0;
        if (f.ids != buf + head || (size_t)head + 2 * f.count != size || f.count == 0) __builtin_trap();
        volatile unsigned sink = 0;
        for (size_t i = 0; i < 2 * f.count; i++) sink ^= f.ids[i];
        (void)sink;
    }
    free(buf);
    return head;
}

/* Every window of one split through an in-order loader of context 4 (when the split has one). */
static void read_split(const ampc_dataset *ds, ampc_split split) {
    ampc_loader *ld;
    if (ampc_loader_new(g_ctx, ds, &(ampc_loader_params){.split = split, .batch = 8, .context = 4}, &ld) != AMPC_OK)
        return; /* too short for a window: a message, checked elsewhere */
    for (bool end = false; !end;) {
        ampc_tensor *x, *y;
        if (ampc_loader_next(ld, &x, &y, &end) != AMPC_OK) __builtin_trap();
        ampc_ctx_step_end(g_ctx);
    }
    ampc_loader_free(ld);
}

static void open_set(const uint8_t *data, size_t size, int vocab, long head) {
    if (ftruncate(g_fd, 0) != 0 || (size && pwrite(g_fd, data, size, 0) != (ssize_t)size)) abort();
    ampc_dataset *ds;
    ampc_status s = ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_TOKENS, .path = g_path, .vocab = vocab},
                                      &ds);
    if (s != AMPC_OK) {
        check_error(s, g_path);
        return;
    }
    ampc_dataset_info info;
    if (head < 0) __builtin_trap(); /* the data set accepted what the parser refused */
    if (ampc_dataset_get_info(ds, &info) != AMPC_OK || info.num_classes <= info.max_id || info.max_id < 0 ||
        info.max_id > 65535 || (vocab && info.num_classes != vocab) || info.split_size[0] < 1 ||
        info.split_size[1] < 1 || !info.summary)
        __builtin_trap();
    if ((uint64_t)(info.split_size[0] + info.split_size[1]) * 2 + (uint64_t)head != size) __builtin_trap();
    read_split(ds, AMPC_SPLIT_TRAIN);
    read_split(ds, AMPC_SPLIT_EVAL);
    ampc_dataset_free(ds);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_fd = memfd_create("fuzz_tokens", MFD_CLOEXEC);
    if (g_fd < 0 || ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &g_ctx) != AMPC_OK) abort();
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0];
    data++, size--;
    long head = parse(data, size);
    open_set(data, size, mode % 2 ? 0 : 2 << (mode / 2 % 17), head);
    return 0;
}
