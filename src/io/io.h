/* io.h: internal declarations of the file-format code (src/io). The JSON lexer here is deliberately
 * small and strict: the safetensors header has a fixed schema of depth 3, so the parser drives the lexer
 * token by token with the schema in hand and never builds a tree or recurses. A value of a kind the schema
 * does not expect at that place is an error, which also bounds nesting without any depth counter. */
#ifndef AMPC_IO_H
#define AMPC_IO_H

#include "../core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Integers in headers are limited to 2^53, the range JSON numbers keep exactly everywhere. */
#define AMPCI_JSON_MAX_INT ((uint64_t)1 << 53)

typedef struct ampci_json {
    const char *file; /* the file's name, for messages */
    const char *ctx;  /* the tensor being parsed (decoded name), NULL at the top level */
    const unsigned char *begin, *p, *end;
    char *pool; /* decoded strings, NUL-terminated, back to back */
    size_t pool_len, pool_cap;
} ampci_json;

/* Starts lexing [text, text + len). The pool must hold len + 1 bytes: a decoded string is never longer
 * than its encoding, and the closing quote leaves room for the NUL. */
AMPCI_HIDDEN void ampci_json_init(ampci_json *j, const char *file, const void *text, size_t len, char *pool,
                                  size_t pool_cap);
/* Skips JSON whitespace (space, tab, CR, LF). */
AMPCI_HIDDEN void ampci_json_ws(ampci_json *j);
/* After whitespace: consumes c and returns true when it is next. */
AMPCI_HIDDEN bool ampci_json_accept(ampci_json *j, char c);
/* After whitespace: consumes c or fails (FORMAT) saying what `what` expected and what was found. */
AMPCI_HIDDEN ampc_status ampci_json_expect(ampci_json *j, char c, const char *what);
/* After whitespace: a string, decoded to UTF-8 in the pool (*out points there). Every escape is handled,
 * \uXXXX surrogate pairs are combined; lone surrogates, \u0000 (a C string cannot hold it), raw control
 * characters and invalid UTF-8 are refused. */
AMPCI_HIDDEN ampc_status ampci_json_string(ampci_json *j, const char *what, const char **out);
/* After whitespace: a non-negative integer <= AMPCI_JSON_MAX_INT, without sign, fraction, exponent or
 * leading zeros. */
AMPCI_HIDDEN ampc_status ampci_json_uint(ampci_json *j, const char *what, uint64_t *out);
/* Fails with FORMAT: "FILE: [tensor "CTX": ]WHAT: PROBLEM (header byte K)"; PROBLEM is printf-style. */
AMPCI_HIDDEN ampc_status ampci_json_fail(const ampci_json *j, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Describes the next token for messages: "an object", "a number", "the end of the header", "'x'"... */
AMPCI_HIDDEN const char *ampci_json_found(const ampci_json *j, char *buf, size_t size);

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when it is not one (overlong forms,
 * surrogates and code points past U+10FFFF are invalid). */
AMPCI_HIDDEN int ampci_utf8_len(const unsigned char *s, size_t n);
/* The whole NUL-terminated string is valid UTF-8. */
AMPCI_HIDDEN bool ampci_utf8_valid(const char *s);
/* A name for messages: at most ~80 bytes of s (cut at a character boundary, "..." added), with control
 * characters shown as \xNN, so a hostile name cannot flood or garble the message. Returns buf. */
AMPCI_HIDDEN const char *ampci_msg_name(char *buf, size_t size, const char *s);

/* zlib's CRC-32 of n bytes continuing from crc (0 to start), for any n. */
AMPCI_HIDDEN uint32_t ampci_crc32(uint32_t crc, const void *p, size_t n);
/* The position of an ampc dtype in the safetensors reference's Dtype enum (the writer's layout key). */
AMPCI_HIDDEN int ampci_st_dtype_rank(ampc_dtype dt);

#endif
