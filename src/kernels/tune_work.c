/* tune_work.c: what the kernel measurement times (tune.h's real ampci_tune_ops). A scratch context of one
 * thread of its own (so the caller's context, RNG and memory counters are untouched, and the choice does
 * not depend on anyone's thread count), and per cell operands written once per shape, outside the timing:
 * finite values k/128 (exact in F16 and BF16, no subnormals or specials, whose exact slow paths are the
 * tests' business), of a bounded size (the largest GEMM shape, 2048 x 384: a few MiB), freed at the end.
 * Each call is timed on the monotonic clock. */
#include "tune.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBUF 10                   /* 0..8 operands, 9 ids */
#define N_ELEM ((int64_t)1 << 15) /* elementwise, optimizer, conversion cells: 32768 values (128 KiB F32) */
#define ROWS 32                   /* softmax, layer norm, cross-entropy: 32 rows of 1024 */
#define COLS 1024
#define EMB_IDS 256 /* embedding backward: 256 ids into 512 rows of 384 */
#define EMB_ROWS 512
#define EMB_COLS 384
#define ATT_BH 2 /* attention: 2 heads of 256 BF16 tokens, head size 64, causal (a GPT block's) */
#define ATT_T 256
#define ATT_D 64

typedef struct work {
    ampc_ctx *ctx;
    void *buf[NBUF];
    size_t size[NBUF];
    float *master[2]; /* the pattern from 0 and from 1.25, written once, copied into the operands */
    int64_t master_n[2];
    ampc_dtype gemm_dt; /* what buf[0] holds for the GEMM cells (gemm_n values), reused across cells */
    int64_t gemm_n;
    ampci_slot slot;
    int key;
    ampci_gemm g;
    ampci_attn a;
    ampci_conv_geom cg;
    int64_t *ids;
    int32_t *arg;
} work;

static void silent(void *user, ampc_log_level level, const char *message) { (void)user, (void)level, (void)message; }

/* Buffer i of at least `bytes`, every page touched (no page faults in a timed call). */
static void *buf(work *w, int i, size_t bytes) {
    if (w->size[i] >= bytes) return w->buf[i];
    free(w->buf[i]);
    size_t rounded = (bytes + 63) / 64 * 64;
    w->buf[i] = aligned_alloc(64, rounded ? rounded : 64);
    w->size[i] = w->buf[i] ? rounded : 0;
    if (w->buf[i]) memset(w->buf[i], 0, rounded);
    if (i == 0) w->gemm_n = 0;
    return w->buf[i];
}

/* The first n values of the pattern k/128 + base, k in [-128, 128) (base 0 or 1.25). */
static const float *master(work *w, int64_t n, float base) {
    int m = base != 0.0f;
    if (w->master_n[m] >= n) return w->master[m];
    free(w->master[m]);
    w->master[m] = malloc((size_t)n * sizeof(float));
    w->master_n[m] = w->master[m] ? n : 0;
    for (int64_t j = 0; j < w->master_n[m]; j++)
        w->master[m][j] = base + (float)((int)((uint32_t)j * 2654435761u >> 24) - 128) / 128.0f;
    return w->master[m];
}

/* Buffer i holding n values of the pattern in dt. */
static void *pattern(work *w, int i, ampc_dtype dt, int64_t n, float base) {
    const float *m = master(w, n, base);
    void *p = buf(w, i, (size_t)n * ampc_dtype_size(dt));
    if (!m || !p) return NULL;
    if (dt == AMPC_DTYPE_F32) memcpy(p, m, (size_t)n * sizeof(float));
    else ampci_convert_generic(p, dt, m, AMPC_DTYPE_F32, (size_t)n);
    if (i == 0) w->gemm_n = 0;
    return p;
}

static float *fbuf(work *w, int i, int64_t n, float base) { return pattern(w, i, AMPC_DTYPE_F32, n, base); }

static int64_t operand_elems(const ampci_tune_shape *s) { return (s->m > s->n ? s->m : s->n) * s->k; }

static bool prep_gemm(work *w, const ampci_tune_shape *s) {
    ampc_dtype dt = w->slot == AMPCI_SLOT_GEMM ? (ampc_dtype)w->key : AMPC_DTYPE_F32;
    ampci_tune_shape all[AMPCI_TUNE_MAX_SHAPES];
    int64_t most = 0; /* a and b read one pattern (they are const), as long as the cell's largest shape needs */
    for (int i = 0, n = ampci_tune_shapes(w->slot, w->key, all); i < n; i++)
        if (operand_elems(&all[i]) > most) most = operand_elems(&all[i]);
    void *ab = w->gemm_dt == dt && w->gemm_n >= most ? w->buf[0] : pattern(w, 0, dt, most, 0.0f);
    if (ab) w->gemm_dt = dt, w->gemm_n = w->gemm_n > most ? w->gemm_n : most;
    float *c = buf(w, 1, (size_t)(s->m * s->n) * sizeof(float));
    w->g = (ampci_gemm){s->m, s->n, s->k, ab,   s->ta ? s->m : s->k, s->ta, ab, s->n, false, c,
                        s->n, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
    return ab && c;
}

static const ampci_kernel *ref_attention(void) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->slot == AMPCI_SLOT_ATTENTION && all[i]->level == AMPC_ISA_REF) return all[i];
    return NULL;
}

static bool prep_attention(work *w) {
    int64_t n = ATT_BH * ATT_T * ATT_D;
    void *qkv = pattern(w, 0, AMPC_DTYPE_BF16, n, 0.0f);
    float *o = buf(w, 2, (size_t)n * sizeof(float)), *stats = buf(w, 3, (size_t)(2 * ATT_BH * ATT_T) * sizeof(float));
    w->a = (ampci_attn){ATT_BH, ATT_T, ATT_T, ATT_D, ATT_D, AMPC_DTYPE_BF16, qkv, qkv, qkv, true, 0.125};
    if (!qkv || !o || !stats) return false;
    if (w->slot != AMPCI_SLOT_ATTENTION_BW) return true;
    for (int i = 4; i < 7; i++)
        if (!buf(w, i, (size_t)n * sizeof(float))) return false;
    const ampci_kernel *r = ref_attention(); /* the backward reads the forward's statistics */
    return r && r->fn.ATTENTION(w->ctx, &w->a, o, stats) == AMPC_OK;
}

static bool prep_conv(work *w) {
    bool pool = w->slot == AMPCI_SLOT_MAXPOOL || w->slot == AMPCI_SLOT_MAXPOOL_BW;
    w->cg = pool ? (ampci_conv_geom){2, 16, 32, 32, 2, 2, 16, 16, 2, 2, 0, 0}
                 : (ampci_conv_geom){2, 16, 16, 16, 3, 3, 16, 16, 1, 1, 1, 1};
    const ampci_conv_geom *g = &w->cg;
    ampc_dtype dt = w->slot == AMPCI_SLOT_IM2COL ? (ampc_dtype)w->key : AMPC_DTYPE_F32;
    int64_t planes = g->N * g->C, rows = g->N * g->OH * g->OW, cols = g->C * g->KH * g->KW;
    int64_t in = planes * g->H * g->W, out = pool ? planes * g->OH * g->OW : rows * cols;
    bool big_in = w->slot == AMPCI_SLOT_COL2IM || w->slot == AMPCI_SLOT_MAXPOOL_BW; /* reads the small side */
    void *src = pattern(w, 0, dt, big_in ? out : in, 0.0f);
    void *dst = buf(w, 2, (size_t)(big_in ? in : out) * ampc_dtype_size(dt));
    w->arg = buf(w, 3, (size_t)(planes * g->OH * g->OW) * sizeof(int32_t));
    if (!src || !dst || !w->arg) return false;
    for (int64_t p = 0, i = 0; p < planes; p++) /* each window's top-left element: a valid argmax */
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) w->arg[i++] = (int32_t)(oh * g->sh * g->W + ow * g->sw);
    return true;
}

static bool prep_ids(work *w, int64_t n, int64_t bound) {
    w->ids = buf(w, 9, (size_t)n * sizeof(int64_t));
    for (int64_t i = 0; w->ids && i < n; i++) w->ids[i] = (int64_t)((uint64_t)i * 2654435761u % (uint64_t)bound);
    return w->ids != NULL;
}

/* The operands every other cell reads: buffers 0..8 of n values each (0.25..2.25: log, sqrt and division
 * stay finite; buffer 0 in the cell's source dtype), ids for the cells that take them. */
static bool prep_rows(work *w) {
    int64_t n = w->slot == AMPCI_SLOT_EMBEDDING_BW ? EMB_ROWS * EMB_COLS : N_ELEM;
    ampc_dtype dt = w->slot == AMPCI_SLOT_CONVERT ? (ampc_dtype)(w->key % AMPC_DTYPE_COUNT)
                    : w->slot == AMPCI_SLOT_UNSCALE || w->slot == AMPCI_SLOT_SUMSQ || w->slot == AMPCI_SLOT_COLSUM
                        ? (ampc_dtype)w->key
                        : AMPC_DTYPE_F32;
    bool ok = pattern(w, 0, dt, n, 1.25f) != NULL;
    for (int i = 1; ok && i < 9; i++) ok = fbuf(w, i, n, 1.25f) != NULL;
    if (ok && w->slot == AMPCI_SLOT_CONVERT)
        ok = buf(w, 1, (size_t)n * ampc_dtype_size((ampc_dtype)(w->key / AMPC_DTYPE_COUNT))) != NULL;
    if (ok && w->slot == AMPCI_SLOT_UNSCALE) ok = pattern(w, 1, dt, n, 1.25f) != NULL;
    if (ok && (w->slot == AMPCI_SLOT_XENT || w->slot == AMPCI_SLOT_XENT_BW)) ok = prep_ids(w, ROWS, COLS);
    if (ok && w->slot == AMPCI_SLOT_EMBEDDING_BW) ok = prep_ids(w, EMB_IDS, EMB_ROWS);
    return ok;
}

static bool prepare(void *user, ampci_slot slot, int key, const ampci_tune_shape *s) {
    work *w = user;
    w->slot = slot, w->key = key;
    if (!w->ctx && ampci_ctx_core_new(&(ampc_ctx_params){.threads = 1, .log = silent}, &w->ctx) != AMPC_OK)
        return false;
    if (ampci_gemm_cell(slot, key) >= 0) return prep_gemm(w, s);
    switch (slot) {
    case AMPCI_SLOT_ATTENTION:
    case AMPCI_SLOT_ATTENTION_BW: return prep_attention(w);
    case AMPCI_SLOT_IM2COL:
    case AMPCI_SLOT_COL2IM:
    case AMPCI_SLOT_MAXPOOL:
    case AMPCI_SLOT_MAXPOOL_BW: return prep_conv(w);
    default: return prep_rows(w);
    }
}

/* One call of a cell that is not a GEMM, attention or window op, on the buffers prep_rows wrote. */
static void run_rows(work *w, const ampci_kernel *e) {
    float *const *f = (float *const *)w->buf;
    const ampci_kernel_fn *k = &e->fn;
    switch (e->slot) {
    case AMPCI_SLOT_CONVERT: k->CONVERT(w->buf[1], w->buf[0], (size_t)N_ELEM); break;
    case AMPCI_SLOT_UNARY: k->UNARY(f[1], f[0], N_ELEM); break;
    case AMPCI_SLOT_UNARY_BW: k->UNARY_BW(f[2], f[3], f[0], f[1], N_ELEM); break;
    case AMPCI_SLOT_BINARY: k->BINARY(f[2], f[0], f[1], N_ELEM); break;
    case AMPCI_SLOT_SOFTMAX: k->SOFTMAX(f[1], f[0], ROWS, COLS, false); break;
    case AMPCI_SLOT_SOFTMAX_BW: k->SOFTMAX_BW(f[2], f[0], f[1], ROWS, COLS, false); break;
    case AMPCI_SLOT_LAYERNORM: k->LAYERNORM(f[1], f[3], f[4], f[0], f[5], f[6], ROWS, COLS, 1e-5f); break;
    case AMPCI_SLOT_LAYERNORM_BW: k->LAYERNORM_BW(f[2], f[7], f[8], f[0], f[1], f[3], f[4], f[5], ROWS, COLS); break;
    case AMPCI_SLOT_XENT: k->XENT(f[3], f[4], f[0], w->ids, ROWS, COLS, -100); break;
    case AMPCI_SLOT_XENT_BW: k->XENT_BW(f[2], f[0], f[4], w->ids, ROWS, COLS, -100, 1.0f / ROWS); break;
    case AMPCI_SLOT_EMBEDDING_BW: k->EMBEDDING_BW(f[2], f[0], w->ids, EMB_IDS, EMB_COLS, EMB_COLS); break;
    case AMPCI_SLOT_SGD:
        k->SGD(f[1], f[0], f[2], N_ELEM, &(ampci_sgd_args){1e-4f, 1e-2f, 0.9f, 0, false, false});
        break;
    case AMPCI_SLOT_ADAMW:
        k->ADAMW(f[1], f[0], f[2], f[3], N_ELEM, &(ampci_adamw_args){0.99999f, 0.9f, 0.999f, 1e-8f, 1e-4f, 0.1f});
        break;
    case AMPCI_SLOT_UNSCALE: k->UNSCALE(w->buf[1], N_ELEM, -1.0f); break; /* magnitudes stay put */
    case AMPCI_SLOT_SUMSQ: k->SUMSQ(w->buf[0], N_ELEM); break;
    case AMPCI_SLOT_COLSUM: k->COLSUM((double *)f[1], w->buf[0], COLS, ROWS, COLS); break; /* f[1]: COLS doubles */
    case AMPCI_SLOT_RANGE: {
        static const uint32_t thr[12] = {0x33000001, 0x387fc000, 0x477ff000, 0x00000001, 0x00800000, 0x7f7f8000,
                                         0x3a800001, 0x3c800000, 0x43e80001, 0x37000001, 0x38800000, 0x47700000};
        ampci_range_acc acc = {.min_bits = 0x7f800000u};
        k->RANGE(f[0], N_ELEM, thr, 12, &acc);
        break;
    }
    case AMPCI_SLOT_QUANT8: { /* E4M3 at a power-of-two scale, the BF16 bits into buffer 1 */
        float amax = 0.0f;
        k->QUANT8((uint16_t *)w->buf[1], f[0], N_ELEM, 64.0f, AMPCI_QUANT8_E4M3, &amax);
        break;
    }
    default: AMPCI_ASSERT(!"tune_work: no workload for this slot");
    }
}

/* One call; false when the kernel failed. */
static bool run(work *w, const ampci_kernel *e) {
    const ampci_kernel_fn *k = &e->fn;
    const ampci_conv_geom *g = &w->cg;
    float *const *f = (float *const *)w->buf;
    int64_t planes = g->N * g->C;
    if (ampci_gemm_cell(e->slot, ampci_kernel_key(e)) >= 0) return k->GEMM(w->ctx, &w->g) == AMPC_OK;
    switch (e->slot) {
    case AMPCI_SLOT_ATTENTION: return k->ATTENTION(w->ctx, &w->a, f[2], f[3]) == AMPC_OK;
    case AMPCI_SLOT_ATTENTION_BW: return k->ATTENTION_BW(w->ctx, &w->a, f[3], w->buf[0], f[4], f[5], f[6]) == AMPC_OK;
    case AMPCI_SLOT_IM2COL: k->IM2COL(w->buf[2], w->buf[0], g, 0, g->N * g->OH * g->OW); return true;
    case AMPCI_SLOT_COL2IM: k->COL2IM(f[2], f[0], g, 0, planes); return true;
    case AMPCI_SLOT_MAXPOOL: k->MAXPOOL(f[2], w->arg, f[0], g, 0, planes); return true;
    case AMPCI_SLOT_MAXPOOL_BW: k->MAXPOOL_BW(f[2], f[0], w->arg, g, 0, planes); return true;
    default: run_rows(w, e); return true;
    }
}

double ampci_tune_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double time_one(void *user, const ampci_kernel *e) {
    double t0 = ampci_tune_now();
    bool ok = run(user, e);
    double t = ampci_tune_now() - t0;
    return ok ? t : -1.0;
}

static void done(void *user) {
    work *w = user;
    for (int i = 0; i < NBUF; i++) free(w->buf[i]), w->buf[i] = NULL, w->size[i] = 0;
    for (int m = 0; m < 2; m++) free(w->master[m]), w->master[m] = NULL, w->master_n[m] = 0;
    w->gemm_n = 0;
}

ampc_status ampci_tune_work_new(ampci_tune_ops *out) {
    work *w = calloc(1, sizeof *w); /* the scratch context comes with the first shape: a cached run needs none */
    if (!w) return AMPC_STATUS_OOM;
    *out = (ampci_tune_ops){prepare, time_one, done, w};
    return AMPC_OK;
}

void ampci_tune_work_free(ampci_tune_ops *ops) {
    work *w = ops->user;
    if (!w) return;
    done(w);
    if (w->ctx) ampci_ctx_core_free(w->ctx);
    free(w);
    ops->user = NULL;
}
