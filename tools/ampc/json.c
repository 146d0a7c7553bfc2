/* json.c: the streaming JSON writer of json.h. The writer keeps one bit per open container (does it
 * hold a value yet?) and so knows where commas go; misuse (a value where a key is due, unbalanced
 * ends) is a bug in the CLI and asserts. Numbers are printed with the fewest significant digits that
 * read back to the same double, so logs are both exact and readable (0.1, not 0.10000000000000001). */
#include "json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_writer *w, FILE *f, bool pretty) {
    memset(w, 0, sizeof *w);
    w->f = f;
    w->pretty = pretty;
}

void json_finish(json_writer *w) {
    assert(w->depth == 0 && !w->after_key);
    fputc('\n', w->f);
}

static void newline_indent(json_writer *w) {
    if (!w->pretty) return;
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++) fputs("  ", w->f);
}

/* Everything that precedes a value: a comma after a sibling, and the line break of pretty mode. */
static void before_value(json_writer *w) {
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth == 0) return;
    if (w->has_items[w->depth - 1]) fputc(',', w->f);
    w->has_items[w->depth - 1] = true;
    newline_indent(w);
}

static void open_container(json_writer *w, char c) {
    before_value(w);
    assert(w->depth < JSON_MAX_DEPTH);
    fputc(c, w->f);
    w->has_items[w->depth++] = false;
}

static void close_container(json_writer *w, char c) {
    assert(w->depth > 0 && !w->after_key);
    bool had = w->has_items[--w->depth];
    if (had) newline_indent(w);
    fputc(c, w->f);
}

void json_obj_begin(json_writer *w) { open_container(w, '{'); }
void json_obj_end(json_writer *w) { close_container(w, '}'); }
void json_arr_begin(json_writer *w) { open_container(w, '['); }
void json_arr_end(json_writer *w) { close_container(w, ']'); }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there are not one. Overlong forms,
 * surrogates and code points above U+10FFFF are invalid, as a strict reader would say. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || c > 0xf4 || c == 0xc0 || c == 0xc1) return 0;
    uint32_t cp = c & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

static void write_escaped(FILE *f, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned c = *s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c), s++;
        else if (c == '\n') fputs("\\n", f), s++;
        else if (c == '\t') fputs("\\t", f), s++;
        else if (c == '\r') fputs("\\r", f), s++;
        else if (c < 0x20) fprintf(f, "\\u%04x", c), s++;
        else if (c < 0x80) fputc((int)c, f), s++;
        else {
            int n = utf8_len(s);
            if (n) fwrite(s, 1, (size_t)n, f), s += n;
            else fputs("\\ufffd", f), s++;
        }
    }
    fputc('"', f);
}

void json_key(json_writer *w, const char *key) {
    assert(w->depth > 0 && !w->after_key);
    before_value(w);
    write_escaped(w->f, key);
    fputs(w->pretty ? ": " : ":", w->f);
    w->after_key = true;
}

void json_str(json_writer *w, const char *s) {
    if (!s) {
        json_null(w);
        return;
    }
    before_value(w);
    write_escaped(w->f, s);
}

void json_format_double(double x, char *buf, size_t size) {
    /* Integral values of moderate size print as integers ("448", not "448.0" or "4.48e+02"). */
    if (x == floor(x) && fabs(x) < 9007199254740992.0 && !(x == 0 && signbit(x))) {
        snprintf(buf, size, "%" PRId64, (int64_t)x);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

void json_num(json_writer *w, double x) {
    if (!isfinite(x)) {
        json_null(w);
        return;
    }
    char buf[40];
    json_format_double(x, buf, sizeof buf);
    before_value(w);
    fputs(buf, w->f);
}

void json_int(json_writer *w, int64_t x) {
    before_value(w);
    fprintf(w->f, "%" PRId64, x);
}

void json_uint(json_writer *w, uint64_t x) {
    before_value(w);
    fprintf(w->f, "%" PRIu64, x);
}

void json_bool(json_writer *w, bool b) {
    before_value(w);
    fputs(b ? "true" : "false", w->f);
}

void json_null(json_writer *w) {
    before_value(w);
    fputs("null", w->f);
}

void json_kstr(json_writer *w, const char *key, const char *s) {
    json_key(w, key);
    json_str(w, s);
}

void json_knum(json_writer *w, const char *key, double x) {
    json_key(w, key);
    json_num(w, x);
}

void json_kint(json_writer *w, const char *key, int64_t x) {
    json_key(w, key);
    json_int(w, x);
}

void json_kbool(json_writer *w, const char *key, bool b) {
    json_key(w, key);
    json_bool(w, b);
}

void json_knull(json_writer *w, const char *key) {
    json_key(w, key);
    json_null(w);
}
