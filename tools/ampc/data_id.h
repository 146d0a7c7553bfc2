/* data_id.h: the identity of a run's data, as a checkpoint records it so that --resume trains on the same
 * bytes: the --data spec with an absolute path (a relative one would mean another file from another
 * directory), and a fingerprint, the size and CRC-32 of the data as loaded. */
#ifndef AMPC_CLI_DATA_ID_H
#define AMPC_CLI_DATA_ID_H

#include "ampc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct data_id {
    char spec[8400]; /* "text:/home/u/fortunes.txt", "fashion-mnist:/data/fm", "builtin",
                        "tokens:/data/train.bin,/data/val.bin" */
    uint64_t size;   /* bytes fingerprinted */
    uint32_t crc32;  /* zlib's CRC-32 of them */
} data_id;

/* spec with a relative path made absolute against the current directory (both of tokens:TRAIN,VAL;
 * "builtin" and a bare "fashion-mnist" stay as they are). */
void data_id_absolute(const char *spec, char *buf, size_t size);

/* Fills id for the data set ds opened from spec: for a text (and the built-in corpus) the bytes of both
 * splits, which together are the file; for token files the ids of both splits as stored (2 bytes each,
 * headers left out); for Fashion-MNIST its four files, as the library picks them.
 * false with a reason in why when a file cannot be read. */
bool data_id_make(const char *spec, const ampc_dataset *ds, data_id *id, char *why, size_t why_size);

#endif
