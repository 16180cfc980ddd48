/*
 * profile.h — the forward step's stage timers (internal; the public switch and
 * read-out are colibri_profile_enable / colibri_profile_read* in colibri.h).
 *
 * A step calls colibri_profile_begin once, then colibri_profile_mark(ctx,
 * stage, layer) at the end of every stretch of work: the time since the
 * previous mark is charged to (stage, layer), and each thread's share of it
 * to (stage, thread) as busy (inside pool runs; for the caller, everything
 * but its waits for the workers) or waiting. Layer -1 is outside the layers
 * (embedding, lm_head). Matmul runs charge each routed expert's thread time
 * and weight bytes to (layer of the last mark, expert). State lives in the
 * context (ctx->profile); when it is not being profiled every call is one
 * NULL test.
 */
#ifndef COLIBRI_PROFILE_H
#define COLIBRI_PROFILE_H

#include <stdint.h>

#include "internal.h"

typedef struct colibri_profile colibri_profile;

void colibri_profile_restart(const colibri_context *ctx);
void colibri_profile_charge(const colibri_context *ctx, int32_t stage, int32_t layer);
/* Adds one routed expert's work in the current layer: tokens (0 for a second
 * matmul of the same step), weight bytes read, thread-seconds spent. */
void colibri_profile_expert(colibri_profile *p, int32_t expert, int64_t tokens, int64_t bytes, double seconds);
/* Frees a context's timers (NULL: nothing). */
void colibri_profile_free(colibri_profile *p);

static inline void colibri_profile_begin(const colibri_context *ctx) {
    if (ctx->profile) colibri_profile_restart(ctx);
}

static inline void colibri_profile_mark(const colibri_context *ctx, int32_t stage, int32_t layer) {
    if (ctx->profile) colibri_profile_charge(ctx, stage, layer);
}

#endif /* COLIBRI_PROFILE_H */
