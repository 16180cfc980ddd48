/*
 * threadpool.h — a persistent pthread pool (internal).
 * colibri_threadpool_run(pool, fn, arg) calls fn(arg, i, n) once for every
 * thread index i in [0, n) — index 0 on the calling thread — and returns when
 * all have finished. Work is split statically by the callee from (i, n), so
 * the same index always computes the same rows. In a child of fork() (the
 * workers stayed behind in the parent) a run calls fn for every index in turn
 * on the caller instead: the same shares, so the same values, at one
 * thread's speed, never a hang.
 */
#ifndef COLIBRI_THREADPOOL_H
#define COLIBRI_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct colibri_threadpool colibri_threadpool;
typedef void (*colibri_task_fn)(void *task_ctx, int32_t thread_index, int32_t n_threads);

/* NULL on failure (with colibri_last_error set). cpus: [n_threads] the CPU
 * each worker (index >= 1) is pinned to from its start, or NULL for none;
 * cpus[0] is the caller's and is left alone (the caller's thread belongs to
 * the application). */
colibri_threadpool *colibri_threadpool_create(int32_t n_threads, const int32_t *cpus);
/* 1 if every worker was started on the CPU create gave it. */
int colibri_threadpool_pinned(const colibri_threadpool *pool);
void colibri_threadpool_run(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx);
void colibri_threadpool_free(colibri_threadpool *pool);
/* The caller is about to block on something else (storage) and will not
 * start a run for a while: idle workers go to sleep now instead of spinning
 * (a spinning vCPU takes host CPU the wait itself may need). The next run
 * wakes them as usual (a futex wake-up each). */
void colibri_threadpool_nap(colibri_threadpool *pool);

/* Per-thread timing for the profiler (off by default: one branch per run).
 * While on, each worker adds the time it spends inside fn and the caller the
 * time it waits for the workers at the end of a run; take_times hands out
 * and resets those sums: busy: [n_threads] (busy[0] unused), *caller_wait. */
void colibri_threadpool_timing(colibri_threadpool *pool, int on);
void colibri_threadpool_take_times(colibri_threadpool *pool, double *busy, double *caller_wait);

/* How many fork()s lie between the process that loaded the library and this one (0 in that
 * process; the child side of each fork adds one). Threads do not survive a fork, so a pool
 * (or a paging context's readers) made at another count has no workers here: its runs go
 * sequentially on the caller (colibri_threadpool_run), its free joins nothing. */
uint64_t colibri_fork_generation(void);

/* The stack a thread running a forward step needs: the AVX2 gemm of the 256-element types keeps
 * its two panels and the tokens' side of a chunk on the stack (~255 KiB; a 2-thread Q4_K_M
 * prefill crashed in a worker under `ulimit -s 256`, whose size glibc gives new threads), so
 * twice that. Workers are created with at least this much; colibri_forward refuses a calling
 * thread with less in one line. */
#define COLIBRI_THREAD_STACK_MIN ((size_t)512 << 10)

/* The calling thread's stack size in bytes (SIZE_MAX where the system does not say),
 * looked up once per thread. */
size_t colibri_thread_stack_bytes(void);

/* The static share [*lo, *hi) of n items for thread i of nt. */
void colibri_range_split(int64_t n, int32_t i, int32_t nt, int64_t *lo, int64_t *hi);
/* CLOCK_MONOTONIC seconds. */
double colibri_now(void);

#endif /* COLIBRI_THREADPOOL_H */
