/*
 * colibri_demo.c — libcolibri from plain C, no Python.
 *
 * Builds a small random MoE model in memory (a dense first layer, then a MoE
 * layer with a gated shared expert; per-head q/k norm; q/k/v biases; weights
 * from a fixed PRNG), creates a context, prefills a short prompt and decodes
 * a few tokens greedily. Prints the generated ids and a logits checksum.
 * Exits 1 with colibri_last_error() on any failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "colibri.h"

enum { VOCAB = 96, EMBD = 64, LAYERS = 2, HEADS = 4, HEADS_KV = 2, HEAD_DIM = 16, FF = 96,
       EXPERTS = 8, TOP_K = 2, FF_EXPERT = 48, FF_SHARED = 64, N_CTX = 64, N_DECODE = 8 };

/* Every weight lives in one buffer, carved in order. */
typedef struct demo_weights {
    float *data;     /* data: [capacity] */
    size_t used, capacity;
    uint64_t rng;
} demo_weights;

static float demo_rand(uint64_t *state) {   /* splitmix64 → uniform [-0.5, 0.5) */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) / 16777216.0f - 0.5f;
}

/* Fills a [rows, cols] f32 weight with center + (2/sqrt(cols)) * U(-0.5, 0.5) and
 * registers it with the model. */
static int demo_set(colibri_model *m, demo_weights *w, int32_t kind, int32_t layer, int32_t expert,
                    int64_t rows, int64_t cols, float center) {
    size_t n = (size_t)(rows * cols);
    if (w->used + n > w->capacity) {
        fprintf(stderr, "colibri_demo: weight buffer too small\n");
        return 1;
    }
    float *t = w->data + w->used;   /* t: [rows, cols] */
    w->used += n;
    float scale = 2.0f / sqrtf((float)cols);
    for (size_t i = 0; i < n; i++) t[i] = center + scale * demo_rand(&w->rng);
    return colibri_model_set_tensor(m, kind, layer, expert, t, COLIBRI_DTYPE_F32, rows, cols);
}

static int demo_fill(colibri_model *m, demo_weights *w) {
    const int64_t D = EMBD, Q = HEADS * HEAD_DIM, K = HEADS_KV * HEAD_DIM;
    int rc = 0;
    rc |= demo_set(m, w, COLIBRI_T_TOKEN_EMBD, -1, -1, VOCAB, D, 0.0f);
    rc |= demo_set(m, w, COLIBRI_T_OUTPUT_NORM, -1, -1, 1, D, 1.0f);
    rc |= demo_set(m, w, COLIBRI_T_OUTPUT, -1, -1, VOCAB, D, 0.0f);
    for (int32_t l = 0; l < LAYERS; l++) {
        rc |= demo_set(m, w, COLIBRI_T_ATTN_NORM, l, -1, 1, D, 1.0f);
        rc |= demo_set(m, w, COLIBRI_T_WQ, l, -1, Q, D, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_WK, l, -1, K, D, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_WV, l, -1, K, D, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_WO, l, -1, D, Q, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_BQ, l, -1, 1, Q, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_BK, l, -1, 1, K, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_BV, l, -1, 1, K, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_Q_NORM, l, -1, 1, HEAD_DIM, 1.0f);
        rc |= demo_set(m, w, COLIBRI_T_K_NORM, l, -1, 1, HEAD_DIM, 1.0f);
        rc |= demo_set(m, w, COLIBRI_T_FFN_NORM, l, -1, 1, D, 1.0f);
        if (l == 0) {   /* dense layer */
            rc |= demo_set(m, w, COLIBRI_T_FFN_GATE, l, -1, FF, D, 0.0f);
            rc |= demo_set(m, w, COLIBRI_T_FFN_UP, l, -1, FF, D, 0.0f);
            rc |= demo_set(m, w, COLIBRI_T_FFN_DOWN, l, -1, D, FF, 0.0f);
            continue;
        }
        rc |= demo_set(m, w, COLIBRI_T_ROUTER, l, -1, EXPERTS, D, 0.0f);
        for (int32_t e = 0; e < EXPERTS; e++) {
            rc |= demo_set(m, w, COLIBRI_T_EXPERT_GATE, l, e, FF_EXPERT, D, 0.0f);
            rc |= demo_set(m, w, COLIBRI_T_EXPERT_UP, l, e, FF_EXPERT, D, 0.0f);
            rc |= demo_set(m, w, COLIBRI_T_EXPERT_DOWN, l, e, D, FF_EXPERT, 0.0f);
        }
        rc |= demo_set(m, w, COLIBRI_T_SHARED_GATE, l, -1, FF_SHARED, D, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_SHARED_UP, l, -1, FF_SHARED, D, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_SHARED_DOWN, l, -1, D, FF_SHARED, 0.0f);
        rc |= demo_set(m, w, COLIBRI_T_SHARED_ROUTER, l, -1, 1, D, 0.0f);
    }
    return rc;
}

static int32_t demo_argmax(const float *logits) {   /* logits: [VOCAB]; ties → lower id */
    int32_t best = 0;
    for (int32_t i = 1; i < VOCAB; i++) best = logits[i] > logits[best] ? i : best;
    return best;
}

static int demo_fail(const char *what) {
    fprintf(stderr, "colibri_demo: %s: %s\n", what, colibri_last_error());
    return 1;
}

int main(void) {
    float inv_freq[HEAD_DIM / 2];   /* inv_freq: [HEAD_DIM/2], rope_theta 10000 */
    for (int i = 0; i < HEAD_DIM / 2; i++) inv_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / HEAD_DIM);
    const uint8_t layer_is_moe[LAYERS] = {0, 1};
    colibri_hparams hp = {
        .n_vocab = VOCAB, .n_embd = EMBD, .n_layer = LAYERS, .n_head = HEADS, .n_head_kv = HEADS_KV,
        .head_dim = HEAD_DIM, .n_ff = FF, .n_expert = EXPERTS, .n_expert_used = TOP_K,
        .n_ff_expert = FF_EXPERT, .n_ff_shared = FF_SHARED, .shared_gated = 1, .router_renorm = 0,
        .qk_norm = COLIBRI_QK_NORM_PER_HEAD, .attn_bias = 1, .tied_embeddings = 0, .sliding_window = 0,
        .norm_eps = 1e-6f, .attn_scale = 0.0f, .rope_attn_factor = 1.0f, .qkv_clip = 0.0f,
        .rope_inv_freq = inv_freq, .layer_is_moe = layer_is_moe,
    };
    colibri_model *model = colibri_model_create(&hp);
    if (!model) return demo_fail("model_create");

    demo_weights w = {NULL, 0, 1u << 20, 42};
    w.data = (float *)malloc(w.capacity * sizeof(float));
    int status = 1;
    colibri_context *ctx = NULL;
    if (!w.data) {
        fprintf(stderr, "colibri_demo: out of memory\n");
        goto done;
    }
    if (demo_fill(model, &w) != 0) { demo_fail("set_tensor"); goto done; }
    if (colibri_model_finalize(model) != 0) { demo_fail("finalize"); goto done; }
    ctx = colibri_context_create(model, N_CTX, 1, 16, 2);
    if (!ctx) { demo_fail("context_create"); goto done; }

    int32_t tokens[16] = {1, 7, 42, 13, 5};   /* the prompt, then generated ids */
    int32_t pos[16], seq[16] = {0};
    int32_t n = 5;
    for (int32_t i = 0; i < 16; i++) pos[i] = i;
    float logits[VOCAB];   /* logits: [1, VOCAB] the last token's */
    double checksum = 0.0;
    colibri_outputs out = {logits, NULL, NULL, NULL};
    colibri_batch prefill = {n, tokens, pos, seq, NULL};
    if (colibri_forward(ctx, &prefill, &out) != 0) { demo_fail("prefill"); goto done; }
    printf("generated:");
    for (int32_t step = 0; step < N_DECODE; step++) {
        for (int32_t i = 0; i < VOCAB; i++) checksum += logits[i] * (double)(i + 1);
        tokens[n] = demo_argmax(logits);
        printf(" %d", tokens[n]);
        colibri_batch decode = {1, &tokens[n], &pos[n], seq, NULL};
        n++;
        if (colibri_forward(ctx, &decode, &out) != 0) { demo_fail("decode"); goto done; }
    }
    printf("\nlogits checksum: %.6f\ncached positions: %d\n", checksum, colibri_seq_len(ctx, 0));
    status = 0;
done:
    colibri_context_free(ctx);
    colibri_model_free(model);
    free(w.data);
    return status;
}
