/* term.c: the output width of term.h and text that fits it: COLUMNS first (a user or a test can ask for
 * a width, and tmux or a pipe may not tell), then TIOCGWINSZ on the stream's descriptor. Wrapping counts
 * display columns, not bytes, because the report's headers and verdicts hold "Δ" and "—". */
#include "term.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int term_columns(FILE *f) {
    const char *env = getenv("COLUMNS");
    if (env && *env) {
        char *end;
        long c = strtol(env, &end, 10);
        if (!*end && c >= 1 && c <= 10000) return (int)c;
    }
    int fd = fileno(f);
    if (fd < 0 || !isatty(fd)) return 0;
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

static bool continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

int term_text_width(const char *s) {
    int w = 0;
    for (; *s; s++) w += !continuation(*s);
    return w;
}

size_t term_fit(const char *s, int width) {
    size_t i = 0;
    for (int w = 0; s[i]; i++) {
        if (!continuation(s[i]) && w++ == width) break;
    }
    return i;
}

/* Display columns of s[0..n). */
static int span_width(const char *s, size_t n) {
    int w = 0;
    for (size_t i = 0; i < n; i++) w += !continuation(s[i]);
    return w;
}

void term_wrap(FILE *f, const char *text, int width, int indent) {
    if (width <= 0 || indent >= width) {
        fprintf(f, "%s\n", text);
        return;
    }
    int col = 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, " ");
        int w = span_width(p, n);
        if (col > 0 && col + 1 + w > width) { /* the word starts a new line */
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > 0) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, n, f);
        col += w;
        p += n;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}
