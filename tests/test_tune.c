/* test_tune.c: kernels chosen by measurement (src/kernels/tune*.c, choices.c). The pick with injected
 * times (ties, the margin for the rule's pick, untimed candidates); the rounds with a fake timer (size
 * classes, noisy calls, a candidate that fails, one far slower that stops early and skips the large
 * shapes); the per-size dispatcher of a table; the cache file (written and read back, a corrupt or
 * foreign one ignored with a warning, concurrent first processes that all end with the one measurement);
 * the switches; this process's own choice (every chosen kernel is a candidate within the margin of the
 * fastest); and the kernels a checkpoint records, run again by a restore, with a warning for one that
 * cannot run here. */
#define _DEFAULT_SOURCE /* usleep, pread */
#include "test_dir.h"

#include "kernels/tune.h"
#include "nn/nn.h"

#include <fcntl.h>
#include <sys/wait.h>

TU_CONTEXT(3, 1)

static const ampci_kernel *K(const char *name) {
    const ampci_kernel *e = ampci_kernel_find(name);
    if (!e) FAILF("%s is not registered", name);
    return e;
}

/* ---- the pick ---- */

static void test_pick(void **state) {
    (void)state;
    int second;
    assert_int_equal(ampci_tune_pick((double[]){3, 1, 2}, 3, -1, &second), 1);
    assert_int_equal(second, 2);
    assert_int_equal(ampci_tune_pick((double[]){1, 1, 1}, 3, -1, &second), 2); /* ties: the rule's order */
    assert_int_equal(second, 1);
    assert_int_equal(ampci_tune_pick((double[]){1.00, 1.02}, 2, 1, NULL), 1);     /* within the margin */
    assert_int_equal(ampci_tune_pick((double[]){1.00, 1.05}, 2, 1, NULL), 0);     /* beyond it */
    assert_int_equal(ampci_tune_pick((double[]){INFINITY, 5}, 2, 0, &second), 1); /* untimed never wins */
    assert_int_equal(second, -1);
    assert_int_equal(ampci_tune_pick((double[]){INFINITY, INFINITY}, 2, 1, &second), -1);
    assert_int_equal(ampci_gemm_size_class(127, 128, 256), AMPCI_SIZE_SMALL); /* 2^22 - 1 */
    assert_int_equal(ampci_gemm_size_class(128, 128, 256), AMPCI_SIZE_MEDIUM);
    assert_int_equal(ampci_gemm_size_class(1024, 256, 255), AMPCI_SIZE_MEDIUM);
    assert_int_equal(ampci_gemm_size_class(1024, 256, 256), AMPCI_SIZE_LARGE);
    ampci_tune_shape sh[AMPCI_TUNE_MAX_SHAPES];
    int n = ampci_tune_shapes(AMPCI_SLOT_GEMM, AMPC_DTYPE_BF16, sh);
    for (int i = 0; i < n; i++) assert_int_equal(ampci_gemm_size_class(sh[i].m, sh[i].n, sh[i].k), sh[i].cls);
    assert_int_equal(ampci_tune_shapes(AMPCI_SLOT_SOFTMAX, 0, sh), 1);
}

/* ---- the rounds, with a fake timer ---- */

typedef struct fake {
    ampci_slot slot;
    int key, shape, n;
    const ampci_kernel *cand[4];
    double base[4][AMPCI_TUNE_MAX_SHAPES]; /* seconds per call of candidate i on shape s */
    int calls[4][AMPCI_TUNE_MAX_SHAPES];
    int fails;    /* this candidate returns -1 (or -1: none) */
    double noise; /* this fraction of calls takes 3 times as long */
    uint64_t rng;
} fake;

static bool fake_prepare(void *user, ampci_slot slot, int key, const ampci_tune_shape *s) {
    fake *f = user;
    ampci_tune_shape all[AMPCI_TUNE_MAX_SHAPES];
    int n = ampci_tune_shapes(slot, key, all);
    for (f->shape = 0; f->shape < n && (all[f->shape].m != s->m || all[f->shape].ta != s->ta); f->shape++) continue;
    return f->shape < n;
}

static double fake_time(void *user, const ampci_kernel *e) {
    fake *f = user;
    int i = 0;
    while (f->cand[i] != e) i++;
    f->calls[i][f->shape]++;
    if (i == f->fails) return -1;
    f->rng = f->rng * 6364136223846793005ull + 1442695040888963407ull;
    return f->base[i][f->shape] * ((double)(f->rng >> 40) / (1 << 24) < f->noise ? 3.0 : 1.0);
}

static ampci_cell_times fake_cell(fake *f) {
    ampci_cell_times c = {.slot = f->slot, .key = f->key, .nclass = 3, .n = f->n};
    for (int i = 0; i < f->n; i++) c.cand[i] = f->cand[i];
    return c;
}

static void run_fake(fake *f, ampci_cell_times *c) {
    static ampci_tune_times t;
    t.ncells = 1, t.cell[0] = fake_cell(f);
    ampci_tune_measure(&t, &(ampci_tune_ops){fake_prepare, fake_time, NULL, f});
    *c = t.cell[0];
}

/* A wins the small class, B the others; C fails; noise on a quarter of the calls changes nothing. */
static void test_rounds_classes(void **state) {
    (void)state;
    fake f = {AMPCI_SLOT_GEMM,
              AMPC_DTYPE_BF16,
              0,
              3,
              {K("ampc_k_gemm_bf16f32__ref"), K("ampc_k_gemm_bf16f32__avx512"), K("ampc_k_gemm_bf16f32__amx")},
              .fails = 2,
              .noise = 0.25,
              .rng = 7};
    for (int s = 0; s < 6; s++) f.base[0][s] = s < 2 ? 1e-5 : 2e-5, f.base[1][s] = s < 2 ? 2e-5 : 1e-5;
    ampci_cell_times c;
    run_fake(&f, &c);
    double col[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 3; i++) col[i] = c.sec[i][k];
        assert_int_equal(ampci_tune_pick(col, 3, 2, NULL), k == 0 ? 0 : 1);
        assert_true(isinf(c.sec[2][k]));
        assert_true(fabs(c.sec[1][k] - (k == 0 ? 4e-5 : 2e-5)) < 1e-12); /* medians: the noise is gone */
    }
    assert_int_equal(f.calls[2][0], 1); /* failed at the warm-up, never run again */
    for (int s = 1; s < 6; s++) assert_int_equal(f.calls[2][s], 0);
}

/* A candidate 1.6 times slower stops after the minimum rounds; one 20 times slower and long stops after
 * its warm-up and is not run on the larger shapes. */
static void test_rounds_drop_skip(void **state) {
    (void)state;
    fake f = {AMPCI_SLOT_GEMM,
              AMPC_DTYPE_F16,
              0,
              3,
              {K("ampc_k_gemm_f16f32__ref"), K("ampc_k_gemm_f16f32__avx512"), K("ampc_k_gemm_f16f32__amx_bf16x3")},
              .fails = -1};
    for (int s = 0; s < 6; s++) f.base[0][s] = 2e-3, f.base[1][s] = 1e-4, f.base[2][s] = 1.6e-4;
    ampci_cell_times c;
    run_fake(&f, &c);
    assert_int_equal(f.calls[0][0], 1);
    for (int s = 1; s < 6; s++) assert_int_equal(f.calls[0][s], 0);
    assert_true(c.sec[0][0] == INFINITY && c.sec[0][1] == INFINITY && c.sec[0][2] == INFINITY);
    assert_int_equal(f.calls[1][0], 1 + 15); /* warm-up, then rounds until 4 ms or 15 */
    assert_int_equal(f.calls[2][0], 1 + 3);
    assert_int_equal(f.calls[2][1], 3);
}

/* ---- a table's per-size dispatcher ---- */

static void test_sized_dispatch(void **state) {
    (void)state;
    const ampci_kernel *ref = K("ampc_k_gemm_f32f32__ref"), *fast = K("ampc_k_gemm_f32f32__avx512");
    if (!ampci_kernel_usable(fast)) return;
    struct ampc_kernels k = *g_ctx->kernels;
    const struct ampc_kernels *saved = g_ctx->kernels;
    ampci_kernels_set(&k, AMPCI_SLOT_GEMM, AMPC_DTYPE_F32, (const ampci_kernel *[]){ref, fast, fast}, AMPCI_TABLE_CTX);
    const ampci_kernel *none[3] = {NULL, NULL, NULL};
    ampci_kernels_set(&k, AMPCI_SLOT_GEMM_F32_BF16X3, 0, none, AMPCI_TABLE_CTX);
    assert_null(k.gemm_f32_bf16x3);
    assert_ptr_equal(k.chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_F32], fast); /* the large class's */
    g_ctx->kernels = &k;
    enum { M = 256, N = 96, KK = 192 }; /* medium: 2^22.2 */
    static float a[M * KK], b[KK * N], c1[M * N], c2[M * N];
    for (int i = 0; i < M * KK; i++) a[i] = (float)(i % 23 - 11) / 7.0f;
    for (int i = 0; i < KK * N; i++) b[i] = (float)(i % 19 - 9) / 5.0f;
    for (int m = 40; m <= M; m += M - 40) { /* 40 x 96 x 192: small */
        ampci_gemm g = {m, N, KK, a, KK, false, b, N, false, c1, N, 0.0f, NULL, NULL, AMPC_DTYPE_F32}, h = g;
        h.c = c2;
        const ampci_kernel *want = m == M ? fast : ref;
        assert_ptr_equal(ampci_gemm_pick(&k, AMPCI_SLOT_GEMM, AMPC_DTYPE_F32, m, N, KK), want);
        ASSERT_OK(k.gemm[AMPC_DTYPE_F32](g_ctx, &g));
        ASSERT_OK(want->fn.GEMM(g_ctx, &h));
        assert_memory_equal(c1, c2, sizeof(float) * (size_t)(m * N));
    }
    g_ctx->kernels = saved;
}

/* ---- the cache ---- */

/* Times for every measured cell: the same numbers for a seed, others for another. */
static double hashed(const ampci_kernel *e, uint64_t seed) {
    uint64_t h = seed * 0x9e3779b97f4a7c15ull;
    for (const char *p = e->name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return 1e-6 * (1 + (double)(h >> 44) / 1024.0);
}
typedef struct seeded {
    uint64_t seed;
    unsigned sleep_us;
} seeded;
static bool seeded_prepare(void *user, ampci_slot slot, int key, const ampci_tune_shape *s) {
    (void)slot, (void)key, (void)s;
    usleep(((seeded *)user)->sleep_us);
    return true;
}
static double seeded_time(void *user, const ampci_kernel *e) { return hashed(e, ((seeded *)user)->seed); }

static uint64_t times_hash(const ampci_tune_times *t) {
    uint64_t h = 1;
    for (int i = 0; i < t->ncells; i++)
        for (int j = 0; j < t->cell[i].n; j++)
            for (int k = 0; k < t->cell[i].nclass; k++) h = h * 31 + (uint64_t)(t->cell[i].sec[j][k] * 1e12);
    return h;
}

/* Runs fn with stderr going to a file; returns what it wrote. */
static const char *captured(void (*fn)(void *), void *arg) {
    static char text[4096];
    fflush(stderr);
    int saved = dup(2), fd = open(tu_path("stderr.txt"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2), close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

typedef struct load_job {
    ampci_tune_state st;
    const char *path;
    seeded timer;
} load_job;
static void load(void *arg) {
    load_job *j = arg;
    ampci_tune_cells(&j->st.times);
    ampci_tune_load(&j->st, j->path, &(ampci_tune_ops){seeded_prepare, seeded_time, NULL, &j->timer});
}

static void rewrite(const char *path, const char *from, const char *to) {
    char text[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *p = strstr(text, from);
    assert_non_null(p);
    f = fopen(path, "w");
    fprintf(f, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    fclose(f);
}

static void test_cache_file(void **state) {
    (void)state;
    char path[512], note[768];
    assert_true(ampci_tune_cache_path(tu_path("cache"), path, sizeof path, note, sizeof note));
    static load_job a, b;
    a = (load_job){.path = path, .timer = {1, 0}}, b = (load_job){.path = path, .timer = {2, 0}};
    load(&a);
    if (a.st.times.ncells == 0) return; /* a CPU without a choice anywhere */
    assert_int_equal(a.st.source, AMPCI_TUNE_FROM_MEASURED);
    assert_true(a.st.written);
    load(&b); /* another seed would measure otherwise: it reads a's file */
    assert_int_equal(b.st.source, AMPCI_TUNE_FROM_CACHE);
    for (int i = 0; i < a.st.times.ncells; i++)
        for (int j = 0; j < a.st.times.cell[i].n; j++)
            for (int k = 0; k < a.st.times.cell[i].nclass; k++)
                if (b.st.times.cell[i].sec[j][k] != a.st.times.cell[i].sec[j][k])
                    FAILF("%s %d %d: %g vs %g", ampci_cell_name(a.st.times.cell[i].slot, a.st.times.cell[i].key), j, k,
                          a.st.times.cell[i].sec[j][k], b.st.times.cell[i].sec[j][k]);
    static const char *const edits[][3] = {
        {"version ", "version 0.", "another ampc version"},
        {"\nend ", "\nend 1", "corrupt"},
        {"gemm_f32 ", "gemm_f33 ", "corrupt"},
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        rewrite(path, edits[e][0], edits[e][1]);
        ampci_tune_cells(&b.st.times);
        assert_false(ampci_tune_cache_read(path, &b.st.times, note, sizeof note));
        if (!strstr(note, edits[e][2])) FAILF("edit %zu: note \"%s\"", e, note);
        b.timer.seed = 3 + e;
        const char *err = captured(load, &b); /* warns, measures again, rewrites */
        if (!strstr(err, "warning: kernel cache") || !strstr(err, "ignored")) FAILF("edit %zu: stderr \"%s\"", e, err);
        assert_int_equal(b.st.source, AMPCI_TUNE_FROM_MEASURED);
        assert_true(b.st.written);
    }
    b.st.cache = AMPCI_CACHE_REFRESH, b.timer.seed = 9;
    load(&b);
    assert_int_equal(b.st.source, AMPCI_TUNE_FROM_MEASURED);
    unlink(path), unlink(tu_path("cache/stderr")), rmdir(tu_path("cache"));
}

/* Four processes start on an empty cache at once: one measures, the others wait for its file. */
static void test_cache_concurrent(void **state) {
    (void)state;
    char path[512], note[768];
    assert_true(ampci_tune_cache_path(tu_path("conc"), path, sizeof path, note, sizeof note));
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    enum { KIDS = 4 };
    for (int i = 0; i < KIDS; i++) {
        if (fork() != 0) continue;
        static load_job j;
        j = (load_job){.path = path, .timer = {100 + (uint64_t)i, 500}};
        load(&j);
        uint64_t msg[2] = {j.st.source, times_hash(&j.st.times)};
        _exit(write(fds[1], msg, sizeof msg) == sizeof msg ? 0 : 1);
    }
    close(fds[1]);
    int measured = 0;
    uint64_t first = 0, msg[2];
    for (int i = 0; i < KIDS; i++) {
        assert_int_equal(read(fds[0], msg, sizeof msg), sizeof msg);
        measured += msg[0] == AMPCI_TUNE_FROM_MEASURED;
        if (i == 0) first = msg[1];
        assert_true(msg[1] == first); /* every process has the same times, so the same choices */
    }
    close(fds[0]);
    for (int i = 0; i < KIDS; i++) wait(NULL);
    assert_int_equal(measured, 1);
    char lock[600];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path), unlink(lock), rmdir(tu_path("conc"));
}

static void test_switches(void **state) {
    (void)state;
    ampci_tune_mode m;
    ampci_tune_cache c;
    assert_true(ampci_tune_parse_mode(NULL, &m) && m == AMPCI_TUNE_MEASURE);
    assert_true(ampci_tune_parse_mode("", &m) && m == AMPCI_TUNE_MEASURE);
    assert_true(ampci_tune_parse_mode("measure", &m) && m == AMPCI_TUNE_MEASURE);
    assert_true(ampci_tune_parse_mode("rule", &m) && m == AMPCI_TUNE_RULE);
    assert_false(ampci_tune_parse_mode("fast", &m));
    assert_int_equal(m, AMPCI_TUNE_MEASURE);
    assert_true(ampci_tune_parse_cache(NULL, &c) && c == AMPCI_CACHE_ON);
    assert_true(ampci_tune_parse_cache("off", &c) && c == AMPCI_CACHE_OFF);
    assert_true(ampci_tune_parse_cache("refresh", &c) && c == AMPCI_CACHE_REFRESH);
    assert_false(ampci_tune_parse_cache("yes", &c));
    assert_int_equal(c, AMPCI_CACHE_ON);
}

/* ---- this process's choice ---- */

/* Every cell with a choice runs the pick of its times: a candidate of its level within the margin of the
 * fastest candidate timed (what makes a chosen kernel never more than a few percent slower). */
static void test_process_choice(void **state) {
    (void)state;
    const ampci_tune_state *st = ampci_tune();
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    ampc_kernel_tuning t;
    ampc_kernel_get_tuning(&t);
    printf("  kernel choice: %s (%s), %d rows, %.3f s\n", t.mode, t.source, t.choices, t.seconds);
    ampc_kernel_choice ch;
    for (int i = 0; ampc_kernel_get_choice(i, &ch); i++) {
        ampci_slot slot = AMPCI_SLOT_COUNT;
        int key = 0, cls = ch.size_class[0] == 'm' ? 1 : ch.size_class[0] == 'l' ? 2 : 0;
        for (size_t n, e = 0; e < (ampci_registry(&n), n); e++) {
            const ampci_kernel *x = ampci_registry(&n)[e];
            if (!strcmp(ampci_cell_name(x->slot, ampci_kernel_key(x)), ch.slot))
                slot = x->slot, key = ampci_kernel_key(x);
        }
        const ampci_kernel *run = ampci_gemm_pick(k, slot, key, cls == 2 ? 1024 : cls ? 256 : 16, 256, 256);
        assert_string_equal(run ? run->name : "-", ch.kernel);
        if (st->mode == AMPCI_TUNE_RULE || !ch.runner_up) continue;
        if (ch.seconds > (1 + AMPCI_TUNE_MARGIN) * ch.runner_up_seconds * (1 + 1e-9))
            FAILF("%s %s: %s %.3g s, but %s %.3g s", ch.slot, ch.size_class, ch.kernel, ch.seconds, ch.runner_up,
                  ch.runner_up_seconds);
        if (run) assert_true(run->level <= k->isa && ampci_kernel_usable(run) && run->role == AMPCI_ROLE_KERNEL);
    }
}

/* ---- the kernels a checkpoint records ---- */

static char g_warned[4096];
static void catch_log(void *user, ampc_log_level level, const char *message) {
    (void)user;
    size_t n = strlen(g_warned);
    if (level == AMPC_LOG_WARN) snprintf(g_warned + n, sizeof g_warned - n, "%s\n", message);
}

static ampc_ctx *ctx_at(ampc_isa isa) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1, .isa = isa, .log = catch_log}, &ctx));
    return ctx;
}

static ampc_model *gpt(ampc_ctx *ctx) {
    ampc_model *m;
    ampc_model_config c = {.kind = AMPC_MODEL_GPT, .layers = 1, .d_model = 16, .heads = 2, .context = 8, .seed = 5};
    ASSERT_OK(ampc_model_new(ctx, &c, &m));
    return m;
}

static const char *recorded(const char *path) {
    static char v[8192];
    ampc_safetensors *ck;
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    const char *s = ampc_safetensors_metadata(ck, "ampc.kernels");
    snprintf(v, sizeof v, "%s", s ? s : "(none)");
    ampc_safetensors_free(ck);
    return v;
}

static const char *format(const ampc_ctx *ctx) {
    static char v[8192];
    ampci_kernels_format(ctx, v, sizeof v);
    return v;
}

/* Restores path into a GPT of ctx (the kernels stay with ctx). */
static void restore(ampc_ctx *ctx, const char *path) {
    ampc_safetensors *ck;
    ampc_model *m = gpt(ctx);
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    ASSERT_OK(ampc_checkpoint_restore(ck, &(ampc_checkpoint_state){.model = m}));
    ampc_safetensors_free(ck);
    ampc_model_free(m);
}

/* A copy of the checkpoint without ampc.kernels (as ampc 0.2.0 and earlier wrote them). */
static void without_kernels(const char *from, const char *to) {
    ampc_safetensors *ck;
    ampc_safetensors_writer *w;
    ASSERT_OK(ampc_safetensors_read(from, &ck));
    ASSERT_OK(ampc_safetensors_writer_new(&w));
    for (int i = 0; i < ampc_safetensors_count(ck); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(ck, i);
        ASSERT_OK(ampc_safetensors_add(w, t->name, t->dtype, t->ndim, t->shape, t->data));
    }
    const char *key, *value;
    for (int i = 0; ampc_safetensors_metadata_at(ck, i, &key, &value) == AMPC_OK; i++)
        if (strcmp(key, "ampc.kernels") && strcmp(key, "ampc.payload_crc32"))
            ASSERT_OK(ampc_safetensors_set_metadata(w, key, value));
    ASSERT_OK(ampc_safetensors_set_checksum_key(w, "ampc.payload_crc32"));
    ASSERT_OK(ampc_safetensors_write(w, to));
    ampc_safetensors_writer_free(w);
    ampc_safetensors_free(ck);
}

/* F32 matmul bits of a context (the GEMM its table runs for a small product). */
static void matmul_bits(ampc_ctx *ctx, float *out) {
    ampc_tensor *a = ampc_tensor_zeros(ctx, AMPC_DTYPE_F32, SHAPE(9, 33)),
                *b = ampc_tensor_zeros(ctx, AMPC_DTYPE_F32, SHAPE(33, 7));
    float *pa = ampc_tensor_data(a), *pb = ampc_tensor_data(b);
    for (int i = 0; i < 9 * 33; i++) pa[i] = (float)(i % 17 - 8) / 3.0f;
    for (int i = 0; i < 33 * 7; i++) pb[i] = (float)(i % 13 - 6) / 7.0f;
    ampc_tensor *c = ampc_matmul(ctx, a, b, 0);
    assert_non_null(c);
    memcpy(out, ampc_tensor_data(c), sizeof(float) * 9 * 7);
}

static void test_checkpoint_kernels(void **state) {
    (void)state;
    ampc_ctx *a = ctx_at(AMPC_ISA_AUTO), *b = ctx_at(AMPC_ISA_AUTO), *c = ctx_at(AMPC_ISA_AUTO),
             *r = ctx_at(AMPC_ISA_REF);
    struct ampc_kernels *own;
    g_warned[0] = '\0';
    /* a runs the ref F32 GEMM and softmax (the process runs faster ones unless capped at ref) */
    ASSERT_OK(
        ampci_kernels_recorded(a, "test", "gemm_f32=ampc_k_gemm_f32f32__ref;softmax=ampc_k_softmax_f32__ref", &own));
    bool differs = own != NULL;
    if (own) ampci_kernels_adopt(a, own);
    assert_string_equal(g_warned, "");
    char path[512], old[512];
    snprintf(path, sizeof path, "%s", tu_path("k.st"));
    snprintf(old, sizeof old, "%s", tu_path("old.st"));
    ampc_model *m = gpt(a);
    ASSERT_OK(ampc_checkpoint_save(path, &(ampc_checkpoint_state){.model = m}));
    ampc_model_free(m);
    assert_string_equal(recorded(path), format(a));
    restore(b, path); /* b runs what a ran */
    assert_string_equal(format(b), format(a));
    assert_string_equal(g_warned, "");
    assert_true(differs == (b->kernels != ampci_kernels(AMPC_ISA_AUTO)));
    if (differs)
        assert_string_equal(b->kernels->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_F32]->name, "ampc_k_gemm_f32f32__ref");
    float x[63], y[63];
    matmul_bits(a, x), matmul_bits(b, y);
    assert_memory_equal(x, y, sizeof x);
    /* a checkpoint without the key (older versions) leaves the context's kernels as they are */
    without_kernels(path, old);
    restore(b, old), restore(c, old);
    assert_string_equal(format(b), format(a));
    assert_ptr_equal(c->kernels, ampci_kernels(AMPC_ISA_AUTO));
    /* capped at ref, the higher levels' kernels warn and the context keeps its own */
    restore(r, path);
    assert_ptr_equal(r->kernels, ampci_kernels(AMPC_ISA_REF));
    bool capped = ampci_kernels(AMPC_ISA_AUTO)->isa > AMPC_ISA_REF && ampci_kernels_format(a, NULL, 0) > 0;
    if (capped && (!strstr(g_warned, "of the recorded kernels cannot run here (the first: ") ||
                   !strstr(g_warned, ": above the context's kernel level)")))
        FAILF("capped restore: warnings \"%s\"", g_warned);
    /* unknown names warn; what can run is applied */
    g_warned[0] = '\0';
    ASSERT_OK(ampci_kernels_recorded(
        c, "x.st", "gemm_bf16=ampc_k_gemm_bf16f32__nonexistent;no_cell=x;softmax=ampc_k_softmax_f32__ref", &own));
    if (strcmp(g_warned, "x.st: 2 of the recorded kernels cannot run here (the first: "
                         "ampc_k_gemm_bf16f32__nonexistent for gemm_bf16: this build has no such kernel); this "
                         "context's own choice runs instead, so results may differ in their last bits from the "
                         "recorded run\n") != 0)
        FAILF("warnings \"%s\"", g_warned);
    const struct ampc_kernels *k = own ? own : c->kernels;
    assert_string_equal(k->chosen[AMPCI_SLOT_SOFTMAX][0]->name, "ampc_k_softmax_f32__ref");
    assert_ptr_equal(k->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_BF16], c->kernels->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_BF16]);
    free(own);
    ampc_ctx_free(a), ampc_ctx_free(b), ampc_ctx_free(c), ampc_ctx_free(r);
}

static int group_setup(void **state) {
    tu_dir_make("tune");
    return setup(state);
}
static int group_teardown(void **state) {
    tu_dir_remove();
    return teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_rounds_classes),
        cmocka_unit_test(test_rounds_drop_skip),
        cmocka_unit_test(test_sized_dispatch),
        cmocka_unit_test(test_cache_file),
        cmocka_unit_test(test_cache_concurrent),
        cmocka_unit_test(test_switches),
        cmocka_unit_test(test_process_choice),
        cmocka_unit_test(test_checkpoint_kernels),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
