/*
 * threadpool.h — a persistent pthread pool (internal).
 * colibri_threadpool_run(pool, fn, arg) calls fn(arg, i, n) once for every
 * thread index i in [0, n) — index 0 on the calling thread — and returns when
 * all have finished. Work is split statically by the callee from (i, n), so
 * the same index always computes the same rows.
 */
#ifndef COLIBRI_THREADPOOL_H
#define COLIBRI_THREADPOOL_H

#include <stdint.h>

typedef struct colibri_threadpool colibri_threadpool;
typedef void (*colibri_task_fn)(void *task_ctx, int32_t thread_index, int32_t n_threads);

/* NULL on failure (with colibri_last_error set). */
colibri_threadpool *colibri_threadpool_create(int32_t n_threads);
void colibri_threadpool_run(colibri_threadpool *pool, colibri_task_fn fn, void *task_ctx);
void colibri_threadpool_free(colibri_threadpool *pool);

/* The static share [*lo, *hi) of n items for thread i of nt. */
void colibri_range_split(int64_t n, int32_t i, int32_t nt, int64_t *lo, int64_t *hi);

#endif /* COLIBRI_THREADPOOL_H */
