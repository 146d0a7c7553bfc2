/* data.h: what the data files share: the data set struct (an image set keeps its raw IDX bytes, a text
 * set its bytes and the split point, a token set its mapped files; a language-modelling set of either kind
 * exposes each split as an array of ids of one width, which is all the loader reads), the bounded
 * whole-file reader, the IDX and token-file parsers (pure, on memory, so a fuzzer can drive them without
 * files) and the built-in corpus generator. Names are ampci_. */
#ifndef AMPC_DATA_H
#define AMPC_DATA_H

#include "../core/core.h"

#define AMPCI_IMAGE_SIDE 28
#define AMPCI_IMAGE_CLASSES 10

struct ampc_dataset {
    ampc_data_kind kind;
    ampc_task task;
    char *name;
    /* images: count[s] images of 28 x 28 bytes at pixels[s], count[s] labels at labels[s]. The pointers
     * point into the owned file buffers img_buf/lbl_buf (past the IDX headers). */
    int64_t count[AMPC_SPLIT_COUNT];
    const uint8_t *pixels[AMPC_SPLIT_COUNT], *labels[AMPC_SPLIT_COUNT];
    uint8_t *img_buf[AMPC_SPLIT_COUNT], *lbl_buf[AMPC_SPLIT_COUNT];
    /* text: len bytes; train = [0, split_at), eval = [split_at, len) */
    uint8_t *text;
    size_t len, split_at;
    /* language modelling, text or tokens: split s is n_ids[s] ids of id_bytes bytes each (1: bytes, 2:
     * uint16 little-endian) at ids[s], pointing into text or into a mapping; vocab is the model's number
     * of ids, max_id the largest id of both splits */
    const uint8_t *ids[AMPC_SPLIT_COUNT];
    size_t n_ids[AMPC_SPLIT_COUNT];
    int id_bytes;
    int vocab;
    int64_t max_id;
    /* tokens: the files mapped read-only (the second only with a validation file), unmapped at free */
    void *map[2];
    size_t map_len[2];
    char *summary; /* ampc_dataset_info.summary (all language-modelling sets) */
};

/* A token file's layout, as ampci_tokens_parse finds it in the file's bytes. */
typedef enum ampci_token_format { AMPCI_TOKENS_RAW = 0, AMPCI_TOKENS_LLMC } ampci_token_format;
typedef struct ampci_token_file {
    ampci_token_format format;
    const uint8_t *ids; /* the first id (past the header), count uint16 little-endian ids */
    size_t count;
} ampci_token_file;

/* A parsed IDX file: ndim dims (1..4) and a pointer to the first data byte inside the parsed buffer. */
typedef struct ampci_idx {
    int ndim;
    uint32_t dims[AMPC_MAX_DIMS];
    const uint8_t *data;
    size_t bytes; /* product of the dims = bytes of data */
} ampci_idx;

/* Reads a whole file, gzip or plain, into a malloc'd buffer (*buf, *len; free() it). The buffer grows
 * geometrically with what was actually read, so a lying header or size field cannot make it allocate
 * much more than the data; more than max bytes fails. fn names the public call in messages. */
AMPCI_HIDDEN ampc_status ampci_read_file(const char *fn, const char *path, size_t max, uint8_t **buf, size_t *len);
/* Validates an IDX image (type 0x08 only, 1..4 dims, data size = product of the dims exactly) and fills
 * out; FORMAT with a message naming `path` otherwise. Never reads outside buf[0, len). */
AMPCI_HIDDEN ampc_status ampci_idx_parse(const char *fn, const char *path, const uint8_t *buf, size_t len,
                                         ampci_idx *out);

/* One split's pair of IDX images already in memory, as the Fashion-MNIST reader checks them: each through
 * ampci_idx_parse, then images N x 28 x 28 with N > 0, labels a list of N values in 0..9. On success
 * *count = N and *pixels, *labels point into ibuf, lbuf (past the headers); FORMAT naming ipath or lpath
 * otherwise, and the outputs are untouched. The Fashion-MNIST reader calls it after reading the files
 * (ampci_read_file), and the fuzzer calls it on raw bytes. */
AMPCI_HIDDEN ampc_status ampci_fashion_parse_split(const char *fn, const char *ipath, const uint8_t *ibuf, size_t ilen,
                                                   const char *lpath, const uint8_t *lbuf, size_t llen, int64_t *count,
                                                   const uint8_t **pixels, const uint8_t **labels);
/* Opens the Fashion-MNIST files of dir into ds (kind, task, counts, buffers; not the name). */
AMPCI_HIDDEN ampc_status ampci_fashion_open(const char *fn, const char *dir, ampc_dataset *ds);
/* Fills a char-LM data set from path (NULL: the built-in corpus) and splits it by val_fraction (already
 * validated to lie in (0, 1)); vocab 0 = 256, else at least 256. */
AMPCI_HIDDEN ampc_status ampci_text_open(const char *fn, const char *path, double val_fraction, int vocab,
                                         ampc_dataset *ds);
/* The validation part of n ids: round(n * frac), halves up; the same on every machine. A split that would
 * leave either part empty fails with FORMAT naming `what` (a file, or "the built-in corpus"). */
AMPCI_HIDDEN ampc_status ampci_split_tail(const char *fn, const char *what, const char *unit, size_t n, double frac,
                                          size_t *split_at);
/* Validates a token file's bytes (an llm.c header, or raw uint16 ids: see ampc.h) and fills out; FORMAT
 * or UNSUPPORTED with a message naming `path` otherwise (empty, odd length, a header whose count does not
 * match the length, another llm.c magic or version). Never reads outside buf[0, len) nor the ids. */
AMPCI_HIDDEN ampc_status ampci_tokens_parse(const char *fn, const char *path, const uint8_t *buf, size_t len,
                                            ampci_token_file *out);
/* Maps the token file(s) of spec ("TRAIN" or "TRAIN,VAL") into ds, checks them, splits and sets the
 * vocabulary (vocab 0: the default). */
AMPCI_HIDDEN ampc_status ampci_tokens_open(const char *fn, const char *spec, double val_fraction, int vocab,
                                           ampc_dataset *ds);
/* Unmaps what ampci_tokens_open mapped. */
AMPCI_HIDDEN void ampci_tokens_close(ampc_dataset *ds);
/* The built-in corpus: a malloc'd buffer of AMPC_BUILTIN_BYTES bytes in *text, its length in *len. */
AMPCI_HIDDEN ampc_status ampci_builtin_text(const char *fn, uint8_t **text, size_t *len);

#endif
