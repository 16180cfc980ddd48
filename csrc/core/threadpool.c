/*
 * threadpool.c — persistent pthread pool: n-1 workers plus the caller.
 * A run publishes (fn, arg) under a new generation number, wakes the
 * workers, runs index 0 itself and waits until every worker reports done.
 *
 * A decode step is dozens of short runs, so both waits spin first (about a
 * millisecond, with the CPU's pause hint) and only then sleep on a condition
 * variable: a sleeping worker costs a futex wake-up per run, tens of
 * microseconds in a VM. Generation and pending are atomics (GCC/Clang
 * __atomic builtins); every sleep re-checks its condition under the mutex
 * that the other side holds to change it, so no wake-up is lost.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define COLIBRI_SPIN_ROUNDS (1 << 14)   /* pause hints before a wait sleeps */

static inline void colibri_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef struct colibri_worker {
    colibri_threadpool *pool;
    int32_t index;
} colibri_worker;

struct colibri_threadpool {
    int32_t n_threads;
    pthread_t *threads;          /* threads: [n_threads - 1] */
    colibri_worker *workers;     /* workers: [n_threads - 1] */
    pthread_mutex_t mutex;
    pthread_cond_t wake;         /* workers wait here for a new generation */
    pthread_cond_t done;         /* the caller waits here for pending == 0 */
    uint64_t generation;
    int32_t pending;             /* workers still running this generation */
    int stop;
    colibri_task_fn fn;
    void *task_ctx;
};

/* The first generation after `seen` (spinning, then sleeping). */
static uint64_t colibri_wait_generation(colibri_threadpool *pool, uint64_t seen) {
    for (int32_t i = 0; i < COLIBRI_SPIN_ROUNDS; i++) {
        uint64_t g = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
        if (g != seen) return g;
        colibri_cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    while (__atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE) == seen) {
        pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    uint64_t g = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&pool->mutex);
    return g;
}

static void *colibri_worker_main(void *arg) {
    colibri_worker *w = (colibri_worker *)arg;
    colibri_threadpool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = colibri_wait_generation(pool, seen);   /* acquire: fn, task_ctx, stop are published */
        if (pool->stop) return NULL;
        pool->fn(pool->task_ctx, w->index, pool->n_threads);
        if (__atomic_sub_fetch(&pool->pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool->mutex);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
}

colibri_threadpool *colibri_threadpool_create(int32_t n_threads) {
    colibri_threadpool *pool = (colibri_threadpool *)calloc(1, sizeof *pool);
    if (!pool) {
        colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating a thread pool");
        return NULL;
    }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    int32_t n_workers = n_threads - 1;
    if (n_workers > 0) {
        pool->threads = (pthread_t *)calloc((size_t)n_workers, sizeof *pool->threads);
        pool->workers = (colibri_worker *)calloc((size_t)n_workers, sizeof *pool->workers);
        if (!pool->threads || !pool->workers) {
            pool->n_threads = 1;
            colibri_threadpool_free(pool);
            colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating a thread pool");
            return NULL;
        }
    }
    for (int32_t i = 0; i < n_workers; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].index = i + 1;
        if (pthread_create(&pool->threads[i], NULL, colibri_worker_main, &pool->workers[i]) != 0) {
            pool->n_threads = i + 1;   /* free joins only the threads that started */
            colibri_threadpool_free(pool);
            colibri_error_set(COLIBRI_ERR_NOMEM, "could not start thread %d of %d", i + 1, n_threads);
            return NULL;
        }
    }
    return pool;
}

/* Publishes (fn, task_ctx) or stop as the next generation and wakes sleepers. */
static void colibri_publish(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx, int stop) {
    pthread_mutex_lock(&pool->mutex);
    pool->fn = fn;
    pool->task_ctx = task_ctx;
    pool->stop = stop;
    __atomic_store_n(&pool->pending, pool->n_threads - 1, __ATOMIC_RELAXED);
    __atomic_store_n(&pool->generation, pool->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
}

void colibri_threadpool_run(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx) {
    if (pool->n_threads == 1) {
        fn(task_ctx, 0, 1);
        return;
    }
    colibri_publish(pool, fn, task_ctx, 0);
    fn(task_ctx, 0, pool->n_threads);
    for (int32_t i = 0; i < COLIBRI_SPIN_ROUNDS; i++) {
        if (__atomic_load_n(&pool->pending, __ATOMIC_ACQUIRE) == 0) return;
        colibri_cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    while (__atomic_load_n(&pool->pending, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&pool->done, &pool->mutex);
    pthread_mutex_unlock(&pool->mutex);
}

void colibri_threadpool_free(colibri_threadpool *pool) {
    if (!pool) return;
    if (pool->n_threads > 1) colibri_publish(pool, NULL, NULL, 1);
    for (int32_t i = 0; i + 1 < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->threads);
    free(pool->workers);
    free(pool);
}

void colibri_range_split(int64_t n, int32_t i, int32_t nt, int64_t *lo, int64_t *hi) {
    *lo = n * i / nt;
    *hi = n * (i + 1) / nt;
}
