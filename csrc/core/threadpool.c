/*
 * threadpool.c — persistent pthread pool: n-1 workers plus the caller.
 * A run publishes (fn, arg) under a new generation number, runs index 0
 * itself and waits until every worker has stored that generation in its own
 * done flag (a cache line per worker: no read-modify-write that all of them
 * would contend for).
 *
 * A decode step is dozens of short runs, so both waits spin first (about a
 * millisecond, with the CPU's pause hint) and only then sleep on a condition
 * variable: a sleeping worker costs a futex wake-up per run, tens of
 * microseconds in a VM. A side about to sleep counts itself in `sleepers`
 * (or sets `caller_sleeps`) and checks its condition again; the other side
 * changes the condition and then reads that count, both sequentially
 * consistent, so one of the two always sees the other and no wake-up is lost;
 * a run with nobody asleep touches no mutex.
 *
 * fork(): only the forking thread lives on in the child. An atfork handler
 * counts the forks a process descends through; a pool made at another count
 * runs its shares one after another on the caller and frees without joining
 * (or touching its mutex, which a worker may have held at the fork).
 *
 * A caller about to block on something else (an expert read) says so first
 * (colibri_threadpool_nap): the workers' spin then ends at once. Spinning
 * through a wait for storage only burns a vCPU the host could give to the
 * read (measured on a 2-vCPU VM: the hypervisor's steal grew with it).
 */
#define _GNU_SOURCE 1   /* pthread_attr_setaffinity_np, CPU_SET */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define COLIBRI_SPIN_ROUNDS (1 << 14)   /* pause hints before a wait sleeps */
#define COLIBRI_LINE 64

static inline void colibri_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

double colibri_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One worker's state, alone on its cache line(s). */
typedef struct colibri_worker {
    _Alignas(COLIBRI_LINE) uint64_t done;   /* the last generation it finished */
    double busy;                            /* seconds inside fn since the last take_times (timing on) */
    colibri_threadpool *pool;
    int32_t index;
} colibri_worker;

struct colibri_threadpool {
    _Alignas(COLIBRI_LINE) uint64_t generation;   /* read by every spinning worker */
    uint64_t forks;              /* colibri_fork_generation() when the workers started */
    colibri_task_fn fn;
    void *task_ctx;
    int stop;
    int timing;                  /* per-thread timing on */
    int pinned;                  /* every worker runs on the CPU it was given */
    int32_t nap;                 /* no run soon (colibri_threadpool_nap): idle workers sleep, not spin */
    _Alignas(COLIBRI_LINE) int32_t sleepers;   /* workers asleep (or about to be) on `wake` */
    int32_t caller_sleeps;       /* the caller is asleep (or about to be) on `done` */
    int32_t n_threads;
    double caller_wait;          /* seconds the caller waited for workers (timing on) */
    pthread_t *threads;          /* threads: [n_threads - 1] */
    colibri_worker *workers;     /* workers: [n_threads - 1] */
    pthread_mutex_t mutex;
    pthread_cond_t wake;         /* workers sleep here for a new generation */
    pthread_cond_t done_cond;    /* the caller sleeps here for the workers */
};

/* ---- fork() ---------------------------------------------------------------------- */

static uint64_t colibri_forks;   /* the child side of every fork() since the library loaded adds one */
static pthread_once_t colibri_fork_once = PTHREAD_ONCE_INIT;

static void colibri_fork_child(void) { colibri_forks++; }

static void colibri_fork_watch(void) { pthread_atfork(NULL, NULL, colibri_fork_child); }

uint64_t colibri_fork_generation(void) {
    pthread_once(&colibri_fork_once, colibri_fork_watch);
    return colibri_forks;
}

/* Whether the pool's workers live in another process (this one is a fork() child of it). */
static int colibri_pool_orphaned(const colibri_threadpool *pool) { return pool->forks != colibri_forks; }

/* ---- waiting ------------------------------------------------------------------- */

/* The first generation after `seen` (spinning, then sleeping). */
static uint64_t colibri_wait_generation(colibri_threadpool *pool, uint64_t seen) {
    for (int32_t i = 0; i < COLIBRI_SPIN_ROUNDS; i++) {
        uint64_t g = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
        if (g != seen) return g;
        if (__atomic_load_n(&pool->nap, __ATOMIC_RELAXED)) break;
        colibri_cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    __atomic_add_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&pool->generation, __ATOMIC_SEQ_CST) == seen) {
        pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    __atomic_sub_fetch(&pool->sleepers, 1, __ATOMIC_SEQ_CST);
    uint64_t g = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&pool->mutex);
    return g;
}

/* Whether every worker has finished generation g. */
static int colibri_all_done(colibri_threadpool *pool, uint64_t g, int order) {
    for (int32_t i = 0; i + 1 < pool->n_threads; i++) {
        if (__atomic_load_n(&pool->workers[i].done, order) != g) return 0;
    }
    return 1;
}

static void colibri_wait_done(colibri_threadpool *pool, uint64_t g) {
    for (int32_t i = 0; i < COLIBRI_SPIN_ROUNDS; i++) {
        if (colibri_all_done(pool, g, __ATOMIC_ACQUIRE)) return;
        colibri_cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    __atomic_store_n(&pool->caller_sleeps, 1, __ATOMIC_SEQ_CST);
    while (!colibri_all_done(pool, g, __ATOMIC_SEQ_CST)) pthread_cond_wait(&pool->done_cond, &pool->mutex);
    __atomic_store_n(&pool->caller_sleeps, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&pool->mutex);
}

static void *colibri_worker_main(void *arg) {
    colibri_worker *w = (colibri_worker *)arg;
    colibri_threadpool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = colibri_wait_generation(pool, seen);   /* acquire: fn, task_ctx, stop are published */
        if (pool->stop) return NULL;
        if (pool->timing) {
            double start = colibri_now();
            pool->fn(pool->task_ctx, w->index, pool->n_threads);
            w->busy += colibri_now() - start;
        } else {
            pool->fn(pool->task_ctx, w->index, pool->n_threads);
        }
        __atomic_store_n(&w->done, seen, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&pool->caller_sleeps, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&pool->mutex);
            pthread_cond_signal(&pool->done_cond);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
}

/* ---- life ------------------------------------------------------------------------ */

/* The affinity set of one CPU. */
static void colibri_cpu_set(cpu_set_t *set, int32_t cpu) {
    CPU_ZERO(set);
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, set);
}

/* A worker's attributes: a stack of COLIBRI_THREAD_STACK_MIN bytes or the system's default if
 * larger, never the default alone (musl's is 128 KiB, and glibc's follows `ulimit -s`). */
static void colibri_worker_attr_init(pthread_attr_t *attr) {
    size_t size = 0;
    pthread_attr_init(attr);
    if (pthread_attr_getstacksize(attr, &size) != 0 || size < COLIBRI_THREAD_STACK_MIN) {
        pthread_attr_setstacksize(attr, COLIBRI_THREAD_STACK_MIN);
    }
}

size_t colibri_thread_stack_bytes(void) {
    static __thread size_t bytes;   /* 0: not looked up yet on this thread */
    if (bytes == 0) {
        pthread_attr_t attr;
        void *base = NULL;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &base, &size) != 0) size = 0;
            pthread_attr_destroy(&attr);
        }
        bytes = size > 0 ? size : SIZE_MAX;   /* unknown: assume enough */
    }
    return bytes;
}

colibri_threadpool *colibri_threadpool_create(int32_t n_threads, const int32_t *cpus) {
    colibri_threadpool *pool = NULL;
    if (posix_memalign((void **)&pool, COLIBRI_LINE, sizeof *pool) != 0) pool = NULL;
    if (!pool) {
        colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating a thread pool");
        return NULL;
    }
    memset(pool, 0, sizeof *pool);
    pool->forks = colibri_fork_generation();
    pool->n_threads = 1;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done_cond, NULL);
    int32_t n_workers = n_threads - 1;
    pool->pinned = cpus != NULL && n_workers > 0;
    if (n_workers > 0) {
        pool->threads = (pthread_t *)calloc((size_t)n_workers, sizeof *pool->threads);
        if (posix_memalign((void **)&pool->workers, COLIBRI_LINE, (size_t)n_workers * sizeof *pool->workers) != 0) {
            pool->workers = NULL;
        }
        if (!pool->threads || !pool->workers) {
            colibri_threadpool_free(pool);
            colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating a thread pool");
            return NULL;
        }
        memset(pool->workers, 0, (size_t)n_workers * sizeof *pool->workers);
    }
    for (int32_t i = 0; i < n_workers; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].index = i + 1;
        pthread_attr_t attr;
        colibri_worker_attr_init(&attr);
        if (cpus) {   /* the thread starts on its CPU, so its stack is first touched there */
            cpu_set_t set;
            colibri_cpu_set(&set, cpus[i + 1]);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        }
        int rc = pthread_create(&pool->threads[i], &attr, colibri_worker_main, &pool->workers[i]);
        if (rc != 0 && cpus) {   /* the CPU may have gone away: start unpinned */
            pthread_attr_destroy(&attr);
            colibri_worker_attr_init(&attr);
            rc = pthread_create(&pool->threads[i], &attr, colibri_worker_main, &pool->workers[i]);
            pool->pinned = 0;
        }
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            colibri_threadpool_free(pool);   /* joins the i threads that started */
            colibri_error_set(COLIBRI_ERR_NOMEM, "could not start thread %d of %d", i + 1, n_threads);
            return NULL;
        }
        pool->n_threads = i + 2;
    }
    return pool;
}

int colibri_threadpool_pinned(const colibri_threadpool *pool) { return pool->pinned; }

/* Publishes (fn, task_ctx) or stop as the next generation, waking any sleeper. */
static uint64_t colibri_publish(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx, int stop) {
    pool->fn = fn;
    pool->task_ctx = task_ctx;
    pool->stop = stop;
    __atomic_store_n(&pool->nap, 0, __ATOMIC_RELAXED);
    uint64_t g = pool->generation + 1;
    __atomic_store_n(&pool->generation, g, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pool->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mutex);
    }
    return g;
}

void colibri_threadpool_run(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx) {
    if (pool->n_threads == 1) {
        fn(task_ctx, 0, 1);
        return;
    }
    if (colibri_pool_orphaned(pool)) {   /* a fork() child: every share on the caller, in turn */
        for (int32_t i = 0; i < pool->n_threads; i++) fn(task_ctx, i, pool->n_threads);
        return;
    }
    uint64_t g = colibri_publish(pool, fn, task_ctx, 0);
    fn(task_ctx, 0, pool->n_threads);
    if (pool->timing) {
        double start = colibri_now();
        colibri_wait_done(pool, g);
        pool->caller_wait += colibri_now() - start;
    } else {
        colibri_wait_done(pool, g);
    }
}

void colibri_threadpool_nap(colibri_threadpool *pool) {
    if (pool->n_threads > 1) __atomic_store_n(&pool->nap, 1, __ATOMIC_RELAXED);
}

void colibri_threadpool_timing(colibri_threadpool *pool, int on) {
    pool->timing = on;
    pool->caller_wait = 0.0;
    for (int32_t i = 0; i + 1 < pool->n_threads; i++) pool->workers[i].busy = 0.0;
}

void colibri_threadpool_take_times(colibri_threadpool *pool, double *busy, double *caller_wait) {
    *caller_wait = pool->caller_wait;
    pool->caller_wait = 0.0;
    for (int32_t i = 0; i + 1 < pool->n_threads; i++) {
        busy[i + 1] = pool->workers[i].busy;
        pool->workers[i].busy = 0.0;
    }
}

void colibri_threadpool_free(colibri_threadpool *pool) {
    if (!pool) return;
    if (!colibri_pool_orphaned(pool)) {   /* in a fork() child there is no worker to stop, and the
                                             mutex may have been held by one at the fork */
        if (pool->n_threads > 1) colibri_publish(pool, NULL, NULL, 1);
        for (int32_t i = 0; i + 1 < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
        pthread_cond_destroy(&pool->wake);
        pthread_cond_destroy(&pool->done_cond);
        pthread_mutex_destroy(&pool->mutex);
    }
    free(pool->threads);
    free(pool->workers);
    free(pool);
}

void colibri_range_split(int64_t n, int32_t i, int32_t nt, int64_t *lo, int64_t *hi) {
    *lo = n * i / nt;
    *hi = n * (i + 1) / nt;
}
