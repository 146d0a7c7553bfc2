/* json.h: a small streaming JSON writer for every `--json` output of the CLI. Values are written as
 * they come (no tree is built); the writer inserts commas, colons and, in pretty mode, newlines and
 * indentation. Strings are escaped (and invalid UTF-8 replaced by U+FFFD) so the output is always valid
 * JSON; doubles round-trip exactly, integral doubles print as integers, and NaN/Inf print as null. */
#ifndef AMPC_CLI_JSON_H
#define AMPC_CLI_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct json_writer {
    FILE *f;
    bool pretty; /* newlines + 2-space indent; else one line */
    int depth;
    bool has_items[JSON_MAX_DEPTH]; /* the open container already holds a value (comma needed) */
    bool after_key;                 /* a key was written; its value comes next */
} json_writer;

void json_init(json_writer *w, FILE *f, bool pretty);
/* Ends the document: a newline after the top-level value. */
void json_finish(json_writer *w);

void json_obj_begin(json_writer *w);
void json_obj_end(json_writer *w);
void json_arr_begin(json_writer *w);
void json_arr_end(json_writer *w);
/* The key of the next member; only inside an object. */
void json_key(json_writer *w, const char *key);

void json_str(json_writer *w, const char *s); /* NULL writes null */
void json_num(json_writer *w, double x);
void json_int(json_writer *w, int64_t x);
void json_uint(json_writer *w, uint64_t x);
void json_bool(json_writer *w, bool b);
void json_null(json_writer *w);

/* key + value in one call */
void json_kstr(json_writer *w, const char *key, const char *s);
void json_knum(json_writer *w, const char *key, double x);
void json_kint(json_writer *w, const char *key, int64_t x);
void json_kbool(json_writer *w, const char *key, bool b);
void json_knull(json_writer *w, const char *key);

/* Shortest "%.{15,16,17}g" text that reads back as exactly x (x finite); buf >= 32 bytes. */
void json_format_double(double x, char *buf, size_t size);

#endif
