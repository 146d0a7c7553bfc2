/* term.h: how wide the output may be, and text that fits it. The width comes from COLUMNS when it is set
 * (so a script or a test can ask for a width), else from the terminal behind the stream; a stream that
 * is no terminal has no width, and output to it stays as it always was. The helpers measure text in
 * display columns (UTF-8 continuation bytes take none, so "Δ" and "—" count one each). */
#ifndef AMPC_CLI_TERM_H
#define AMPC_CLI_TERM_H

#include <stddef.h>
#include <stdio.h>

/* The width for output to f: COLUMNS (1..10000) when set, else the terminal's when f is one (80 when a
 * terminal does not say), else 0: no limit. */
int term_columns(FILE *f);

/* Display columns of s. */
int term_text_width(const char *s);

/* The longest prefix of s that fits in width columns, in bytes (never splits a UTF-8 sequence). */
size_t term_fit(const char *s, int width);

/* Writes text to f as lines of at most width columns (0: one line), breaking at spaces; lines after the
 * first start with indent spaces. A word longer than a line gets a line of its own. Ends with '\n'. */
void term_wrap(FILE *f, const char *text, int width, int indent);

#endif
