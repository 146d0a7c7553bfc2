/* decode.h: what `ampc sample` prints with: the decoder of llm.c's tokenizer file (token id -> bytes) and
 * a writer that passes text through to a terminal but escapes every byte that could upset it. */
#ifndef AMPC_CLI_DECODE_H
#define AMPC_CLI_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DECODE_TOKENIZER_MAGIC 20240328u

/* llm.c's tokenizer file (gpt2_tokenizer.bin): a header of 256 uint32 little-endian, [0] the magic, [1] the
 * version (1, or 2 with [3] the end-of-text token), [2] the vocabulary size; then per token a uint8 length
 * (1..255) and that many bytes. */
typedef struct decode_tokenizer {
    uint32_t vocab;
    bool has_eot; /* version 2 */
    uint32_t eot;
    uint32_t *off;        /* vocab + 1 offsets into bytes: token i is bytes[off[i] .. off[i + 1]) */
    unsigned char *bytes; /* the tokens' bytes, one after another */
} decode_tokenizer;

/* Reads and checks path. false with one phrase in why (no file name, no newline) when the file cannot be
 * read, its header is not llm.c's, or an entry is empty or truncated. */
bool decode_tokenizer_read(const char *path, decode_tokenizer *t, char *why, size_t why_size);
void decode_tokenizer_free(decode_tokenizer *t);

/* Text for a terminal: printable ASCII, line feeds, tabs and whole valid UTF-8 characters (C1 controls
 * aside) pass through; every other byte is written as \xNN and a backslash as \\, so the output can neither
 * move the cursor nor be mistaken for one of those escapes. A UTF-8 character may arrive one byte at a
 * time (a byte-level model makes one byte per token): its first bytes wait in pend. */
typedef struct decode_text {
    FILE *f;
    unsigned char pend[4];
    int npend, need; /* bytes waiting, and the length of the character they begin */
    bool line_open;  /* something was written since the last line feed */
} decode_text;

void decode_text_init(decode_text *w, FILE *f);
void decode_text_put(decode_text *w, const unsigned char *bytes, size_t n);
/* Writes what is still waiting (escaped: the character never completed) and ends an open line. */
void decode_text_end(decode_text *w);

#endif
