/* safetensors.c: reading and writing safetensors files (format and rules in ampc.h). The reader loads the
 * whole file into one 64-byte-aligned buffer, parses the JSON header with the strict schema-driven lexer
 * of st_json.c, and then checks the header against the data the way the reference validate() does: the
 * tensors sorted by offset must tile the data buffer exactly. Its input is untrusted (and fuzzed), so
 * every size is checked before it is used and every failure is one FORMAT message naming the file. The
 * writer lays tensors out as the reference writer does, so a file holding the same tensors comes out
 * byte for byte the same, and writes atomically (temp file, fsync, rename, fsync of the directory). */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- dtypes: the reference's Dtype enum, in its order (the writer sorts by this rank) ---- */

typedef struct st_dtype {
    const char *name;
    int bits;
    ampc_dtype dt; /* AMPC_DTYPE_COUNT: ampc does not compute in it */
} st_dtype;

#define NODT AMPC_DTYPE_COUNT
static const st_dtype st_dtypes[] = {
    {"BOOL", 8, NODT},
    {"F4", 4, NODT},
    {"F6_E2M3", 6, NODT},
    {"F6_E3M2", 6, NODT},
    {"U8", 8, AMPC_DTYPE_U8},
    {"I8", 8, NODT},
    {"F8_E5M2", 8, NODT},
    {"F8_E4M3", 8, NODT},
    {"F8_E8M0", 8, NODT},
    {"F8_E4M3FNUZ", 8, NODT},
    {"F8_E5M2FNUZ", 8, NODT},
    {"I16", 16, NODT},
    {"U16", 16, NODT},
    {"F16", 16, AMPC_DTYPE_F16},
    {"BF16", 16, AMPC_DTYPE_BF16},
    {"I32", 32, AMPC_DTYPE_I32},
    {"U32", 32, NODT},
    {"F32", 32, AMPC_DTYPE_F32},
    {"C64", 64, NODT},
    {"F64", 64, AMPC_DTYPE_F64},
    {"I64", 64, AMPC_DTYPE_I64},
    {"U64", 64, NODT},
};
#define N_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static const st_dtype *dtype_by_name(const char *s) {
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(st_dtypes[i].name, s)) return &st_dtypes[i];
    return NULL;
}

int ampci_st_dtype_rank(ampc_dtype dt) {
    for (int i = 0; i < N_DTYPES; i++)
        if (st_dtypes[i].dt == dt) return i;
    return -1;
}

static const char *shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t o = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    if (o < size) snprintf(buf + o, size - o, "]");
    return buf;
}

/* Grows *arr (of *cap elements of `elem` bytes) so that index n fits. */
static ampc_status grow(void **arr, int *cap, int n, size_t elem, const char *what) {
    if (n < *cap) return AMPC_OK;
    int nc = *cap ? *cap * 2 : 16;
    void *p = nc > 0 ? realloc(*arr, (size_t)nc * elem) : NULL;
    if (!p) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory (%d entries)", what, nc);
    *arr = p, *cap = nc;
    return AMPC_OK;
}

/* ---- the loaded file ---- */

typedef struct st_key {
    const char *key;
    int idx;
} st_key;

typedef struct st_pair {
    const char *key, *value;
} st_pair;

struct ampc_safetensors {
    char *name;
    unsigned char *buf; /* the whole file, 64-byte aligned */
    size_t len;
    const unsigned char *data; /* the data buffer: buf + 8 + N */
    size_t data_len;
    char *pool;        /* decoded header strings */
    ampc_st_tensor *t; /* in offset order */
    int n, cap;
    st_key *by_name; /* names sorted, for find and the duplicate check */
    st_pair *meta;   /* in file order */
    int nmeta, meta_cap;
    st_key *meta_sorted;
};

static int cmp_key(const void *a, const void *b) { return strcmp(((const st_key *)a)->key, ((const st_key *)b)->key); }

static int cmp_offsets(const void *pa, const void *pb) {
    const ampc_st_tensor *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

typedef struct parser {
    ampci_json j;
    ampc_safetensors *st;
    bool seen_meta;
} parser;

/* "[a, b, ...]" of at most max integers; too_many is the problem when there are more. */
static ampc_status parse_uints(ampci_json *j, const char *what, uint64_t *out, int max, int *n, const char *too_many) {
    *n = 0;
    ampc_status s = ampci_json_expect(j, '[', what);
    if (s != AMPC_OK || ampci_json_accept(j, ']')) return s;
    for (;;) {
        if (*n == max) return ampci_json_fail(j, what, "%s", too_many);
        s = ampci_json_uint(j, what, &out[(*n)++]);
        if (s != AMPC_OK) return s;
        if (ampci_json_accept(j, ',')) continue;
        if (ampci_json_accept(j, ']')) return AMPC_OK;
        char b[16];
        return ampci_json_fail(j, what, "expected ',' or ']', found %s", ampci_json_found(j, b, sizeof b));
    }
}

/* The checks of one entry against its dtype and the buffer, once its fields are read. */
static ampc_status check_entry(const parser *ps, ampc_st_tensor *t, const char *dtype) {
    const ampc_safetensors *st = ps->st;
    char nm[112], sh[192];
    ampci_msg_name(nm, sizeof nm, t->name);
    const st_dtype *d = dtype_by_name(dtype);
    if (!d) {
        char dn[112];
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: tensor \"%s\": unknown dtype \"%s\"", st->name, nm,
                          ampci_msg_name(dn, sizeof dn, dtype));
    }
    if (d->bits % 8)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: tensor \"%s\": dtype %s (%d-bit, packed) is not supported", st->name,
                          nm, d->name, d->bits);
    t->dtype_name = d->name, t->dtype = d->dt, t->bits = d->bits;
    shape_str(sh, sizeof sh, t->ndim, t->shape);
    int64_t numel = 1, bytes;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(numel, t->shape[i], &numel))
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: tensor \"%s\": shape %s has too many elements (overflow)",
                              st->name, nm, sh);
    if (__builtin_mul_overflow(numel, (int64_t)(d->bits / 8), &bytes))
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: tensor \"%s\": shape %s of %s is too large (byte size overflows)",
                          st->name, nm, sh, d->name);
    t->numel = numel;
    if (t->begin > t->end)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] begin after they end", st->name,
                          nm, t->begin, t->end);
    if (t->end - t->begin != (uint64_t)bytes)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                          " bytes, shape %s of %s needs %" PRId64,
                          st->name, nm, t->begin, t->end, t->end - t->begin, sh, d->name, bytes);
    if (t->end > st->data_len)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                          "] run past the data buffer (%zu bytes)",
                          st->name, nm, t->begin, t->end, st->data_len);
    t->data = st->data + t->begin;
    return AMPC_OK;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

/* One field of a tensor entry ("key": already read), recorded in *seen. */
static ampc_status parse_field(parser *ps, ampc_st_tensor *t, const char *key, unsigned *seen, const char **dtype) {
    ampci_json *j = &ps->j;
    unsigned f = !strcmp(key, "dtype")          ? F_DTYPE
                 : !strcmp(key, "shape")        ? F_SHAPE
                 : !strcmp(key, "data_offsets") ? F_OFFSETS
                                                : 0;
    char kn[112];
    if (!f)
        return ampci_json_fail(j, "fields",
                               "unknown field \"%s\" (a tensor has exactly \"dtype\", \"shape\" and "
                               "\"data_offsets\")",
                               ampci_msg_name(kn, sizeof kn, key));
    if (*seen & f) return ampci_json_fail(j, "fields", "duplicate field \"%s\"", key);
    *seen |= f;
    if (f == F_DTYPE) return ampci_json_string(j, "dtype", dtype);
    uint64_t v[AMPC_ST_MAX_DIMS];
    int n;
    if (f == F_SHAPE) {
        ampc_status s = parse_uints(j, "shape", v, AMPC_ST_MAX_DIMS, &n,
                                    "more dims than AMPC_ST_MAX_DIMS (" AMPCI_STR(AMPC_ST_MAX_DIMS) ")");
        t->ndim = n;
        for (int i = 0; i < n; i++) t->shape[i] = (int64_t)v[i];
        return s;
    }
    ampc_status s = parse_uints(j, "data_offsets", v, 2, &n, "more than 2 values (expected [BEGIN, END])");
    if (s == AMPC_OK && n != 2)
        return ampci_json_fail(j, "data_offsets", "%d value%s (expected [BEGIN, END])", n, n == 1 ? "" : "s");
    t->begin = v[0], t->end = v[1];
    return s;
}

/* `name`: {"dtype": ..., "shape": [...], "data_offsets": [BEGIN, END]} */
static ampc_status parse_entry(parser *ps, const char *name) {
    ampc_safetensors *st = ps->st;
    ampci_json *j = &ps->j;
    ampc_status s = grow((void **)&st->t, &st->cap, st->n, sizeof *st->t, st->name);
    if (s != AMPC_OK) return s;
    ampc_st_tensor *t = &st->t[st->n];
    memset(t, 0, sizeof *t);
    t->name = name;
    j->ctx = name;
    char b[16];
    if (!ampci_json_accept(j, '{'))
        return ampci_json_fail(j, "entry", "expected an object {\"dtype\", \"shape\", \"data_offsets\"}, found %s",
                               ampci_json_found(j, b, sizeof b));
    unsigned seen = 0;
    const char *dtype = NULL, *key;
    if (!ampci_json_accept(j, '}'))
        for (;;) {
            if ((s = ampci_json_string(j, "field name", &key)) != AMPC_OK) return s;
            if ((s = ampci_json_expect(j, ':', "entry")) != AMPC_OK) return s;
            if ((s = parse_field(ps, t, key, &seen, &dtype)) != AMPC_OK) return s;
            if (ampci_json_accept(j, ',')) continue;
            if (ampci_json_accept(j, '}')) break;
            return ampci_json_fail(j, "entry", "expected ',' or '}', found %s", ampci_json_found(j, b, sizeof b));
        }
    const char *missing = !(seen & F_DTYPE)     ? "dtype"
                          : !(seen & F_SHAPE)   ? "shape"
                          : !(seen & F_OFFSETS) ? "data_offsets"
                                                : NULL;
    if (missing) return ampci_json_fail(j, "entry", "missing field \"%s\"", missing);
    j->ctx = NULL;
    if ((s = check_entry(ps, t, dtype)) != AMPC_OK) return s;
    st->n++;
    return AMPC_OK;
}

/* "__metadata__": {"key": "value", ...} */
static ampc_status parse_metadata(parser *ps) {
    ampc_safetensors *st = ps->st;
    ampci_json *j = &ps->j;
    char b[16], kn[112];
    if (ps->seen_meta) return ampci_json_fail(j, "__metadata__", "appears twice");
    ps->seen_meta = true;
    if (!ampci_json_accept(j, '{'))
        return ampci_json_fail(j, "__metadata__", "must be an object of string values, found %s",
                               ampci_json_found(j, b, sizeof b));
    if (ampci_json_accept(j, '}')) return AMPC_OK;
    for (;;) {
        const char *key, *value;
        ampc_status s = ampci_json_string(j, "__metadata__ key", &key);
        if (s == AMPC_OK) s = ampci_json_expect(j, ':', "__metadata__");
        if (s != AMPC_OK) return s;
        ampci_json_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return ampci_json_fail(j, "__metadata__", "value of \"%s\" must be a string, found %s",
                                   ampci_msg_name(kn, sizeof kn, key), ampci_json_found(j, b, sizeof b));
        if ((s = ampci_json_string(j, "__metadata__ value", &value)) != AMPC_OK) return s;
        if ((s = grow((void **)&st->meta, &st->meta_cap, st->nmeta, sizeof *st->meta, st->name)) != AMPC_OK) return s;
        st->meta[st->nmeta++] = (st_pair){key, value};
        if (ampci_json_accept(j, ',')) continue;
        if (ampci_json_accept(j, '}')) return AMPC_OK;
        return ampci_json_fail(j, "__metadata__", "expected ',' or '}', found %s", ampci_json_found(j, b, sizeof b));
    }
}

/* The whole header: one object, then nothing but spaces. */
static ampc_status parse_header(parser *ps) {
    ampci_json *j = &ps->j;
    char b[16];
    if (j->p >= j->end || *j->p != '{')
        return ampci_json_fail(j, "header", "must start with '{', found %s", ampci_json_found(j, b, sizeof b));
    j->p++;
    if (!ampci_json_accept(j, '}'))
        for (;;) {
            const char *key;
            ampc_status s = ampci_json_string(j, "tensor name", &key);
            if (s == AMPC_OK) s = ampci_json_expect(j, ':', "header");
            if (s == AMPC_OK) s = !strcmp(key, "__metadata__") ? parse_metadata(ps) : parse_entry(ps, key);
            if (s != AMPC_OK) return s;
            if (ampci_json_accept(j, ',')) continue;
            if (ampci_json_accept(j, '}')) break;
            return ampci_json_fail(j, "header", "expected ',' or '}', found %s", ampci_json_found(j, b, sizeof b));
        }
    while (j->p < j->end && *j->p == ' ') j->p++;
    if (j->p < j->end)
        return ampci_json_fail(j, "header", "%s after the closing '}' (only spaces may pad the header)",
                               ampci_json_found(j, b, sizeof b));
    return AMPC_OK;
}

/* Sorted copies of the names (tensors) and keys (metadata); duplicates are errors. */
static ampc_status index_names(ampc_safetensors *st) {
    char nm[112];
    st->by_name = malloc(((size_t)st->n + 1) * sizeof *st->by_name);
    st->meta_sorted = malloc(((size_t)st->nmeta + 1) * sizeof *st->meta_sorted);
    if (!st->by_name || !st->meta_sorted)
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory indexing %d names", st->name, st->n);
    for (int i = 0; i < st->n; i++) st->by_name[i] = (st_key){st->t[i].name, i};
    for (int i = 0; i < st->nmeta; i++) st->meta_sorted[i] = (st_key){st->meta[i].key, i};
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_key);
    qsort(st->meta_sorted, (size_t)st->nmeta, sizeof *st->meta_sorted, cmp_key);
    for (int i = 1; i < st->n; i++)
        if (!strcmp(st->by_name[i].key, st->by_name[i - 1].key))
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: duplicate tensor name \"%s\"", st->name,
                              ampci_msg_name(nm, sizeof nm, st->by_name[i].key));
    for (int i = 1; i < st->nmeta; i++)
        if (!strcmp(st->meta_sorted[i].key, st->meta_sorted[i - 1].key))
            return ampci_fail(AMPC_STATUS_FORMAT, "%s: __metadata__: duplicate key \"%s\"", st->name,
                              ampci_msg_name(nm, sizeof nm, st->meta_sorted[i].key));
    return AMPC_OK;
}

/* The tensors, in offset order, must cover [0, data_len) exactly: no overlap, no gap, nothing after. */
static ampc_status check_tiling(const ampc_safetensors *st) {
    char a[112], b[112];
    uint64_t at = 0;
    for (int i = 0; i < st->n; i++) {
        const ampc_st_tensor *t = &st->t[i];
        if (t->begin < at)
            return ampci_fail(AMPC_STATUS_FORMAT,
                              "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                              "] overlap tensor \"%s\" [%" PRIu64 ", %" PRIu64 "]",
                              st->name, ampci_msg_name(a, sizeof a, t->name), t->begin, t->end,
                              ampci_msg_name(b, sizeof b, st->t[i - 1].name), st->t[i - 1].begin, st->t[i - 1].end);
        if (t->begin > at)
            return ampci_fail(AMPC_STATUS_FORMAT,
                              "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap: bytes [%" PRIu64
                              ", %" PRIu64 ") of the data belong to no tensor",
                              st->name, ampci_msg_name(a, sizeof a, t->name), t->begin, t->end, at, t->begin);
        at = t->end;
    }
    if (at != st->data_len)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: the data buffer has %zu bytes but the tensors end at %" PRIu64 " (%zu trailing bytes)",
                          st->name, st->data_len, at, st->data_len - (size_t)at);
    return AMPC_OK;
}

static ampc_status parse_all(ampc_safetensors *st) {
    if (st->len < 8)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %zu bytes is too short for a safetensors file (the header "
                          "length alone takes 8)",
                          st->name, st->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | st->buf[i];
    if (n == 0) return ampci_fail(AMPC_STATUS_FORMAT, "%s: header length is 0", st->name);
    /* A length past the limit or the file, with no '{' where the header would start, is not a damaged
     * safetensors file but another kind of file (text gives lengths like 7.5e18): say that first. */
    const char *other = st->len > 8 && st->buf[8] == '{' ? "" : "not a safetensors file: ";
    if (n > AMPC_ST_MAX_HEADER)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %sheader length %" PRIu64 " exceeds the limit of %u bytes", st->name,
                          other, n, AMPC_ST_MAX_HEADER);
    if (n > st->len - 8)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %sheader length %" PRIu64 " exceeds the file (%zu bytes)", st->name,
                          other, n, st->len);
    st->data = st->buf + 8 + n;
    st->data_len = st->len - 8 - (size_t)n;
    st->pool = malloc((size_t)n + 1);
    if (!st->pool)
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory for the header (%" PRIu64 " bytes)", st->name, n);
    parser ps = {.st = st};
    ampci_json_init(&ps.j, st->name, st->buf + 8, (size_t)n, st->pool, (size_t)n + 1);
    ampc_status s = parse_header(&ps);
    if (s != AMPC_OK) return s;
    if (st->n > 1) qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_offsets); /* st->t is NULL when empty */
    if ((s = index_names(st)) != AMPC_OK) return s;
    return check_tiling(st);
}

/* Takes buf (len bytes, from aligned_buffer) whatever happens. */
static ampc_status load(unsigned char *buf, size_t len, const char *name, ampc_safetensors **out) {
    ampc_safetensors *st = calloc(1, sizeof *st);
    char *nm = strdup(name);
    if (!st || !nm) {
        free(buf), free(st), free(nm);
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", name);
    }
    st->name = nm, st->buf = buf, st->len = len;
    ampc_status s = parse_all(st);
    if (s != AMPC_OK) {
        ampc_safetensors_free(st);
        return s;
    }
    *out = st;
    return AMPC_OK;
}

static unsigned char *aligned_buffer(size_t len) {
    void *p = NULL;
    return posix_memalign(&p, AMPCI_ALIGN, len ? len : 1) == 0 ? p : NULL;
}

ampc_status ampc_safetensors_parse(const void *bytes, size_t len, const char *name, ampc_safetensors **out) {
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_parse: out is NULL");
    *out = NULL;
    if (!bytes && len) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_parse: bytes is NULL");
    if (!name) name = "<memory>";
    unsigned char *buf = aligned_buffer(len);
    if (!buf) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory copying %zu bytes", name, len);
    if (len) memcpy(buf, bytes, len);
    return load(buf, len, name, out);
}

/* Reads exactly len bytes of fd into buf. */
static ampc_status read_exactly(int fd, const char *path, unsigned char *buf, size_t len) {
    for (size_t got = 0; got < len;) {
        size_t want = len - got < ((size_t)1 << 30) ? len - got : (size_t)1 << 30;
        ssize_t r = read(fd, buf + got, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ampci_fail(AMPC_STATUS_IO, "%s: read failed: %s", path, strerror(errno));
        if (r == 0)
            return ampci_fail(AMPC_STATUS_IO, "%s: the file shrank while being read (%zu of %zu bytes)", path, got,
                              len);
        got += (size_t)r;
    }
    return AMPC_OK;
}

ampc_status ampc_safetensors_read(const char *path, ampc_safetensors **out) {
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_read: out is NULL");
    *out = NULL;
    if (!path) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_read: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ampci_fail(AMPC_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    ampc_status s = AMPC_OK;
    if (fstat(fd, &sb) != 0) s = ampci_fail(AMPC_STATUS_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode)) s = ampci_fail(AMPC_STATUS_IO, "%s: is a directory, expected a file", path);
    else if (sb.st_size < 0 || (uint64_t)sb.st_size > SIZE_MAX / 2)
        s = ampci_fail(AMPC_STATUS_IO, "%s: size %jd cannot be read into memory", path, (intmax_t)sb.st_size);
    unsigned char *buf = NULL;
    size_t len = s == AMPC_OK ? (size_t)sb.st_size : 0;
    if (s == AMPC_OK && !(buf = aligned_buffer(len)))
        s = ampci_fail(AMPC_STATUS_OOM, "%s: out of memory reading %zu bytes", path, len);
    if (s == AMPC_OK) s = read_exactly(fd, path, buf, len);
    close(fd);
    if (s != AMPC_OK) {
        free(buf);
        return s;
    }
    return load(buf, len, path, out);
}

void ampc_safetensors_free(ampc_safetensors *st) {
    if (!st) return;
    free(st->name);
    free(st->buf);
    free(st->pool);
    free(st->t);
    free(st->by_name);
    free(st->meta);
    free(st->meta_sorted);
    free(st);
}

const char *ampc_safetensors_name(const ampc_safetensors *st) { return st ? st->name : NULL; }
int ampc_safetensors_count(const ampc_safetensors *st) { return st ? st->n : 0; }

const ampc_st_tensor *ampc_safetensors_tensor(const ampc_safetensors *st, int i) {
    return st && i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const ampc_st_tensor *ampc_safetensors_find(const ampc_safetensors *st, const char *name) {
    if (!st || !name) return NULL;
    st_key k = {name, 0};
    const st_key *f = bsearch(&k, st->by_name, (size_t)st->n, sizeof k, cmp_key);
    return f ? &st->t[f->idx] : NULL;
}

int ampc_safetensors_metadata_count(const ampc_safetensors *st) { return st ? st->nmeta : 0; }

ampc_status ampc_safetensors_metadata_at(const ampc_safetensors *st, int i, const char **key, const char **value) {
    if (key) *key = NULL;
    if (value) *value = NULL;
    if (!st || i < 0 || i >= st->nmeta)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_metadata_at: index %d out of range [0, %d)", i,
                          st ? st->nmeta : 0);
    if (key) *key = st->meta[i].key;
    if (value) *value = st->meta[i].value;
    return AMPC_OK;
}

const char *ampc_safetensors_metadata(const ampc_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    st_key k = {key, 0};
    const st_key *f = bsearch(&k, st->meta_sorted, (size_t)st->nmeta, sizeof k, cmp_key);
    return f ? st->meta[f->idx].value : NULL;
}

const void *ampc_safetensors_data(const ampc_safetensors *st, size_t *len) {
    if (len) *len = st ? st->data_len : 0;
    return st ? st->data : NULL;
}

uint32_t ampci_crc32(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    uLong c = crc;
    while (n) {
        uInt k = n > ((size_t)1 << 30) ? (uInt)1 << 30 : (uInt)n; /* zlib takes uInt lengths */
        c = crc32(c, b, k);
        b += k, n -= k;
    }
    return (uint32_t)c;
}

ampc_status ampc_safetensors_verify_checksum(const ampc_safetensors *st, const char *key) {
    if (!st || !key) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_verify_checksum: NULL argument");
    char want[16], kn[112], vn[112];
    snprintf(want, sizeof want, "%08" PRIx32, ampci_crc32(0, st->data, st->data_len));
    const char *have = ampc_safetensors_metadata(st, key);
    if (!have)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: __metadata__ has no checksum \"%s\" (the data's CRC-32 is %s)",
                          st->name, ampci_msg_name(kn, sizeof kn, key), want);
    if (strcmp(have, want))
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: checksum mismatch: __metadata__ \"%s\" is \"%s\", the data's "
                          "CRC-32 is \"%s\"",
                          st->name, ampci_msg_name(kn, sizeof kn, key), ampci_msg_name(vn, sizeof vn, have), want);
    return AMPC_OK;
}
