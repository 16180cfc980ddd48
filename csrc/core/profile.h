/*
 * profile.h — the forward step's stage timers (internal; the public switch and
 * read-out are colibri_profile_enable / colibri_profile_read in colibri.h).
 *
 * A step calls colibri_profile_begin once, then colibri_profile_mark(ctx,
 * stage, layer) at the end of every stretch of work: the time since the
 * previous mark is charged to (stage, layer). Layer -1 is outside the layers
 * (embedding, lm_head). State lives in the context (ctx->profile); when it is
 * not being profiled both calls are one NULL test.
 */
#ifndef COLIBRI_PROFILE_H
#define COLIBRI_PROFILE_H

#include <stdint.h>

#include "internal.h"

typedef struct colibri_profile colibri_profile;

void colibri_profile_restart(colibri_profile *p);
void colibri_profile_charge(colibri_profile *p, int32_t stage, int32_t layer);
/* Frees a context's timers (NULL: nothing). */
void colibri_profile_free(colibri_profile *p);

static inline void colibri_profile_begin(const colibri_context *ctx) {
    if (ctx->profile) colibri_profile_restart(ctx->profile);
}

static inline void colibri_profile_mark(const colibri_context *ctx, int32_t stage, int32_t layer) {
    if (ctx->profile) colibri_profile_charge(ctx->profile, stage, layer);
}

#endif /* COLIBRI_PROFILE_H */
