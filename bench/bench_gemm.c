/* bench_gemm.c: times the GEMM kernels of the registry directly, every candidate dispatch chose among at
 * the process's level, the one it runs for each shape's size class marked (not through ampc_matmul, so neither the op
 * layer's output conversion nor its allocation is counted) on squares and on the GEMMs of one
 * training step of the default GPT (6 layers, d 384, 4x MLP, vocab 256, batch 8 x context 256 = 2048
 * tokens): the four forward projections and the LM head, plus a weight-gradient shape (a transposed).
 * Operands are normal random values (no subnormals or specials: those take exact slow paths by design
 * and are the tests' business). Before timing, each kernel is checked on a small odd shape against the
 * reference entry of its cell (the ref GEMM, or the split oracle for the split F32 kernels).
 *
 * Packing: each kernel family's packing of one operand alone (ampci_gemm_packer, kernels/driver_util.h),
 * on one thread, for the four ways an operand is stored (A: a (M, K), A^T: a (K, M), B: b (K, N), B^T:
 * b (N, K); square, min(max_square, 1024) on a side, so the operand is L3-resident as in the GEMMs above),
 * in GB/s of bytes read + written, next to memcpy of the packed size on the same thread. */
#include "bench_gemm.h"

#include "kernels/amx/gemm_amx.h"
#include "kernels/avx512/kernels_avx512.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
    const char *name;
    int64_t m, n, k;
    bool ta;
} shape;

/* The GEMMs of the default GPT's step (tokens x in -> out), from ampc_model_config's defaults. */
static const shape gpt_shapes[] = {
    {"gpt qkv", 2048, 1152, 384, false}, {"gpt proj", 2048, 384, 384, false},    {"gpt fc", 2048, 1536, 384, false},
    {"gpt fc2", 2048, 384, 1536, false}, {"gpt lm head", 2048, 256, 384, false}, {"gpt fc dW", 1536, 384, 2048, true},
};

/* One GEMM kernel to time: a candidate of one of the GEMM cells. */
typedef struct slot {
    const ampci_kernel *e;
} slot;

/* The GEMM cells in the order they are reported: F32, BF16, F16, then the split F32 ones. */
static const struct {
    ampci_slot slot;
    int key;
} gemm_cells[] = {
    {AMPCI_SLOT_GEMM, AMPC_DTYPE_F32}, {AMPCI_SLOT_GEMM, AMPC_DTYPE_BF16}, {AMPCI_SLOT_GEMM, AMPC_DTYPE_F16},
    {AMPCI_SLOT_GEMM_F32_BF16X1, 0},   {AMPCI_SLOT_GEMM_F32_BF16X3, 0},
};

/* Every candidate of every GEMM cell at the process's chosen level (what dispatch chose among), each
 * cell's highest level first. */
static int slots_of(const struct ampc_kernels *k, slot *out, int max) {
    int n = 0;
    for (size_t c = 0; c < sizeof gemm_cells / sizeof gemm_cells[0]; c++) {
        const ampci_kernel *cand[16];
        size_t nc = ampci_candidates(k->isa, gemm_cells[c].slot, gemm_cells[c].key, cand, 16);
        for (size_t i = nc < 16 ? nc : 16; i-- > 0 && n < max;) out[n++] = (slot){cand[i]};
    }
    return n;
}

/* n normal values in dtype (through F32, rounded once). */
static void *operand(ampc_ctx *ctx, ampc_dtype dt, int64_t n, uint64_t stream) {
    float *f = malloc((size_t)n * sizeof *f);
    void *p = bench_alloc((size_t)n * ampc_dtype_size(dt));
    if (!f || !p) return free(f), bench_free(p), NULL;
    ampc_rng r = *ampc_ctx_rng(ctx);
    r.stream = stream;
    ampc_rng_normal(&r, f, n, 0.0f, 1.0f);
    ampc_convert(p, dt, f, AMPC_DTYPE_F32, (size_t)n);
    free(f);
    return p;
}

/* The kernel's result on a 67 x 45 x 129 product agrees with the reference within twice the F32
 * summation bound K u sum|a||b| (products are exact in every kernel; only sums round). */
static bool check(ampc_ctx *ctx, const slot *s) {
    enum { M = 67, N = 45, K = 129 };
    ampc_dtype dt = s->e->dtype;
    void *a = operand(ctx, dt, M * K, 101), *b = operand(ctx, dt, K * N, 102);
    float *c = malloc(sizeof(float) * M * N), *r = malloc(sizeof(float) * M * N);
    float *fa = malloc(sizeof(float) * M * K), *fb = malloc(sizeof(float) * K * N);
    bool ok = a && b && c && r && fa && fb;
    ampci_gemm g = {M, N, K, a, K, false, b, N, false, c, N, 0.0f, NULL, NULL, AMPC_DTYPE_F32}, gr = g;
    gr.c = r;
    ok = ok && s->e->fn.GEMM(ctx, &g) == AMPC_OK;
    ok = ok && ampci_kernel_ref(s->e)->fn.GEMM(ctx, &gr) == AMPC_OK; /* the cell's ref: split ones too */
    if (ok) {
        ampc_convert(fa, AMPC_DTYPE_F32, a, dt, M * K);
        ampc_convert(fb, AMPC_DTYPE_F32, b, dt, K * N);
    }
    for (int64_t i = 0; ok && i < M * N; i++) {
        double mag = 0;
        for (int64_t k = 0; k < K; k++) mag += fabs((double)fa[i / N * K + k] * fb[k * N + i % N]);
        ok = fabs((double)c[i] - r[i]) <= 2.0 * K * 0x1p-24 * mag;
    }
    bench_free(a), bench_free(b), free(c), free(r), free(fa), free(fb);
    return ok;
}

typedef struct gemm_job {
    ampc_ctx *ctx;
    ampc_k_gemm_fn fn;
    ampci_gemm g;
} gemm_job;

static void gemm_once(void *arg) {
    gemm_job *j = arg;
    j->fn(j->ctx, &j->g);
}

static ampc_status time_one(ampc_ctx *ctx, const slot *s, const shape *sh, bench_gemm_row *row) {
    void *a = operand(ctx, s->e->dtype, sh->m * sh->k, 1), *b = operand(ctx, s->e->dtype, sh->k * sh->n, 2);
    float *c = bench_alloc((size_t)(sh->m * sh->n) * sizeof(float));
    if (!a || !b || !c) return bench_free(a), bench_free(b), bench_free(c), AMPC_STATUS_OOM;
    ampci_gemm g = {sh->m, sh->n, sh->k, a,    sh->ta ? sh->m : sh->k, sh->ta, b, sh->n, false, c,
                    sh->n, 0.0f,  NULL,  NULL, AMPC_DTYPE_F32};
    gemm_job j = {ctx, s->e->fn.GEMM, g};
    row->t = bench_time(gemm_once, &j, &(bench_repeat){.min_runs = 3, .min_seconds = 0.2});
    row->gflops = 2.0 * (double)sh->m * (double)sh->n * (double)sh->k / row->t.median_s / 1e9;
    bench_free(a), bench_free(b), bench_free(c);
    return AMPC_OK;
}

/* A peak probe that another process slowed down reads low, and a kernel then seems to beat the hardware.
 * The peaks are probed again after the kernels and the higher reading of each unit kept; a row still above
 * its unit's peak is flagged rather than printed as more than 100%. */
static ampc_status settle_peaks(int threads, bench_gemm_report *out) {
    bench_peaks again;
    ampc_status st = bench_peak_measure(threads, &again);
    if (st != AMPC_OK) return st;
    bench_peaks *p = &out->peaks;
    p->fma32 = p->fma32 > again.fma32 ? p->fma32 : again.fma32;
    p->bf16dp = p->bf16dp > again.bf16dp ? p->bf16dp : again.bf16dp;
    p->amx = p->amx > again.amx ? p->amx : again.amx;
    for (size_t i = 0; i < out->nrows; i++) {
        bench_gemm_row *r = &out->rows[i];
        r->peak_gflops = bench_peak_for(p, r->kernel, &r->peak_kind);
        r->peak_fraction = r->peak_gflops > 0 ? r->gflops / r->peak_gflops : 0;
        r->above_peak = r->peak_fraction > 1.0;
    }
    return AMPC_OK;
}

/* ---- packing ---- */

typedef struct pack_job {
    const ampci_gemm_packer *p;
    ampci_gemm g;
    bool is_b;
    void *scratch;
} pack_job;

static void pack_once(void *arg) {
    pack_job *j = arg;
    j->p->pack(&j->g, j->is_b, j->scratch);
}

/* Memcpy GB/s per packed size, measured once per size. */
typedef struct memcpy_cache {
    size_t bytes[8];
    double gbps[8];
    int n;
} memcpy_cache;

static double memcpy_for(memcpy_cache *m, size_t bytes) {
    for (int i = 0; i < m->n; i++)
        if (m->bytes[i] == bytes) return m->gbps[i];
    double g = bench_memcpy_gbps(bytes);
    if (m->n < 8) m->bytes[m->n] = bytes, m->gbps[m->n++] = g;
    return g;
}

static const char *const pack_operands[4] = {"A", "A^T", "B", "B^T"};

static ampc_status time_pack(ampc_ctx *ctx, const ampci_gemm_packer *p, int which, int64_t S, memcpy_cache *mc,
                             bench_pack_row *row) {
    bool is_b = which >= 2, t = which & 1;
    void *src = operand(ctx, p->dtype, S * S, 3);
    ampci_gemm g = {S, S, S, src, S, !is_b && t, src, S, is_b && t, NULL, S, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
    pack_job j = {p, g, is_b, NULL};
    size_t bytes = p->bytes(&g, is_b);
    j.scratch = bench_alloc(bytes);
    if (!src || !j.scratch) return bench_free(src), bench_free(j.scratch), AMPC_STATUS_OOM;
    *row = (bench_pack_row){.packer = p->name,
                            .dtype = p->dtype,
                            .operand = pack_operands[which],
                            .rows = S,
                            .cols = S,
                            .src_bytes = (size_t)(S * S) * ampc_dtype_size(p->dtype),
                            .packed_bytes = p->packed(&g, is_b)};
    row->t = bench_time(pack_once, &j, &(bench_repeat){.min_runs = 5, .min_seconds = 0.1});
    row->gbps = (double)(row->src_bytes + row->packed_bytes) / row->t.median_s * 1e-9;
    row->memcpy_gbps = memcpy_for(mc, row->packed_bytes);
    row->fraction_of_memcpy = row->memcpy_gbps > 0 ? row->gbps / row->memcpy_gbps : 0;
    bench_free(src), bench_free(j.scratch);
    return AMPC_OK;
}

/* The packers of the folders this process's level runs (and whose extra CPU feature is here). */
static int packers_of(ampc_isa level, const ampci_gemm_packer **out, int max) {
    int n = 0;
    for (size_t i = 0; level >= AMPC_ISA_AVX512 && i < ampci_gemm_packers_avx512_count && n < max; i++) {
        const ampci_gemm_packer *p = &ampci_gemm_packers_avx512[i];
        if (p->need == AMPC_CPU_FEATURE_COUNT || ampc_cpu_has(p->need)) out[n++] = p;
    }
    for (size_t i = 0; level >= AMPC_ISA_AMX && i < ampci_gemm_packers_amx_count && n < max; i++)
        out[n++] = &ampci_gemm_packers_amx[i];
    return n;
}

static ampc_status bench_packs(ampc_ctx *ctx, const bench_gemm_params *p, ampc_isa level, bench_gemm_report *out) {
    const ampci_gemm_packer *ps[32];
    int np = packers_of(level, ps, 32);
    int64_t S = p->max_square && p->max_square < 1024 ? p->max_square : 1024;
    out->packs = calloc((size_t)np * 4 + 1, sizeof *out->packs);
    if (!out->packs) return AMPC_STATUS_OOM;
    memcpy_cache mc = {.n = 0};
    ampc_status st = AMPC_OK;
    for (int i = 0; i < np && st == AMPC_OK; i++)
        for (int w = 0; w < 4 && st == AMPC_OK; w++) {
            if (p->progress) p->progress(p->user, (int)out->npacks, np * 4, ps[i]->name);
            if ((st = time_pack(ctx, ps[i], w, S, &mc, &out->packs[out->npacks])) == AMPC_OK) out->npacks++;
        }
    return st;
}

ampc_status bench_gemm_run(const bench_gemm_params *p, bench_gemm_report *out) {
    memset(out, 0, sizeof *out);
    ampc_status st = bench_peak_measure(p->threads, &out->peaks);
    ampc_ctx *ctx;
    if (st != AMPC_OK || (st = ampc_ctx_new(&(ampc_ctx_params){.threads = p->threads, .seed = 7}, &ctx)) != AMPC_OK)
        return st;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    out->level = k->isa;
    shape shapes[16];
    int nsh = 0;
    for (int64_t s = 256; s <= (p->max_square ? p->max_square : 2048); s *= 2)
        shapes[nsh++] = (shape){"square", s, s, s, false};
    for (size_t i = 0; !p->no_gpt && i < sizeof gpt_shapes / sizeof gpt_shapes[0]; i++) shapes[nsh++] = gpt_shapes[i];
    slot slots[32];
    int ns = slots_of(k, slots, 32);
    out->rows = calloc((size_t)(ns * nsh), sizeof *out->rows);
    if (!out->rows) return ampc_ctx_free(ctx), AMPC_STATUS_OOM;
    for (int i = 0; i < ns && st == AMPC_OK; i++) {
        bool ok = check(ctx, &slots[i]);
        for (int s = 0; s < nsh && st == AMPC_OK; s++) {
            bench_gemm_row *r = &out->rows[out->nrows];
            const shape *sh = &shapes[s];
            const ampci_kernel *e = slots[i].e;
            *r = (bench_gemm_row){.slot = ampci_cell_name(e->slot, ampci_kernel_key(e)),
                                  .kernel = e->name,
                                  .chosen = ampci_gemm_pick(k, e->slot, ampci_kernel_key(e), sh->m, sh->n, sh->k) == e,
                                  .dtype = e->dtype,
                                  .shape = sh->name,
                                  .m = sh->m,
                                  .n = sh->n,
                                  .k = sh->k,
                                  .ta = sh->ta,
                                  .threads = ampc_ctx_threads(ctx),
                                  .matches_ref = ok};
            if (p->progress) p->progress(p->user, (int)out->nrows, ns * nsh, r->kernel);
            if ((st = time_one(ctx, &slots[i], sh, r)) != AMPC_OK) break;
            r->peak_gflops = bench_peak_for(&out->peaks, r->kernel, &r->peak_kind);
            r->peak_fraction = r->peak_gflops > 0 ? r->gflops / r->peak_gflops : 0;
            out->nrows++;
        }
    }
    if (st == AMPC_OK && !p->no_pack) st = bench_packs(ctx, p, out->level, out);
    ampc_ctx_free(ctx);
    if (st == AMPC_OK) st = settle_peaks(p->threads, out);
    return st;
}

void bench_gemm_report_free(bench_gemm_report *r) {
    free(r->rows);
    free(r->packs);
    r->rows = NULL;
    r->packs = NULL;
    r->nrows = r->npacks = 0;
}
