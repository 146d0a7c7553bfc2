/* tokens.c: token-id data sets, the files the GPT recipes train on: nanoGPT's raw uint16 train.bin /
 * val.bin and llm.c's headered GPT-2 files (layouts in ampc.h). A file is mapped read-only, never copied:
 * a data set of billions of tokens costs address space, not memory, and opens in the time one scan takes.
 * That scan happens once, at open, and finds the largest id (the default vocabulary) and, when a
 * vocabulary is given, the first id it cannot hold, so a bad id is reported with its file and position
 * before training rather than as an index error in the middle of a step. Ids are read as little-endian
 * bytes everywhere (here and in the loader), so the files mean the same on any host. The splits are
 * views into the mappings: the training file and the validation file, or, with one file, its tokens cut
 * by the same tail rule as text (ampci_split_tail). */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)
#define LLAMA3_MAGIC 20240801u /* llm.c's Llama 3 files: version 7, uint32 ids */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned id_at(const uint8_t *ids, size_t i) { return (unsigned)ids[2 * i] | (unsigned)ids[2 * i + 1] << 8; }

/* An llm.c header of a format ampc does not read: a date-like magic (llm.c's are the dates the formats
 * were made, 2024MMDD), a small version and the unused ints zero, as llm.c writes them. Raw ids would need
 * 506 zero ids in a row at the start to look like this. */
static bool looks_like_llmc(const uint8_t *buf, size_t len) {
    if (len < HEADER_BYTES) return false;
    uint32_t magic = le32(buf), version = le32(buf + 4);
    if (magic < 20240101u || magic > 20991231u || version < 1 || version > 255) return false;
    for (int i = 3; i < HEADER_INTS; i++)
        if (le32(buf + 4 * i)) return false;
    return true;
}

static ampc_status parse_llmc(const char *fn, const char *path, const uint8_t *buf, size_t len, ampci_token_file *out) {
    if (len < HEADER_BYTES)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s is truncated: %zu bytes that start with llm.c's magic %u, shorter than its "
                          "%d-byte header",
                          fn, path, len, AMPC_TOKENS_LLMC_MAGIC, HEADER_BYTES);
    uint32_t version = le32(buf + 4), count = le32(buf + 8);
    if (version != 1)
        return ampci_fail(AMPC_STATUS_UNSUPPORTED,
                          "%s: %s is an llm.c token file of version %u, which ampc does not read; expected "
                          "version 1 (uint16 GPT-2 tokens)",
                          fn, path, version);
    uint64_t want = HEADER_BYTES + 2 * (uint64_t)count;
    if (want != (uint64_t)len)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s: its llm.c header counts %u tokens, %llu bytes with the header, but the file "
                          "has %zu bytes; expected the lengths to match exactly",
                          fn, path, count, (unsigned long long)want, len);
    if (count == 0)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s holds no tokens (its llm.c header counts 0)", fn, path);
    *out = (ampci_token_file){AMPCI_TOKENS_LLMC, buf + HEADER_BYTES, count};
    return AMPC_OK;
}

ampc_status ampci_tokens_parse(const char *fn, const char *path, const uint8_t *buf, size_t len,
                               ampci_token_file *out) {
    memset(out, 0, sizeof *out);
    if (len == 0) return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is empty; expected token ids", fn, path);
    uint32_t magic = len >= 4 ? le32(buf) : 0;
    if (magic == AMPC_TOKENS_LLMC_MAGIC) return parse_llmc(fn, path, buf, len, out);
    if (looks_like_llmc(buf, len)) {
        if (magic == LLAMA3_MAGIC)
            return ampci_fail(AMPC_STATUS_UNSUPPORTED,
                              "%s: %s is an llm.c token file in Llama 3's format (magic %u, version %u: uint32 "
                              "ids), which ampc does not read; expected uint16 ids: nanoGPT's raw .bin or llm.c's "
                              "GPT-2 format (magic %u, version 1)",
                              fn, path, magic, le32(buf + 4), AMPC_TOKENS_LLMC_MAGIC);
        return ampci_fail(AMPC_STATUS_UNSUPPORTED,
                          "%s: %s starts with an llm.c header of magic %u, version %u, which ampc does not read; "
                          "expected llm.c's GPT-2 format (magic %u, version 1) or nanoGPT's raw uint16 ids",
                          fn, path, magic, le32(buf + 4), AMPC_TOKENS_LLMC_MAGIC);
    }
    if (len % 2)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s has an odd length, %zu bytes; expected raw uint16 token ids (2 bytes each, "
                          "nanoGPT's .bin) or an llm.c token file",
                          fn, path, len);
    *out = (ampci_token_file){AMPCI_TOKENS_RAW, buf, len / 2};
    return AMPC_OK;
}

/* Maps path read-only (an empty file maps to nothing: the parser says it is empty). Whoever truncates a
 * mapped file while it trains gets SIGBUS: the same contract as numpy's memmap in nanoGPT. */
static ampc_status map_file(const char *fn, const char *path, void **map, size_t *len) {
    *map = NULL, *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ampci_fail(AMPC_STATUS_IO, "%s: cannot open %s: %s", fn, path, strerror(errno));
    struct stat st;
    ampc_status s = AMPC_OK;
    if (fstat(fd, &st) != 0) s = ampci_fail(AMPC_STATUS_IO, "%s: cannot stat %s: %s", fn, path, strerror(errno));
    else if (S_ISDIR(st.st_mode)) s = ampci_fail(AMPC_STATUS_IO, "%s: %s is a directory, expected a file", fn, path);
    else if (!S_ISREG(st.st_mode))
        s = ampci_fail(AMPC_STATUS_IO, "%s: %s is not a regular file; token files are mapped, expected a file", fn,
                       path);
    else if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX / 2)
        s = ampci_fail(AMPC_STATUS_IO, "%s: %s is too large to map here (%lld bytes)", fn, path, (long long)st.st_size);
    if (s == AMPC_OK && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) s = ampci_fail(AMPC_STATUS_IO, "%s: cannot map %s: %s", fn, path, strerror(errno));
        else *map = p, *len = (size_t)st.st_size;
    }
    close(fd);
    return s;
}

/* One file of the data set: its path, layout and, after the scan, its largest id and the position of its
 * first id outside the vocabulary (SIZE_MAX: none, or no vocabulary given). */
typedef struct tok_file {
    const char *path;
    ampci_token_file f;
    unsigned max_id;
    size_t first_bad;
} tok_file;

static void scan(tok_file *t, int vocab) {
    unsigned mx = 0;
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < t->f.count; i++) {
        unsigned v = id_at(t->f.ids, i);
        if (v > mx) mx = v;
        if (vocab && v >= (unsigned)vocab && bad == SIZE_MAX) bad = i;
    }
    t->max_id = mx, t->first_bad = bad;
}

static const char *format_name(ampci_token_format f) { return f == AMPCI_TOKENS_LLMC ? "llm.c" : "raw uint16"; }

/* ampc_dataset_info.summary: the files, the split and the vocabulary with where it came from. */
static ampc_status make_summary(const char *fn, ampc_dataset *ds, const tok_file *t, int n, bool given) {
    char buf[9200], vocab[160];
    size_t k;
    if (given) snprintf(vocab, sizeof vocab, "vocab %d (given)", ds->vocab);
    else
        snprintf(vocab, sizeof vocab, "vocab %d (largest id + 1, rounded up to a multiple of %d)", ds->vocab,
                 AMPC_TOKENS_VOCAB_ROUND);
    if (n == 2)
        k = (size_t)snprintf(buf, sizeof buf,
                             "tokens: %s (%s, %zu tokens) for training, %s (%s, %zu tokens) for "
                             "validation",
                             t[0].path, format_name(t[0].f.format), t[0].f.count, t[1].path, format_name(t[1].f.format),
                             t[1].f.count);
    else
        k = (size_t)snprintf(buf, sizeof buf, "tokens: %s (%s, %zu tokens, the last %zu for validation)", t[0].path,
                             format_name(t[0].f.format), t[0].f.count, ds->n_ids[AMPC_SPLIT_EVAL]);
    if (k < sizeof buf) snprintf(buf + k, sizeof buf - k, "; largest id %lld, %s", (long long)ds->max_id, vocab);
    ds->summary = malloc(strlen(buf) + 1);
    if (!ds->summary) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    memcpy(ds->summary, buf, strlen(buf) + 1);
    return AMPC_OK;
}

/* The first id outside a given vocabulary, in file order, with its file and position. */
static ampc_status check_vocab(const char *fn, const tok_file *t, int n, int vocab, unsigned max_id) {
    for (int i = 0; i < n; i++) {
        if (t[i].first_bad == SIZE_MAX) continue;
        size_t pos = t[i].first_bad, off = (t[i].f.format == AMPCI_TOKENS_LLMC ? HEADER_BYTES : 0) + 2 * pos;
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: %s: token %zu (byte offset %zu) is %u, outside vocab %d; the largest id of the data "
                          "is %u: expected a vocab of at least %u",
                          fn, t[i].path, pos, off, id_at(t[i].f.ids, pos), vocab, max_id, max_id + 1);
    }
    return AMPC_OK;
}

/* "TRAIN[,VAL]" into its one or two non-empty names, in buf (a copy of spec). */
static ampc_status split_spec(const char *fn, const char *spec, char *buf, tok_file *t, int *n) {
    strcpy(buf, spec);
    char *comma = strchr(buf, ',');
    *n = comma ? 2 : 1;
    if (comma) *comma = '\0';
    t[0].path = buf, t[1].path = comma ? comma + 1 : NULL;
    if (!buf[0] || (comma && (!comma[1] || strchr(comma + 1, ','))))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: token files '%s': expected TRAIN or TRAIN,VAL (one or two non-empty file names)", fn,
                          spec);
    return AMPC_OK;
}

ampc_status ampci_tokens_open(const char *fn, const char *spec, double val_fraction, int vocab, ampc_dataset *ds) {
    ds->kind = AMPC_DATA_TOKENS, ds->task = AMPC_TASK_CHAR_LM, ds->id_bytes = 2;
    tok_file t[2] = {{0}};
    int n;
    char *names = malloc(strlen(spec) + 1);
    if (!names) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    ampc_status s = split_spec(fn, spec, names, t, &n);
    for (int i = 0; i < n && s == AMPC_OK; i++) {
        s = map_file(fn, t[i].path, &ds->map[i], &ds->map_len[i]);
        if (s == AMPC_OK) s = ampci_tokens_parse(fn, t[i].path, ds->map[i], ds->map_len[i], &t[i].f);
    }
    unsigned mx = 0;
    for (int i = 0; i < n && s == AMPC_OK; i++) {
        scan(&t[i], vocab);
        if (t[i].max_id > mx) mx = t[i].max_id;
    }
    if (s == AMPC_OK && vocab) s = check_vocab(fn, t, n, vocab, mx);
    size_t split_at = t[0].f.count;
    if (s == AMPC_OK && n == 1) s = ampci_split_tail(fn, t[0].path, "tokens", t[0].f.count, val_fraction, &split_at);
    if (s == AMPC_OK) {
        ds->ids[AMPC_SPLIT_TRAIN] = t[0].f.ids, ds->n_ids[AMPC_SPLIT_TRAIN] = split_at;
        ds->ids[AMPC_SPLIT_EVAL] = n == 2 ? t[1].f.ids : t[0].f.ids + 2 * split_at;
        ds->n_ids[AMPC_SPLIT_EVAL] = n == 2 ? t[1].f.count : t[0].f.count - split_at;
        ds->max_id = mx;
        ds->vocab = vocab ? vocab
                          : (int)((mx + 1 + AMPC_TOKENS_VOCAB_ROUND - 1) / AMPC_TOKENS_VOCAB_ROUND *
                                  AMPC_TOKENS_VOCAB_ROUND);
        s = make_summary(fn, ds, t, n, vocab != 0);
    }
    free(names);
    return s;
}

void ampci_tokens_close(ampc_dataset *ds) {
    for (int i = 0; i < 2; i++)
        if (ds->map[i]) munmap(ds->map[i], ds->map_len[i]);
    ds->map[0] = ds->map[1] = NULL;
}
