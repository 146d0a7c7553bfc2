/* args.c: the table-driven long-option parser of args.h. It accepts "--opt value" and "--opt=value",
 * checks every value against its option's kind (choice list, integer or number range, custom parser)
 * and turns any mistake into one line that quotes the offending text and says what is accepted, so that
 * the ~40 options of train/compare and the two of info share one behaviour. No prefix matching: an
 * abbreviation that works today would break scripts the day another option shares its prefix. */
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void cli_one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* Offending text goes into a one-line message cut short; fail() replaces its control characters (a
 * newline in an argument must not split the line). */
static void quote(const char *s, char *buf, size_t size) {
    size_t n = 0, limit = size > 4 ? size - 4 : 0;
    for (; *s && n < limit; s++) buf[n++] = *s;
    if (*s && size >= 4) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = '\0';
}

static cli_result fail(cli_parse_out *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cli_result fail(cli_parse_out *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof out->error, fmt, ap);
    va_end(ap);
    cli_one_line(out->error); /* a value parser's reason may quote the raw value too */
    return CLI_ERROR;
}

void cli_join(const char *const *items, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; items[i] && used < size; i++) {
        int w = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", items[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

void cli_list_options(const cli_opt *opts, size_t nopts, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i <= nopts && used < size; i++) {
        int w = snprintf(buf + used, size - used, "%s--%s", i ? ", " : "", i < nopts ? opts[i].name : "help");
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* What an option accepts, as the tail of an error message or a --help line. */
static void describe(const cli_opt *o, char *buf, size_t size) {
    char list[384];
    switch (o->kind) {
    case CLI_CHOICE:
        cli_join(o->choices, list, sizeof list);
        snprintf(buf, size, "accepted: %s", list);
        break;
    case CLI_INT: snprintf(buf, size, "expected an integer in %" PRId64 "..%" PRId64, o->imin, o->imax); break;
    case CLI_DOUBLE: snprintf(buf, size, "expected a number in %g..%g", o->dmin, o->dmax); break;
    case CLI_CUSTOM: snprintf(buf, size, "expected %s", o->accepts ? o->accepts : "a valid value"); break;
    default: snprintf(buf, size, "expected a non-empty value"); break;
    }
}

static bool parse_int(const char *v, int64_t *out) {
    /* strtoll would skip leading blanks and accept a lone sign; a value must be all digits. */
    const char *d = (*v == '-' || *v == '+') ? v + 1 : v;
    if (*d < '0' || *d > '9') return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end) return false;
    *out = x;
    return true;
}

static bool parse_double(const char *v, double *out) {
    if (!*v || strchr(" \t\n", *v)) return false;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (*end || !isfinite(x)) return false;
    *out = x;
    return true;
}

static int find_choice(const char *const *choices, const char *v) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], v) == 0) return i;
    return -1;
}

/* Stores v into o->out; false when v is not acceptable. why gets a custom parser's explanation. */
static bool store(const cli_opt *o, const char *v, char *why, size_t why_size) {
    why[0] = '\0';
    switch (o->kind) {
    case CLI_STRING:
        if (!*v) return false;
        *(const char **)o->out = v;
        return true;
    case CLI_CHOICE: {
        int i = find_choice(o->choices, v);
        if (i < 0) return false;
        *(int *)o->out = i;
        return true;
    }
    case CLI_INT: {
        int64_t x;
        if (!parse_int(v, &x) || x < o->imin || x > o->imax) return false;
        *(int64_t *)o->out = x;
        return true;
    }
    case CLI_DOUBLE: {
        double x;
        if (!parse_double(v, &x) || x < o->dmin || x > o->dmax) return false;
        *(double *)o->out = x;
        return true;
    }
    case CLI_CUSTOM: return o->parse(v, o->out, why, why_size);
    default: return false;
    }
}

static int find_opt(const cli_opt *opts, size_t nopts, const char *name, size_t len) {
    for (size_t i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return (int)i;
    return -1;
}

/* Edit distance (insertions, deletions, substitutions), capped inputs: for "did you mean". */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la > 63 || lb > 63) return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up, row[j] = best;
        }
    }
    return row[lb];
}

static cli_result unknown_option(const cli_opt *opts, size_t nopts, const char *arg, cli_parse_out *out) {
    char q[80], list[1400], hint[96] = "";
    quote(arg, q, sizeof q);
    cli_list_options(opts, nopts, list, sizeof list);
    const char *name = arg + strspn(arg, "-"), *eq = strchr(name, '=');
    char bare[64];
    snprintf(bare, sizeof bare, "%.*s", (int)(eq ? eq - name : (ptrdiff_t)strlen(name)), name);
    size_t best = 3; /* suggest only close misspellings */
    for (size_t i = 0; i < nopts; i++) {
        size_t d = distance(bare, opts[i].name);
        if (d < best) best = d, snprintf(hint, sizeof hint, " (did you mean --%s?)", opts[i].name);
    }
    return fail(out, "unknown option '%s'%s; accepted: %s", q, hint, list);
}

static cli_result bad_value(const cli_opt *o, const char *v, const char *why, cli_parse_out *out) {
    char q[80], acc[400];
    quote(v, q, sizeof q);
    if (why && *why) snprintf(acc, sizeof acc, "expected %s", why);
    else describe(o, acc, sizeof acc);
    return fail(out, "bad value '%s' for --%s; %s", q, o->name, acc);
}

/* One "--name[=value]" at argv[*i]; advances *i past a separate value. */
static cli_result take_option(const cli_opt *opts, size_t nopts, int argc, char **argv, int *i, cli_parse_out *out) {
    const char *arg = argv[*i], *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    int k = find_opt(opts, nopts, name, len);
    if (k < 0) return unknown_option(opts, nopts, arg, out);
    const cli_opt *o = &opts[k];
    if (out->seen) out->seen[k] = true;
    if (o->kind == CLI_FLAG) {
        char q[80];
        quote(arg, q, sizeof q);
        if (eq) return fail(out, "option --%s takes no value (got '%s')", o->name, q);
        *(bool *)o->out = true;
        return CLI_PARSED;
    }
    const char *v = eq ? eq + 1 : NULL;
    /* A following "--x" is the next option, not this one's value: the value was forgotten. */
    if (!v && *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) v = argv[++*i];
    if (!v) {
        char acc[400];
        describe(o, acc, sizeof acc);
        return fail(out, "option --%s needs a value; %s", o->name, acc);
    }
    char why[200];
    if (!store(o, v, why, sizeof why)) return bad_value(o, v, why, out);
    return CLI_PARSED;
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static cli_result take_positional(const cli_opt *opts, size_t nopts, const char *arg, int max_pos, const char *pos_what,
                                  cli_parse_out *out) {
    if (out->npos < max_pos) {
        out->pos[out->npos++] = (char *)arg;
        return CLI_PARSED;
    }
    char q[80], list[400];
    quote(arg, q, sizeof q);
    if (max_pos == 0) {
        cli_list_options(opts, nopts, list, sizeof list);
        return fail(out, "unexpected argument '%s'; this command takes only options: %s", q, list);
    }
    return fail(out, "unexpected argument '%s'; expected at most %d (%s)", q, max_pos, pos_what);
}

cli_result cli_parse(const cli_opt *opts, size_t nopts, int argc, char **argv, int max_pos, const char *pos_what,
                     cli_parse_out *out) {
    out->npos = 0;
    out->error[0] = '\0';
    /* --help wins over any mistake elsewhere on the line: asking for help is never an error. */
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (is_help(argv[i])) return CLI_HELP;
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        cli_result r = CLI_PARSED;
        if (!options_done && strcmp(a, "--") == 0) options_done = true;
        else if (!options_done && strncmp(a, "--", 2) == 0) r = take_option(opts, nopts, argc, argv, &i, out);
        else if (!options_done && a[0] == '-' && a[1]) r = unknown_option(opts, nopts, a, out);
        else r = take_positional(opts, nopts, a, max_pos, pos_what, out);
        if (r != CLI_PARSED) return r;
    }
    return CLI_PARSED;
}

/* "--threads T" */
static int left_column(const cli_opt *o, char *buf, size_t size) {
    if (o->kind == CLI_FLAG) return snprintf(buf, size, "--%s", o->name);
    return snprintf(buf, size, "--%s %s", o->name, o->metavar ? o->metavar : "VALUE");
}

/* The accepted values as a --help line shows them: "one of: a, b", "1..1024"; "" for free-form values. */
static void help_values(const cli_opt *o, char *buf, size_t size) {
    char list[384];
    buf[0] = '\0';
    if (o->kind == CLI_CHOICE) {
        cli_join(o->choices, list, sizeof list);
        snprintf(buf, size, "one of: %s", list);
    } else if (o->kind == CLI_INT) {
        snprintf(buf, size, "%" PRId64 "..%" PRId64, o->imin, o->imax);
    } else if (o->kind == CLI_DOUBLE) {
        snprintf(buf, size, "%g..%g", o->dmin, o->dmax);
    }
}

void cli_print_options(FILE *f, const cli_opt *opts, size_t nopts) {
    int width = 6; /* "--help" */
    char left[96], acc[400];
    for (size_t i = 0; i < nopts; i++) {
        int w = left_column(&opts[i], left, sizeof left);
        if (w > width) width = w;
    }
    fprintf(f, "Options:\n");
    for (size_t i = 0; i < nopts; i++) {
        const cli_opt *o = &opts[i];
        left_column(o, left, sizeof left);
        fprintf(f, "  %-*s  %s", width, left, o->help ? o->help : "");
        help_values(o, acc, sizeof acc);
        if (acc[0]) fprintf(f, " (%s)", acc);
        if (o->defval) fprintf(f, " [default: %s]", o->defval);
        fputc('\n', f);
    }
    fprintf(f, "  %-*s  show this help and exit\n", width, "--help");
}
