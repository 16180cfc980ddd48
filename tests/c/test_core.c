/*
 * test_core.c — C tests of libcolibri: conversions, the MoE stages (router,
 * dispatcher, aggregator), self-consistency of the forward step (cached
 * step-by-step == full prefill, threads 1 == 2, alone == batched, rewind) —
 * all BITWISE, since every output element has one fixed accumulation order —
 * and every validation error path; block-type (Q8_0, Q4_0, Q4_1) models against
 * the same model with the dequantized weights in F32. Prints "N passed, M
 * failed"; exit 1 on failure.
 */
#define _DEFAULT_SOURCE 1   /* mkstemp, mmap (the paging test's expert file) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "colibri.h"
#include "internal.h"
#include "kernels.h"
#include "quant.h"

#include "check.h"

/* status == want and a non-empty error line. */
#define CHECK_STATUS(call, want)                                                           \
    do {                                                                                   \
        int got_ = (call);                                                                 \
        CHECK(got_ == (want) && colibri_last_error()[0] != '\0', "%s: status %d (want %d), " \
              "error '%s'", #call, got_, (want), colibri_last_error());                    \
    } while (0)

/* ---- a small random model ------------------------------------------------- */

typedef struct test_model {
    colibri_hparams hp;
    float inv_freq[64];       /* inv_freq: [head_dim/2] */
    uint8_t is_moe[8];        /* is_moe: [n_layer] */
    int32_t window[8];        /* window: [n_layer] per-layer sliding windows (test_mechanisms) */
    int32_t dtype;            /* dtype of every weight (norms and biases: F32 if a block type) */
    int32_t round_through;    /* a block type: weights are rounded through it, stored as F32 */
    int up_f16;               /* 1, 2: every up projection holds f16 values, stored as F16 (1) or F32 (2) */
    uint64_t rng;
    void *bufs[512];          /* every weight buffer, freed with the model */
    int n_bufs;
    colibri_model *m;
} test_model;

static int test_is_block_type(int32_t dtype) {
    return colibri_type_traits_of(dtype)->block_elems > 1;
}

/* A [rows, cols] weight of tm->dtype (F32 for 1-D norms and biases of a
 * block-type model); values center + scale*U(-0.5, 0.5), rounded through
 * tm->round_through first when that is set. */
static int test_set(test_model *tm, int32_t kind, int32_t layer, int32_t expert, int64_t rows,
                    int64_t cols, float center, float scale) {
    int is_vector = kind == COLIBRI_T_OUTPUT_NORM || kind == COLIBRI_T_ATTN_NORM || kind == COLIBRI_T_BQ ||
                    kind == COLIBRI_T_BK || kind == COLIBRI_T_BV || kind == COLIBRI_T_Q_NORM ||
                    kind == COLIBRI_T_K_NORM || kind == COLIBRI_T_FFN_NORM || kind == COLIBRI_T_BO ||
                    kind == COLIBRI_T_ATTN_SINKS || kind == COLIBRI_T_EXPERT_GATE_BIAS ||
                    kind == COLIBRI_T_EXPERT_UP_BIAS || kind == COLIBRI_T_EXPERT_DOWN_BIAS ||
                    kind == COLIBRI_T_Q_A_NORM || kind == COLIBRI_T_KV_A_NORM;
    int32_t dtype = is_vector && test_is_block_type(tm->dtype) ? COLIBRI_DTYPE_F32 : tm->dtype;
    int64_t n = rows * cols;
    float *values = malloc((size_t)n * sizeof(float));   /* values: [rows, cols] */
    for (int64_t i = 0; i < n; i++) values[i] = center + scale * test_rand(&tm->rng);
    if (tm->round_through && !is_vector) {
        const colibri_type_traits *through = colibri_type_traits_of(tm->round_through);
        void *q = malloc((size_t)colibri_row_bytes(tm->round_through, n));
        through->from_f32(values, q, n);
        through->to_f32(q, values, n);
        free(q);
    }
    int is_up = kind == COLIBRI_T_FFN_UP || kind == COLIBRI_T_EXPERT_UP || kind == COLIBRI_T_SHARED_UP;
    if (tm->up_f16 && is_up) {
        uint16_t *h = malloc((size_t)n * sizeof(uint16_t));   /* h: [rows, cols] f16 */
        colibri_type_traits_of(COLIBRI_DTYPE_F16)->from_f32(values, h, n);
        colibri_type_traits_of(COLIBRI_DTYPE_F16)->to_f32(h, values, n);
        free(h);
        if (tm->up_f16 == 1) dtype = COLIBRI_DTYPE_F16;
    }
    void *buf = malloc((size_t)colibri_row_bytes(dtype, n));
    colibri_type_traits_of(dtype)->from_f32(values, buf, n);
    free(values);
    tm->bufs[tm->n_bufs++] = buf;
    return colibri_model_set_tensor(tm->m, kind, layer, expert, buf, dtype, rows, cols);
}

/* When set, test_config gives the latent-attention twin of its config. */
static int latent_mode = 0;

/* Latent KV attention in place of GQA (no biases or qk norm): q straight from
 * x for float weights, through a q LoRA for block types (every matrix's cols
 * a multiple of 32 there). */
static void test_config_latent(test_model *tm) {
    colibri_hparams *hp = &tm->hp;
    int block = test_is_block_type(tm->dtype);
    hp->n_head_kv = 1; hp->attn_bias = 0; hp->qk_norm = COLIBRI_QK_NORM_NONE;
    hp->kv_lora_rank = block ? 32 : 20; hp->q_lora_rank = block ? 32 : 0;
    hp->head_dim = block ? 16 : 8; hp->head_dim_nope = block ? 32 : 12; hp->head_dim_v = block ? 32 : 10;
    hp->latent_norm_eps = 1e-6f;
    for (int i = 0; i < hp->head_dim / 2; i++) tm->inv_freq[i] = powf(10000.0f, -2.0f * i / hp->head_dim);
}

/* The default test config: layer 0 dense, layer 1 MoE with a gated shared
 * expert, per-head qk norm, biases, untied output; D = 36 exercises the
 * dot kernels' scalar tail. */
static void test_config(test_model *tm, int32_t dtype) {
    memset(tm, 0, sizeof *tm);
    colibri_hparams *hp = &tm->hp;
    hp->n_vocab = 50; hp->n_embd = 36; hp->n_layer = 2; hp->n_head = 4; hp->n_head_kv = 2;
    hp->head_dim = 12; hp->n_ff = 40; hp->n_expert = 6; hp->n_expert_used = 2; hp->n_ff_expert = 24;
    hp->n_ff_shared = 20; hp->shared_gated = 1; hp->router_renorm = 1;
    hp->qk_norm = COLIBRI_QK_NORM_PER_HEAD; hp->attn_bias = 1; hp->tied_embeddings = 0;
    hp->norm_eps = 1e-6f; hp->rope_attn_factor = 1.0f;
    for (int i = 0; i < hp->head_dim / 2; i++) tm->inv_freq[i] = powf(10000.0f, -2.0f * i / hp->head_dim);
    tm->is_moe[0] = 0;
    tm->is_moe[1] = 1;
    hp->rope_inv_freq = tm->inv_freq;
    hp->layer_is_moe = tm->is_moe;
    tm->dtype = dtype;
    tm->rng = 1234;
    if (test_is_block_type(dtype)) {   /* every matrix's cols a multiple of 32 */
        hp->n_embd = 64; hp->head_dim = 16; hp->n_ff = 64; hp->n_ff_expert = 32; hp->n_ff_shared = 32;
        for (int i = 0; i < hp->head_dim / 2; i++) tm->inv_freq[i] = powf(10000.0f, -2.0f * i / hp->head_dim);
    }
    if (latent_mode) test_config_latent(tm);
}

/* Layer l's latent attention tensors (colibri.h's shapes). */
static int test_build_latent(test_model *tm, int32_t l) {
    const colibri_hparams *hp = &tm->hp;
    int64_t D = hp->n_embd, H = hp->n_head, R = hp->kv_lora_rank, Rq = hp->q_lora_rank;
    int64_t Qm = H * (hp->head_dim_nope + hp->head_dim);
    int rc = 0;
    if (Rq > 0) {
        rc |= test_set(tm, COLIBRI_T_WQ_A, l, -1, Rq, D, 0.0f, 0.6f);
        rc |= test_set(tm, COLIBRI_T_Q_A_NORM, l, -1, 1, Rq, 1.0f, 0.2f);
        rc |= test_set(tm, COLIBRI_T_WQ_B, l, -1, Qm, Rq, 0.0f, 0.6f);
    } else {
        rc |= test_set(tm, COLIBRI_T_WQ, l, -1, Qm, D, 0.0f, 0.6f);
    }
    rc |= test_set(tm, COLIBRI_T_WKV_A, l, -1, R + hp->head_dim, D, 0.0f, 0.6f);
    rc |= test_set(tm, COLIBRI_T_KV_A_NORM, l, -1, 1, R, 1.0f, 0.2f);
    rc |= test_set(tm, COLIBRI_T_WK_B, l, -1, H * R, hp->head_dim_nope, 0.0f, 0.6f);
    rc |= test_set(tm, COLIBRI_T_WV_B, l, -1, H * hp->head_dim_v, R, 0.0f, 0.6f);
    rc |= test_set(tm, COLIBRI_T_WO, l, -1, D, H * hp->head_dim_v, 0.0f, 0.5f);
    return rc;
}

/* gpt-oss's mechanisms on top of the default config: a 3-position window on
 * layer 0 (full attention on layer 1), sink logits, an output bias, expert
 * biases and the clamped SwiGLU with a limit the random activations reach. */
static void test_mechanisms(test_model *tm) {
    tm->window[0] = 3;
    tm->window[1] = 0;
    tm->hp.layer_window = tm->window;
    tm->hp.attn_sinks = 1;
    tm->hp.attn_out_bias = 1;
    tm->hp.expert_bias = 1;
    tm->hp.ffn_act = COLIBRI_FFN_SWIGLU_CLAMPED;
    tm->hp.ffn_alpha = 1.702f;
    tm->hp.ffn_limit = 0.7f;
}

/* Creates the model and sets every tensor the config calls for (this list is
 * the test's own statement of the rules in colibri.h); finalizes if asked. */
static int test_build(test_model *tm, int finalize) {
    const colibri_hparams *hp = &tm->hp;
    int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, K = (int64_t)hp->n_head_kv * hp->head_dim;
    tm->m = colibri_model_create(hp);
    if (!tm->m) return -1;
    int rc = 0;
    rc |= test_set(tm, COLIBRI_T_TOKEN_EMBD, -1, -1, hp->n_vocab, D, 0.0f, 2.0f);
    rc |= test_set(tm, COLIBRI_T_OUTPUT_NORM, -1, -1, 1, D, 1.0f, 0.2f);
    if (!hp->tied_embeddings) rc |= test_set(tm, COLIBRI_T_OUTPUT, -1, -1, hp->n_vocab, D, 0.0f, 0.5f);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        rc |= test_set(tm, COLIBRI_T_ATTN_NORM, l, -1, 1, D, 1.0f, 0.2f);
        if (hp->kv_lora_rank > 0) {
            rc |= test_build_latent(tm, l);
        } else {
            rc |= test_set(tm, COLIBRI_T_WQ, l, -1, Q, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_WK, l, -1, K, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_WV, l, -1, K, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_WO, l, -1, D, Q, 0.0f, 0.5f);
        }
        if (hp->attn_bias) {
            rc |= test_set(tm, COLIBRI_T_BQ, l, -1, 1, Q, 0.0f, 0.2f);
            rc |= test_set(tm, COLIBRI_T_BK, l, -1, 1, K, 0.0f, 0.2f);
            rc |= test_set(tm, COLIBRI_T_BV, l, -1, 1, K, 0.0f, 0.2f);
        }
        if (hp->attn_out_bias) rc |= test_set(tm, COLIBRI_T_BO, l, -1, 1, D, 0.0f, 0.2f);
        if (hp->attn_sinks) rc |= test_set(tm, COLIBRI_T_ATTN_SINKS, l, -1, 1, hp->n_head, 0.0f, 2.0f);
        if (hp->qk_norm) {
            int per_head = hp->qk_norm == COLIBRI_QK_NORM_PER_HEAD;
            rc |= test_set(tm, COLIBRI_T_Q_NORM, l, -1, 1, per_head ? hp->head_dim : Q, 1.0f, 0.2f);
            rc |= test_set(tm, COLIBRI_T_K_NORM, l, -1, 1, per_head ? hp->head_dim : K, 1.0f, 0.2f);
        }
        rc |= test_set(tm, COLIBRI_T_FFN_NORM, l, -1, 1, D, 1.0f, 0.2f);
        if (!hp->layer_is_moe[l]) {
            rc |= test_set(tm, COLIBRI_T_FFN_GATE, l, -1, hp->n_ff, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_FFN_UP, l, -1, hp->n_ff, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_FFN_DOWN, l, -1, D, hp->n_ff, 0.0f, 0.5f);
            continue;
        }
        rc |= test_set(tm, COLIBRI_T_ROUTER, l, -1, hp->n_expert, D, 0.0f, 1.0f);
        for (int32_t e = 0; e < hp->n_expert; e++) {
            rc |= test_set(tm, COLIBRI_T_EXPERT_GATE, l, e, hp->n_ff_expert, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_EXPERT_UP, l, e, hp->n_ff_expert, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_EXPERT_DOWN, l, e, D, hp->n_ff_expert, 0.0f, 0.5f);
        }
        if (hp->expert_bias) {
            rc |= test_set(tm, COLIBRI_T_EXPERT_GATE_BIAS, l, -1, hp->n_expert, hp->n_ff_expert, 0.0f, 0.4f);
            rc |= test_set(tm, COLIBRI_T_EXPERT_UP_BIAS, l, -1, hp->n_expert, hp->n_ff_expert, 0.0f, 0.4f);
            rc |= test_set(tm, COLIBRI_T_EXPERT_DOWN_BIAS, l, -1, hp->n_expert, D, 0.0f, 0.4f);
        }
        if (hp->n_ff_shared > 0) {
            rc |= test_set(tm, COLIBRI_T_SHARED_GATE, l, -1, hp->n_ff_shared, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_SHARED_UP, l, -1, hp->n_ff_shared, D, 0.0f, 0.6f);
            rc |= test_set(tm, COLIBRI_T_SHARED_DOWN, l, -1, D, hp->n_ff_shared, 0.0f, 0.5f);
        }
        if (hp->shared_gated) rc |= test_set(tm, COLIBRI_T_SHARED_ROUTER, l, -1, 1, D, 0.0f, 1.0f);
    }
    if (rc == 0 && finalize) rc = colibri_model_finalize(tm->m);
    return rc;
}

static void test_free(test_model *tm) {
    colibri_model_free(tm->m);
    for (int i = 0; i < tm->n_bufs; i++) free(tm->bufs[i]);
    tm->n_bufs = 0;
    tm->m = NULL;
}

/* Runs one forward step; logits: [n_wanted, V] (may be NULL). */
static int test_step(colibri_context *ctx, int32_t n, const int32_t *token, const int32_t *pos,
                     const int32_t *seq, const int8_t *want, float *logits) {
    colibri_batch b = {n, token, pos, seq, want};
    colibri_outputs out = {logits, NULL, NULL, NULL};
    return colibri_forward(ctx, &b, &out);
}

static const int32_t prompt[6] = {3, 17, 42, 8, 8, 29};

/* A prompt run one layer per step (colibri_forward_span) beside another
 * sequence's decode tokens: its last logits and the decode tokens' logits are
 * bitwise those of plain steps; its length counts once it passes the last layer. */
static void test_layer_span(int32_t dtype) {
    test_model tm;
    test_config(&tm, dtype);
    CHECK(test_build(&tm, 1) == 0, "build: %s", colibri_last_error());
    int32_t V = tm.hp.n_vocab, L = tm.hp.n_layer;
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq0[6] = {0}, seq1[6] = {1, 1, 1, 1, 1, 1};
    int32_t other[6] = {5, 9, 11, 2, 7, 13};
    float whole[64], decode_ref[6 * 64], logits[2 * 64];   /* decode_ref: [6, V] */
    colibri_context *ctx = colibri_context_create_kv(tm.m, 16, 2, 12, 2, COLIBRI_DTYPE_F32);
    CHECK(V <= 64 && L == 2, "test model shape");
    CHECK(test_step(ctx, 6, prompt, pos, seq0, NULL, whole) == 0, "whole: %s", colibri_last_error());
    int8_t all[6] = {1, 1, 1, 1, 1, 1};
    CHECK(test_step(ctx, 6, other, pos, seq1, all, decode_ref) == 0, "other: %s", colibri_last_error());
    colibri_seq_clear(ctx, 0);
    colibri_seq_clear(ctx, 1);
    CHECK(test_step(ctx, 2, other, pos, seq1, NULL, logits) == 0, "other's start: %s", colibri_last_error());
    for (int32_t l = 0; l < L; l++) {   /* batch: other[2 + l] of seq 1, then the prompt's layer l */
        int32_t tok[7], bpos[7], bseq[7];
        int8_t want[7] = {1, 0, 0, 0, 0, 0, (int8_t)(l == L - 1)};
        tok[0] = other[2 + l]; bpos[0] = 2 + l; bseq[0] = 1;
        for (int i = 0; i < 6; i++) { tok[1 + i] = prompt[i]; bpos[1 + i] = i; bseq[1 + i] = 0; }
        colibri_batch b = {7, tok, bpos, bseq, want};
        colibri_layer_span span = {6, l, l + 1};
        colibri_outputs out = {logits, NULL, NULL, NULL};
        CHECK(colibri_forward_span(ctx, &b, &span, &out) == 0, "span layer %d: %s", l, colibri_last_error());
        CHECK(memcmp(logits, decode_ref + (2 + l) * V, (size_t)V * sizeof(float)) == 0, "decode beside layer %d", l);
        CHECK(colibri_seq_len(ctx, 0) == (l == L - 1 ? 6 : 0), "prompt counted after the last layer only");
    }
    CHECK(memcmp(logits + V, whole, (size_t)V * sizeof(float)) == 0, "sliced prompt bitwise the whole one");
    colibri_layer_span stale = {6, 1, 2};   /* nothing carried any more */
    colibri_batch b = {6, prompt, pos, seq0, NULL};
    CHECK_STATUS(colibri_forward_span(ctx, &b, &stale, NULL), COLIBRI_ERR_INVALID);
    colibri_context_free(ctx);
    test_free(&tm);
}

/* ---- kernels ----------------------------------------------------------------- */

static void test_conversions(void) {
    CHECK(colibri_f32_to_f16(1.0f) == 0x3c00 && colibri_f32_to_f16(-2.0f) == 0xc000, "f16 of 1, -2");
    CHECK(colibri_f32_to_f16(65504.0f) == 0x7bff && colibri_f32_to_f16(65520.0f) == 0x7c00, "f16 max / overflow");
    CHECK(colibri_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001 && colibri_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000,
          "f16 smallest subnormal, half of it ties to even 0");
    CHECK(colibri_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00 &&
          colibri_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02, "f16 ties to even");
    CHECK(colibri_f32_to_f16(NAN) >= 0x7c01 && colibri_f32_to_f16(NAN) <= 0x7fff, "f16 NaN stays NaN");
    int roundtrip_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (!is_nan && colibri_f32_to_f16(colibri_f16_to_f32((uint16_t)h)) != h) roundtrip_ok = 0;
    }
    CHECK(roundtrip_ok, "every non-NaN f16 round-trips through f32");
    CHECK(colibri_f16_to_f32(0x0001) == ldexpf(1.0f, -24) && colibri_f16_to_f32(0x03ff) == 1023 * ldexpf(1.0f, -24),
          "f16 subnormals decode exactly");
    CHECK(colibri_f32_to_bf16(1.0f) == 0x3f80 && colibri_bf16_to_f32(0x3f80) == 1.0f, "bf16 of 1");
    CHECK(colibri_f32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3f80 &&
          colibri_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)) == 0x3f82, "bf16 ties to even");
    CHECK(isnan(colibri_bf16_to_f32(colibri_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
    float w[13], x[13];
    for (int i = 0; i < 13; i++) { w[i] = (float)(i + 1); x[i] = 0.5f; }
    CHECK(colibri_dot_f32(w, x, 13) == 45.5f, "dot with a tail");
}

/* Distance in ulps between two finite floats of the same sign. */
static int64_t test_ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* colibri_expf within 1 ulp of the double exp rounded to f32 (every 97th f32
 * in [-87, 88.7]; an exhaustive sweep measured the same bound), and its
 * special values. */
/* The clamped SwiGLU against the formula in double: gate clamped above at the
 * limit, up on both sides, (up + 1) * gate * sigmoid(alpha * gate); NaN stays NaN. */
static void test_swiglu_clamped(void) {
    float g[41], u[41];
    int close = 1;
    for (int i = 0; i < 41; i++) {
        g[i] = -10.0f + 0.5f * (float)i;
        u[i] = 9.0f - 0.45f * (float)i;
    }
    float want[41];
    for (int i = 0; i < 41; i++) {
        double c = g[i] > 7.0 ? 7.0 : g[i], v = u[i] > 7.0 ? 7.0 : (u[i] < -7.0 ? -7.0 : u[i]);
        want[i] = (float)((v + 1.0) * c / (1.0 + exp(-1.702 * c)));
    }
    colibri_swiglu_clamped(g, u, 41, 1.702f, 7.0f);
    for (int i = 0; i < 41; i++) close &= fabsf(g[i] - want[i]) <= 1e-6f * (1.0f + fabsf(want[i]));
    CHECK(close, "clamped SwiGLU matches (up + 1) * c * sigmoid(1.702 c), c = min(gate, 7), |up| <= 7");
    float gn[2] = {NAN, 1.0f}, un[2] = {1.0f, NAN};
    colibri_swiglu_clamped(gn, un, 2, 1.702f, 7.0f);
    CHECK(isnan(gn[0]) && isnan(gn[1]), "clamped SwiGLU keeps NaN in gate or up");
}

static void test_exp(void) {
    int64_t worst = 0;
    float worst_x = 0.0f;
    for (float x = -87.0f; x <= COLIBRI_EXP_MAX; x = nextafterf(x + fabsf(x) * 97 * 6e-8f, INFINITY)) {
        int64_t u = test_ulps(colibri_expf(x), (float)exp((double)x));
        if (u > worst) worst = u, worst_x = x;
    }
    CHECK(worst <= 1, "colibri_expf is %lld ulp off at %.9g", (long long)worst, (double)worst_x);
    CHECK(colibri_expf(0.0f) == 1.0f && colibri_expf(-0.0f) == 1.0f, "e^0 = 1");
    CHECK(colibri_expf(-INFINITY) == 0.0f && colibri_expf(-104.5f) == 0.0f && colibri_expf(-103.9f) > 0.0f,
          "e^x underflows to 0 below -104 only");
    CHECK(isinf(colibri_expf(INFINITY)) && isinf(colibri_expf(88.7229f)) && !isinf(colibri_expf(COLIBRI_EXP_MAX)),
          "e^x overflows above EXP_MAX only");
    CHECK(isnan(colibri_expf(NAN)), "e^NaN is NaN");
    float x[19];
    for (int i = 0; i < 19; i++) x[i] = (float)(i % 7) - 3.0f;
    colibri_softmax_apply(x, 19);
    CHECK(fabsf(colibri_sum_f32(x, 19) - 1.0f) < 1e-6f && x[6] == x[13] && x[3] < x[4], "softmax sums to 1");
}

/* ---- MoE stages ---------------------------------------------------------------- */

/* A routing rule over E experts choosing k, otherwise Mixtral's. */
static colibri_router test_rule(int32_t E, int32_t k, int32_t renorm) {
    colibri_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_expert = E;
    hp.n_expert_used = k;
    hp.router_renorm = renorm;
    colibri_router r;
    colibri_router_from_hparams(&hp, &r);
    return r;
}

static void test_router(void) {
    float work[3 * 8], gates[4];
    int32_t iwork[8], experts[4];
    colibri_router r = test_rule(4, 2, 0);
    const float tie[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    colibri_router_select(&r, tie, NULL, work, iwork, experts, gates);
    CHECK(experts[0] == 1 && experts[1] == 2, "tie 1/2 → %d, %d", experts[0], experts[1]);
    const float flat[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    colibri_router_select(&r, flat, NULL, work, iwork, experts, gates);
    CHECK(experts[0] == 0 && experts[1] == 1 && gates[0] == 0.25f, "all tied → 0, 1 (%d, %d)", experts[0], experts[1]);
    const float logits[4] = {0.1f, 2.0f, -1.0f, 1.5f};
    float probs[4];
    memcpy(probs, logits, sizeof probs);
    colibri_softmax_apply(probs, 4);
    colibri_router_select(&r, logits, NULL, work, iwork, experts, gates);
    CHECK(experts[0] == 1 && experts[1] == 3 && gates[0] == probs[1] && gates[1] == probs[3],
          "no renorm: gates are the softmax probabilities");
    r = test_rule(4, 2, 1);
    colibri_router_select(&r, logits, NULL, work, iwork, experts, gates);
    CHECK(fabsf(gates[0] + gates[1] - 1.0f) < 1e-6f && gates[0] == probs[1] / (probs[1] + probs[3]),
          "renorm: gates divided by their sum");
    const float nans[4] = {NAN, 1.0f, NAN, 2.0f};
    r = test_rule(4, 3, 1);
    colibri_router_select(&r, nans, NULL, work, iwork, experts, gates);
    CHECK(experts[0] >= 0 && experts[0] < 4 && experts[1] >= 0 && experts[1] < 4 && experts[2] >= 0 &&
          experts[2] < 4 && experts[0] != experts[1] && experts[1] != experts[2] && experts[0] != experts[2],
          "NaN logits: still k distinct experts in range (%d, %d, %d)", experts[0], experts[1], experts[2]);

    /* sigmoid scores, selection bias, renorm with eps, scale (DeepSeek-V3 without groups) */
    r = test_rule(4, 2, 1);
    r.score = COLIBRI_ROUTER_SIGMOID;
    r.norm_eps = 0.5f;
    r.scale = 2.0f;
    const float sig_logits[4] = {0.0f, 1.0f, 2.0f, -3.0f};
    const float bias[4] = {0.0f, 0.0f, -1.0f, 5.0f};   /* choice: 0.5, .73, -.12, 5.05 */
    colibri_router_select(&r, sig_logits, bias, work, iwork, experts, gates);
    float s1 = colibri_sigmoid(1.0f), s3 = colibri_sigmoid(-3.0f);
    CHECK(experts[0] == 3 && experts[1] == 1, "bias picks 3 then 1, got %d, %d", experts[0], experts[1]);
    CHECK(gates[0] == s3 / (s3 + s1 + 0.5f) * 2.0f && gates[1] == s1 / (s3 + s1 + 0.5f) * 2.0f,
          "gates: the unbiased sigmoids, / (sum + eps), * scale");
    r.norm_eps = 0.0f;
    r.norm_min = 10.0f;
    colibri_router_select(&r, sig_logits, bias, work, iwork, experts, gates);
    CHECK(gates[0] == s3 / 10.0f * 2.0f, "renorm floor: divides by max(sum, norm_min)");

    /* top-k on the logits, softmax over the chosen (Granite, gpt-oss) */
    r = test_rule(4, 2, 0);
    r.score = COLIBRI_ROUTER_TOPK_SOFTMAX;
    colibri_router_select(&r, logits, NULL, work, iwork, experts, gates);
    float two[2] = {logits[1], logits[3]};
    colibri_softmax_apply(two, 2);
    CHECK(experts[0] == 1 && experts[1] == 3 && gates[0] == two[0] && gates[1] == two[1],
          "top-k softmax: softmax over the two chosen logits");

    /* groups: 8 experts in 4 groups of 2, keep 2 groups scored by their top 2 (V3); the
     * scores are the raw logits (TOPK_SOFTMAX) to keep the arithmetic readable */
    r = test_rule(8, 3, 0);
    r.score = COLIBRI_ROUTER_TOPK_SOFTMAX;
    r.n_group = 4;
    r.group_used = 2;
    r.group_top = 2;
    const float g_logits[8] = {5.0f, -5.0f, 1.0f, 1.0f, 3.0f, 0.0f, 0.5f, 0.4f};
    /* group sums: 0, 2, 3, 0.9 → groups 2 and 1; expert 0 (the best alone) is masked */
    colibri_router_select(&r, g_logits, NULL, work, iwork, experts, gates);
    CHECK(experts[0] == 4 && experts[1] == 2 && experts[2] == 3, "groups 2, 1 kept: %d, %d, %d", experts[0],
          experts[1], experts[2]);
    r.group_top = 1;   /* V2: a group's best alone: 5, 1, 3, 0.5 → groups 0, 2 */
    colibri_router_select(&r, g_logits, NULL, work, iwork, experts, gates);
    CHECK(experts[0] == 0 && experts[1] == 4 && experts[2] == 5, "groups 0, 2 kept: %d, %d, %d", experts[0],
          experts[1], experts[2]);

    /* colibri_route: the public rows API and its checks */
    colibri_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_expert = 8;
    hp.n_expert_used = 3;
    hp.router_n_group = 4;
    hp.router_group_used = 2;
    hp.router_group_top = 2;
    hp.router_score = COLIBRI_ROUTER_TOPK_SOFTMAX;
    float rows[16];
    for (int i = 0; i < 16; i++) rows[i] = g_logits[i % 8];
    int32_t ex[6];
    float gt[6];
    CHECK(colibri_route(&hp, rows, NULL, 2, ex, gt) == 0 && ex[0] == 4 && ex[3] == 4 && ex[5] == 3,
          "colibri_route routes each row");
    hp.router_group_used = 1;
    CHECK_STATUS(colibri_route(&hp, rows, NULL, 2, ex, gt), COLIBRI_ERR_INVALID);   /* 1 group of 2 < k = 3 */
    hp.router_group_used = 2;
    hp.router_n_group = 3;
    CHECK_STATUS(colibri_route(&hp, rows, NULL, 2, ex, gt), COLIBRI_ERR_INVALID);   /* 3 does not divide 8 */
    hp.router_n_group = 4;
    hp.router_sel_bias = 1;
    CHECK_STATUS(colibri_route(&hp, rows, NULL, 2, ex, gt), COLIBRI_ERR_INVALID);   /* bias missing */
    hp.router_sel_bias = 0;
    hp.router_score = 3;
    CHECK_STATUS(colibri_route(&hp, rows, NULL, 2, ex, gt), COLIBRI_ERR_INVALID);
    hp.router_score = COLIBRI_ROUTER_TOPK_SOFTMAX;
    hp.router_scale = NAN;
    CHECK_STATUS(colibri_route(&hp, rows, NULL, 2, ex, gt), COLIBRI_ERR_INVALID);
}

/* colibri_threadpool_nap between runs (the paging code naps the workers while
 * the step waits for a read): every run still runs every thread index once,
 * whether the workers were spinning, napping or asleep when it started. */
static void pool_count(void *arg, int32_t i, int32_t n) {
    (void)n;
    ((int32_t *)arg)[i]++;
}

static void test_threadpool_nap(void) {
    colibri_threadpool *pool = colibri_threadpool_create(3, NULL);
    CHECK(pool != NULL, "pool of 3: %s", colibri_last_error());
    if (!pool) return;
    int32_t count[3] = {0, 0, 0};
    for (int32_t r = 0; r < 3000; r++) {
        if (r % 3 == 0) colibri_threadpool_nap(pool);
        if (r % 500 == 0) usleep(2000);   /* past the spin: the workers sleep */
        colibri_threadpool_run(pool, pool_count, count);
    }
    CHECK(count[0] == 3000 && count[1] == 3000 && count[2] == 3000, "runs with naps: %d %d %d of 3000", count[0],
          count[1], count[2]);
    colibri_threadpool_free(pool);
}

static void test_dispatch_aggregate(void) {
    /* experts: [T=3, k=2] */
    const int32_t experts[6] = {2, 0, 0, 1, 2, 1};
    int32_t count[3], start[4], sorted[6], row[6];
    colibri_dispatch_build(experts, 3, 2, 3, count, start, sorted, row);
    CHECK(count[0] == 2 && count[1] == 2 && count[2] == 2, "counts");
    CHECK(start[0] == 0 && start[1] == 2 && start[2] == 4 && start[3] == 6, "starts");
    const int32_t want_sorted[6] = {1, 2, 3, 5, 0, 4};
    CHECK(memcmp(sorted, want_sorted, sizeof sorted) == 0, "grouped by expert, batch order inside");
    int inverse_ok = 1;
    for (int p = 0; p < 6; p++) inverse_ok &= sorted[row[p]] == p;
    CHECK(inverse_ok, "pair_row inverts sorted_pair");
    /* y: [6, 1] in sorted order holds 10*expert + pair id */
    float y[6], gates[6] = {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 4.0f}, out[3];
    for (int r = 0; r < 6; r++) y[r] = (float)(10 * experts[sorted[r]] + sorted[r]);
    colibri_aggregate_slots(y, row, gates, 3, 2, 1, out);
    CHECK(out[0] == 0.5f * 20 + 0.25f * 1 && out[1] == 1.0f * 2 + 2.0f * 13 && out[2] == 0.125f * 24 + 4.0f * 15,
          "aggregate: gate-weighted slot sum per token");
}

/* ---- self-consistency of the forward step ------------------------------------ */

static void test_prefill_vs_steps(int32_t dtype, int32_t kv_dtype, int mechanisms) {
    test_model tm;
    test_config(&tm, dtype);
    if (mechanisms) test_mechanisms(&tm);
    CHECK(test_build(&tm, 1) == 0, "build: %s", colibri_last_error());
    int32_t V = tm.hp.n_vocab, n = 6;
    colibri_context *ctx = colibri_context_create_kv(tm.m, 16, 1, 8, 1, kv_dtype);
    CHECK(colibri_context_kv_type(ctx) == kv_dtype, "KV type %d", colibri_context_kv_type(ctx));
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    int8_t want[6] = {1, 1, 1, 1, 1, 1};
    float full[6 * 64], step[64];
    CHECK(test_step(ctx, n, prompt, pos, seq, want, full) == 0, "prefill: %s", colibri_last_error());
    CHECK(colibri_seq_len(ctx, 0) == 6, "seq_len after prefill");
    colibri_seq_clear(ctx, 0);
    int same = 1;
    for (int i = 0; i < n; i++) {
        CHECK(test_step(ctx, 1, &prompt[i], &pos[i], seq, NULL, step) == 0, "step: %s", colibri_last_error());
        same &= memcmp(step, full + i * V, (size_t)V * sizeof(float)) == 0;
    }
    CHECK(same, "dtype %d, KV %d: cached step-by-step logits == full prefill logits, bitwise", dtype, kv_dtype);
    /* rewind to position 3 with the same token: the logits of position 3 again */
    CHECK(test_step(ctx, 1, &prompt[3], &pos[3], seq, NULL, step) == 0, "rewind: %s", colibri_last_error());
    CHECK(colibri_seq_len(ctx, 0) == 4, "rewind sets seq_len to pos + 1 (got %d)", colibri_seq_len(ctx, 0));
    CHECK(memcmp(step, full + 3 * V, (size_t)V * sizeof(float)) == 0, "rewound logits == original");
    int finite = 1;
    for (int i = 0; i < n * V; i++) finite &= isfinite(full[i]);
    CHECK(finite, "logits finite");
    colibri_context_free(ctx);
    test_free(&tm);
}

/* The same prompt under 1 and 2 threads, and alone vs interleaved with another
 * sequence in one batch: bitwise the same logits and routes. */
static void test_threads_and_batching(int32_t dtype, int32_t kv_dtype, int mechanisms) {
    test_model tm;
    test_config(&tm, dtype);
    if (mechanisms) test_mechanisms(&tm);
    CHECK(test_build(&tm, 1) == 0, "build: %s", colibri_last_error());
    int32_t V = tm.hp.n_vocab, L = tm.hp.n_layer, k = tm.hp.n_expert_used;
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq0[6] = {0};
    int8_t want[6] = {1, 1, 1, 1, 1, 1};
    float alone[2][6 * 64] = {{0}};
    int32_t alone_experts[2 * 6 * 2];
    for (int threads = 1; threads <= 2; threads++) {
        colibri_context *ctx = colibri_context_create_kv(tm.m, 16, 2, 12, threads, kv_dtype);
        CHECK(colibri_context_threads(ctx) == threads, "thread count");
        colibri_batch b = {6, prompt, pos, seq0, want};
        colibri_outputs out = {alone[threads - 1], NULL, threads == 1 ? alone_experts : NULL, NULL};
        CHECK(colibri_forward(ctx, &b, &out) == 0, "forward: %s", colibri_last_error());
        colibri_context_free(ctx);
    }
    CHECK(memcmp(alone[0], alone[1], sizeof alone[0]) == 0, "dtype %d, KV %d: threads 1 vs 2 bitwise", dtype,
          kv_dtype);

    /* interleave: seq 1 (another prompt) and seq 0 alternate in one batch */
    int32_t tok[12], bpos[12], bseq[12];
    for (int i = 0; i < 6; i++) {
        tok[2 * i] = (prompt[i] * 7 + 1) % V; bpos[2 * i] = i; bseq[2 * i] = 1;
        tok[2 * i + 1] = prompt[i]; bpos[2 * i + 1] = i; bseq[2 * i + 1] = 0;
    }
    int8_t bwant[12];
    for (int i = 0; i < 12; i++) bwant[i] = (int8_t)(i % 2);   /* seq 0's tokens only */
    float batched[6 * 64] = {0};
    int32_t experts[2 * 12 * 2];
    float sentinel_gates[2 * 12 * 2];
    for (int i = 0; i < 2 * 12 * 2; i++) sentinel_gates[i] = -7.0f;
    colibri_context *ctx = colibri_context_create_kv(tm.m, 16, 2, 12, 2, kv_dtype);
    colibri_batch b = {12, tok, bpos, bseq, bwant};
    colibri_outputs out = {batched, NULL, experts, sentinel_gates};
    CHECK(colibri_forward(ctx, &b, &out) == 0, "batched forward: %s", colibri_last_error());
    CHECK(memcmp(alone[0], batched, sizeof batched) == 0, "dtype %d, KV %d: alone vs batched bitwise", dtype,
          kv_dtype);
    int routes_same = 1, dense_untouched = 1;
    for (int i = 0; i < 6; i++) {
        for (int s = 0; s < k; s++) {
            routes_same &= experts[(1 * 12 + 2 * i + 1) * k + s] == alone_experts[(1 * 6 + i) * k + s];
        }
    }
    for (int i = 0; i < 12 * k; i++) dense_untouched &= sentinel_gates[i] == -7.0f;   /* layer 0 is dense */
    CHECK(routes_same, "routes alone vs batched");
    CHECK(dense_untouched, "dense layer rows of gates left untouched");
    CHECK(L == 2 && colibri_seq_len(ctx, 0) == 6 && colibri_seq_len(ctx, 1) == 6, "both sequences cached");
    colibri_context_free(ctx);
    test_free(&tm);
}

/* Thread counts 1, 2, 3, 5, 7 and 16 (more threads than most matrices have
 * row groups to deal out), every placement: a 150-token prompt in one batch (past
 * the 64-token chunks the matmuls split by; every logit wanted) and a decode
 * step after it give bitwise the same logits and routes. */
static void test_thread_counts(int32_t dtype, int32_t kv_dtype) {
    enum { N = 150 };
    static const int32_t counts[] = {1, 2, 3, 5, 7, 16};
    static const int32_t placements[] = {COLIBRI_PLACE_CORES, COLIBRI_PLACE_DISTRIBUTE, COLIBRI_PLACE_ISOLATE,
                                         COLIBRI_PLACE_NONE};
    test_model tm;
    test_config(&tm, dtype);
    CHECK(test_build(&tm, 1) == 0, "build: %s", colibri_last_error());
    int32_t V = tm.hp.n_vocab, L = tm.hp.n_layer, k = tm.hp.n_expert_used;
    int32_t tok[N + 1], pos[N + 1], seq[N + 1] = {0};
    int8_t want[N];
    for (int i = 0; i <= N; i++) tok[i] = (i * 13 + 5) % V, pos[i] = i;
    memset(want, 1, sizeof want);
    float *ref = malloc((size_t)(N + 1) * V * sizeof(float)), *got = malloc((size_t)(N + 1) * V * sizeof(float));
    int32_t *ref_experts = malloc((size_t)L * N * k * sizeof(int32_t)), *experts = malloc((size_t)L * N * k * sizeof(int32_t));
    memset(ref_experts, 0xff, (size_t)L * N * k * sizeof(int32_t));   /* the dense layer's rows stay -1 */
    memset(experts, 0xff, (size_t)L * N * k * sizeof(int32_t));
    for (int c = 0; c < (int)(sizeof counts / sizeof counts[0]); c++) {
        for (int p = 0; p < (c == 2 ? 4 : 1); p++) {   /* every placement at 3 threads */
            colibri_context_params params = {N + 2, 1, N, counts[c], kv_dtype, placements[p]};
            colibri_context *ctx = colibri_context_create_params(tm.m, &params);
            CHECK(ctx && colibri_context_threads(ctx) == counts[c], "%d threads: %s", counts[c], colibri_last_error());
            if (!ctx) continue;
            CHECK(colibri_context_pinned(ctx) == 0 || (counts[c] > 1 && placements[p] != COLIBRI_PLACE_NONE),
                  "pinned only with several threads and a placement");
            float *logits = c == 0 ? ref : got;
            colibri_batch b = {N, tok, pos, seq, want};
            colibri_outputs out = {logits, NULL, c == 0 ? ref_experts : experts, NULL};
            CHECK(colibri_forward(ctx, &b, &out) == 0, "prompt: %s", colibri_last_error());
            CHECK(test_step(ctx, 1, &tok[N], &pos[N], seq, NULL, logits + (int64_t)N * V) == 0, "step: %s",
                  colibri_last_error());
            if (c > 0) {
                CHECK(memcmp(ref, got, (size_t)(N + 1) * V * sizeof(float)) == 0,
                      "dtype %d, KV %d: %d threads (placement %d) == 1 thread, bitwise", dtype, kv_dtype, counts[c],
                      placements[p]);
                CHECK(memcmp(ref_experts, experts, (size_t)L * N * k * sizeof(int32_t)) == 0,
                      "dtype %d: %d threads: routes", dtype, counts[c]);
            }
            colibri_context_free(ctx);
        }
    }
    colibri_context_params bad = {16, 1, 8, 2, kv_dtype, 9};
    CHECK(colibri_context_create_params(tm.m, &bad) == NULL && strstr(colibri_last_error(), "placement"),
          "placement 9 refused: %s", colibri_last_error());
    CHECK(colibri_context_create_params(tm.m, NULL) == NULL, "NULL params refused");
    CHECK(colibri_context_pinned(NULL) == -1, "pinned of NULL");
    free(ref), free(got), free(ref_experts), free(experts);
    test_free(&tm);
}

/* ---- paging ------------------------------------------------------------------------ */

/* Moves the routed experts of tm (built, not finalized) into a file: each
 * expert tensor is written at the next 64-byte boundary, the file mapped and
 * the tensor set again as a view of the mapping, which is declared for paging.
 * path: a mkstemp template (the caller unlinks it); *base, *size: the mapping. */
static int test_experts_to_file(test_model *tm, char *path, void **base, size_t *size) {
    const colibri_hparams *hp = &tm->hp;
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    uint64_t offsets[8][16][3], at = 0;   /* offsets: [layer][expert][kind] in the file */
    static const char zeros[64];
    for (int32_t l = 0; l < hp->n_layer; l++) {
        for (int32_t e = 0; hp->layer_is_moe[l] && e < hp->n_expert; e++) {
            for (int32_t k = 0; k < 3; k++) {
                const colibri_tensor *t = colibri_model_tensor(tm->m, COLIBRI_T_EXPERT_GATE + k, l, e);
                size_t n = (size_t)(t->rows * colibri_row_bytes(t->dtype, t->cols));
                size_t pad = (size_t)((64 - at % 64) % 64);
                if (write(fd, zeros, pad) != (ssize_t)pad || write(fd, t->data, n) != (ssize_t)n) return -1;
                offsets[l][e][k] = at + pad;
                at += pad + n;
            }
        }
    }
    *size = (size_t)at;
    *base = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (*base == MAP_FAILED) return -1;
    int rc = colibri_model_add_file(tm->m, path, *base, *size);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        for (int32_t e = 0; hp->layer_is_moe[l] && e < hp->n_expert; e++) {
            for (int32_t k = 0; k < 3; k++) {
                const colibri_tensor *t = colibri_model_tensor(tm->m, COLIBRI_T_EXPERT_GATE + k, l, e);
                rc |= colibri_model_set_tensor(tm->m, COLIBRI_T_EXPERT_GATE + k, l, e,
                                               (const char *)*base + offsets[l][e][k], t->dtype, t->rows, t->cols);
            }
        }
    }
    return rc;
}

/* The prompt (every position's logits) then 4 greedy steps: logits [10, V]. */
static int test_trace(colibri_context *ctx, float *logits) {
    int32_t V = colibri_context_hparams(ctx)->n_vocab, pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    int8_t want[6] = {1, 1, 1, 1, 1, 1};
    int rc = test_step(ctx, 6, prompt, pos, seq, want, logits);
    for (int32_t i = 0; i < 4 && !rc; i++) {
        const float *last = logits + (int64_t)(5 + i) * V;
        int32_t token = 0, at = 6 + i;
        for (int32_t v = 1; v < V; v++) token = last[v] > last[token] ? v : token;
        rc = test_step(ctx, 1, &token, &at, seq, NULL, logits + (int64_t)(6 + i) * V);
    }
    return rc;
}

/* Paging changes only where the expert bytes come from: contexts paging the
 * experts of one model through 1, 2 or all 6 slots, read-ahead depth 0, 1, 2,
 * give the logits of a context that does not, bitwise; then the API's refusals
 * and a file that shrinks under a paging context (COLIBRI_ERR_IO). */
static void test_paging(int32_t dtype) {
    test_model tm;
    test_config(&tm, dtype);
    CHECK(test_build(&tm, 0) == 0, "build: %s", colibri_last_error());
    char path[] = "/tmp/colibri_test_paging_XXXXXX";
    void *base = NULL;
    size_t size = 0;
    CHECK(test_experts_to_file(&tm, path, &base, &size) == 0, "experts to a file: %s", colibri_last_error());
    CHECK(colibri_model_finalize(tm.m) == 0, "finalize: %s", colibri_last_error());
    float want[10 * 64], got[10 * 64];   /* [10, V] */
    colibri_context *ctx = colibri_context_create(tm.m, 16, 1, 6, 2);
    CHECK(test_trace(ctx, want) == 0, "resident trace: %s", colibri_last_error());
    CHECK_STATUS(colibri_paging_stats_read(ctx, &(colibri_paging_stats){0}, 0), COLIBRI_ERR_STATE);
    colibri_context_free(ctx);
    int64_t slots[3] = {1, 2, 6};
    for (int i = 0; i < 9; i++) {
        ctx = colibri_context_create(tm.m, 16, 1, 6, 1 + i % 2);
        colibri_paging_options opt = {slots[i / 3], 2, i % 3, 1, 0};
        CHECK(colibri_context_page_experts(ctx, &opt) == 0, "page_experts: %s", colibri_last_error());
        memset(got, 0, sizeof got);
        CHECK(test_trace(ctx, got) == 0, "paged trace: %s", colibri_last_error());
        CHECK(memcmp(got, want, (size_t)10 * tm.hp.n_vocab * sizeof(float)) == 0,
              "dtype %d, %lld slots, read-ahead %d: paged logits == resident bitwise", dtype,
              (long long)slots[i / 3], i % 3);
        colibri_paging_stats st;
        CHECK(colibri_paging_stats_read(ctx, &st, 1) == 0 && st.lookups == st.hits + st.misses && st.misses > 0 &&
              st.tokens == 10 && st.n_slots == slots[i / 3] && st.reads == st.misses + st.prefetches &&
              st.predicted2 == 0 && st.stall_ahead_seconds <= st.stall_seconds,   /* one MoE layer: nothing 2 ahead */
              "stats: %lld lookups, %lld hits, %lld misses", (long long)st.lookups, (long long)st.hits,
              (long long)st.misses);
        colibri_paging_options again = {1, 1, 0, 1, 0};
        CHECK_STATUS(colibri_context_page_experts(ctx, &again), COLIBRI_ERR_STATE);
        colibri_context_free(ctx);
    }
    ctx = colibri_context_create(tm.m, 16, 1, 6, 2);
    colibri_paging_options none = {0, 1, 0, 1, 0}, one = {1, 1, 0, 1, 0}, deep = {1, 1, 3, 1, 0};
    CHECK_STATUS(colibri_context_page_experts(ctx, &none), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_context_page_experts(ctx, &deep), COLIBRI_ERR_INVALID);
    CHECK(colibri_context_page_experts(ctx, &one) == 0, "page_experts: %s", colibri_last_error());
    int32_t pin_layer[2] = {1, 1}, pin_expert[2] = {0, 3};
    CHECK_STATUS(colibri_paging_pin(ctx, pin_layer, pin_expert, 1), COLIBRI_ERR_INVALID);   /* the only slot */
    CHECK(truncate(path, 0) == 0, "truncate");   /* the file shrinks: the first miss fails the step */
    CHECK_STATUS(test_trace(ctx, got), COLIBRI_ERR_IO);
    CHECK(strstr(colibri_last_error(), path) != NULL, "the error names the file: %s", colibri_last_error());
    colibri_context_free(ctx);
    test_model other;   /* experts in memory, in no declared file */
    test_config(&other, dtype);
    CHECK(test_build(&other, 1) == 0, "build: %s", colibri_last_error());
    ctx = colibri_context_create(other.m, 16, 1, 6, 1);
    CHECK_STATUS(colibri_context_page_experts(ctx, &one), COLIBRI_ERR_INVALID);
    colibri_context_free(ctx);
    test_free(&other);
    munmap(base, size);
    unlink(path);
    test_free(&tm);
}

/* An F16 KV cache against the F32 one: the logits of a 6-token prompt agree to
 * NMSE <= 1e-5 (keys and values rounded to f16 only); a KV type other than
 * F32 / F16 is refused. */
static void test_kv_f16(void) {
    test_model tm;
    test_config(&tm, COLIBRI_DTYPE_F32);
    CHECK(test_build(&tm, 1) == 0, "build: %s", colibri_last_error());
    int32_t V = tm.hp.n_vocab;
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    int8_t want[6] = {1, 1, 1, 1, 1, 1};
    float logits[2][6 * 64];   /* logits: [kv type][6, V] */
    for (int k = 0; k < 2; k++) {
        colibri_context *ctx = colibri_context_create_kv(tm.m, 16, 1, 8, 2, k ? COLIBRI_DTYPE_F16 : COLIBRI_DTYPE_F32);
        CHECK(test_step(ctx, 6, prompt, pos, seq, want, logits[k]) == 0, "forward: %s", colibri_last_error());
        colibri_context_free(ctx);
    }
    double err = 0.0, ref = 0.0;
    for (int i = 0; i < 6 * V; i++) {
        err += ((double)logits[1][i] - logits[0][i]) * ((double)logits[1][i] - logits[0][i]);
        ref += (double)logits[0][i] * logits[0][i];
    }
    CHECK(err / ref <= 1e-5 && memcmp(logits[0], logits[1], sizeof logits[0]) != 0,
          "F16 KV vs F32 KV: logits NMSE %.3g (and not identical)", err / ref);
    printf("F16 KV vs F32 KV: logits NMSE %.3g\n", err / ref);
    CHECK(colibri_context_create_kv(tm.m, 16, 1, 8, 1, COLIBRI_DTYPE_BF16) == NULL &&
          strstr(colibri_last_error(), "kv_dtype") != NULL, "BF16 KV refused: %s", colibri_last_error());
    CHECK(colibri_context_kv_type(NULL) == -1, "KV type of NULL");
    test_free(&tm);
}

/* A block-type model (block-type embeddings too) against its twin: the same
 * weights dequantized to F32. They differ only by the per-block Q8_H / Q8_S
 * quantization of the matmul activations, so the logits agree to NMSE <= max_nmse
 * at 5 of the 6 positions and 10 max_nmse over all: a router's near tie that the
 * rounding flips moves one position's logits further (the Q4_0 model's last
 * position: 0.02, its others 1e-4..5e-4). */
/* Builds tm, runs the 6-token prompt with 2 threads and frees it; logits:
 * [6, V] every position's logits. */
static void test_prompt_logits(test_model *tm, float *logits) {
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    int8_t want[6] = {1, 1, 1, 1, 1, 1};
    CHECK(test_build(tm, 1) == 0, "build: %s", colibri_last_error());
    colibri_context *ctx = colibri_context_create(tm->m, 16, 1, 8, 2);
    CHECK(test_step(ctx, 6, prompt, pos, seq, want, logits) == 0, "forward: %s", colibri_last_error());
    colibri_context_free(ctx);
    test_free(tm);
}

static void test_block_vs_dequantized(int32_t dtype, double max_nmse) {
    float logits[2][6 * 64];
    for (int twin = 0; twin < 2; twin++) {
        test_model tm;
        test_config(&tm, dtype);
        tm.hp.tied_embeddings = dtype == COLIBRI_DTYPE_Q4_1;   /* lm_head through a block-type TOKEN_EMBD */
        if (twin) {
            tm.dtype = COLIBRI_DTYPE_F32;
            tm.round_through = dtype;
        }
        test_prompt_logits(&tm, logits[twin]);
    }
    double err = 0.0, ref = 0.0;
    int within = 0;   /* positions whose own NMSE is within max_nmse */
    for (int p = 0; p < 6; p++) {
        double e = 0.0, r = 0.0;
        for (int i = p * 50; i < p * 50 + 50; i++) {
            double d = (double)logits[0][i] - (double)logits[1][i];
            e += d * d;
            r += (double)logits[1][i] * logits[1][i];
        }
        within += r > 0.0 && e / r <= max_nmse;
        err += e;
        ref += r;
    }
    CHECK(ref > 0.0 && within >= 5 && err / ref <= 10.0 * max_nmse,
          "dtype %d: logits vs dequantized-F32 twin: %d of 6 positions within NMSE %.3g, all %.3g", dtype, within,
          max_nmse, err / ref);
    CHECK(err > 0.0, "dtype %d: activations really are quantized (twin differs)", dtype);
    printf("dtype %d vs its dequantized F32 twin: logits NMSE %.3g, %d of 6 positions within %.3g\n", dtype,
           err / ref, within, max_nmse);
}

/* Gate and up of different dtypes take the unfused path (two matmuls, SwiGLU
 * after); the same values in one dtype take the fused one (SwiGLU in the
 * matmul epilogue). F16 up weights widen exactly, so logits agree bitwise. */
static void test_mixed_gate_up(void) {
    float logits[2][6 * 50];
    for (int twin = 0; twin < 2; twin++) {
        test_model tm;
        test_config(&tm, COLIBRI_DTYPE_F32);
        tm.up_f16 = twin + 1;
        test_prompt_logits(&tm, logits[twin]);
    }
    CHECK(memcmp(logits[0], logits[1], sizeof logits[0]) == 0, "F16 up (unfused) vs F32 up (fused): bitwise");
}

/* Variants of the config run and agree with themselves: whole-q/k norm, clip,
 * tied embeddings, a sliding window wider than the context == no window. */
static void test_variants(void) {
    float ref[64] = {0}, got[64] = {0};
    int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    for (int variant = 0; variant < 2; variant++) {
        test_model tm;
        test_config(&tm, COLIBRI_DTYPE_F32);
        tm.hp.qk_norm = COLIBRI_QK_NORM_WHOLE;
        tm.hp.qkv_clip = 0.8f;
        tm.hp.tied_embeddings = 1;
        tm.hp.n_ff_shared = 0;
        tm.hp.shared_gated = 0;
        tm.hp.sliding_window = variant ? 64 : 0;
        CHECK(test_build(&tm, 1) == 0, "variant build: %s", colibri_last_error());
        colibri_context *ctx = colibri_context_create(tm.m, 16, 1, 8, 2);
        CHECK(test_step(ctx, 6, prompt, pos, seq, NULL, variant ? got : ref) == 0, "variant: %s",
              colibri_last_error());
        colibri_context_free(ctx);
        test_free(&tm);
    }
    CHECK(memcmp(ref, got, sizeof ref) == 0, "sliding window wider than the context == full attention");
    /* a window of 2 must change the last token's logits */
    test_model tm;
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.sliding_window = 2;
    CHECK(test_build(&tm, 1) == 0, "window build");
    colibri_context *ctx = colibri_context_create(tm.m, 16, 1, 8, 1);
    test_step(ctx, 6, prompt, pos, seq, NULL, got);
    colibri_context_free(ctx);
    test_free(&tm);
    test_config(&tm, COLIBRI_DTYPE_F32);
    test_build(&tm, 1);
    ctx = colibri_context_create(tm.m, 16, 1, 8, 1);
    test_step(ctx, 6, prompt, pos, seq, NULL, ref);
    colibri_context_free(ctx);
    test_free(&tm);
    CHECK(memcmp(ref, got, sizeof ref) != 0, "a sliding window of 2 changes the logits");
}

/* gpt-oss's mechanisms: each one changes the logits of the 6-token prompt, and
 * a layer window wider than the prompt is full attention, bitwise. */
static void test_mechanisms_matter(void) {
    static float base[6 * 64], got[6 * 64];
    test_model tm;
    test_config(&tm, COLIBRI_DTYPE_F32);
    test_mechanisms(&tm);
    test_prompt_logits(&tm, base);
    for (int change = 0; change < 6; change++) {
        test_config(&tm, COLIBRI_DTYPE_F32);
        test_mechanisms(&tm);
        switch (change) {
        case 0: tm.window[0] = 0; break;
        case 1: tm.hp.attn_sinks = 0; break;
        case 2: tm.hp.attn_out_bias = 0; break;
        case 3: tm.hp.expert_bias = 0; break;
        case 4: tm.hp.ffn_limit = 100.0f; break;
        default: tm.hp.ffn_act = COLIBRI_FFN_SWIGLU; break;
        }
        test_prompt_logits(&tm, got);
        CHECK(memcmp(base, got, sizeof base) != 0, "mechanism change %d changes the logits", change);
    }
    float full[6 * 64];
    test_config(&tm, COLIBRI_DTYPE_F32);
    test_mechanisms(&tm);
    tm.window[0] = 0;
    test_prompt_logits(&tm, full);
    test_config(&tm, COLIBRI_DTYPE_F32);
    test_mechanisms(&tm);
    tm.window[0] = 6;
    test_prompt_logits(&tm, got);
    CHECK(memcmp(full, got, sizeof full) == 0, "a layer window as wide as the prompt == full attention, bitwise");
    test_config(&tm, COLIBRI_DTYPE_F32);
    test_mechanisms(&tm);
    tm.window[1] = -1;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "layer_window[1]"),
          "negative layer window refused: %s", colibri_last_error());
    test_mechanisms(&tm);
    tm.hp.ffn_limit = 0.0f;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "ffn_limit"),
          "clamped SwiGLU without a limit refused: %s", colibri_last_error());
}

/* ---- validation error paths --------------------------------------------------- */

static void test_model_errors(void) {
    test_model tm;
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.n_head_kv = 3;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "n_head_kv"), "bad n_head_kv");
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.n_expert_used = 7;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "n_expert_used"), "bad top-k");
    CHECK(colibri_model_create(NULL) == NULL, "NULL hparams");

    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.m = colibri_model_create(&tm.hp);
    colibri_model *m = tm.m;
    float buf[64 * 64] = {0};
    int64_t D = 36;
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, 0, -1, buf, 0, D, 48), COLIBRI_ERR_SHAPE);
    CHECK(strstr(colibri_last_error(), "expected shape [48, 36]") != NULL, "shape message: %s", colibri_last_error());
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, 0, -1, buf, 7, 48, D), COLIBRI_ERR_SHAPE);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, 2, -1, buf, 0, 48, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, -1, -1, buf, 0, 48, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_TOKEN_EMBD, 0, -1, buf, 0, 50, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_EXPERT_UP, 1, 6, buf, 0, 24, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_EXPERT_UP, 1, -1, buf, 0, 24, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_EXPERT_UP, 0, 0, buf, 0, 24, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, 0, 1, buf, 0, 48, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_FFN_UP, 1, -1, buf, 0, 40, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_ROUTER, 0, -1, buf, 0, 6, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_COUNT, 0, -1, buf, 0, 1, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, -1, 0, -1, buf, 0, 1, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_WQ, 0, -1, NULL, 0, 48, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(m, COLIBRI_T_Q_NORM, 0, -1, buf, 0, 1, 48), COLIBRI_ERR_SHAPE);
    CHECK_STATUS(colibri_model_set_tensor(NULL, COLIBRI_T_WQ, 0, -1, buf, 0, 48, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_finalize(m), COLIBRI_ERR_MISSING);
    CHECK(strstr(colibri_last_error(), "TOKEN_EMBD") != NULL, "missing names the tensor: %s", colibri_last_error());
    CHECK(colibri_context_create(m, 16, 1, 4, 1) == NULL && strstr(colibri_last_error(), "finalized"),
          "context before finalize");
    test_free(&tm);

    /* features switched off reject their tensors */
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.attn_bias = 0; tm.hp.qk_norm = 0; tm.hp.tied_embeddings = 1; tm.hp.shared_gated = 0;
    tm.m = colibri_model_create(&tm.hp);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_BQ, 0, -1, buf, 0, 1, 48), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_K_NORM, 0, -1, buf, 0, 1, 12), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_OUTPUT, -1, -1, buf, 0, 50, D), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_SHARED_ROUTER, 1, -1, buf, 0, 1, D), COLIBRI_ERR_INVALID);
    test_free(&tm);

    /* every tensor but one expert's down projection → MISSING naming it */
    test_config(&tm, COLIBRI_DTYPE_BF16);
    CHECK(test_build(&tm, 0) == 0, "build without finalize");
    tm.m->layers[1].experts[3 * COLIBRI_EXPERT_KINDS + 2].data = NULL;   /* white-box: unset it */
    CHECK_STATUS(colibri_model_finalize(tm.m), COLIBRI_ERR_MISSING);
    CHECK(strstr(colibri_last_error(), "EXPERT_DOWN (layer 1, expert 3)") != NULL, "message: %s", colibri_last_error());
    test_free(&tm);

    test_config(&tm, COLIBRI_DTYPE_F16);
    CHECK(test_build(&tm, 1) == 0, "build");
    CHECK_STATUS(colibri_model_finalize(tm.m), COLIBRI_ERR_STATE);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WQ, 0, -1, buf, 0, 48, D), COLIBRI_ERR_STATE);
    CHECK(colibri_context_create(tm.m, 0, 1, 4, 1) == NULL, "n_ctx 0 rejected");
    test_free(&tm);

    /* block types: matrices only, cols a multiple of 32 (D = 36 is not) */
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.m = colibri_model_create(&tm.hp);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WQ, 0, -1, buf, COLIBRI_DTYPE_Q4_0, 48, D),
                 COLIBRI_ERR_SHAPE);
    CHECK(strstr(colibri_last_error(), "tensor WQ (layer 0): dtype Q4_0 needs cols to be a multiple of 32, got 36"),
          "message: %s", colibri_last_error());
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_TOKEN_EMBD, -1, -1, buf, COLIBRI_DTYPE_Q8_0, 50, D),
                 COLIBRI_ERR_SHAPE);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WO, 0, -1, buf, COLIBRI_DTYPE_Q4_1, D, 48),
                 COLIBRI_ERR_SHAPE);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_Q_NORM, 0, -1, buf, COLIBRI_DTYPE_Q8_0, 1, 12),
                 COLIBRI_ERR_SHAPE);
    CHECK(strstr(colibri_last_error(), "dtype Q8_0 is for matrices; norms and biases must be F32, F16 or BF16"),
          "message: %s", colibri_last_error());
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WQ, 0, -1, buf, COLIBRI_TYPE_Q8_H, 48, D),
                 COLIBRI_ERR_SHAPE);
    CHECK(strstr(colibri_last_error(), "unknown dtype 16"), "Q8_H is activation-only: %s", colibri_last_error());
    test_free(&tm);
}

/* Latent attention's hyperparameter rules and its tensors' presence. */
static void test_latent_errors(void) {
    test_model tm;
    float buf[64 * 64] = {0};
    latent_mode = 1;
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.n_head_kv = 2;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "n_head_kv = 1"),
          "latent needs one KV head: %s", colibri_last_error());
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.qk_norm = COLIBRI_QK_NORM_PER_HEAD;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "qk_norm"), "latent with qk norm");
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.head_dim_v = 0;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "head_dim_v"), "latent without dv");
    latent_mode = 0;
    test_config(&tm, COLIBRI_DTYPE_F32);
    tm.hp.q_lora_rank = 8;
    CHECK(colibri_model_create(&tm.hp) == NULL && strstr(colibri_last_error(), "kv_lora_rank > 0"),
          "q_lora_rank without latent attention");

    latent_mode = 1;
    test_config(&tm, COLIBRI_DTYPE_F32);   /* q straight from x: WQ [H*(12+8), D], no WQ_A; no WK */
    tm.m = colibri_model_create(&tm.hp);
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WK, 0, -1, buf, 0, 8, 36), COLIBRI_ERR_INVALID);
    CHECK(strstr(colibri_last_error(), "latent attention"), "WK absence reason: %s", colibri_last_error());
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WQ_A, 0, -1, buf, 0, 8, 36), COLIBRI_ERR_INVALID);
    CHECK(strstr(colibri_last_error(), "q_lora_rank is 0"), "WQ_A absence reason: %s", colibri_last_error());
    CHECK(colibri_model_set_tensor(tm.m, COLIBRI_T_WQ, 0, -1, buf, 0, 80, 36) == 0, "WQ [80, 36]: %s",
          colibri_last_error());
    CHECK_STATUS(colibri_model_set_tensor(tm.m, COLIBRI_T_WK_B, 0, -1, buf, 0, 80, 20), COLIBRI_ERR_SHAPE);
    CHECK(strstr(colibri_last_error(), "expected shape [80, 12]"), "WK_B shape: %s", colibri_last_error());
    test_free(&tm);
    test_config(&tm, COLIBRI_DTYPE_F32);
    CHECK(test_build(&tm, 0) == 0, "latent build: %s", colibri_last_error());
    tm.m->layers[1].t[COLIBRI_T_WV_B].data = NULL;   /* white-box: unset it */
    CHECK_STATUS(colibri_model_finalize(tm.m), COLIBRI_ERR_MISSING);
    CHECK(strstr(colibri_last_error(), "WV_B (layer 1)"), "missing latent tensor: %s", colibri_last_error());
    test_free(&tm);
    latent_mode = 0;
}

static void test_batch_errors(void) {
    test_model tm;
    test_config(&tm, COLIBRI_DTYPE_F32);
    CHECK(test_build(&tm, 1) == 0, "build");
    colibri_context *ctx = colibri_context_create(tm.m, 8, 2, 4, 1);
    int32_t tok[5] = {1, 2, 3, 4, 5}, pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0};
    CHECK(test_step(ctx, 3, tok, pos, seq, NULL, NULL) == 0, "prefill 3");
    int32_t bad_tok[2] = {1, 50}, bad_seq[2] = {0, 2}, bad_pos[2] = {3, 8}, skip[2] = {3, 5};
    int32_t neg_pos[2] = {-1, 3}, repeat[2] = {3, 3}, zero_seq[2] = {0, 0}, next_pos[2] = {3, 4};
    CHECK_STATUS(test_step(ctx, 0, tok, pos, seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 5, tok, pos, seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 2, bad_tok, next_pos, zero_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK(strstr(colibri_last_error(), "batch token 1: token id 50") != NULL, "message: %s", colibri_last_error());
    CHECK_STATUS(test_step(ctx, 2, tok, next_pos, bad_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 2, tok, neg_pos, zero_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 2, tok, bad_pos, zero_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 2, tok, skip, zero_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK(strstr(colibri_last_error(), "batch token 1: position 5 skips ahead of sequence 0's cached length 4"),
          "message: %s", colibri_last_error());
    CHECK_STATUS(test_step(ctx, 2, tok, repeat, zero_seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 1, tok, &pos[1], &bad_seq[1], NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(test_step(ctx, 1, tok, NULL, seq, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_forward(ctx, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK_STATUS(colibri_forward(NULL, NULL, NULL), COLIBRI_ERR_INVALID);
    CHECK(colibri_seq_len(ctx, 0) == 3 && colibri_seq_len(ctx, 1) == 0, "failed batches change nothing");
    CHECK(colibri_seq_len(ctx, 2) == -1, "seq_len out of range → -1");
    CHECK_STATUS(colibri_seq_clear(ctx, 2), COLIBRI_ERR_INVALID);
    __atomic_store_n(&ctx->stepping, 1, __ATOMIC_SEQ_CST);   /* as while another thread's step runs */
    CHECK_STATUS(test_step(ctx, 2, tok, next_pos, zero_seq, NULL, NULL), COLIBRI_ERR_STATE);
    CHECK(strstr(colibri_last_error(), "forward: the context is running a step on another thread"),
          "message: %s", colibri_last_error());
    CHECK(colibri_seq_len(ctx, 0) == 3, "a refused step changes nothing");
    /* nor may a call change what the running step reads: each refused in one line, nothing changed */
    CHECK_STATUS(colibri_seq_clear(ctx, 0), COLIBRI_ERR_STATE);
    CHECK(strstr(colibri_last_error(), "seq_clear: the context is running a step on another thread"),
          "message: %s", colibri_last_error());
    CHECK(colibri_seq_len(ctx, 0) == 3, "a refused seq_clear changes nothing");
    CHECK_STATUS(colibri_context_set_exact(ctx, 1), COLIBRI_ERR_STATE);
    CHECK(ctx->exact == 0, "a refused set_exact changes nothing");
    CHECK_STATUS(colibri_profile_enable(ctx, 1), COLIBRI_ERR_STATE);
    CHECK(ctx->profile == NULL, "a refused profile_enable changes nothing");
    colibri_paging_options paging = {.n_slots = 1};
    CHECK_STATUS(colibri_context_page_experts(ctx, &paging), COLIBRI_ERR_STATE);
    CHECK(ctx->paging == NULL, "a refused page_experts changes nothing");
    CHECK_STATUS(colibri_paging_pin(ctx, NULL, NULL, 0), COLIBRI_ERR_STATE);
    CHECK(strstr(colibri_last_error(), "paging_pin: the context is running a step"), "message: %s",
          colibri_last_error());
    __atomic_store_n(&ctx->stepping, 0, __ATOMIC_SEQ_CST);
    CHECK(test_step(ctx, 2, tok, next_pos, zero_seq, NULL, NULL) == 0, "a valid batch still runs");
    colibri_context_free(ctx);
    test_free(&tm);
}

int main(void) {
    CHECK(colibri_api_version() == COLIBRI_API_VERSION, "api version");
    test_conversions();
    test_exp();
    test_router();
    test_dispatch_aggregate();
    test_threadpool_nap();
    test_prefill_vs_steps(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F32, 0);
    test_prefill_vs_steps(COLIBRI_DTYPE_BF16, COLIBRI_DTYPE_F32, 0);
    test_prefill_vs_steps(COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_F16, 0);
    test_mixed_gate_up();
    test_threads_and_batching(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F32, 0);
    test_threads_and_batching(COLIBRI_DTYPE_F16, COLIBRI_DTYPE_F32, 0);
    test_prefill_vs_steps(COLIBRI_DTYPE_Q4_1, COLIBRI_DTYPE_F32, 0);
    test_threads_and_batching(COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_F32, 0);
    test_threads_and_batching(COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_F32, 0);
    test_threads_and_batching(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F16, 0);
    test_threads_and_batching(COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_F16, 0);
    test_prefill_vs_steps(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F32, 1);
    test_prefill_vs_steps(COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_F16, 1);
    test_threads_and_batching(COLIBRI_DTYPE_BF16, COLIBRI_DTYPE_F32, 1);
    test_threads_and_batching(COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_F16, 1);
    test_layer_span(COLIBRI_DTYPE_F32);
    test_layer_span(COLIBRI_DTYPE_Q4_0);
    test_swiglu_clamped();
    test_mechanisms_matter();
    test_kv_f16();
    test_thread_counts(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F32);
    test_thread_counts(COLIBRI_DTYPE_BF16, COLIBRI_DTYPE_F16);
    test_thread_counts(COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_F16);
    test_thread_counts(COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_F32);
    test_thread_counts(COLIBRI_DTYPE_Q4_1, COLIBRI_DTYPE_F32);
    test_paging(COLIBRI_DTYPE_F32);
    test_paging(COLIBRI_DTYPE_Q4_0);
    test_block_vs_dequantized(COLIBRI_DTYPE_Q8_0, 1e-3);
    test_block_vs_dequantized(COLIBRI_DTYPE_Q4_0, 1e-3);
    test_block_vs_dequantized(COLIBRI_DTYPE_Q4_1, 1e-3);
    test_variants();
    /* latent KV attention: the same self-consistency and determinism */
    latent_mode = 1;
    test_prefill_vs_steps(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F32, 0);
    test_prefill_vs_steps(COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_F16, 0);
    test_threads_and_batching(COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F16, 0);
    test_threads_and_batching(COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_F32, 0);
    test_block_vs_dequantized(COLIBRI_DTYPE_Q8_0, 1e-3);
    latent_mode = 0;
    test_latent_errors();
    test_model_errors();
    test_batch_errors();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
