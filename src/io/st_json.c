/* st_json.c: the strict JSON lexer behind the safetensors header parser (see io.h). It reads only what a
 * caller asks for next (a given character, a string, an integer) and checks every byte against the end
 * of the input before looking at it: the header comes from untrusted files and is fuzzed, so any input
 * must end in AMPC_OK or in one FORMAT message, never in a read past the buffer. */
#include "io.h"

#include <stdio.h>
#include <string.h>

void ampci_json_init(ampci_json *j, const char *file, const void *text, size_t len, char *pool, size_t pool_cap) {
    j->file = file;
    j->ctx = NULL;
    j->begin = j->p = text;
    j->end = j->begin + len;
    j->pool = pool;
    j->pool_len = 0;
    j->pool_cap = pool_cap;
}

ampc_status ampci_json_fail(const ampci_json *j, const char *what, const char *fmt, ...) {
    char problem[512], ctx[128] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    if (j->ctx) {
        char nm[112];
        snprintf(ctx, sizeof ctx, "tensor \"%s\": ", ampci_msg_name(nm, sizeof nm, j->ctx));
    }
    return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s%s: %s (header byte %zu)", j->file, ctx, what, problem,
                      (size_t)(j->p - j->begin));
}

const char *ampci_json_found(const ampci_json *j, char *buf, size_t size) {
    if (j->p >= j->end) return "the end of the header";
    unsigned char c = *j->p;
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    case '-': return "a negative number";
    default: break;
    }
    if (c >= '0' && c <= '9') return "a number";
    if (c >= 0x21 && c < 0x7f) snprintf(buf, size, "'%c'", c);
    else snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

void ampci_json_ws(ampci_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

bool ampci_json_accept(ampci_json *j, char c) {
    ampci_json_ws(j);
    if (j->p < j->end && *j->p == (unsigned char)c) {
        j->p++;
        return true;
    }
    return false;
}

ampc_status ampci_json_expect(ampci_json *j, char c, const char *what) {
    if (ampci_json_accept(j, c)) return AMPC_OK;
    char b[16];
    return ampci_json_fail(j, what, "expected '%c', found %s", c, ampci_json_found(j, b, sizeof b));
}

int ampci_utf8_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;      /* overlong */
        else if (c == 0xed) hi = 0x9f; /* UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;      /* overlong */
        else if (c == 0xf4) hi = 0x8f; /* past U+10FFFF */
    } else return 0;
    if ((size_t)len > n || s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

bool ampci_utf8_valid(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int l = ampci_utf8_len(u + i, n - i);
        if (!l) return false;
        i += (size_t)l;
    }
    return true;
}

const char *ampci_msg_name(char *buf, size_t size, const char *s) {
    size_t o = 0, limit = size > 96 ? 80 : size / 2; /* leaves room for one escape, "..." and the NUL */
    const unsigned char *u = (const unsigned char *)s;
    while (*u && o < limit) {
        int n = ampci_utf8_len(u, strnlen((const char *)u, 4));
        if (n == 1 && *u >= 0x20 && *u != 0x7f) buf[o++] = (char)*u;
        else if (n > 1) memcpy(buf + o, u, (size_t)n), o += (size_t)n; /* whole characters only */
        else o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *u), n = 1;
        u += n;
    }
    if (*u) memcpy(buf + o, "...", 3), o += 3;
    buf[o] = '\0';
    return buf;
}

/* ---- strings ---- */

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at j->p (after "\u"), consumed; -1 when they are not there. */
static long hex4(ampci_json *j) {
    if (j->end - j->p < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(j->p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    j->p += 4;
    return v;
}

static size_t put_utf8(char *o, unsigned long cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A \u escape (j->p just past the 'u'), with its low surrogate when it is a high one, as a code point;
 * 0 after recording the error. */
static unsigned long unicode_escape(ampci_json *j, const char *what) {
    long hi = hex4(j);
    if (hi < 0) return ampci_json_fail(j, what, "\\u must be followed by 4 hex digits"), 0;
    if (hi == 0) return ampci_json_fail(j, what, "\\u0000 (a NUL character) is not allowed in names or values"), 0;
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return ampci_json_fail(j, what, "lone low surrogate \\u%04lx", (unsigned long)hi), 0;
    if (hi < 0xd800 || hi > 0xdbff) return (unsigned long)hi;
    if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
        return ampci_json_fail(j, what, "high surrogate \\u%04lx is not followed by a low surrogate",
                               (unsigned long)hi),
               0;
    j->p += 2;
    long lo = hex4(j);
    if (lo < 0) return ampci_json_fail(j, what, "\\u must be followed by 4 hex digits"), 0;
    if (lo < 0xdc00 || lo > 0xdfff)
        return ampci_json_fail(j, what, "high surrogate \\u%04lx is followed by \\u%04lx, not a low surrogate",
                               (unsigned long)hi, (unsigned long)lo),
               0;
    return 0x10000 + (((unsigned long)hi - 0xd800) << 10) + ((unsigned long)lo - 0xdc00);
}

/* One escape sequence (j->p on the backslash) decoded into o; its length, 0 after recording the error. */
static size_t escape(ampci_json *j, const char *what, char *o) {
    if (j->end - j->p < 2) return ampci_json_fail(j, what, "unterminated string"), 0;
    unsigned char c = j->p[1];
    j->p += 2;
    switch (c) {
    case '"': *o = '"'; return 1;
    case '\\': *o = '\\'; return 1;
    case '/': *o = '/'; return 1;
    case 'b': *o = '\b'; return 1;
    case 'f': *o = '\f'; return 1;
    case 'n': *o = '\n'; return 1;
    case 'r': *o = '\r'; return 1;
    case 't': *o = '\t'; return 1;
    case 'u': {
        unsigned long cp = unicode_escape(j, what);
        return cp ? put_utf8(o, cp) : 0;
    }
    default: break;
    }
    j->p -= 1;
    if (c >= 0x21 && c < 0x7f) return ampci_json_fail(j, what, "invalid escape \\%c", c), 0;
    return ampci_json_fail(j, what, "invalid escape: backslash followed by byte 0x%02x", c), 0;
}

ampc_status ampci_json_string(ampci_json *j, const char *what, const char **out) {
    ampci_json_ws(j);
    if (j->p >= j->end || *j->p != '"') {
        char b[16];
        return ampci_json_fail(j, what, "expected a string, found %s", ampci_json_found(j, b, sizeof b));
    }
    j->p++;
    char *o = j->pool + j->pool_len;
    const char *start = o;
    for (;;) {
        /* The decoded text is never longer than what was consumed, which the pool covers (see io.h). */
        if (j->p >= j->end) return ampci_json_fail(j, what, "unterminated string");
        unsigned char c = *j->p;
        if (c == '"') break;
        if (c == '\\') {
            size_t n = escape(j, what, o);
            if (!n) return AMPC_STATUS_FORMAT;
            o += n;
        } else if (c < 0x20) {
            return ampci_json_fail(j, what, "raw control character 0x%02x inside a string (it must be escaped)", c);
        } else {
            int n = ampci_utf8_len(j->p, (size_t)(j->end - j->p));
            if (!n) return ampci_json_fail(j, what, "invalid UTF-8 (byte 0x%02x) inside a string", c);
            memcpy(o, j->p, (size_t)n);
            o += n;
            j->p += n;
        }
    }
    j->p++;
    *o++ = '\0';
    AMPCI_ASSERT((size_t)(o - j->pool) <= j->pool_cap);
    j->pool_len = (size_t)(o - j->pool);
    *out = start;
    return AMPC_OK;
}

/* ---- integers ---- */

ampc_status ampci_json_uint(ampci_json *j, const char *what, uint64_t *out) {
    ampci_json_ws(j);
    char b[16];
    if (j->p < j->end && *j->p == '-') return ampci_json_fail(j, what, "negative numbers are not allowed");
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return ampci_json_fail(j, what, "expected a non-negative integer, found %s", ampci_json_found(j, b, sizeof b));
    const unsigned char *start = j->p;
    uint64_t v = 0;
    bool big = false;
    for (; j->p < j->end && *j->p >= '0' && *j->p <= '9'; j->p++) {
        if (v > AMPCI_JSON_MAX_INT) big = true; /* keep scanning for the message; v stays bounded */
        else v = v * 10 + (uint64_t)(*j->p - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return ampci_json_fail(j, what, "expected an integer, found a number with a fraction or exponent");
    if (*start == '0' && j->p - start > 1) {
        j->p = start;
        return ampci_json_fail(j, what, "integers must not have leading zeros");
    }
    if (big || v > AMPCI_JSON_MAX_INT) {
        j->p = start;
        return ampci_json_fail(j, what, "integer exceeds 2^53");
    }
    *out = v;
    return AMPC_OK;
}
