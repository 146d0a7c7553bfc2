/* test_dist_train.c: data-parallel training (src/dist) under mpirun (tests/dist_api.cmake: 2 ranks; 3 for the
 * cases that depend on the world size; the found-inf case again with the agreement switched off, where the
 * ranks must then decide differently). It checks that a data-parallel AdamW step on each rank's half of a
 * batch equals bit for bit one process applying the documented reduction arithmetic (pre-division by f = 2,
 * reduce-dtype roundings) to the halves' gradients, and within a tolerance one process on the whole batch, for
 * F32/BF16/F16 reductions, sharded (ZeRO-1) or not, at several bucket sizes; reductions started inside the
 * backward, a second backward refused; unused parameters left alone; ZeRO-1's state split; found-inf agreement
 * when only the rank owning a slice sees the inf; FP16 reductions without overflow; uneven shards weighted to
 * the whole-batch mean; one checkpoint from a sharded run equal to the unsharded run's, resumable. The
 * communication layer is test_dist.c; the shared harness dist_test_util.h. */
#include "dist_test_util.h"
#include "test_dir.h"

#include "autograd/autograd.h" /* internal: the grad-ready listeners */
#include "dist/dist.h"         /* internal: launched buckets, owned ranges */

enum { B = 8, STEPS = 3 };
static float g_x[STEPS][B * IN]; /* the global batch of each step, the same on every rank */
static int64_t g_y[STEPS][B];

/* ---- data, steps of a replica, and the reduction arithmetic ---- */

/* v rounded to dt (F32: unchanged), through ampc_convert. */
static float rnd(float v, ampc_dtype dt) {
    uint16_t h;
    if (dt == F32) return v;
    ampc_convert(&h, dt, &v, F32, 1);
    ampc_convert(&v, F32, &h, dt, 1);
    return v;
}
/* Forward and backward on rows [first, first + rows) of step t's batch (mean cross-entropy). */
static void rep_backward(replica *r, int t, int64_t first, int64_t rows) {
    ampc_tensor *x = ampc_tensor_from_buffer(r->ctx, F32, 2, (int64_t[]){rows, IN}, g_x[t] + first * IN, F32);
    ampc_tensor *y = ampc_tensor_from_buffer(r->ctx, AMPC_DTYPE_I64, 1, (int64_t[]){rows}, g_y[t] + first,
                                             AMPC_DTYPE_I64);
    ampc_tensor *loss = ampc_model_loss(r->m, x, y);
    if (!loss) FAILF("loss: %s", ampc_last_error());
    ASSERT_OK(ampc_backward(r->ctx, loss));
}
static void rep_end_step(replica *r) { ampc_optim_zero_grad(r->opt), ampc_ctx_step_end(r->ctx); }
static void my_rows(int64_t batch, int64_t *first, int64_t *rows) {
    ampc_loader_shard_rows(batch, g_rank, g_size, first, rows);
}

static void write_grads(ampc_model *m, const float *in) {
    for (int i = 0; i < ampc_model_num_params(m); i++) {
        ampc_tensor *p = ampc_model_param(m, i);
        ASSERT_OK(ampc_tensor_copy_from(ampc_tensor_grad(p), in, F32));
        in += ampc_tensor_numel(p);
    }
}
/* Which elements (model order) this rank's optimizer owns: all unless sharded. */
static void owned_mask(const replica *r, bool *own) {
    for (int j = 0; j < ampc_model_num_params(r->m); j++) {
        const ampc_tensor *p = ampc_model_param(r->m, j);
        const ampci_param *pp = NULL;
        for (int i = 0; i < r->opt->n; i++)
            if (r->opt->params[i].p == p) pp = &r->opt->params[i];
        assert_non_null(pp);
        for (int64_t k = 0; k < pp->n; k++) *own++ = k >= pp->lo && k < pp->hi;
    }
}
/* What ampc.h says two ranks' reduction makes of gradients g0, g1: each multiplied by w_r / f (f = 2) and
 * rounded to the reduce dtype, summed in F32 and rounded once to it, multiplied by f / N = 1, rounded to the
 * gradient's dtype. */
static float reduce2(float g0, float g1, ampc_dtype rd, ampc_dtype gd) {
    float a = rnd(g0 * 0.5f, rd), b = rnd(g1 * 0.5f, rd);
    return rnd(rnd(a + b, rd) * 1.0f, gd);
}

/* ---- 1. data-parallel steps against one process ---- */

/* r's gradients become what the reduction should make of step t's two halves (e, too). */
static void reduced_grads(replica *r, int t, ampc_dtype rd, ampc_dtype pdt, float *e) {
    static float g[2][NP];
    for (int q = 0; q < 2; q++) {
        if (q) ampc_optim_zero_grad(r->opt);
        rep_backward(r, t, q * B / 2, B / 2);
        read_all(r->m, true, g[q]);
    }
    for (int i = 0; i < NP; i++) e[i] = reduce2(g[0][i], g[1][i], rd, pdt);
    write_grads(r->m, e);
}

typedef struct ddp_cfg {
    ampc_dtype rd, pdt;
    ampc_dist_shard shard;
    int64_t bucket;
} ddp_cfg;

/* Against the whole batch: the largest gradient error relative to the largest gradient; the largest
 * parameter error relative to 1 + |p|, and its root mean square. */
typedef struct ddp_tol {
    double g, p, rms;
} ddp_tol;

/* STEPS AdamW steps, gradients clipped, three ways: attached (this rank's half of each batch); one process
 * applying reduce2 to the two halves' gradients (the same gradients and parameters bit for bit, the same
 * clipping norm); one process on the whole batch (within tol; gradients of the first step, where all three
 * start from the same parameters). final: the parameters. */
static void run_ddp(ddp_cfg c, ddp_tol tol, float *final, ampc_dist_stats *stats) {
    static float e[NP], ga[NP], gw[NP], pr[NP], pw[NP];
    static bool own[NP];
    replica a = rep_new(c.pdt), r = rep_new(c.pdt), w = rep_new(c.pdt);
    rep_attach(&a, c.rd, c.shard, c.bucket);
    owned_mask(&a, own);
    int64_t first, rows, exact_miss = -1;
    my_rows(B, &first, &rows);
    double gerr = 0, gmax = 0, norm_err = 0;
    for (int t = 0; t < STEPS; t++) {
        reduced_grads(&r, t, c.rd, c.pdt, e);
        rep_backward(&w, t, 0, B), read_all(w.m, true, gw);
        rep_backward(&a, t, first, rows);
        ASSERT_OK(ampc_dist_sync_grads(g_d));
        read_all(a.m, true, ga);
        double na, nr, nw; /* clipped to 0.1 (every norm here is above): sharded, the norm is agreed */
        ASSERT_OK(ampc_clip_grad_norm(a.opt, 0.1, &na));
        ASSERT_OK(ampc_clip_grad_norm(r.opt, 0.1, &nr));
        ASSERT_OK(ampc_clip_grad_norm(w.opt, 0.1, &nw));
        norm_err = fmax(norm_err, fabs(na - nr) / nr + (nr < 0.1));
        ASSERT_OK(ampc_optim_step(a.opt));
        ASSERT_OK(ampc_optim_step(r.opt));
        ASSERT_OK(ampc_optim_step(w.opt));
        for (int i = 0; i < NP; i++) {
            if (own[i] && memcmp(&ga[i], &e[i], 4) && exact_miss < 0) exact_miss = t * NP + i;
            if (t == 0 && own[i]) gerr = fmax(gerr, fabs(ga[i] - gw[i])); /* later the parameters differ */
            if (t == 0) gmax = fmax(gmax, fabs(gw[i]));
        }
        rep_end_step(&a), rep_end_step(&r), rep_end_step(&w);
    }
    read_all(a.m, false, final), read_all(r.m, false, pr), read_all(w.m, false, pw);
    double perr = 0, rms = 0;
    for (int i = 0; i < NP; i++)
        perr = fmax(perr, fabs(final[i] - pw[i]) / (1 + fabs(pw[i]))), rms += (final[i] - pw[i]) * (final[i] - pw[i]);
    rms = sqrt(rms / NP);
    const char *rdn = ampc_dtype_name(c.rd), *pn = ampc_dtype_name(c.pdt);
    int sh = (int)c.shard;
    AGREE(exact_miss < 0, "reduce %s params %s shard %d: gradient %lld differs from the documented arithmetic", rdn, pn,
          sh, (long long)exact_miss);
    AGREE(!memcmp(final, pr, sizeof pr), "reduce %s params %s shard %d: parameters differ from one process's", rdn, pn,
          sh);
    AGREE(norm_err < 1e-12, "reduce %s shard %d: clipping norm off by %g", rdn, sh, norm_err);
    AGREE(gerr <= tol.g * gmax, "reduce %s shard %d: gradient off the whole batch's by %g of %g", rdn, sh, gerr, gmax);
    AGREE(perr <= tol.p && rms <= tol.rms, "reduce %s shard %d: parameters off the whole batch's by %g (rms %g)", rdn,
          sh, perr, rms);
    AGREE(same_everywhere(final, sizeof pr), "reduce %s shard %d: the ranks' parameters differ", rdn, sh);
    if (getenv("AMPC_TEST_DIST_VERBOSE") && g_rank == 0)
        print_message("reduce %s params %s shard %d: grad err %.3g of %.3g, param err %.3g, rms %.3g\n", rdn, pn, sh,
                      gerr, gmax, perr, rms);
    ASSERT_OK(ampc_dist_get_stats(g_d, stats));
    rep_free(&a), rep_free(&r), rep_free(&w);
}

/* Tolerances against the whole batch (another summation order): F32, a few F32 roundings of the largest
 * gradient (1e-6) and the parameters likewise. 16-bit: two roundings of 2^-9 (BF16) or 2^-12 (F16) per
 * gradient, plus slack (BF16 parameters have BF16 gradients: the same); AdamW normalises each element's step
 * to about lr, so an element whose gradient is near zero may step differently: the parameters are held to
 * STEPS * lr at most and lr / 4 in RMS (a reduction into the wrong elements would be about lr). */
static void test_ddp_matches_one_process(void **state) {
    (void)state;
    if (g_size != 2) skip();
    const ddp_tol f32 = {1e-6, 1e-6, 1e-6}, b16 = {1e-2, STEPS * LR, 0.25 * LR}, f16 = {2e-3, STEPS * LR, 0.25 * LR};
    const struct {
        ampc_dtype rd, pdt;
        ddp_tol tol;
    } cases[] = {{F32, F32, f32}, {BF16, F32, b16}, {F16, F32, f16}, {F32, BF16, b16}};
    static float pn[NP], po[NP];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ampc_dist_stats st;
        run_ddp((ddp_cfg){cases[k].rd, cases[k].pdt, AMPC_DIST_SHARD_NONE, 0}, cases[k].tol, pn, &st);
        assert_int_equal(st.steps, STEPS);
        run_ddp((ddp_cfg){cases[k].rd, cases[k].pdt, AMPC_DIST_SHARD_OPTIMIZER, 0}, cases[k].tol, po, &st);
        AGREE(!memcmp(pn, po, sizeof pn), "reduce %s: sharded and unsharded parameters differ",
              ampc_dtype_name(cases[k].rd));
    }
}

/* More, smaller buckets change the layout only: the same bits, sharded or not. */
static void test_bucket_size_changes_nothing(void **state) {
    (void)state;
    if (g_size != 2) skip();
    static const int64_t caps[] = {0, 4096, 1024, 256};
    static float p0[NP], p[NP];
    for (int shard = AMPC_DIST_SHARD_NONE; shard <= AMPC_DIST_SHARD_OPTIMIZER; shard++) {
        int64_t prev = 0;
        for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
            ampc_dist_stats st;
            run_ddp((ddp_cfg){F32, F32, (ampc_dist_shard)shard, caps[k]}, (ddp_tol){1e-6, 1e-6, 1e-6}, k ? p : p0, &st);
            if (k == 0) assert_int_equal(st.buckets, 1); /* 18 KB: one bucket under the first cap of 1 MiB */
            else if (st.buckets < prev || (k == 1 && st.buckets <= prev)) /* once a parameter is alone, no more */
                FAILF("bucket_bytes %lld: %lld buckets, fewer than %lld", (long long)caps[k], (long long)st.buckets,
                      (long long)prev);
            assert_true(st.bytes_reduced >= NP * 4 && st.bytes_reduced < (NP + st.buckets * g_size) * 4);
            if (shard) assert_int_equal(st.bytes_gathered, st.bytes_reduced);
            prev = st.buckets;
            AGREE(!k || !memcmp(p0, p, sizeof p), "bucket_bytes %lld changed the parameters", (long long)caps[k]);
        }
    }
}

/* ---- 2. reductions overlap the backward; one backward per step ---- */

static struct { int leaves, launched[16]; /* buckets launched when each leaf's gradient was final */ } g_spy;
/* Buckets whose reduction the reducer has launched in this backward. */
static int launched_buckets(void) {
    int n = 0;
    for (int i = 0; i < g_d->nbuckets; i++) n += g_d->buckets[i].launched;
    return n;
}
/* A second grad-ready listener, added after the reducer's, so it runs after it for every leaf. */
static void spy_hook(void *arg, ampc_tensor *leaf) {
    (void)arg;
    if (leaf && g_spy.leaves < 16) g_spy.launched[g_spy.leaves++] = launched_buckets();
}

static void test_reductions_overlap_backward(void **state) {
    (void)state;
    if (g_size != 2) skip();
    replica a = rep_new(F32);
    rep_attach(&a, F32, AMPC_DIST_SHARD_NONE, 4096);
    assert_int_equal(a.ctx->grad_ready.n, 1); /* the reducer's */
    g_spy.leaves = 0;
    ASSERT_OK(ampci_autograd_on_grad_ready(a.ctx, spy_hook, NULL)); /* watches the reducer from inside the backward */
    ampc_dist_stats st;
    ASSERT_OK(ampc_dist_get_stats(g_d, &st));
    assert_true(st.buckets > 1);
    int64_t first, rows;
    my_rows(B, &first, &rows);
    rep_backward(&a, 0, first, rows);
    assert_int_equal(g_spy.leaves, ampc_model_num_params(a.m));
    /* every bucket was launched by the hook before ampc_backward returned, and one before the last gradient */
    assert_int_equal(launched_buckets(), st.buckets);
    assert_int_equal(g_spy.launched[g_spy.leaves - 1], st.buckets);
    if (g_spy.launched[g_spy.leaves - 2] < 1) FAILF("no reduction started before the backward's last gradient");
    ASSERT_OK(ampc_dist_sync_grads(g_d)); /* what the reductions make is run_ddp's business (4096 there too) */
    ASSERT_OK(ampc_dist_get_stats(g_d, &st));
    assert_int_equal(st.steps, 1);
    assert_true(st.comm_seconds > 0 && st.exposed_seconds >= 0);
    assert_true(ampci_autograd_off_grad_ready(a.ctx, spy_hook, NULL));
    assert_int_equal(a.ctx->grad_ready.n, 1); /* the reducer's stays */
    ASSERT_OK(ampc_optim_step(a.opt));
    rep_free(&a);
}

/* Two backwards before one step: the step is refused (STATE naming the rule); after zero_grad a clean step works
 * alike everywhere. Retried without a new backward the refused step must be refused again (or reduce), never
 * update each rank with its own gradients (the replicas would diverge silently). */
static void test_second_backward_refused(void **state) {
    (void)state;
    static float p[NP];
    replica a = rep_new(F32);
    rep_attach(&a, F32, AMPC_DIST_SHARD_NONE, 4096);
    int64_t first, rows;
    my_rows(B, &first, &rows);
    for (int retry = 0; retry < 2; retry++) {
        rep_backward(&a, retry, first, rows), rep_backward(&a, retry, first, rows);
        assert_int_equal(ampc_optim_step(a.opt), AMPC_STATUS_STATE);
        ASSERT_ERROR_MENTIONS("second backward", "one backward with sync on per step");
        if (!retry) rep_end_step(&a), rep_backward(&a, 2, first, rows); /* a clean one */
        ampc_status s = ampc_optim_step(a.opt);
        read_all(a.m, false, p);
        bool same = same_everywhere(p, sizeof p);
        AGREE(retry ? s != AMPC_OK || same : s == AMPC_OK && same, "%s step: %s, the ranks' parameters %s",
              retry ? "a retried" : "a clean", ampc_status_str(s), same ? "equal" : "differ");
        rep_end_step(&a);
    }
    rep_free(&a);
}

/* Gradient accumulation (DDP's no_sync): two micro-batches per step, the first with sync off, reduce once
 * per step (counted) and train as one process does on both micro-batches' whole batches, in every shard
 * mode; a step after a backward under no_sync alone is refused (the gradients were never reduced), and a
 * backward under no_sync after one that reduced is refused too. */
static void test_accumulation_no_sync(void **state) {
    (void)state;
    static float pa[NP], pw[NP];
    int64_t first, rows;
    my_rows(B, &first, &rows);
    for (int sh = AMPC_DIST_SHARD_NONE; sh <= AMPC_DIST_SHARD_FULL; sh++) {
        replica a = rep_new(F32), w = rep_new(F32);
        rep_attach(&a, F32, (ampc_dist_shard)sh, 1024);
        ampc_dist_reset_stats(g_d);
        for (int step = 0; step < 2; step++) {
            for (int k = 0; k < 2; k++) {
                ASSERT_OK(ampc_dist_set_sync(g_d, k == 1));
                rep_backward(&a, (2 * step + k) % STEPS, first, rows);
                rep_backward(&w, (2 * step + k) % STEPS, 0, B);
                if (k == 0) ampc_ctx_step_end(a.ctx), ampc_ctx_step_end(w.ctx); /* as the CLI: activations go */
            }
            ASSERT_OK(ampc_optim_step(a.opt));
            ASSERT_OK(ampc_optim_step(w.opt));
            rep_end_step(&a), rep_end_step(&w);
        }
        ampc_dist_stats st;
        ASSERT_OK(ampc_dist_get_stats(g_d, &st));
        AGREE(st.steps == 2, "shard %d: %lld reductions for 2 optimizer steps of 2 micro-batches", sh,
              (long long)st.steps);
        ASSERT_OK(ampc_dist_unshard(g_d)); /* shard FULL: the parameters whole again, to be read */
        read_all(a.m, false, pa), read_all(w.m, false, pw);
        double err = 0;
        for (int i = 0; i < NP; i++) err = fmax(err, fabs(pa[i] - pw[i]) / (1 + fabs(pw[i])));
        AGREE(err <= 1e-5, "shard %d: accumulated parameters off one process's by %g", sh, err);
        AGREE(same_everywhere(pa, sizeof pa), "shard %d: the ranks' parameters differ", sh);
        /* misuse: a step after no_sync backwards only; no_sync after a reducing backward */
        ASSERT_OK(ampc_dist_set_sync(g_d, false));
        rep_backward(&a, 0, first, rows);
        assert_int_equal(ampc_optim_step(a.opt), AMPC_STATUS_STATE);
        ASSERT_ERROR_MENTIONS("never reduced", "sync on");
        rep_end_step(&a);
        ASSERT_OK(ampc_dist_set_sync(g_d, true));
        rep_backward(&a, 0, first, rows);
        ASSERT_OK(ampc_dist_set_sync(g_d, false));
        rep_backward(&a, 1, first, rows);
        assert_int_equal(ampc_optim_step(a.opt), AMPC_STATUS_STATE);
        ASSERT_ERROR_MENTIONS("after one that reduced");
        rep_end_step(&a);
        ASSERT_OK(ampc_dist_set_sync(g_d, true));
        rep_free(&a), rep_free(&w);
    }
    assert_int_equal(ampc_dist_set_sync(NULL, true), AMPC_STATUS_INVALID_ARG);
}

/* ---- 3. ZeRO-1: about 1/N of the optimizer state per rank ---- */

static void test_zero1_state_is_sharded(void **state) {
    (void)state;
    for (ampc_dtype pdt = F32; pdt <= BF16; pdt++) { /* F32: moments; BF16 and F16: masters too */
        replica a = rep_new(pdt);
        int64_t whole = ampc_optim_state_bytes(a.opt), per = pdt == F32 ? 8 : 12;
        assert_int_equal(whole, NP * per);
        rep_attach(&a, F32, AMPC_DIST_SHARD_OPTIMIZER, 1024);
        ampc_dist_stats st;
        ASSERT_OK(ampc_dist_get_stats(g_d, &st));
        int64_t mine = ampc_optim_state_bytes(a.opt), slack = st.buckets * per; /* < 1 padded element per bucket */
        AGREE(mine <= whole / g_size + slack && mine >= whole / g_size - slack,
              "%s: %lld bytes of state, whole %lld over %d ranks", ampc_dtype_name(pdt), (long long)mine,
              (long long)whole, g_size);
        AGREE(reduce_i64(mine, AMPC_DIST_SUM) == whole, "%s: the ranks' state does not add up to the whole",
              ampc_dtype_name(pdt));
        rep_free(&a);
        replica u = rep_new(pdt); /* unsharded keeps everything */
        rep_attach(&u, F32, AMPC_DIST_SHARD_NONE, 1024);
        assert_int_equal(ampc_optim_state_bytes(u.opt), whole);
        rep_free(&u);
    }
}

/* ---- 4. found-inf agreement ---- */

/* n F32 parameters "a", "b", "c" of len[k] ones, in a context of their own, one group of an optimizer o;
 * attached with tp unless it is NULL. */
typedef struct toy {
    ampc_ctx *ctx;
    ampc_optim *opt;
    ampc_tensor *p[3];
    int n;
} toy;
static toy toy_new(const int64_t *len, int n, ampc_optim_params o, const ampc_dist_train_params *tp) {
    toy t = {.n = n};
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &t.ctx));
    for (int k = 0; k < n; k++) {
        t.p[k] = ampc_tensor_new(t.ctx, F32, 1, &len[k]);
        ASSERT_OK(ampc_tensor_fill(t.p[k], 1));
        ASSERT_OK(ampc_tensor_set_requires_grad(t.p[k], true));
        ASSERT_OK(ampc_tensor_set_name(t.p[k], (const char[][2]){"a", "b", "c"}[k]));
    }
    ASSERT_OK(ampc_optim_new(t.ctx, &o, &t.opt));
    ASSERT_OK(ampc_optim_add_group(t.opt, "all", t.p, n, NULL));
    if (tp) ASSERT_OK(ampc_dist_attach(g_d, t.opt, tp));
    return t;
}
static void toy_free(toy *t) {
    ampc_ctx_step_end(t->ctx), ampc_optim_free(t->opt);
    for (int k = 0; k < t->n; k++) ampc_tensor_free(t->p[k]);
    ampc_ctx_free(t->ctx);
}
/* sum(p * c) for a leaf p and a constant c of the same shape. */
static ampc_tensor *dot(ampc_ctx *ctx, ampc_tensor *p, const float *c) {
    ampc_tensor *ct = ampc_tensor_from_buffer(ctx, F32, 1, (int64_t[]){ampc_tensor_numel(p)}, c, F32);
    return ampc_sum(ctx, ampc_mul(ctx, p, ct), NULL, 0, false);
}

/* Sharded, parameters "a" and "b" lie in the slices of different ranks; only rank 1's data makes b's
 * gradient infinite, so only b's owner sees an inf locally after the reduce-scatter. Both must skip, keep equal scales and name "b". With
 * AMPC_TEST_DIST_EXPECT_DIVERGENCE (test_dist_mutation, agreement off) the ranks must decide differently. */
static void test_found_inf_agreed(void **state) {
    (void)state;
    if (g_size != 2) skip();
    const char *e = getenv("AMPC_TEST_DIST_EXPECT_DIVERGENCE");
    bool expect_div = e && *e && strcmp(e, "0");
    if (expect_div) { /* a short timeout: without agreement rank 0 waits alone in the all-gather */
        ampc_dist_free(g_d);
        ASSERT_OK(ampc_dist_new(&(ampc_dist_params){.timeout_s = 2}, &g_d));
    }
    toy t = toy_new((int64_t[]){64, 64}, 2, (ampc_optim_params){.kind = AMPC_OPTIM_ADAMW},
                    &(ampc_dist_train_params){.shard = AMPC_DIST_SHARD_OPTIMIZER});
    ampc_ctx *ctx = t.ctx;
    ampc_optim *opt = t.opt;
    const ampci_param *pp = opt->params; /* the premise: each rank owns one of a and b whole */
    AGREE((pp[0].hi - pp[0].lo == 64 && pp[1].hi == pp[1].lo) || (pp[0].hi == pp[0].lo && pp[1].hi - pp[1].lo == 64),
          "a and b are not owned by one rank each");
    ampc_grad_scaler *gs;
    ASSERT_OK(ampc_grad_scaler_new(ctx, NULL, &gs));
    float ca[64], cb[64];
    for (int i = 0; i < 64; i++) ca[i] = 0.5f, cb[i] = g_rank == 1 ? 1e35f : 0.25f; /* x 65536: inf */
    ampc_tensor *loss = ampc_add(ctx, dot(ctx, t.p[0], ca), dot(ctx, t.p[1], cb));
    ASSERT_OK(ampc_backward(ctx, ampc_grad_scaler_scale(gs, loss)));
    const char *bad = NULL;
    bool finite = ampc_optim_grads_finite(opt, &bad), stepped = true;
    ampc_status ss = ampc_grad_scaler_step(gs, opt, &stepped);
    ampc_grad_scaler_overflow ov;
    ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
    ASSERT_OK(ampc_grad_scaler_update(gs));
    float w[128], scale = (float)ampc_grad_scaler_get_scale(gs);
    ASSERT_OK(ampc_tensor_copy_to(t.p[0], w, F32));
    ASSERT_OK(ampc_tensor_copy_to(t.p[1], w + 64, F32));
    /* compared over MPI_COMM_WORLD: the handle's communicator is stuck when the ranks disagreed */
    int64_t mine[5] = {finite, ss == AMPC_OK && !stepped, ov.found_inf, (int64_t)(fnv(ov.first_tensor, 64) >> 1),
                       (int64_t)(fnv(w, sizeof w) >> 1) ^ (int64_t)tu_bits(scale)},
            lo[5], hi[5];
    MPI_Allreduce(mine, lo, 5, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 5, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    bool same = !memcmp(lo, hi, sizeof lo);
    if (expect_div) {
        if (same)
            FAILF("AMPC_TEST_DIST_NO_AGREEMENT is set, yet the ranks decided alike: this test cannot see a "
                  "missing agreement");
        if (g_rank == 0) print_message("without the agreement the ranks decided differently, as expected\n");
    } else {
        if (!same)
            FAILF("rank %d: the ranks decided differently (finite %d, skipped %d, found_inf %d, scale %g)", g_rank,
                  finite, ss == AMPC_OK && !stepped, ov.found_inf, scale);
        ASSERT_OK(ss);
        assert_false(finite), assert_string_equal(bad, "b");
        assert_false(stepped);
        assert_true(ov.found_inf), assert_string_equal(ov.first_tensor, "b"), assert_int_equal(ov.tensors, 1);
        assert_true(scale == 32768.0f);
        for (int i = 0; i < 128; i++) assert_true(w[i] == 1.0f); /* nobody stepped */
    }
    ampc_grad_scaler_free(gs), toy_free(&t);
}

/* Parameters the backward did not reach: "c" only on rank 0's data (it gets rank 0's gradient over N), "b" on
 * no rank's: as in one process (ampc_optim_step leaves a parameter without a gradient alone; PyTorch's DDP keeps
 * a globally unused parameter's gradient untouched) b has no gradient and keeps its value and step count:
 * the ranks agree on which parameters had a gradient anywhere. */
static void test_unused_parameter_left_alone(void **state) {
    (void)state;
    for (int shard = AMPC_DIST_SHARD_NONE; shard <= AMPC_DIST_SHARD_OPTIMIZER; shard++) {
        toy t = toy_new((int64_t[]){64, 64, 64}, 3,
                        (ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 1, .weight_decay = 0.5},
                        &(ampc_dist_train_params){.shard = (ampc_dist_shard)shard});
        ampc_ctx *ctx = t.ctx;
        ampc_tensor **p = t.p;
        float c[64], w[3][64];
        for (int i = 0; i < 64; i++) c[i] = 0.25f * (float)(i + 1);
        ampc_tensor *loss = dot(ctx, p[0], c);
        ASSERT_OK(ampc_backward(ctx, g_rank ? loss : ampc_add(ctx, loss, dot(ctx, p[2], c))));
        ASSERT_OK(ampc_optim_step(t.opt));
        bool ok = !ampc_tensor_grad(p[1]) && t.opt->params[1].steps == 0;
        for (int k = 0; k < 3; k++) ASSERT_OK(ampc_tensor_copy_to(p[k], w[k], F32));
        for (int i = 0; i < 64; i++) /* SGD, lr 1, L2 0.5: w = 1 - (g + 0.5) */
            ok &= w[0][i] == -c[i] + 0.5f && w[1][i] == 1 && fabsf(w[2][i] - (0.5f - c[i] / g_size)) < 1e-6f;
        AGREE(ok, "shard %d: a %.9g (want %.9g), b %.9g with grad %p, c %.9g (want %.9g)", shard, w[0][0], 0.25,
              w[1][0], (void *)ampc_tensor_grad(p[1]), w[2][0], 0.5 - 0.25 / g_size);
        toy_free(&t);
    }
}

/* ---- 5. FP16 reductions do not overflow where F32 ones do not ---- */

/* Gradients of 40000-44000 on each rank (FP16's largest is 65504): summed as they are, two of them overflow
 * FP16; pre-divided by f = 2 they do not, and the average comes out finite and right, bit for bit the
 * documented arithmetic. N = 3 (test_dist_np3): f is 2 there too, so 30000 on each rank (90000 summed as
 * they are) reduce to a finite 30000 within FP16 rounding. */
static void test_fp16_reduce_does_not_overflow(void **state) {
    (void)state;
    float c[2][64], got[64];
    for (int i = 0; i < 64; i++)
        c[0][i] = g_size == 2   ? 40000.0f + 37 * i
                  : g_size == 3 ? 30000.0f + 32 * i
                                : 40000.0f + 32 * i,
        c[1][i] = g_size == 2 ? 41000.0f + 53 * i : c[0][i];
    for (ampc_dtype rd = F32; rd <= F16; rd++) {
        toy t = toy_new((int64_t[]){64}, 1, (ampc_optim_params){.kind = AMPC_OPTIM_SGD},
                        &(ampc_dist_train_params){.reduce_dtype = rd});
        ASSERT_OK(ampc_backward(t.ctx, dot(t.ctx, t.p[0], c[g_rank > 0])));
        ASSERT_OK(ampc_dist_sync_grads(g_d));
        ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(t.p[0]), got, F32));
        bool ok = true;
        for (int i = 0; i < 64 && ok; i++) {
            double avg = g_size == 2 ? (c[0][i] + c[1][i]) / 2.0 : c[0][i];
            float want = g_size == 2 ? reduce2(c[0][i], c[1][i], rd, F32) : (float)avg;
            if (rd == F16 && g_size == 2) assert_true(isinf(rnd(c[0][i] + c[1][i], F16))); /* the premise */
            if (!isfinite(got[i]) || (g_size == 2 ? got[i] != want : fabs(got[i] - avg) > avg * 0x1p-10))
                ok = false, print_error("reduce %s, element %d: %.9g, expected %.9g (average %.9g)\n",
                                        ampc_dtype_name(rd), i, got[i], want, avg);
        }
        AGREE(ok, "an %s reduction of large gradients is wrong", ampc_dtype_name(rd));
        toy_free(&t);
    }
}

/* ---- 6. uneven shards ---- */

enum { R = 5, K = 10 };
static float g_lx[R * K], g_lt[R], g_lw0[K + 1];

/* One SGD step (lr 1: the step is the gradient) of a linear layer (1 x K weight and a bias: 11 elements,
 * padded in the buckets of 2 and 3 ranks) with MSE on rows [first, first + rows); attached (weighted rows *
 * N / R, sharded) when dp. step: w0 - w after it. */
static void lin_step(int64_t first, int64_t rows, bool dp, float *step) {
    toy t = toy_new((int64_t[]){K, 1}, 2, (ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 1},
                    dp ? &(ampc_dist_train_params){.shard = AMPC_DIST_SHARD_OPTIMIZER} : NULL);
    ampc_ctx *ctx = t.ctx;
    ASSERT_OK(ampc_tensor_copy_from(t.p[0], g_lw0, F32));
    ASSERT_OK(ampc_tensor_copy_from(t.p[1], g_lw0 + K, F32));
    if (dp) ASSERT_OK(ampc_dist_set_grad_weight(g_d, (double)rows * g_size / R));
    ampc_tensor *wv = ampc_tensor_reshape(t.p[0], 2, (int64_t[]){1, K});
    ampc_tensor *xs = ampc_tensor_from_buffer(ctx, F32, 2, (int64_t[]){rows, K}, g_lx + first * K, F32);
    ampc_tensor *ts = ampc_tensor_from_buffer(ctx, F32, 2, (int64_t[]){rows, 1}, g_lt + first, F32);
    ASSERT_OK(ampc_backward(ctx, ampc_mse_loss(ctx, ampc_linear(ctx, xs, wv, t.p[1]), ts)));
    ASSERT_OK(ampc_optim_step(t.opt));
    ASSERT_OK(ampc_tensor_copy_to(t.p[0], step, F32));
    ASSERT_OK(ampc_tensor_copy_to(t.p[1], step + K, F32));
    for (int i = 0; i <= K; i++) step[i] = g_lw0[i] - step[i];
    toy_free(&t);
}

/* B = 5 rows over 2 ranks: 3 + 2 (3 ranks: 2 + 2 + 1); weighted by rows * N / B the data-parallel step equals
 * one process's on all 5 rows (the mean over 5 rows), where an unweighted mean of the shards' means would
 * not. */
static void test_uneven_shards_average_exactly(void **state) {
    (void)state;
    for (int i = 0; i < R * K; i++) g_lx[i] = val((uint32_t)i, 31);
    for (int i = 0; i < R; i++) g_lt[i] = val((uint32_t)i, 32) * 4;
    for (int i = 0; i <= K; i++) g_lw0[i] = val((uint32_t)i, 33) * 0.3f;
    int64_t first, rows;
    my_rows(R, &first, &rows);
    if (g_size == 2) assert_true(g_rank == 0 ? first == 0 && rows == 3 : first == 3 && rows == 2);
    assert_int_equal(reduce_i64(rows, AMPC_DIST_SUM), R);
    float whole[K + 1], got[K + 1], part[K + 1], unweighted[K + 1] = {0};
    lin_step(0, R, false, whole);
    for (int r = 0; r < g_size; r++) {
        int64_t f, n;
        ampc_loader_shard_rows(R, r, g_size, &f, &n);
        lin_step(f, n, false, part);
        for (int i = 0; i <= K; i++) unweighted[i] += part[i] / g_size;
    }
    lin_step(first, rows, true, got);
    double err = 0, bias = 0, mag = 0;
    for (int i = 0; i <= K; i++)
        err = fmax(err, fabs(got[i] - whole[i])), bias = fmax(bias, fabs(unweighted[i] - whole[i])),
        mag = fmax(mag, fabs(whole[i]));
    assert_true(bias > 1e-2 * mag); /* the premise: the data tell a weighted mean from an unweighted one */
    AGREE(err <= 1e-6 * mag, "uneven shards: the step is off the whole batch's by %g of %g", err, mag);
}

/* ---- 7. checkpoints ---- */

/* BF16 parameters (masters and moments are sharded), attached with `shard`. from NULL: STEPS steps, saving to
 * `save` before the last (rank 0 must hold its own shard again after the save); else the checkpoint `from`
 * restored on every rank before attaching, then the last step. p: the parameters after the last step. */
static void ckpt_steps(ampc_dist_shard shard, const char *from, const char *save, float *p) {
    replica a = rep_new(BF16);
    int t = 0;
    if (from) {
        ampc_safetensors *ck;
        ASSERT_OK(ampc_checkpoint_open(from, &ck));
        ampc_checkpoint_state st = {.model = a.m, .optim = a.opt};
        ASSERT_OK(ampc_checkpoint_restore(ck, &st));
        ampc_safetensors_free(ck);
        assert_true(st.step == STEPS - 1 && st.world_size == g_size && ampc_optim_steps(a.opt) == STEPS - 1);
        t = STEPS - 1;
    }
    rep_attach(&a, F32, shard, 1024);
    int64_t first, rows, held = ampc_optim_state_bytes(a.opt);
    my_rows(B, &first, &rows);
    for (; t < STEPS; t++) {
        if (save && t == STEPS - 1) {
            ampc_checkpoint_state st = {.model = a.m, .optim = a.opt, .step = t};
            ASSERT_OK(ampc_dist_checkpoint_save(g_d, save, &st));
            assert_int_equal(ampc_optim_state_bytes(a.opt), held);
        }
        rep_backward(&a, t, first, rows);
        ASSERT_OK(ampc_optim_step(a.opt));
        rep_end_step(&a);
    }
    read_all(a.m, false, p);
    rep_free(&a);
}

/* Rank 0: the two files hold the same tensors, bit for bit, and the world size; nothing else was written. */
static bool same_checkpoints(const char *a, const char *b) {
    ampc_safetensors *x, *y;
    ASSERT_OK(ampc_safetensors_read(a, &x));
    ASSERT_OK(ampc_safetensors_read(b, &y));
    /* 6 parameters, each with a master, two moments and a step */
    bool ok = ampc_safetensors_count(x) == 5 * 6 && ampc_safetensors_count(y) == 5 * 6;
    for (int i = 0; ok && i < ampc_safetensors_count(x); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(x, i), *u = ampc_safetensors_find(y, t->name);
        ok = u && u->dtype == t->dtype && u->numel == t->numel && !memcmp(u->data, t->data, t->end - t->begin);
        if (!ok) print_error("checkpoint tensor %s differs\n", t->name);
    }
    char n[16];
    snprintf(n, sizeof n, "%d", g_size);
    const char *wx = ampc_safetensors_metadata(x, "ampc.world_size"),
               *wy = ampc_safetensors_metadata(y, "ampc.world_size");
    ok = ok && wx && wy && !strcmp(wx, n) && !strcmp(wy, n);
    ampc_safetensors_free(x), ampc_safetensors_free(y);
    int files = 0;
    DIR *d = opendir(g_dir);
    for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.';
    if (d) closedir(d);
    return ok && files == 2;
}

/* A sharded run saves one file (rank 0) equal to the unsharded run's; resumed on every rank, sharded or not,
 * the next step gives the parameters of the uninterrupted runs; the save left rank 0's shard as it was. */
static void test_checkpoint_sharded_equals_unsharded(void **state) {
    (void)state;
    if (g_rank == 0) tu_dir_make("dist");
    ASSERT_OK(ampc_dist_broadcast(g_d, g_dir, sizeof g_dir, AMPC_DTYPE_U8, 0));
    static float pn[NP], ps[NP], p[NP];
    char whole[512], shard[512];
    snprintf(whole, sizeof whole, "%s", tu_path("whole.st")), snprintf(shard, sizeof shard, "%s", tu_path("shard.st"));
    ckpt_steps(AMPC_DIST_SHARD_NONE, NULL, whole, pn);
    ckpt_steps(AMPC_DIST_SHARD_OPTIMIZER, NULL, shard, ps);
    AGREE(!memcmp(pn, ps, sizeof pn), "after a save the sharded run's step differs from the unsharded one's");
    AGREE(g_rank != 0 || same_checkpoints(whole, shard), "the sharded checkpoint differs from the unsharded one");
    for (int s = AMPC_DIST_SHARD_NONE; s <= AMPC_DIST_SHARD_OPTIMIZER; s++) {
        ckpt_steps((ampc_dist_shard)s, shard, NULL, p);
        AGREE(!memcmp(p, pn, sizeof p), "resumed with shard %d, the step differs from the uninterrupted run", s);
    }
    ASSERT_OK(ampc_dist_barrier(g_d));
    if (g_rank == 0) tu_dir_remove();
}

/* ---- the program ---- */

static void make_data(void) {
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < B * IN; i++) g_x[t][i] = val((uint32_t)i, 50u + (uint32_t)t) * 2;
        for (int i = 0; i < B; i++) g_y[t][i] = (int64_t)((val((uint32_t)i, 60u + (uint32_t)t) + 1) * CLS / 2) % CLS;
    }
}

int main(int argc, char **argv) {
    make_data();
    // clang-format off
    const struct CMUnitTest all[] = {
        DIST_TEST(test_ddp_matches_one_process), DIST_TEST(test_bucket_size_changes_nothing),
        DIST_TEST(test_reductions_overlap_backward), DIST_TEST(test_second_backward_refused),
        DIST_TEST(test_accumulation_no_sync),
        DIST_TEST(test_zero1_state_is_sharded), DIST_TEST(test_found_inf_agreed),
        DIST_TEST(test_unused_parameter_left_alone), DIST_TEST(test_fp16_reduce_does_not_overflow),
        DIST_TEST(test_uneven_shards_average_exactly), DIST_TEST(test_checkpoint_sharded_equals_unsharded),
    };
    // clang-format on
    return dist_test_main("test_dist_train", all, sizeof all / sizeof all[0], argc, argv);
}
