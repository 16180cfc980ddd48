/*
 * router.c — the ROUTER stage of a MoE layer: one token's router logits [E]
 * → its k experts and their gates, under every routing rule the supported
 * families use (colibri.h, the hparams router_* fields): softmax, sigmoid or
 * top-k-then-softmax scores, a selection-only bias, group-limited selection,
 * renormalisation with a floor and an epsilon, and a scaling factor.
 * Allocation-free (the caller passes the scratch); ties always go to the
 * lower index, so the result depends on the logits alone.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../kernels/kernels.h"

/* ---- the rule, built once from the hyperparameters ------------------------- */

int colibri_router_check(const colibri_hparams *hp) {
#define COLIBRI_REQUIRE(cond, ...) \
    if (!(cond)) return colibri_error_set(COLIBRI_ERR_INVALID, __VA_ARGS__)
    COLIBRI_REQUIRE(hp->n_expert > 0, "hparams: MoE layers need n_expert > 0");
    COLIBRI_REQUIRE(hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert,
                    "hparams: n_expert_used must be in [1, n_expert=%d], got %d", hp->n_expert,
                    hp->n_expert_used);
    COLIBRI_REQUIRE(hp->router_score >= COLIBRI_ROUTER_SOFTMAX && hp->router_score <= COLIBRI_ROUTER_TOPK_SOFTMAX,
                    "hparams: router_score must be 0 (softmax), 1 (sigmoid) or 2 (top-k softmax), got %d",
                    hp->router_score);
    COLIBRI_REQUIRE(hp->router_bias == 0 || hp->router_bias == 1, "hparams: router_bias must be 0 or 1");
    COLIBRI_REQUIRE(hp->router_sel_bias == 0 || hp->router_sel_bias == 1,
                    "hparams: router_sel_bias must be 0 or 1");
    COLIBRI_REQUIRE(hp->router_n_group >= 0 && hp->router_n_group <= hp->n_expert,
                    "hparams: router_n_group must be in [0, n_expert=%d], got %d", hp->n_expert,
                    hp->router_n_group);
    if (hp->router_n_group > 1) {
        int32_t G = hp->router_n_group, size = hp->n_expert / G;
        COLIBRI_REQUIRE(hp->n_expert % G == 0, "hparams: router_n_group=%d must divide n_expert=%d", G,
                        hp->n_expert);
        COLIBRI_REQUIRE(hp->router_group_used >= 1 && hp->router_group_used <= G,
                        "hparams: router_group_used must be in [1, router_n_group=%d], got %d", G,
                        hp->router_group_used);
        COLIBRI_REQUIRE(hp->router_group_top >= 1 && hp->router_group_top <= size,
                        "hparams: router_group_top must be in [1, n_expert/router_n_group=%d], got %d", size,
                        hp->router_group_top);
        COLIBRI_REQUIRE((int64_t)hp->router_group_used * size >= hp->n_expert_used,
                        "hparams: router_group_used=%d groups of %d experts cannot hold n_expert_used=%d",
                        hp->router_group_used, size, hp->n_expert_used);
    }
    COLIBRI_REQUIRE(isfinite(hp->router_norm_min) && hp->router_norm_min >= 0.0f,
                    "hparams: router_norm_min must be finite and >= 0");
    COLIBRI_REQUIRE(isfinite(hp->router_norm_eps) && hp->router_norm_eps >= 0.0f,
                    "hparams: router_norm_eps must be finite and >= 0");
    COLIBRI_REQUIRE(isfinite(hp->router_scale) && hp->router_scale >= 0.0f,
                    "hparams: router_scale must be finite and >= 0 (0 = 1)");
#undef COLIBRI_REQUIRE
    return COLIBRI_OK;
}

void colibri_router_from_hparams(const colibri_hparams *hp, colibri_router *r) {
    r->n_expert = hp->n_expert;
    r->k = hp->n_expert_used;
    r->score = hp->router_score;
    r->n_group = hp->router_n_group > 1 ? hp->router_n_group : 1;
    r->group_used = hp->router_n_group > 1 ? hp->router_group_used : 1;
    r->group_top = hp->router_n_group > 1 ? hp->router_group_top : 1;
    r->renorm = hp->router_renorm;
    r->norm_min = hp->router_norm_min;
    r->norm_eps = hp->router_norm_eps;
    r->scale = hp->router_scale > 0.0f ? hp->router_scale : 1.0f;
}

/* ---- selection --------------------------------------------------------------- */

/* idx[0, k) = the indices of the k largest of v[0, n), largest first, ties to
 * the lower index (n >= k >= 1). One pass, inserting into the kept list; a
 * value displaces a kept one only when strictly larger, so NaN never does
 * (while fewer than k are kept, every index is taken: the result is always
 * k distinct indices). */
static void colibri_topk(const float *v, int32_t n, int32_t k, int32_t *idx) {
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++) {
        float x = v[i];
        if (kept == k && !(x > v[idx[k - 1]])) continue;
        int32_t j = kept < k ? kept++ : k - 1;
        while (j > 0 && x > v[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

/* choice: [E] with the experts outside the group_used best of the n_group
 * groups set to -inf; a group's score is the sum of its group_top largest
 * choices, added largest first. group_score: [n_group], iwork: [E] scratch. */
static void colibri_router_mask_groups(const colibri_router *r, float *choice, float *group_score,
                                       int32_t *iwork) {
    int32_t G = r->n_group, size = r->n_expert / G;
    for (int32_t g = 0; g < G; g++) {
        const float *c = choice + (int64_t)g * size;   /* c: [size] this group's choices */
        colibri_topk(c, size, r->group_top, iwork);
        float sum = 0.0f;
        for (int32_t i = 0; i < r->group_top; i++) sum += c[iwork[i]];
        group_score[g] = sum;
    }
    colibri_topk(group_score, G, r->group_used, iwork);   /* iwork: [group_used] kept groups */
    for (int32_t g = 0; g < G; g++) {
        int kept = 0;
        for (int32_t i = 0; i < r->group_used; i++) kept |= iwork[i] == g;
        if (kept) continue;
        for (int32_t e = g * size; e < (g + 1) * size; e++) choice[e] = -INFINITY;
    }
}

void colibri_router_select(const colibri_router *r, const float *logits, const float *sel_bias, float *work,
                           int32_t *iwork, int32_t *experts, float *gates) {
    int32_t E = r->n_expert, k = r->k;
    float *s = work;                       /* s: [E] scores */
    float *choice = work + E;              /* choice: [E] s + selection bias, groups masked */
    float *group_score = work + 2 * E;     /* group_score: [n_group] */
    memcpy(s, logits, (size_t)E * sizeof(float));
    if (r->score == COLIBRI_ROUTER_SOFTMAX) {
        colibri_softmax_apply(s, E);
    } else if (r->score == COLIBRI_ROUTER_SIGMOID) {
        for (int32_t e = 0; e < E; e++) s[e] = colibri_sigmoid(s[e]);
    }
    const float *c = s;
    if (sel_bias || r->n_group > 1) {
        for (int32_t e = 0; e < E; e++) choice[e] = sel_bias ? s[e] + sel_bias[e] : s[e];
        if (r->n_group > 1) colibri_router_mask_groups(r, choice, group_score, iwork);
        c = choice;
    }
    colibri_topk(c, E, k, experts);
    for (int32_t i = 0; i < k; i++) gates[i] = s[experts[i]];
    if (r->score == COLIBRI_ROUTER_TOPK_SOFTMAX) colibri_softmax_apply(gates, k);
    if (r->renorm) {
        float sum = 0.0f;
        for (int32_t i = 0; i < k; i++) sum += gates[i];
        float denom = (sum > r->norm_min ? sum : r->norm_min) + r->norm_eps;
        for (int32_t i = 0; i < k; i++) gates[i] /= denom;
    }
    if (r->scale != 1.0f) {
        for (int32_t i = 0; i < k; i++) gates[i] *= r->scale;
    }
}

/* ---- the public entry point ------------------------------------------------------ */

COLIBRI_API int colibri_route(const colibri_hparams *hp, const float *logits, const float *sel_bias,
                              int32_t n_tokens, int32_t *experts, float *gates) {
    if (!hp) return colibri_error_set(COLIBRI_ERR_INVALID, "route: hparams is NULL");
    int rc = colibri_router_check(hp);
    if (rc != COLIBRI_OK) return rc;
    if (n_tokens < 0) return colibri_error_set(COLIBRI_ERR_INVALID, "route: n_tokens must be >= 0, got %d", n_tokens);
    if (n_tokens > 0 && (!logits || !experts || !gates)) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "route: logits, experts and gates must not be NULL");
    }
    if (hp->router_sel_bias && !sel_bias) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "route: router_sel_bias=1 needs sel_bias [n_expert]");
    }
    colibri_router r;
    colibri_router_from_hparams(hp, &r);
    int64_t E = hp->n_expert, k = hp->n_expert_used;
    float *work = (float *)malloc((size_t)COLIBRI_ROUTER_WORK_FLOATS(E) * sizeof(float));
    int32_t *iwork = (int32_t *)malloc((size_t)COLIBRI_ROUTER_WORK_INTS(E) * sizeof(int32_t));
    if (!work || !iwork) {
        free(work);
        free(iwork);
        return colibri_error_set(COLIBRI_ERR_NOMEM, "route: out of memory");
    }
    for (int64_t t = 0; t < n_tokens; t++) {
        colibri_router_select(&r, logits + t * E, hp->router_sel_bias ? sel_bias : NULL, work, iwork,
                              experts + t * k, gates + t * k);
    }
    free(work);
    free(iwork);
    return COLIBRI_OK;
}
