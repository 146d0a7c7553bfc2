/* safetensors_write.c: the safetensors writer. It collects tensors by reference and metadata by copy, then
 * lays the file out exactly as the reference (huggingface/safetensors) writer does: tensors sorted by
 * the position of their dtype in the reference's Dtype enum, largest first (so I64 before F64, F32 before
 * I32, BF16 before F16), then by name byte-wise, with no gaps; a compact JSON header with "__metadata__"
 * first and serde_json's string escapes; spaces to a multiple of 8. The same tensors therefore give the
 * same bytes as Python's safetensors. Metadata keys are written sorted byte-wise: the reference keeps
 * them in a hash map, whose order is not defined, so no order could match it in general; sorted order at
 * least makes our output independent of the order of the calls. Files are written atomically. A tensor's
 * elements, in its device's memory, are read through its host map while a write runs (the memory itself on
 * the CPU), so the bytes do not depend on the device. */
#include "io.h"

#include "../tensor/tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct w_tensor {
    char *name;
    ampc_dtype dtype;
    int ndim;
    int64_t shape[AMPC_ST_MAX_DIMS];
    const void *data; /* host memory (for a device tensor: its host map during a write) */
    uint64_t bytes;
    ampc_ctx *ctx;   /* a tensor's context: its elements are at `dev` in its device's memory */
    const void *dev; /* ... and are mapped for the host only while a write reads them */
    ampci_host_mapping map;
} w_tensor;

typedef struct w_meta {
    char *key, *value;
} w_meta;

struct ampc_safetensors_writer {
    w_tensor *t;
    int n, cap;
    int *slots; /* open-addressing hash of the names: index + 1, 0 = empty; size a power of 2 */
    size_t nslots;
    w_meta *m;
    int nm, mcap;
    char *checksum_key;
};

ampc_status ampc_safetensors_writer_new(ampc_safetensors_writer **out) {
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_writer_new: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? AMPC_OK : ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_writer_new: out of memory");
}

void ampc_safetensors_writer_free(ampc_safetensors_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (int i = 0; i < w->nm; i++) free(w->m[i].key), free(w->m[i].value);
    free(w->t);
    free(w->slots);
    free(w->m);
    free(w->checksum_key);
    free(w);
}

/* ---- the name set ---- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t find_slot(const ampc_safetensors_writer *w, const char *name) {
    size_t mask = w->nslots - 1, i = (size_t)hash_name(name) & mask;
    while (w->slots[i] && strcmp(w->t[w->slots[i] - 1].name, name)) i = (i + 1) & mask;
    return i;
}

/* Keeps the table at most half full, so that index w->n can be added. */
static ampc_status grow_slots(ampc_safetensors_writer *w) {
    if ((size_t)w->n * 2 < w->nslots) return AMPC_OK;
    size_t ns = w->nslots ? w->nslots * 2 : 64;
    int *old = w->slots;
    size_t old_n = w->nslots;
    if (!(w->slots = calloc(ns, sizeof *w->slots))) {
        w->slots = old;
        return ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_add: out of memory (%zu names)", ns);
    }
    w->nslots = ns;
    for (size_t i = 0; i < old_n; i++)
        if (old[i]) w->slots[find_slot(w, w->t[old[i] - 1].name)] = old[i];
    free(old);
    return AMPC_OK;
}

/* ---- adding ---- */

static ampc_status check_name(const ampc_safetensors_writer *w, const char *name) {
    char nm[112];
    if (!name || !name[0])
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: the name is %s", name ? "empty" : "NULL");
    if (!ampci_utf8_valid(name))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: name \"%s\" is not valid UTF-8",
                          ampci_msg_name(nm, sizeof nm, name));
    if (!strcmp(name, "__metadata__"))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: \"__metadata__\" is reserved");
    if (w->slots[find_slot(w, name)])
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: duplicate tensor name \"%s\"",
                          ampci_msg_name(nm, sizeof nm, name));
    return AMPC_OK;
}

/* Bytes of numel(shape) elements of dt, with the shape checked; false after recording the error. */
static bool byte_size(const char *name, ampc_dtype dt, int ndim, const int64_t *shape, uint64_t *bytes) {
    char nm[112];
    ampci_msg_name(nm, sizeof nm, name);
    if ((unsigned)dt >= AMPC_DTYPE_COUNT)
        return ampci_fail(AMPC_STATUS_DTYPE, "ampc_safetensors_add: \"%s\": invalid dtype %d", nm, (int)dt), false;
    if (ndim < 0 || ndim > AMPC_ST_MAX_DIMS || (ndim && !shape))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: \"%s\": ndim %d (need 0..%d and a shape)", nm,
                          ndim, AMPC_ST_MAX_DIMS),
               false;
    uint64_t n = ampc_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (uint64_t)shape[i] > AMPCI_JSON_MAX_INT)
            return ampci_fail(AMPC_STATUS_INVALID_ARG,
                              "ampc_safetensors_add: \"%s\": extent %" PRId64 " of dim %d is out of range [0, 2^53]",
                              nm, shape[i], i),
                   false;
        if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) || n > AMPCI_JSON_MAX_INT)
            return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: \"%s\": byte size exceeds 2^53", nm),
                   false;
    }
    *bytes = n;
    return true;
}

/* One entry: host data, or (ctx set) device memory of ctx at data. */
static ampc_status add_entry(ampc_safetensors_writer *w, const char *name, ampc_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, ampc_ctx *ctx) {
    if (!w) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: writer is NULL");
    ampc_status s = grow_slots(w);
    if (s == AMPC_OK) s = check_name(w, name);
    if (s != AMPC_OK) return s;
    uint64_t bytes;
    if (!byte_size(name, dtype, ndim, shape, &bytes)) return ampc_last_status();
    if (bytes && !data) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add: \"%s\": data is NULL", name);
    if (w->n == w->cap) {
        int nc = w->cap ? w->cap * 2 : 16;
        w_tensor *t = realloc(w->t, (size_t)nc * sizeof *t);
        if (!t) return ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_add: out of memory");
        w->t = t, w->cap = nc;
    }
    w_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_add: out of memory");
    t->dtype = dtype, t->ndim = ndim, t->bytes = bytes;
    if (ctx) t->ctx = ctx, t->dev = data;
    else t->data = data;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    w->n++;
    w->slots[find_slot(w, name)] = w->n;
    return AMPC_OK;
}

ampc_status ampc_safetensors_add(ampc_safetensors_writer *w, const char *name, ampc_dtype dtype, int ndim,
                                 const int64_t *shape, const void *data) {
    return add_entry(w, name, dtype, ndim, shape, data, NULL);
}

ampc_status ampc_safetensors_add_tensor(ampc_safetensors_writer *w, const char *name, const ampc_tensor *t) {
    if (!t)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_add_tensor: tensor \"%s\" is NULL",
                          name ? name : "(null)");
    char d[128];
    if (!ampc_tensor_is_contiguous(t))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_safetensors_add_tensor: tensor \"%s\" (%s) is not "
                          "contiguous; make a contiguous copy first",
                          name ? name : "(null)", ampc_tensor_describe(t, d, sizeof d));
    int64_t shape[AMPC_MAX_DIMS];
    int nd = ampc_tensor_ndim(t);
    for (int i = 0; i < nd; i++) shape[i] = ampc_tensor_dim(t, i);
    return add_entry(w, name, t->dtype, nd, shape, ampci_dev_ptr(t), t->ctx);
}

static ampc_status set_meta(ampc_safetensors_writer *w, const char *fn, const char *key, const char *value) {
    char nm[112];
    if (!w || !key || !value) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: NULL argument", fn);
    if (!ampci_utf8_valid(key) || !ampci_utf8_valid(value))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: key \"%s\" or its value is not valid UTF-8", fn,
                          ampci_msg_name(nm, sizeof nm, key));
    char *v = strdup(value);
    if (!v) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    for (int i = 0; i < w->nm; i++)
        if (!strcmp(w->m[i].key, key)) {
            free(w->m[i].value);
            w->m[i].value = v;
            return AMPC_OK;
        }
    char *k = strdup(key);
    w_meta *m = w->nm == w->mcap ? realloc(w->m, (size_t)(w->mcap ? w->mcap * 2 : 8) * sizeof *m) : w->m;
    if (!k || !m) {
        free(k), free(v);
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    }
    if (w->nm == w->mcap) w->mcap = w->mcap ? w->mcap * 2 : 8;
    w->m = m;
    w->m[w->nm++] = (w_meta){k, v};
    return AMPC_OK;
}

ampc_status ampc_safetensors_set_metadata(ampc_safetensors_writer *w, const char *key, const char *value) {
    return set_meta(w, "ampc_safetensors_set_metadata", key, value);
}

ampc_status ampc_safetensors_set_checksum_key(ampc_safetensors_writer *w, const char *key) {
    if (!w || !key) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_set_checksum_key: NULL argument");
    if (!ampci_utf8_valid(key))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_safetensors_set_checksum_key: key is not valid UTF-8");
    char *k = strdup(key);
    if (!k) return ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_set_checksum_key: out of memory");
    free(w->checksum_key);
    w->checksum_key = k;
    return AMPC_OK;
}

/* ---- the header ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_cstr(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other controls as \u00xx, the rest raw. */
static void sb_json(sbuf *b, const char *s) {
    static const char short_esc[] = "\b\f\n\r\t", short_ch[] = "bfnrt";
    sb_put(b, "\"", 1);
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        char e[8];
        const char *sc = *u ? strchr(short_esc, *u) : NULL;
        if (*u == '"' || *u == '\\') e[0] = '\\', e[1] = (char)*u, sb_put(b, e, 2);
        else if (sc) e[0] = '\\', e[1] = short_ch[sc - short_esc], sb_put(b, e, 2);
        else if (*u < 0x20) snprintf(e, sizeof e, "\\u%04x", *u), sb_put(b, e, 6);
        else sb_put(b, (const char *)u, 1);
    }
    sb_put(b, "\"", 1);
}

static int cmp_layout(const void *pa, const void *pb) {
    const w_tensor *a = *(const w_tensor *const *)pa, *b = *(const w_tensor *const *)pb;
    int ra = ampci_st_dtype_rank(a->dtype), rb = ampci_st_dtype_rank(b->dtype);
    if (ra != rb) return ra > rb ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int cmp_meta(const void *pa, const void *pb) {
    return strcmp((*(const w_meta *const *)pa)->key, (*(const w_meta *const *)pb)->key);
}

/* What a write needs: the tensors in file order, and the header (padded) with its length. */
typedef struct plan {
    w_tensor **order;
    uint64_t total;
    sbuf h;
} plan;

static void plan_free(plan *p) {
    free(p->order);
    free(p->h.p);
}

static void put_metadata(const ampc_safetensors_writer *w, sbuf *h, uint32_t crc) {
    const w_meta **ms = malloc(((size_t)w->nm + 1) * sizeof *ms);
    if (!ms) {
        h->oom = true;
        return;
    }
    int n = 0;
    for (int i = 0; i < w->nm; i++)
        if (!w->checksum_key || strcmp(w->m[i].key, w->checksum_key)) ms[n++] = &w->m[i];
    char hex[16];
    w_meta ck = {w->checksum_key, hex};
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    if (w->checksum_key) ms[n++] = &ck; /* the computed value wins over one set by hand */
    qsort(ms, (size_t)n, sizeof *ms, cmp_meta);
    if (n) sb_cstr(h, "\"__metadata__\":{");
    for (int i = 0; i < n; i++) {
        if (i) sb_put(h, ",", 1);
        sb_json(h, ms[i]->key);
        sb_put(h, ":", 1);
        sb_json(h, ms[i]->value);
    }
    if (n) sb_put(h, "}", 1);
    free(ms);
}

static void put_entry(sbuf *h, const w_tensor *t, uint64_t begin) {
    char num[48];
    sb_json(h, t->name);
    sb_cstr(h, ":{\"dtype\":\"");
    sb_cstr(h, ampc_dtype_name(t->dtype));
    sb_cstr(h, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++)
        sb_put(h, num, (size_t)snprintf(num, sizeof num, d ? ",%" PRId64 : "%" PRId64, t->shape[d]));
    sb_put(h, num,
           (size_t)snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", begin, begin + t->bytes));
}

static ampc_status make_plan(const ampc_safetensors_writer *w, const char *fn, plan *p) {
    memset(p, 0, sizeof *p);
    p->order = malloc(((size_t)w->n + 1) * sizeof *p->order);
    if (!p->order) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    for (int i = 0; i < w->n; i++) p->order[i] = &w->t[i];
    qsort(p->order, (size_t)w->n, sizeof *p->order, cmp_layout);
    uint32_t crc = 0;
    for (int i = 0; i < w->n; i++) {
        p->total += p->order[i]->bytes;
        if (w->checksum_key) crc = ampci_crc32(crc, p->order[i]->data, p->order[i]->bytes);
    }
    sb_put(&p->h, "{", 1);
    put_metadata(w, &p->h, crc);
    uint64_t at = 0;
    for (int i = 0; i < w->n; i++) {
        if (i || p->h.len > 1) sb_put(&p->h, ",", 1);
        put_entry(&p->h, p->order[i], at);
        at += p->order[i]->bytes;
    }
    sb_put(&p->h, "}", 1);
    while (p->h.len % 8) sb_put(&p->h, " ", 1);
    if (p->h.oom) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory for the header", fn);
    if (p->total > AMPCI_JSON_MAX_INT || p->h.len > AMPC_ST_MAX_HEADER)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: %" PRIu64 " data bytes and a %zu-byte header exceed the "
                          "format's limits (2^53, %u)",
                          fn, p->total, p->h.len, AMPC_ST_MAX_HEADER);
    return AMPC_OK;
}

/* The device tensors' elements on the host for the write (their host maps: the memory itself on the CPU, a
 * copy read from the device elsewhere, counted as AMPC_SYNC_READ), and their release. */
static void unmap_all(ampc_safetensors_writer *w) {
    for (int i = 0; i < w->n; i++)
        if (w->t[i].ctx) ampci_host_unmap(&w->t[i].map), w->t[i].data = NULL;
}

static ampc_status map_all(ampc_safetensors_writer *w, const char *fn) {
    for (int i = 0; i < w->n; i++) {
        w_tensor *t = &w->t[i];
        if (!t->ctx || !t->bytes) continue;
        t->data = ampci_host_map(t->ctx, (void *)t->dev, (size_t)t->bytes, AMPCI_MAP_READ, AMPC_SYNC_READ, fn, &t->map);
        if (!t->data) {
            unmap_all(w);
            return ampc_last_status();
        }
    }
    return AMPC_OK;
}

static void put_le64(unsigned char *o, uint64_t v) {
    for (int i = 0; i < 8; i++) o[i] = (unsigned char)(v >> (8 * i));
}

ampc_status ampc_safetensors_serialize(ampc_safetensors_writer *w, void **bytes, size_t *len) {
    const char *fn = "ampc_safetensors_serialize";
    if (!w || !bytes || !len) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: NULL argument", fn);
    *bytes = NULL, *len = 0;
    ampc_status s = map_all(w, fn);
    if (s != AMPC_OK) return s;
    plan p;
    s = make_plan(w, fn, &p);
    size_t n = 8 + p.h.len + (size_t)p.total;
    unsigned char *o = s == AMPC_OK ? malloc(n) : NULL;
    if (s == AMPC_OK && !o) s = ampci_fail(AMPC_STATUS_OOM, "%s: out of memory for %zu bytes", fn, n);
    if (s == AMPC_OK) {
        put_le64(o, p.h.len);
        memcpy(o + 8, p.h.p, p.h.len);
        size_t at = 8 + p.h.len;
        for (int i = 0; i < w->n; i++) {
            if (p.order[i]->bytes) memcpy(o + at, p.order[i]->data, p.order[i]->bytes);
            at += p.order[i]->bytes;
        }
        *bytes = o, *len = n;
    }
    plan_free(&p);
    unmap_all(w);
    return s;
}

/* ---- atomic write ---- */

static int write_all(int fd, const void *data, size_t n) {
    const unsigned char *c = data;
    while (n) {
        ssize_t r = write(fd, c, n < ((size_t)1 << 30) ? n : (size_t)1 << 30);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        c += r, n -= (size_t)r;
    }
    return 0;
}

/* Header and data into the open temp file, synced. -1 with errno set on failure. */
static int write_body(int fd, const plan *p, const ampc_safetensors_writer *w) {
    unsigned char n[8];
    put_le64(n, p->h.len);
    if (write_all(fd, n, 8) || write_all(fd, p->h.p, p->h.len)) return -1;
    for (int i = 0; i < w->n; i++)
        if (p->order[i]->bytes && write_all(fd, p->order[i]->data, p->order[i]->bytes)) return -1;
    return fsync(fd);
}

/* Makes the rename durable; file systems that cannot sync a directory (EINVAL) are fine. */
static ampc_status sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    char *dir = malloc(dl + 1);
    if (!dir) return ampci_fail(AMPC_STATUS_OOM, "ampc_safetensors_write: out of memory");
    if (slash) memcpy(dir, path, dl), dir[dl] = '\0';
    else strcpy(dir, ".");
    if (slash && dl == 0) strcpy(dir, "/");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ok = fd >= 0 && (fsync(fd) == 0 || errno == EINVAL);
    int err = errno;
    if (fd >= 0) close(fd);
    ampc_status s = ok ? AMPC_OK
                       : ampci_fail(AMPC_STATUS_IO,
                                    "ampc_safetensors_write: %s was written, but syncing its "
                                    "directory %s failed: %s",
                                    path, dir, strerror(err));
    free(dir);
    return s;
}

ampc_status ampc_safetensors_write(ampc_safetensors_writer *w, const char *path) {
    const char *fn = "ampc_safetensors_write";
    if (!w || !path || !path[0]) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: NULL or empty argument", fn);
    ampc_status s = map_all(w, fn);
    if (s != AMPC_OK) return s;
    plan p;
    s = make_plan(w, fn, &p);
    size_t pl = strlen(path);
    char *tmp = s == AMPC_OK ? malloc(pl + 5) : NULL;
    if (s == AMPC_OK && !tmp) s = ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    if (s == AMPC_OK) {
        memcpy(tmp, path, pl), memcpy(tmp + pl, ".tmp", 5);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) s = ampci_fail(AMPC_STATUS_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
        else {
            int bad = write_body(fd, &p, w), err = errno;
            if (close(fd) != 0 && !bad) bad = -1, err = errno;
            if (!bad && rename(tmp, path) != 0) bad = -1, err = errno;
            if (bad) {
                unlink(tmp);
                s = ampci_fail(AMPC_STATUS_IO, "%s: writing %s failed: %s", fn, path, strerror(err));
            } else s = sync_dir(path);
        }
    }
    free(tmp);
    plan_free(&p);
    unmap_all(w);
    return s;
}
