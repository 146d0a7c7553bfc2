/* json_check.c: a strict JSON (RFC 8259) syntax checker for the CLI tests, which must run without
 * python or jq. It reads stdin and exits 0 when it holds exactly one JSON value (or, with --lines, when
 * every line holds exactly one), 1 with a message naming the line and byte of the first error, and 2 on
 * a usage mistake. Strict means: no trailing commas, no leading zeros or bare dots in numbers, no
 * NaN/Infinity, no control characters or invalid UTF-8 in strings, nothing after the value.
 * --objects additionally requires each top-level value to be an object. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

typedef struct reader {
    const unsigned char *p, *end, *start;
    const char *error; /* first error, NULL while fine */
    const unsigned char *error_at;
} reader;

static bool value(reader *r, int depth);

static bool fail(reader *r, const char *what) {
    if (!r->error) r->error = what, r->error_at = r->p;
    return false;
}

static void skip_ws(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool at(reader *r, char c) { return r->p < r->end && *r->p == (unsigned char)c; }

static bool is_digit(reader *r) { return r->p < r->end && *r->p >= '0' && *r->p <= '9'; }

static bool literal(reader *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return fail(r, "invalid literal");
    r->p += n;
    return true;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool number(reader *r) {
    if (at(r, '-')) r->p++;
    if (at(r, '0')) r->p++;
    else if (is_digit(r))
        while (is_digit(r)) r->p++;
    else return fail(r, "expected a digit");
    if (at(r, '.')) {
        r->p++;
        if (!is_digit(r)) return fail(r, "expected a digit after '.'");
        while (is_digit(r)) r->p++;
    }
    if (at(r, 'e') || at(r, 'E')) {
        r->p++;
        if (at(r, '+') || at(r, '-')) r->p++;
        if (!is_digit(r)) return fail(r, "expected a digit in the exponent");
        while (is_digit(r)) r->p++;
    }
    if (is_digit(r)) return fail(r, "leading zero in a number");
    return true;
}

/* One UTF-8 encoded code point >= 0x80 (shortest form, no surrogates, <= U+10FFFF). */
static bool utf8(reader *r) {
    unsigned c = *r->p;
    int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || c > 0xf4 || r->end - r->p < n) return fail(r, "invalid UTF-8");
    unsigned long cp = c & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((r->p[i] & 0xc0) != 0x80) return fail(r, "invalid UTF-8");
        cp = cp << 6 | (r->p[i] & 0x3f);
    }
    static const unsigned long min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return fail(r, "invalid UTF-8");
    r->p += n;
    return true;
}

static bool escape(reader *r) {
    r->p++; /* the backslash */
    if (r->p >= r->end) return fail(r, "unterminated escape");
    if (strchr("\"\\/bfnrt", *r->p) && *r->p) {
        r->p++;
        return true;
    }
    if (*r->p != 'u') return fail(r, "invalid escape");
    r->p++;
    for (int i = 0; i < 4; i++, r->p++)
        if (r->p >= r->end || !strchr("0123456789abcdefABCDEF", *r->p) || !*r->p)
            return fail(r, "expected 4 hex digits after \\u");
    return true;
}

static bool string(reader *r) {
    r->p++; /* the opening quote */
    while (r->p < r->end && *r->p != '"') {
        unsigned c = *r->p;
        bool ok = c == '\\'  ? escape(r)
                  : c < 0x20 ? fail(r, "control character in a string")
                  : c < 0x80 ? (r->p++, true)
                             : utf8(r);
        if (!ok) return false;
    }
    if (!at(r, '"')) return fail(r, "unterminated string");
    r->p++;
    return true;
}

static bool array(reader *r, int depth) {
    r->p++;
    skip_ws(r);
    if (at(r, ']')) return r->p++, true;
    for (;;) {
        if (!value(r, depth + 1)) return false;
        skip_ws(r);
        if (at(r, ']')) return r->p++, true;
        if (!at(r, ',')) return fail(r, "expected ',' or ']' in an array");
        r->p++;
    }
}

static bool object(reader *r, int depth) {
    r->p++;
    skip_ws(r);
    if (at(r, '}')) return r->p++, true;
    for (;;) {
        skip_ws(r);
        if (!at(r, '"')) return fail(r, "expected a string key");
        if (!string(r)) return false;
        skip_ws(r);
        if (!at(r, ':')) return fail(r, "expected ':' after a key");
        r->p++;
        if (!value(r, depth + 1)) return false;
        skip_ws(r);
        if (at(r, '}')) return r->p++, true;
        if (!at(r, ',')) return fail(r, "expected ',' or '}' in an object");
        r->p++;
    }
}

static bool value(reader *r, int depth) {
    if (depth > MAX_DEPTH) return fail(r, "nesting too deep");
    skip_ws(r);
    if (r->p >= r->end) return fail(r, "expected a value, found the end");
    switch (*r->p) {
    case '{': return object(r, depth);
    case '[': return array(r, depth);
    case '"': return string(r);
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    default: return (*r->p == '-' || is_digit(r)) ? number(r) : fail(r, "expected a value");
    }
}

/* Exactly one value, with only whitespace around it. */
static bool document(reader *r, bool want_object) {
    skip_ws(r);
    if (want_object && !at(r, '{')) return fail(r, "expected an object");
    if (!value(r, 0)) return false;
    skip_ws(r);
    return r->p == r->end || fail(r, "unexpected text after the value");
}

static unsigned char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    *len = n;
    return buf;
}

static int report(const reader *r, const unsigned char *all, const char *source) {
    long line = 1;
    const unsigned char *bol = all;
    for (const unsigned char *q = all; q < r->error_at; q++)
        if (*q == '\n') line++, bol = q + 1;
    fprintf(stderr, "json_check: %s line %ld, byte %ld: %s\n", source, line, (long)(r->error_at - bol) + 1, r->error);
    return 1;
}

/* --lines: every '\n'-terminated line (the last may lack it) is a document; empty lines are errors. */
static int check_lines(const unsigned char *all, size_t len, bool want_object) {
    if (len == 0) return fprintf(stderr, "json_check: empty input\n"), 1;
    const unsigned char *p = all, *end = all + len;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *le = nl ? nl : end;
        reader r = {p, le, all, NULL, NULL};
        if (le == p) r.error = "empty line", r.error_at = p;
        else document(&r, want_object);
        if (r.error) return report(&r, all, "stdin");
        p = nl ? nl + 1 : end;
    }
    return 0;
}

int main(int argc, char **argv) {
    bool lines = false, objects = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lines") == 0) lines = true;
        else if (strcmp(argv[i], "--objects") == 0) objects = true;
        else {
            fprintf(stderr, "json_check: unknown argument '%s'; accepted: --lines, --objects (input on stdin)\n",
                    argv[i]);
            return 2;
        }
    }
    size_t len;
    unsigned char *all = read_all(stdin, &len);
    if (!all) return fprintf(stderr, "json_check: out of memory\n"), 1;
    int rc;
    if (lines) rc = check_lines(all, len, objects);
    else {
        reader r = {all, all + len, all, NULL, NULL};
        rc = document(&r, objects) ? 0 : report(&r, all, "stdin");
    }
    free(all);
    return rc;
}
