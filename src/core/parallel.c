/* parallel.c: a small pthread pool behind ampc_parallel_for. The range is cut into fixed chunks that
 * depend only on (n, grain); threads take chunks in any order, so a function whose output for a chunk
 * depends only on that chunk gives the same bits whatever the thread count or timing. A call made from
 * inside a running chunk (nested parallelism) runs serially on the calling thread instead of
 * deadlocking. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

struct ampci_pool {
    int threads;               /* including the calling thread */
    pthread_t *workers;        /* threads - 1 of them */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_mutex_t run_lock;  /* one job at a time per pool */
    uint64_t generation;
    bool stop;
    int finished;              /* workers done with the current generation */
    /* the current job */
    ampc_parallel_fn fn;
    void *arg;
    int64_t n, grain, nchunks;
    atomic_int_fast64_t next;
};

static _Thread_local int tl_in_parallel;

int64_t ampc_parallel_chunks(int64_t n, int64_t grain) {
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    return (n - 1) / grain + 1;
}

int ampci_online_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

static void take_chunks(ampci_pool *p) {
    tl_in_parallel++;
    for (;;) {
        int64_t c = atomic_fetch_add(&p->next, 1);
        if (c >= p->nchunks) break;
        int64_t b = c * p->grain, e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->arg, b, e, c);
    }
    tl_in_parallel--;
}

static void *worker_main(void *vp) {
    ampci_pool *p = vp;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        take_chunks(p);
        pthread_mutex_lock(&p->mu);
        if (++p->finished == p->threads - 1) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ampc_status ampci_pool_new(int threads, ampci_pool **out) {
    if (threads < 1) threads = 1;
    ampci_pool *p = calloc(1, sizeof *p);
    if (!p) return ampci_fail(AMPC_STATUS_OOM, "ampc_ctx_new: out of memory for the thread pool");
    p->threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (threads > 1) {
        p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            ampci_pool_free(p);
            return ampci_fail(AMPC_STATUS_OOM, "ampc_ctx_new: out of memory for %d threads", threads);
        }
        for (int i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                p->threads = i + 1;   /* only these exist; free joins them */
                ampci_pool_free(p);
                return ampci_fail(AMPC_STATUS_UNSUPPORTED, "ampc_ctx_new: could not start thread %d of %d",
                                  i + 2, threads);
            }
        }
    }
    *out = p;
    return AMPC_OK;
}

void ampci_pool_free(ampci_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->threads - 1 && p->workers; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    free(p);
}

int ampci_pool_threads(const ampci_pool *p) { return p ? p->threads : 1; }

static void run_serial(int64_t n, int64_t grain, int64_t nchunks, ampc_parallel_fn fn, void *arg) {
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t b = c * grain, e = b + grain < n ? b + grain : n;
        fn(arg, b, e, c);
    }
}

void ampci_pool_run(ampci_pool *p, int64_t n, int64_t grain, ampc_parallel_fn fn, void *arg) {
    if (grain < 1) grain = 1;
    int64_t nchunks = ampc_parallel_chunks(n, grain);
    if (nchunks == 0) return;
    if (!p || p->threads == 1 || nchunks == 1 || tl_in_parallel) {
        tl_in_parallel++;
        run_serial(n, grain, nchunks, fn, arg);
        tl_in_parallel--;
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->arg = arg, p->n = n, p->grain = grain, p->nchunks = nchunks;
    atomic_store(&p->next, 0);
    p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    take_chunks(p);

    /* Wait for every worker to leave this job before the job fields can be reused. */
    pthread_mutex_lock(&p->mu);
    while (p->finished < p->threads - 1) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_lock);
}

void ampc_parallel_for(ampc_ctx *ctx, int64_t n, int64_t grain, ampc_parallel_fn fn, void *arg) {
    if (!fn) return;
    ampci_pool_run(ctx ? ctx->pool : NULL, n, grain, fn, arg);
}
