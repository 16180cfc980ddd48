/*
 * model.c — colibri_model: hyperparameter validation, tensor registration
 * (kind / layer / expert range, dtype and shape checks) and the finalize
 * check that every tensor the hyperparameters call for was set.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "native_file.h"
#include "../kernels/kernels.h"
#include "../kernels/quant.h"

static const char *const colibri_kind_names[COLIBRI_T_COUNT] = {
    "TOKEN_EMBD", "OUTPUT_NORM", "OUTPUT", "ATTN_NORM", "WQ", "WK", "WV", "WO", "BQ", "BK", "BV",
    "Q_NORM", "K_NORM", "FFN_NORM", "FFN_GATE", "FFN_UP", "FFN_DOWN", "ROUTER", "EXPERT_GATE",
    "EXPERT_UP", "EXPERT_DOWN", "SHARED_GATE", "SHARED_UP", "SHARED_DOWN", "SHARED_ROUTER",
    "ROUTER_BIAS", "ROUTER_SEL_BIAS", "BO", "ATTN_SINKS", "EXPERT_GATE_BIAS", "EXPERT_UP_BIAS",
    "EXPERT_DOWN_BIAS", "WQ_A", "Q_A_NORM", "WQ_B", "WKV_A", "KV_A_NORM", "WK_B", "WV_B",
};

static int colibri_kind_is_global(int32_t kind) {
    return kind <= COLIBRI_T_OUTPUT;
}

static int colibri_kind_is_expert(int32_t kind) {
    return kind >= COLIBRI_T_EXPERT_GATE && kind <= COLIBRI_T_EXPERT_DOWN;
}

/* Norms, biases and sinks: read a row at a time as vectors, never multiplied as matrices. */
static int colibri_kind_is_vector(int32_t kind) {
    switch (kind) {
    case COLIBRI_T_OUTPUT_NORM: case COLIBRI_T_ATTN_NORM: case COLIBRI_T_BQ: case COLIBRI_T_BK:
    case COLIBRI_T_BV: case COLIBRI_T_Q_NORM: case COLIBRI_T_K_NORM: case COLIBRI_T_FFN_NORM:
    case COLIBRI_T_ROUTER_BIAS: case COLIBRI_T_ROUTER_SEL_BIAS:
    case COLIBRI_T_BO: case COLIBRI_T_ATTN_SINKS:
    case COLIBRI_T_EXPERT_GATE_BIAS: case COLIBRI_T_EXPERT_UP_BIAS: case COLIBRI_T_EXPERT_DOWN_BIAS:
    case COLIBRI_T_Q_A_NORM: case COLIBRI_T_KV_A_NORM:
        return 1;
    default: return 0;
    }
}

COLIBRI_API int colibri_tensor_kind_is_vector(int32_t kind) {
    return kind < 0 || kind >= COLIBRI_T_COUNT ? -1 : colibri_kind_is_vector(kind);
}

/* ---- hyperparameters ---------------------------------------------------- */

static int colibri_flag_ok(int32_t v) {
    return v == 0 || v == 1;
}

/* Latent attention's sizes stay far below INT32_MAX, so sums such as
 * kv_lora_rank + head_dim never overflow. */
#define COLIBRI_LATENT_SIZE_MAX (1 << 20)
static int colibri_latent_size_ok(int32_t v) {
    return v >= 0 && v <= COLIBRI_LATENT_SIZE_MAX;
}

/* Returns 0 or COLIBRI_ERR_INVALID with the first problem found. */
static int colibri_hparams_check(const colibri_hparams *hp) {
    if (!hp) return colibri_error_set(COLIBRI_ERR_INVALID, "hparams is NULL");
#define COLIBRI_REQUIRE(cond, ...) \
    if (!(cond)) return colibri_error_set(COLIBRI_ERR_INVALID, __VA_ARGS__)
    COLIBRI_REQUIRE(hp->n_vocab > 0, "hparams: n_vocab must be > 0, got %d", hp->n_vocab);
    COLIBRI_REQUIRE(hp->n_embd > 0, "hparams: n_embd must be > 0, got %d", hp->n_embd);
    COLIBRI_REQUIRE(hp->n_layer > 0, "hparams: n_layer must be > 0, got %d", hp->n_layer);
    COLIBRI_REQUIRE(hp->n_head > 0, "hparams: n_head must be > 0, got %d", hp->n_head);
    COLIBRI_REQUIRE(hp->n_head_kv > 0 && hp->n_head % hp->n_head_kv == 0,
                    "hparams: n_head_kv must be > 0 and divide n_head=%d, got %d", hp->n_head,
                    hp->n_head_kv);
    COLIBRI_REQUIRE(hp->head_dim > 0 && hp->head_dim % 2 == 0,
                    "hparams: head_dim must be even and > 0, got %d", hp->head_dim);
    COLIBRI_REQUIRE(hp->n_ff >= 0, "hparams: n_ff must be >= 0, got %d", hp->n_ff);
    COLIBRI_REQUIRE(hp->n_ff_shared >= 0, "hparams: n_ff_shared must be >= 0, got %d",
                    hp->n_ff_shared);
    COLIBRI_REQUIRE(colibri_flag_ok(hp->shared_gated), "hparams: shared_gated must be 0 or 1");
    COLIBRI_REQUIRE(!hp->shared_gated || hp->n_ff_shared > 0,
                    "hparams: shared_gated=1 needs a shared expert (n_ff_shared > 0)");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->router_renorm), "hparams: router_renorm must be 0 or 1");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->attn_bias), "hparams: attn_bias must be 0 or 1");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->tied_embeddings), "hparams: tied_embeddings must be 0 or 1");
    COLIBRI_REQUIRE(hp->qk_norm >= COLIBRI_QK_NORM_NONE && hp->qk_norm <= COLIBRI_QK_NORM_WHOLE,
                    "hparams: qk_norm must be 0, 1 or 2, got %d", hp->qk_norm);
    COLIBRI_REQUIRE(hp->sliding_window >= 0, "hparams: sliding_window must be >= 0, got %d",
                    hp->sliding_window);
    COLIBRI_REQUIRE(hp->rope_interleaved == 0 || hp->rope_interleaved == 1,
                    "hparams: rope_interleaved must be 0 or 1, got %d", hp->rope_interleaved);
    COLIBRI_REQUIRE(isfinite(hp->norm_eps) && hp->norm_eps >= 0.0f,
                    "hparams: norm_eps must be finite and >= 0");
    COLIBRI_REQUIRE(isfinite(hp->attn_scale) && hp->attn_scale >= 0.0f,
                    "hparams: attn_scale must be finite and >= 0 (0 = 1/sqrt(head_dim))");
    COLIBRI_REQUIRE(isfinite(hp->rope_attn_factor), "hparams: rope_attn_factor must be finite");
    COLIBRI_REQUIRE(isfinite(hp->qkv_clip) && hp->qkv_clip >= 0.0f,
                    "hparams: qkv_clip must be finite and >= 0 (0 = off)");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->attn_out_bias), "hparams: attn_out_bias must be 0 or 1");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->attn_sinks), "hparams: attn_sinks must be 0 or 1");
    COLIBRI_REQUIRE(colibri_flag_ok(hp->expert_bias), "hparams: expert_bias must be 0 or 1");
    COLIBRI_REQUIRE(hp->ffn_act == COLIBRI_FFN_SWIGLU || hp->ffn_act == COLIBRI_FFN_SWIGLU_CLAMPED,
                    "hparams: ffn_act must be 0 (SWIGLU) or 1 (SWIGLU_CLAMPED), got %d", hp->ffn_act);
    COLIBRI_REQUIRE(hp->ffn_act != COLIBRI_FFN_SWIGLU_CLAMPED ||
                        (isfinite(hp->ffn_alpha) && hp->ffn_alpha > 0.0f && isfinite(hp->ffn_limit) &&
                         hp->ffn_limit > 0.0f),
                    "hparams: SWIGLU_CLAMPED needs finite ffn_alpha > 0 and ffn_limit > 0");
    COLIBRI_REQUIRE(hp->rope_dim >= 0 && hp->rope_dim <= hp->head_dim && hp->rope_dim % 2 == 0,
                    "hparams: rope_dim must be even and in [0, head_dim=%d] (0 = head_dim), got %d",
                    hp->head_dim, hp->rope_dim);
    COLIBRI_REQUIRE(isfinite(hp->embd_scale) && isfinite(hp->residual_scale) && isfinite(hp->logit_scale) &&
                    hp->logit_scale >= 0.0f,
                    "hparams: embd_scale, residual_scale and logit_scale must be finite, logit_scale >= 0 "
                    "(0 = 1)");
    COLIBRI_REQUIRE(hp->rope_inv_freq != NULL, "hparams: rope_inv_freq is NULL");
    COLIBRI_REQUIRE(hp->layer_is_moe != NULL, "hparams: layer_is_moe is NULL");
    COLIBRI_REQUIRE(colibri_latent_size_ok(hp->kv_lora_rank) && colibri_latent_size_ok(hp->q_lora_rank) &&
                    colibri_latent_size_ok(hp->head_dim_nope) && colibri_latent_size_ok(hp->head_dim_v),
                    "hparams: kv_lora_rank, q_lora_rank, head_dim_nope and head_dim_v must be in [0, %d]",
                    COLIBRI_LATENT_SIZE_MAX);
    if (hp->kv_lora_rank > 0) {
        COLIBRI_REQUIRE(hp->head_dim_nope > 0 && hp->head_dim_v > 0,
                        "hparams: latent attention (kv_lora_rank > 0) needs head_dim_nope and head_dim_v > 0");
        COLIBRI_REQUIRE(hp->n_head_kv == 1, "hparams: latent attention needs n_head_kv = 1 (one latent), got %d",
                        hp->n_head_kv);
        int windowed = hp->sliding_window != 0;
        for (int32_t l = 0; hp->layer_window && l < hp->n_layer; l++) windowed |= hp->layer_window[l] != 0;
        COLIBRI_REQUIRE(!hp->attn_bias && hp->qk_norm == COLIBRI_QK_NORM_NONE && hp->qkv_clip == 0.0f && !windowed &&
                        !hp->attn_out_bias && !hp->attn_sinks,
                        "hparams: latent attention has no attn_bias, qk_norm, qkv_clip, sliding window, "
                        "attn_out_bias or attn_sinks");
        COLIBRI_REQUIRE(isfinite(hp->latent_norm_eps) && hp->latent_norm_eps >= 0.0f,
                        "hparams: latent_norm_eps must be finite and >= 0");
        COLIBRI_REQUIRE(hp->rope_dim == 0 || hp->rope_dim == hp->head_dim,
                        "hparams: latent attention rotates all head_dim=%d RoPE dims (rope_dim 0 or %d), got %d",
                        hp->head_dim, hp->head_dim, hp->rope_dim);
    } else {
        COLIBRI_REQUIRE(hp->q_lora_rank == 0 && hp->head_dim_nope == 0 && hp->head_dim_v == 0,
                        "hparams: q_lora_rank, head_dim_nope and head_dim_v need latent attention "
                        "(kv_lora_rank > 0)");
    }
    for (int32_t i = 0; i < hp->head_dim / 2; i++) {
        COLIBRI_REQUIRE(isfinite(hp->rope_inv_freq[i]), "hparams: rope_inv_freq[%d] is not finite", i);
    }
    for (int32_t l = 0; hp->layer_window && l < hp->n_layer; l++) {
        COLIBRI_REQUIRE(hp->layer_window[l] >= 0, "hparams: layer_window[%d] must be >= 0, got %d", l,
                        hp->layer_window[l]);
    }
    int any_moe = 0, any_dense = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        COLIBRI_REQUIRE(hp->layer_is_moe[l] <= 1, "hparams: layer_is_moe[%d] must be 0 or 1, got %d",
                        l, hp->layer_is_moe[l]);
        if (hp->layer_is_moe[l]) any_moe = 1;
        else any_dense = 1;
    }
    COLIBRI_REQUIRE(!any_dense || hp->n_ff > 0, "hparams: dense layers need n_ff > 0");
    /* a size no layer uses would still size context scratch: it must be 0 */
    COLIBRI_REQUIRE(any_dense || hp->n_ff == 0, "hparams: n_ff must be 0 without dense layers, got %d", hp->n_ff);
    if (any_moe) {
        int rc = colibri_router_check(hp);
        if (rc != COLIBRI_OK) return rc;
        COLIBRI_REQUIRE(hp->n_ff_expert > 0, "hparams: MoE layers need n_ff_expert > 0");
    } else {
        COLIBRI_REQUIRE(hp->n_ff_shared == 0, "hparams: a shared expert needs MoE layers");
        COLIBRI_REQUIRE(!hp->expert_bias, "hparams: expert_bias needs MoE layers");
        COLIBRI_REQUIRE(hp->n_expert == 0 && hp->n_expert_used == 0 && hp->n_ff_expert == 0,
                        "hparams: n_expert, n_expert_used and n_ff_expert must be 0 without MoE layers, got %d, %d, %d",
                        hp->n_expert, hp->n_expert_used, hp->n_ff_expert);
    }
    COLIBRI_REQUIRE(hp->n_expert >= 0 && hp->n_expert_used >= 0 && hp->n_ff_expert >= 0,
                    "hparams: n_expert, n_expert_used and n_ff_expert must be >= 0");
#undef COLIBRI_REQUIRE
    return COLIBRI_OK;
}

/* ---- create / free ------------------------------------------------------- */

COLIBRI_API colibri_model *colibri_model_create(const colibri_hparams *hp) {
    if (colibri_hparams_check(hp) != COLIBRI_OK) return NULL;
    colibri_model *m = (colibri_model *)calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->hp = *hp;
    m->rope_inv_freq = (float *)malloc((size_t)(hp->head_dim / 2) * sizeof(float));
    m->layer_is_moe = (uint8_t *)malloc((size_t)hp->n_layer);
    m->layer_window = (int32_t *)malloc((size_t)hp->n_layer * sizeof(int32_t));
    m->layers = (colibri_layer *)calloc((size_t)hp->n_layer, sizeof(colibri_layer));
    if (!m->rope_inv_freq || !m->layer_is_moe || !m->layer_window || !m->layers) goto nomem;
    memcpy(m->rope_inv_freq, hp->rope_inv_freq, (size_t)(hp->head_dim / 2) * sizeof(float));
    memcpy(m->layer_is_moe, hp->layer_is_moe, (size_t)hp->n_layer);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        m->layer_window[l] = hp->layer_window ? hp->layer_window[l] : hp->sliding_window;
    }
    m->hp.rope_inv_freq = m->rope_inv_freq;
    m->hp.layer_is_moe = m->layer_is_moe;
    colibri_router_from_hparams(hp, &m->router);
    m->hp.layer_window = m->layer_window;
    m->rope_dim = hp->rope_dim ? hp->rope_dim : hp->head_dim;
    m->embd_scale = hp->embd_scale != 0.0f ? hp->embd_scale : 1.0f;
    m->residual_scale = hp->residual_scale != 0.0f ? hp->residual_scale : 1.0f;
    m->logit_scale = hp->logit_scale != 0.0f ? hp->logit_scale : 1.0f;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (!m->layer_is_moe[l]) continue;
        m->layers[l].experts = (colibri_tensor *)calloc((size_t)hp->n_expert * COLIBRI_EXPERT_KINDS,
                                                        sizeof(colibri_tensor));
        if (!m->layers[l].experts) goto nomem;
    }
    return m;
nomem:
    colibri_model_free(m);
    colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating the model");
    return NULL;
}

COLIBRI_API void colibri_model_free(colibri_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int32_t l = 0; l < m->hp.n_layer; l++) free(m->layers[l].experts);
    }
    free(m->layers);
    for (int32_t i = 0; i < m->n_sources; i++) free(m->sources[i].path);
    free(m->sources);
    colibri_file_close(m->file);
    free(m->rope_inv_freq);
    free(m->layer_is_moe);
    free(m->layer_window);
    free(m);
}

COLIBRI_API const colibri_hparams *colibri_model_hparams(const colibri_model *m) {
    return m ? &m->hp : NULL;
}

/* ---- which tensors, which shapes ------------------------------------------- */

/* Whether (kind, layer) is part of this model, and its expected [rows, cols].
 * layer is a valid layer index for per-layer kinds (ignored for global ones). */
static int colibri_tensor_expected(const colibri_model *m, int32_t kind, int32_t layer,
                                   int64_t *rows, int64_t *cols) {
    const colibri_hparams *hp = &m->hp;
    int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim;
    int64_t K = (int64_t)hp->n_head_kv * hp->head_dim;
    int moe = !colibri_kind_is_global(kind) && m->layer_is_moe[layer];
    int per_head = hp->qk_norm == COLIBRI_QK_NORM_PER_HEAD;
    int latent = hp->kv_lora_rank > 0, q_lora = hp->q_lora_rank > 0;
    int64_t R = hp->kv_lora_rank, Rq = hp->q_lora_rank, H = hp->n_head;
    if (latent) Q = H * (hp->head_dim_nope + hp->head_dim);   /* a query head: nope dims, then RoPE dims */
    int64_t O = latent ? H * hp->head_dim_v : Q;               /* WO's input width */
    int64_t shape[COLIBRI_T_COUNT][2] = {
        [COLIBRI_T_TOKEN_EMBD] = {hp->n_vocab, D}, [COLIBRI_T_OUTPUT_NORM] = {1, D},
        [COLIBRI_T_OUTPUT] = {hp->n_vocab, D},     [COLIBRI_T_ATTN_NORM] = {1, D},
        [COLIBRI_T_WQ] = {Q, D},                    [COLIBRI_T_WK] = {K, D},
        [COLIBRI_T_WV] = {K, D},                    [COLIBRI_T_WO] = {D, O},
        [COLIBRI_T_BQ] = {1, Q},                    [COLIBRI_T_BK] = {1, K},
        [COLIBRI_T_BV] = {1, K},
        [COLIBRI_T_Q_NORM] = {1, per_head ? hp->head_dim : Q},
        [COLIBRI_T_K_NORM] = {1, per_head ? hp->head_dim : K},
        [COLIBRI_T_FFN_NORM] = {1, D},
        [COLIBRI_T_FFN_GATE] = {hp->n_ff, D},       [COLIBRI_T_FFN_UP] = {hp->n_ff, D},
        [COLIBRI_T_FFN_DOWN] = {D, hp->n_ff},       [COLIBRI_T_ROUTER] = {hp->n_expert, D},
        [COLIBRI_T_EXPERT_GATE] = {hp->n_ff_expert, D}, [COLIBRI_T_EXPERT_UP] = {hp->n_ff_expert, D},
        [COLIBRI_T_EXPERT_DOWN] = {D, hp->n_ff_expert},
        [COLIBRI_T_SHARED_GATE] = {hp->n_ff_shared, D}, [COLIBRI_T_SHARED_UP] = {hp->n_ff_shared, D},
        [COLIBRI_T_SHARED_DOWN] = {D, hp->n_ff_shared}, [COLIBRI_T_SHARED_ROUTER] = {1, D},
        [COLIBRI_T_ROUTER_BIAS] = {1, hp->n_expert},    [COLIBRI_T_ROUTER_SEL_BIAS] = {1, hp->n_expert},
        [COLIBRI_T_BO] = {1, D},                    [COLIBRI_T_ATTN_SINKS] = {1, hp->n_head},
        [COLIBRI_T_EXPERT_GATE_BIAS] = {hp->n_expert, hp->n_ff_expert},
        [COLIBRI_T_EXPERT_UP_BIAS] = {hp->n_expert, hp->n_ff_expert},
        [COLIBRI_T_EXPERT_DOWN_BIAS] = {hp->n_expert, D},
        [COLIBRI_T_WQ_A] = {Rq, D},                 [COLIBRI_T_Q_A_NORM] = {1, Rq},
        [COLIBRI_T_WQ_B] = {Q, Rq},                 [COLIBRI_T_WKV_A] = {R + hp->head_dim, D},
        [COLIBRI_T_KV_A_NORM] = {1, R},             [COLIBRI_T_WK_B] = {H * R, hp->head_dim_nope},
        [COLIBRI_T_WV_B] = {H * hp->head_dim_v, R},
    };
    *rows = shape[kind][0];
    *cols = shape[kind][1];
    switch (kind) {
    case COLIBRI_T_OUTPUT: return !hp->tied_embeddings;
    case COLIBRI_T_WQ: return !latent || !q_lora;
    case COLIBRI_T_WK: case COLIBRI_T_WV: return !latent;
    case COLIBRI_T_WQ_A: case COLIBRI_T_Q_A_NORM: case COLIBRI_T_WQ_B: return latent && q_lora;
    case COLIBRI_T_WKV_A: case COLIBRI_T_KV_A_NORM: case COLIBRI_T_WK_B: case COLIBRI_T_WV_B: return latent;
    case COLIBRI_T_BQ: case COLIBRI_T_BK: case COLIBRI_T_BV: return hp->attn_bias;
    case COLIBRI_T_Q_NORM: case COLIBRI_T_K_NORM: return hp->qk_norm != COLIBRI_QK_NORM_NONE;
    case COLIBRI_T_FFN_GATE: case COLIBRI_T_FFN_UP: case COLIBRI_T_FFN_DOWN: return !moe;
    case COLIBRI_T_ROUTER: case COLIBRI_T_EXPERT_GATE: case COLIBRI_T_EXPERT_UP:
    case COLIBRI_T_EXPERT_DOWN: return moe;
    case COLIBRI_T_SHARED_GATE: case COLIBRI_T_SHARED_UP: case COLIBRI_T_SHARED_DOWN:
        return moe && hp->n_ff_shared > 0;
    case COLIBRI_T_SHARED_ROUTER: return moe && hp->shared_gated;
    case COLIBRI_T_ROUTER_BIAS: return moe && hp->router_bias;
    case COLIBRI_T_ROUTER_SEL_BIAS: return moe && hp->router_sel_bias;
    case COLIBRI_T_BO: return hp->attn_out_bias;
    case COLIBRI_T_ATTN_SINKS: return hp->attn_sinks;
    case COLIBRI_T_EXPERT_GATE_BIAS: case COLIBRI_T_EXPERT_UP_BIAS: case COLIBRI_T_EXPERT_DOWN_BIAS:
        return moe && hp->expert_bias;
    default: return 1;
    }
}

/* The reason (kind, layer) is not part of this model, for error lines. */
static const char *colibri_tensor_absence_reason(const colibri_model *m, int32_t kind, int32_t layer) {
    switch (kind) {
    case COLIBRI_T_OUTPUT: return "embeddings are tied";
    case COLIBRI_T_WQ: return "q_lora_rank > 0 (WQ_A and WQ_B)";
    case COLIBRI_T_WK: case COLIBRI_T_WV: return "latent attention (kv_lora_rank > 0)";
    case COLIBRI_T_WQ_A: case COLIBRI_T_Q_A_NORM: case COLIBRI_T_WQ_B:
        if (m->hp.kv_lora_rank > 0) return "q_lora_rank is 0";
        /* fall through */
    case COLIBRI_T_WKV_A: case COLIBRI_T_KV_A_NORM: case COLIBRI_T_WK_B: case COLIBRI_T_WV_B:
        return "kv_lora_rank is 0";
    case COLIBRI_T_BQ: case COLIBRI_T_BK: case COLIBRI_T_BV: return "attn_bias is 0";
    case COLIBRI_T_Q_NORM: case COLIBRI_T_K_NORM: return "qk_norm is NONE";
    case COLIBRI_T_FFN_GATE: case COLIBRI_T_FFN_UP: case COLIBRI_T_FFN_DOWN:
        return "the layer is MoE";
    case COLIBRI_T_ROUTER_BIAS:
        if (m->layer_is_moe[layer]) return "router_bias is 0";
        return "the layer is dense";
    case COLIBRI_T_ROUTER_SEL_BIAS:
        if (m->layer_is_moe[layer]) return "router_sel_bias is 0";
        return "the layer is dense";
    case COLIBRI_T_BO: return "attn_out_bias is 0";
    case COLIBRI_T_ATTN_SINKS: return "attn_sinks is 0";
    case COLIBRI_T_EXPERT_GATE_BIAS: case COLIBRI_T_EXPERT_UP_BIAS: case COLIBRI_T_EXPERT_DOWN_BIAS:
        if (m->layer_is_moe[layer]) return "expert_bias is 0";
        return "the layer is dense";
    case COLIBRI_T_SHARED_ROUTER:
        if (m->layer_is_moe[layer] && m->hp.n_ff_shared > 0) return "shared_gated is 0";
        /* fall through */
    case COLIBRI_T_SHARED_GATE: case COLIBRI_T_SHARED_UP: case COLIBRI_T_SHARED_DOWN:
        if (m->layer_is_moe[layer]) return "n_ff_shared is 0";
        /* fall through */
    default: return "the layer is dense";
    }
}

const colibri_tensor *colibri_model_tensor(const colibri_model *m, int32_t kind, int32_t layer,
                                           int32_t expert) {
    if (colibri_kind_is_global(kind)) return &m->global[kind];
    if (colibri_kind_is_expert(kind)) {
        return &m->layers[layer].experts[(int64_t)expert * COLIBRI_EXPERT_KINDS +
                                         (kind - COLIBRI_T_EXPERT_GATE)];
    }
    return &m->layers[layer].t[kind];
}

/* ---- set_tensor / finalize ------------------------------------------------- */

COLIBRI_API int colibri_model_set_tensor(colibri_model *m, int32_t kind, int32_t layer,
                                         int32_t expert, const void *data, int32_t dtype,
                                         int64_t rows, int64_t cols) {
    if (!m) return colibri_error_set(COLIBRI_ERR_INVALID, "set_tensor: model is NULL");
    if (m->finalized) {
        return colibri_error_set(COLIBRI_ERR_STATE, "set_tensor: model is already finalized");
    }
    if (kind < 0 || kind >= COLIBRI_T_COUNT) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "set_tensor: unknown tensor kind %d", kind);
    }
    const char *name = colibri_kind_names[kind];
    const colibri_hparams *hp = &m->hp;
    if (colibri_kind_is_global(kind) ? layer != -1 : (layer < 0 || layer >= hp->n_layer)) {
        if (colibri_kind_is_global(kind)) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s: layer must be -1, got %d", name,
                                     layer);
        }
        return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s: layer %d out of range [0, %d)", name,
                                 layer, hp->n_layer);
    }
    if (!colibri_kind_is_expert(kind) && expert != -1) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s: expert must be -1, got %d", name,
                                 expert);
    }
    int64_t want_rows, want_cols;
    if (!colibri_tensor_expected(m, kind, layer, &want_rows, &want_cols)) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s (layer %d): not used by this model (%s)",
                                 name, layer, colibri_tensor_absence_reason(m, kind, layer));
    }
    if (colibri_kind_is_expert(kind) && (expert < 0 || expert >= hp->n_expert)) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s (layer %d): expert %d out of range [0, %d)",
                                 name, layer, expert, hp->n_expert);
    }
    if (!data) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "tensor %s (layer %d): data is NULL", name, layer);
    }
    if (!colibri_type_is_weight(dtype)) {
        return colibri_error_set(COLIBRI_ERR_SHAPE, "tensor %s (layer %d): unknown dtype %d", name,
                                 layer, dtype);
    }
    if (rows != want_rows || cols != want_cols) {
        return colibri_error_set(COLIBRI_ERR_SHAPE,
                                 "tensor %s (layer %d): expected shape [%lld, %lld], got [%lld, %lld]",
                                 name, layer, (long long)want_rows, (long long)want_cols,
                                 (long long)rows, (long long)cols);
    }
    const colibri_type_traits *type = colibri_type_traits_of(dtype);
    if (type->block_elems > 1 && colibri_kind_is_vector(kind)) {
        return colibri_error_set(COLIBRI_ERR_SHAPE, "tensor %s (layer %d): dtype %s is for matrices; "
                                 "norms and biases must be F32, F16 or BF16", name, layer, type->name);
    }
    if (cols % type->block_elems != 0) {
        return colibri_error_set(COLIBRI_ERR_SHAPE, "tensor %s (layer %d): dtype %s needs cols to be "
                                 "a multiple of %lld, got %lld", name, layer, type->name,
                                 (long long)type->block_elems, (long long)cols);
    }
    if (type->act_type != COLIBRI_DTYPE_F32) m->act_types |= 1u << type->act_type;
    colibri_tensor *t = (colibri_tensor *)colibri_model_tensor(m, kind, layer, expert);
    t->data = data;
    t->dtype = dtype;
    t->rows = rows;
    t->cols = cols;
    return COLIBRI_OK;
}

/* MISSING with the name of the first required tensor that was never set. */
static int colibri_model_check_set(const colibri_model *m, int32_t kind, int32_t layer,
                                   int32_t expert) {
    int64_t rows, cols;
    int32_t shape_layer = colibri_kind_is_global(kind) ? 0 : layer;
    if (!colibri_tensor_expected(m, kind, shape_layer, &rows, &cols)) return COLIBRI_OK;
    if (colibri_model_tensor(m, kind, layer, expert)->data) return COLIBRI_OK;
    if (expert >= 0) {
        return colibri_error_set(COLIBRI_ERR_MISSING, "tensor %s (layer %d, expert %d) was never set",
                                 colibri_kind_names[kind], layer, expert);
    }
    if (layer >= 0) {
        return colibri_error_set(COLIBRI_ERR_MISSING, "tensor %s (layer %d) was never set",
                                 colibri_kind_names[kind], layer);
    }
    return colibri_error_set(COLIBRI_ERR_MISSING, "tensor %s was never set", colibri_kind_names[kind]);
}

COLIBRI_API int colibri_model_finalize(colibri_model *m) {
    if (!m) return colibri_error_set(COLIBRI_ERR_INVALID, "finalize: model is NULL");
    if (m->finalized) return colibri_error_set(COLIBRI_ERR_STATE, "finalize: model is already finalized");
    int rc;
    for (int32_t kind = 0; kind <= COLIBRI_T_OUTPUT; kind++) {
        if ((rc = colibri_model_check_set(m, kind, -1, -1))) return rc;
    }
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        for (int32_t kind = COLIBRI_T_OUTPUT + 1; kind < COLIBRI_T_COUNT; kind++) {
            if (!colibri_kind_is_expert(kind)) {
                if ((rc = colibri_model_check_set(m, kind, l, -1))) return rc;
                continue;
            }
            if (!m->layer_is_moe[l]) continue;
            for (int32_t e = 0; e < m->hp.n_expert; e++) {
                if ((rc = colibri_model_check_set(m, kind, l, e))) return rc;
            }
        }
    }
    m->finalized = 1;
    return COLIBRI_OK;
}
