/* parallel.c: a small pthread pool behind ampc_parallel_for and the library's row-parallel helper
 * (ampci_parallel_rows, core.h). The range is cut into fixed chunks that depend only on (n, grain);
 * threads take chunks in any order, so a function whose output for a chunk depends only on that chunk
 * gives the same bits whatever the thread count or timing. A call made from inside a running chunk
 * (nested parallelism) runs serially on the calling thread instead of deadlocking. Waking a sleeping
 * thread costs tens of microseconds on a VM, as much as a small op, so idle workers (and the caller
 * waiting for them) spin for a short while before they block. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core.h"

#include <pthread.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_ROUNDS 20000 /* about 50-100 us of pause instructions */
#include <stdlib.h>
#include <unistd.h>

struct ampci_pool {
    int threads;        /* including the calling thread */
    pthread_t *workers; /* threads - 1 of them */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_mutex_t run_lock; /* one job at a time per pool */
    atomic_uint_fast64_t generation;
    bool stop;
    atomic_int finished; /* workers done with the current generation */
    int sleepers;        /* workers blocked on cv_work (under mu) */
    /* the current job */
    ampc_parallel_fn fn;
    void *arg;
    int64_t n, grain, nchunks;
    atomic_int_fast64_t next;
    uint64_t regions; /* jobs handed to the workers (under run_lock) */
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

/* Spins until the pool's generation differs from seen (true) or the spin budget runs out (false). */
static bool spin_for_work(ampci_pool *p, uint64_t seen) {
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen) return true;
        CPU_RELAX();
    }
    return false;
}

static void *worker_main(void *vp) {
    ampci_pool *p = vp;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_for_work(p, seen)) {
            pthread_mutex_lock(&p->mu);
            while (!p->stop && atomic_load(&p->generation) == seen) {
                p->sleepers++;
                pthread_cond_wait(&p->cv_work, &p->mu);
                p->sleepers--;
            }
            bool stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop) break;
        }
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (p->stop) break;
        take_chunks(p);
        if (atomic_fetch_add(&p->finished, 1) + 1 == p->threads - 1) {
            pthread_mutex_lock(&p->mu); /* the caller may be blocked waiting for this */
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
                p->threads = i + 1; /* only these exist; free joins them */
                ampci_pool_free(p);
                return ampci_fail(AMPC_STATUS_UNSUPPORTED, "ampc_ctx_new: could not start thread %d of %d", i + 2,
                                  threads);
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
    atomic_fetch_add(&p->generation, 1); /* wakes spinning workers too */
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
uint64_t ampci_pool_regions(const ampci_pool *p) { return p ? p->regions : 0; }

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
    p->regions++;
    p->fn = fn, p->arg = arg, p->n = n, p->grain = grain, p->nchunks = nchunks;
    atomic_store(&p->next, 0);
    atomic_store(&p->finished, 0);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release); /* publishes the job fields */
    if (p->sleepers) pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    take_chunks(p);

    /* Wait for every worker to leave this job before the job fields can be reused. */
    for (int i = 0; i < SPIN_ROUNDS && atomic_load(&p->finished) < p->threads - 1; i++) CPU_RELAX();
    if (atomic_load(&p->finished) < p->threads - 1) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->finished) < p->threads - 1) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&p->run_lock);
}

void ampc_parallel_for(ampc_ctx *ctx, int64_t n, int64_t grain, ampc_parallel_fn fn, void *arg) {
    if (!fn) return;
    ampci_pool_run(ctx ? ctx->pool : NULL, n, grain, fn, arg);
}

void ampci_parallel_rows(ampc_ctx *ctx, int64_t rows, int64_t cols, ampc_parallel_fn body, const void *args) {
    ampc_parallel_for(ctx, rows, ampci_row_grain(cols), body, (void *)args); /* bodies read args as const */
}
