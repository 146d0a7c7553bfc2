/* dist_test_util.c: the shared part of the MPI test programs (see dist_test_util.h): per-test handles,
 * agreement helpers, deterministic values, MLP replicas, and main's rank-aware log and exit status. */
#include "dist_test_util.h"

#include <unistd.h>

ampc_dist *g_d;
int g_rank, g_size;

int dist_test_setup(void **state) {
    (void)state;
    return ampc_dist_new(&(ampc_dist_params){.timeout_s = 20}, &g_d) == AMPC_OK ? 0 : -1;
}
int dist_test_teardown(void **state) {
    (void)state;
    ampc_dist_free(g_d);
    g_d = NULL;
    return 0;
}

/* ---- agreement helpers ---- */

int64_t reduce_i64(int64_t v, ampc_dist_op op) {
    ASSERT_OK(ampc_dist_allreduce(g_d, &v, 1, AMPC_DTYPE_I64, op));
    return v;
}
bool all_true(bool b) { return reduce_i64(b, AMPC_DIST_MIN) == 1; }

uint64_t fnv(const void *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}
bool same_everywhere(const void *p, size_t n) {
    int64_t v = (int64_t)(fnv(p, n) >> 1);
    return reduce_i64(v, AMPC_DIST_MIN) == reduce_i64(v, AMPC_DIST_MAX);
}

float val(uint32_t i, uint32_t salt) {
    uint32_t h = (i + 1) * 2654435761u ^ (salt + 1) * 2246822519u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    return (float)(h >> 8) / 8388608.0f - 1.0f;
}

/* ---- replicas ---- */

replica rep_new(ampc_dtype pdt) {
    replica r;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 5, .threads = 1}, &r.ctx));
    ampc_model_config c = {
        .kind = AMPC_MODEL_MLP, .seed = 11, .param_dtype = pdt, .in_features = IN, .hidden = {H0, H1}, .classes = CLS};
    ASSERT_OK(ampc_model_new(r.ctx, &c, &r.m));
    ASSERT_OK(
        ampc_optim_new(r.ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = LR, .weight_decay = 0.01}, &r.opt));
    ASSERT_OK(ampc_model_add_to_optim(r.m, r.opt));
    return r;
}
void rep_free(replica *r) {
    ampc_ctx_step_end(r->ctx);
    ampc_optim_free(r->opt), ampc_model_free(r->m), ampc_ctx_free(r->ctx);
}
void rep_attach(replica *r, ampc_dtype rd, ampc_dist_shard shard, int64_t bucket) {
    ASSERT_OK(ampc_dist_attach(g_d, r->opt,
                               &(ampc_dist_train_params){.reduce_dtype = rd, .bucket_bytes = bucket, .shard = shard}));
}
void read_all(const ampc_model *m, bool grads, float *out) {
    for (int i = 0; i < ampc_model_num_params(m); i++) {
        ampc_tensor *p = ampc_model_param(m, i), *t = grads ? ampc_tensor_grad(p) : p;
        if (t) ASSERT_OK(ampc_tensor_copy_to(t, out, F32));
        else memset(out, 0, (size_t)ampc_tensor_numel(p) * sizeof *out);
        out += ampc_tensor_numel(p);
    }
}

/* ---- the program ---- */

/* Ranks > 0 write their log (stdout and stderr) to a temporary file, replayed to stderr with their rank as a
 * prefix when any rank failed, so the log reads as rank 0's unless something went wrong elsewhere. */
static FILE *g_log;
static int g_stderr = -1;
static void hold_log(void) {
    fflush(NULL);
    if (!(g_log = tmpfile()) || (g_stderr = dup(2)) < 0) return;
    dup2(fileno(g_log), 1), dup2(fileno(g_log), 2);
}
static void replay_log(bool show) {
    if (!g_log || g_stderr < 0) return;
    fflush(NULL);
    dup2(g_stderr, 1), dup2(g_stderr, 2);
    char line[1024];
    for (rewind(g_log); show && fgets(line, sizeof line, g_log);) fprintf(stderr, "[rank %d] %s", g_rank, line);
    fclose(g_log);
}

int dist_test_main(const char *name, const struct CMUnitTest *all, size_t n_all, int argc, char **argv) {
    g_rank = ampc_dist_launch_rank(); /* from mpirun's environment, before MPI starts */
    if (g_rank > 0) hold_log();
    ampc_dist *world;
    if (ampc_dist_new(&(ampc_dist_params){.timeout_s = 60}, &world) != AMPC_OK) {
        fprintf(stderr, "%s: ampc_dist_new: %s\n", name, ampc_last_error());
        return 1;
    }
    g_size = ampc_dist_world_size(world);
    int64_t failed = ampc_dist_rank(world) != g_rank || !ampc_dist_available();
    struct CMUnitTest *chosen = malloc(n_all * sizeof *chosen);
    size_t n = 0;
    for (size_t i = 0; chosen && i < n_all; i++) {
        bool want = argc < 2;
        for (int a = 1; a < argc; a++) want |= strstr(all[i].name, argv[a]) != NULL;
        if (want) chosen[n++] = all[i];
    }
    failed += chosen ? _cmocka_run_group_tests(name, chosen, n, NULL, NULL) : 1;
    free(chosen);
    int64_t mine = failed;
    if (ampc_dist_allreduce(world, &failed, 1, AMPC_DTYPE_I64, AMPC_DIST_SUM) != AMPC_OK) {
        replay_log(true);
        fprintf(stderr, "%s rank %d: the ranks are out of step: %s\n", name, g_rank, ampc_last_error());
        ampc_dist_abort(world, 1);
    }
    replay_log(failed > 0);
    if (mine) fprintf(stderr, "%s rank %d of %d: %lld failure(s)\n", name, g_rank, g_size, (long long)mine);
    ampc_dist_free(world);
    return failed ? 1 : 0;
}
