/* decode.c: llm.c's tokenizer file, read whole and checked entry by entry before anything is generated (a
 * bad file is one line, not garbage half-way through a sample), and the escaping writer `ampc sample` prints
 * through: a model's bytes are arbitrary, and raw control bytes or broken UTF-8 on a terminal can move the
 * cursor, change the character set or hide text. */
#include "decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The whole file in memory (tokenizer files are a few hundred KiB). */
static unsigned char *slurp(const char *path, size_t *len, char *why, size_t why_size) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_size, "cannot open: %s", strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got = 1; buf && got;) {
        if (n == cap) {
            unsigned char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
            if (!buf) break;
        }
        n += got = fread(buf + n, 1, cap - n, f);
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        snprintf(why, why_size, "%s", err ? "read error" : "out of memory");
        return NULL;
    }
    *len = n;
    return buf;
}

bool decode_tokenizer_read(const char *path, decode_tokenizer *t, char *why, size_t why_size) {
    memset(t, 0, sizeof *t);
    size_t len;
    unsigned char *buf = slurp(path, &len, why, why_size);
    if (!buf) return false;
    bool ok = false;
    uint32_t version = len >= 1024 ? le32(buf + 4) : 0;
    if (len < 1024) snprintf(why, why_size, "%zu bytes, shorter than the 1024-byte header", len);
    else if (le32(buf) != DECODE_TOKENIZER_MAGIC)
        snprintf(why, why_size, "magic %u is not llm.c's tokenizer file's (%u)", le32(buf), DECODE_TOKENIZER_MAGIC);
    else if (version != 1 && version != 2) snprintf(why, why_size, "version %u; expected 1 or 2", version);
    else if ((t->vocab = le32(buf + 8)) == 0 || t->vocab > 1u << 24)
        snprintf(why, why_size, "vocabulary size %u; expected 1..%u", t->vocab, 1u << 24);
    else if (version == 2 && (t->eot = le32(buf + 12)) >= t->vocab)
        snprintf(why, why_size, "end-of-text token %u is not below the vocabulary size %u", t->eot, t->vocab);
    else ok = true;
    t->has_eot = version == 2;
    /* entries: length byte + bytes; the bytes stay where they are, the offsets are relative to the entries */
    t->off = ok ? malloc(((size_t)t->vocab + 1) * sizeof *t->off) : NULL;
    if (ok && !t->off) ok = false, snprintf(why, why_size, "out of memory");
    size_t pos = 1024, total = 0;
    for (uint32_t i = 0; ok && i < t->vocab; i++) {
        size_t n = pos < len ? buf[pos] : 0;
        if (pos >= len || n == 0 || pos + 1 + n > len) {
            snprintf(why, why_size, "token %u of %u is %s", i, t->vocab,
                     pos >= len ? "missing (the file is truncated)"
                     : n == 0   ? "empty (length 0)"
                                : "truncated (its length byte runs past the end of the file)");
            ok = false;
            break;
        }
        memmove(buf + total, buf + pos + 1, n); /* packed at the front: total <= pos always */
        t->off[i] = (uint32_t)total;
        total += n, pos += 1 + n;
    }
    if (ok) t->off[t->vocab] = (uint32_t)total, t->bytes = buf;
    else free(buf), free(t->off), t->off = NULL;
    return ok;
}

void decode_tokenizer_free(decode_tokenizer *t) {
    free(t->off), free(t->bytes);
    memset(t, 0, sizeof *t);
}

/* ---- the escaping writer ---- */

void decode_text_init(decode_text *w, FILE *f) { *w = (decode_text){.f = f}; }

static void raw(decode_text *w, const unsigned char *b, int n) {
    fwrite(b, 1, (size_t)n, w->f);
    w->line_open = b[n - 1] != '\n';
}

static void escaped(decode_text *w, unsigned char c) {
    fprintf(w->f, "\\x%02x", c);
    w->line_open = true;
}

/* A complete multi-byte sequence: passed through when it is a valid UTF-8 character other than a C1
 * control (overlong forms, surrogates and values past U+10FFFF are escaped byte by byte). */
static void finish_char(decode_text *w) {
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t cp = w->pend[0] & (0x7f >> w->need);
    for (int i = 1; i < w->need; i++) cp = cp << 6 | (w->pend[i] & 0x3f);
    bool ok = cp >= min[w->need] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) && (cp < 0x80 || cp > 0x9f);
    if (ok) raw(w, w->pend, w->need);
    else
        for (int i = 0; i < w->need; i++) escaped(w, w->pend[i]);
    w->npend = w->need = 0;
}

static void put_byte(decode_text *w, unsigned char c) {
    if (w->npend && (c & 0xc0) == 0x80) { /* the character goes on */
        w->pend[w->npend++] = c;
        if (w->npend == w->need) finish_char(w);
        return;
    }
    for (int i = 0; i < w->npend; i++) escaped(w, w->pend[i]); /* cut short: never a character */
    w->npend = w->need = 0;
    if (c == '\\') fputs("\\\\", w->f), w->line_open = true;
    else if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t') raw(w, &c, 1);
    else if (c >= 0xc2 && c <= 0xf4) w->pend[0] = c, w->npend = 1, w->need = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    else escaped(w, c);
}

void decode_text_put(decode_text *w, const unsigned char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) put_byte(w, bytes[i]);
}

void decode_text_end(decode_text *w) {
    for (int i = 0; i < w->npend; i++) escaped(w, w->pend[i]);
    w->npend = w->need = 0;
    if (w->line_open) fputc('\n', w->f);
    w->line_open = false;
}
