/*
 * colibri.h — the one public header of libcolibri, the C core of Colibri.
 *
 * Colibri runs Mixture-of-Experts language models on CPUs. This header is
 * plain C99 and usable without Python: describe a model (hyperparameters +
 * tensor views into memory the caller keeps alive, e.g. an mmapped file),
 * create a context (KV cache + scratch, sized once), then run forward steps
 * over batches of (sequence id, position, token).
 *
 * Conventions
 *   - Every weight matrix is row-major [rows, cols] and multiplies an
 *     activation vector of length cols: y[r] = sum_c W[r, c] * x[c]
 *     (the Hugging Face nn.Linear layout). 1-D tensors are [1, n].
 *   - Weights are never copied: the model keeps the pointers it is given.
 *   - Functions that can fail return 0 on success and a non-zero
 *     colibri_status otherwise; colibri_last_error() then describes the
 *     failure in one line (thread-local).
 *   - Deterministic: logits are bitwise identical whatever the thread count
 *     and whatever other tokens share the batch.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define COLIBRI_API __declspec(dllexport)
#else
#define COLIBRI_API __attribute__((visibility("default")))
#endif

#define COLIBRI_API_VERSION 1

/* ---- status codes ------------------------------------------------------ */
typedef enum colibri_status {
    COLIBRI_OK = 0,
    COLIBRI_ERR_INVALID = 1,   /* an argument or hyperparameter is out of range */
    COLIBRI_ERR_SHAPE = 2,     /* a tensor's shape or dtype is not the expected one */
    COLIBRI_ERR_MISSING = 3,   /* a required tensor was never set */
    COLIBRI_ERR_NOMEM = 4,     /* allocation failed (only at create time) */
    COLIBRI_ERR_STATE = 5,     /* call order violated (e.g. forward before finalize) */
    COLIBRI_ERR_IO = 6         /* reading paged expert weights from their file failed */
} colibri_status;

/* ---- element types of weights -----------------------------------------
 * The block types store each run of 32 (or 256) elements of a row as one
 * block, in the GGUF / ggml byte layout (so GGUF tensors are used in place);
 * they are for matrices whose cols is a multiple of the block (1-D norms and
 * biases stay F32, F16 or BF16):
 *   Q8_0 {f16 d; int8 qs[32]}          x = d*q
 *   Q4_0 {f16 d; uint8 qs[16]}         x = d*(q-8), element j < 16 in the low
 *                                      nibble of qs[j], j+16 in the high one
 *   Q4_1 {f16 d; f16 m; uint8 qs[16]}  x = d*q + m, nibbles as in Q4_0
 *   Q5_0, Q5_1, IQ4_NL, MXFP4 (32 elements) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 *   IQ4_XS (256 elements): ggml's layouts, described in docs/KERNELS.md. */
typedef enum colibri_dtype {
    COLIBRI_DTYPE_F32 = 0,
    COLIBRI_DTYPE_F16 = 1,
    COLIBRI_DTYPE_BF16 = 2,
    COLIBRI_DTYPE_Q8_0 = 3,
    COLIBRI_DTYPE_Q4_0 = 4,
    COLIBRI_DTYPE_Q4_1 = 5,
    COLIBRI_DTYPE_Q5_0 = 6,
    COLIBRI_DTYPE_Q5_1 = 7,
    COLIBRI_DTYPE_Q2_K = 8,
    COLIBRI_DTYPE_Q3_K = 9,
    COLIBRI_DTYPE_Q4_K = 10,
    COLIBRI_DTYPE_Q5_K = 11,
    COLIBRI_DTYPE_Q6_K = 12,
    COLIBRI_DTYPE_IQ4_NL = 13,
    COLIBRI_DTYPE_IQ4_XS = 14,
    COLIBRI_DTYPE_MXFP4 = 15
} colibri_dtype;

/* ---- how q/k RMSNorm applies (if at all) ------------------------------- */
typedef enum colibri_qk_norm {
    COLIBRI_QK_NORM_NONE = 0,
    COLIBRI_QK_NORM_PER_HEAD = 1,  /* weight [head_dim], applied to each head (Qwen3-MoE) */
    COLIBRI_QK_NORM_WHOLE = 2      /* weight [n_head*head_dim] / [n_head_kv*head_dim],
                                      applied over the whole projection (OLMoE) */
} colibri_qk_norm;

/* ---- how a router scores experts (hparams.router_score) -----------------
 * s = the scores top-k selects on (plus the selection bias, if any); the
 * gates are the chosen experts' s, except under TOPK_SOFTMAX. */
typedef enum colibri_router_score {
    COLIBRI_ROUTER_SOFTMAX = 0,      /* s = softmax(logits) over all experts (Mixtral, Qwen, DeepSeek-V2) */
    COLIBRI_ROUTER_SIGMOID = 1,      /* s = sigmoid(logits), each expert alone (DeepSeek-V3, GLM-4.5) */
    COLIBRI_ROUTER_TOPK_SOFTMAX = 2  /* s = logits; gates = softmax over the k chosen (Granite, gpt-oss) */
} colibri_router_score;

/* ---- how an MLP combines its gate and up projections --------------------- */
typedef enum colibri_ffn_act {
    COLIBRI_FFN_SWIGLU = 0,          /* silu(gate) * up */
    COLIBRI_FFN_SWIGLU_CLAMPED = 1   /* g = min(gate, limit), u = clamp(up, -limit, limit):
                                        g * sigmoid(alpha * g) * (u + 1)   (gpt-oss) */
} colibri_ffn_act;

/* ---- model hyperparameters --------------------------------------------- */
/* All fields are plain values; the two arrays are copied by
 * colibri_model_create, so the caller may free them afterwards. */
typedef struct colibri_hparams {
    int32_t n_vocab;
    int32_t n_embd;            /* hidden size D */
    int32_t n_layer;
    int32_t n_head;            /* query heads */
    int32_t n_head_kv;         /* key/value heads; n_head % n_head_kv == 0 */
    int32_t head_dim;          /* per-head size (need not be n_embd / n_head) */
    int32_t n_ff;              /* dense MLP intermediate size (0 if no dense layer) */
    int32_t n_expert;          /* routed experts per MoE layer (0 if none) */
    int32_t n_expert_used;     /* top-k */
    int32_t n_ff_expert;       /* routed expert intermediate size */
    int32_t n_ff_shared;       /* shared expert intermediate size (0 = no shared expert) */
    int32_t shared_gated;      /* 1: shared expert output *= sigmoid(x . w_shared_router) */
    int32_t router_renorm;     /* 1: renormalise the top-k softmax probabilities to sum 1 */
    int32_t qk_norm;           /* colibri_qk_norm */
    int32_t attn_bias;         /* 1: q, k, v projections have biases */
    int32_t tied_embeddings;   /* 1: lm_head reuses the token embedding */
    int32_t sliding_window;    /* 0 = full attention; W: attend to the last W positions */
    int32_t rope_interleaved;  /* 0: rotate halves (u[i], u[i+hd/2]) as HF does; 1: rotate adjacent
                                  pairs (u[2i], u[2i+1]), the layout of GGUF llama q/k rows */
    float norm_eps;            /* RMSNorm epsilon */
    float attn_scale;          /* softmax scale; 0 = 1/sqrt(head_dim) */
    float rope_attn_factor;    /* multiplies cos and sin (YaRN's mscale); 1 normally */
    float qkv_clip;            /* clamp q, k, v to [-c, c] after projection (+bias) and
                                  after the q/k norm, as HF OLMoE does; 0 = off */
    const float *rope_inv_freq;   /* [head_dim/2] rotary inverse frequencies (NeoX/HF
                                     rotate-half layout); copied */
    const uint8_t *layer_is_moe;  /* [n_layer]: 1 = routed experts, 0 = dense MLP; copied */
    /* Routing (all 0 = Mixtral's rule: softmax, top-k, router_renorm). In order:
     * logits (+ ROUTER_BIAS) → s (router_score) → choice = s (+ ROUTER_SEL_BIAS)
     * → keep the router_group_used best of router_n_group equal groups of
     * experts, a group scored by the sum of its router_group_top best choices
     * → top-k of choice → gates = s of the chosen (or their softmax) →
     * renormalised (router_renorm) → times router_scale. Ties go to the lower
     * index at every step. */
    int32_t router_score;      /* colibri_router_score */
    int32_t router_bias;       /* 1: ROUTER_BIAS [1, E] is added to the logits (gpt-oss) */
    int32_t router_sel_bias;   /* 1: ROUTER_SEL_BIAS [1, E] is added to s for the choice only
                                  (DeepSeek-V3's e_score_correction_bias) */
    int32_t router_n_group;    /* 0 or 1: no groups; G > 1: G groups of n_expert/G experts */
    int32_t router_group_used; /* groups kept (1..G) when router_n_group > 1 */
    int32_t router_group_top;  /* a group's score: the sum of its best N choices (V2: 1, V3: 2) */
    float router_norm_min;     /* renorm divides by max(sum, norm_min) + norm_eps (ERNIE: */
    float router_norm_eps;     /*   min 1e-12; DeepSeek-V3, GLM: eps 1e-20; others 0, 0) */
    float router_scale;        /* gates multiplied by this (routed_scaling_factor); 0 = 1 */
    /* -- attention and MLP variants (0 / NULL: off) -- */
    const int32_t *layer_window;  /* [n_layer]: each layer's sliding window (0 = full attention);
                                     NULL: every layer uses sliding_window; copied */
    int32_t attn_out_bias;     /* 1: the output projection has a bias (BO) */
    int32_t attn_sinks;        /* 1: each query head has a learned sink logit (ATTN_SINKS) that joins
                                  its softmax's denominator and weighs no value */
    int32_t expert_bias;       /* 1: routed experts' gate, up and down have biases (EXPERT_*_BIAS) */
    int32_t ffn_act;           /* colibri_ffn_act of every MLP (dense, routed, shared) */
    float ffn_alpha;           /* COLIBRI_FFN_SWIGLU_CLAMPED's alpha (> 0) */
    float ffn_limit;           /* COLIBRI_FFN_SWIGLU_CLAMPED's limit (> 0) */
    /* Latent KV attention (multi-head latent attention, DeepSeek-V2/V3), on when
     * kv_lora_rank > 0: each token caches one row per layer, a latent of kv_lora_rank
     * values (RMSNorm'd) and head_dim shared RoPE'd key dims, instead of per-head keys
     * and values. A query head is head_dim_nope + head_dim wide (head_dim: its RoPE
     * part, the last head_dim dims); the key up-projection is absorbed into the query
     * and the value up-projection applied after attention over the latent rows.
     * n_head_kv must be 1; attn_bias, qk_norm, qkv_clip, the sliding windows,
     * attn_out_bias and attn_sinks 0.
     * attn_scale 0 means 1/sqrt(head_dim_nope + head_dim). */
    int32_t kv_lora_rank;      /* R: latent width (0 = standard attention) */
    int32_t q_lora_rank;       /* 0: q = WQ x; > 0: q = WQ_B rmsnorm(WQ_A x), this wide */
    int32_t head_dim_nope;     /* query/key dims without RoPE, per head */
    int32_t head_dim_v;        /* value width per head */
    float latent_norm_eps;     /* RMSNorm epsilon of the q and kv latents */
    int32_t rope_dim;          /* RoPE rotates the first rope_dim dims of each q/k head (even,
                                  <= head_dim; rope_inv_freq[0, rope_dim/2) used); 0 = head_dim */
    float embd_scale;          /* token embeddings multiplied by this (Granite); 0 = 1 */
    float residual_scale;      /* each block's output multiplied by this before the residual
                                  add (Granite); 0 = 1 */
    float logit_scale;         /* logits divided by this (Granite's logits_scaling); 0 = 1 */
} colibri_hparams;

/* ---- tensor kinds -------------------------------------------------------
 * Expected shapes ([rows, cols]; E = n_expert, D = n_embd,
 * Q = n_head*head_dim, K = n_head_kv*head_dim):               layer  expert */
typedef enum colibri_tensor_kind {
    COLIBRI_T_TOKEN_EMBD = 0,  /* [n_vocab, D]                      -1     -1 */
    COLIBRI_T_OUTPUT_NORM,     /* [1, D]                            -1     -1 */
    COLIBRI_T_OUTPUT,          /* [n_vocab, D]; omit when tied      -1     -1 */
    COLIBRI_T_ATTN_NORM,       /* [1, D]                             l     -1 */
    COLIBRI_T_WQ,              /* [Q, D]                             l     -1 */
    COLIBRI_T_WK,              /* [K, D]                             l     -1 */
    COLIBRI_T_WV,              /* [K, D]                             l     -1 */
    COLIBRI_T_WO,              /* [D, Q]                             l     -1 */
    COLIBRI_T_BQ,              /* [1, Q]   (attn_bias)               l     -1 */
    COLIBRI_T_BK,              /* [1, K]   (attn_bias)               l     -1 */
    COLIBRI_T_BV,              /* [1, K]   (attn_bias)               l     -1 */
    COLIBRI_T_Q_NORM,          /* [1, head_dim] or [1, Q] (qk_norm)  l     -1 */
    COLIBRI_T_K_NORM,          /* [1, head_dim] or [1, K] (qk_norm)  l     -1 */
    COLIBRI_T_FFN_NORM,        /* [1, D]                             l     -1 */
    COLIBRI_T_FFN_GATE,        /* [n_ff, D]       dense layers       l     -1 */
    COLIBRI_T_FFN_UP,          /* [n_ff, D]       dense layers       l     -1 */
    COLIBRI_T_FFN_DOWN,        /* [D, n_ff]       dense layers       l     -1 */
    COLIBRI_T_ROUTER,          /* [E, D]          MoE layers         l     -1 */
    COLIBRI_T_EXPERT_GATE,     /* [n_ff_expert, D]                   l      e */
    COLIBRI_T_EXPERT_UP,       /* [n_ff_expert, D]                   l      e */
    COLIBRI_T_EXPERT_DOWN,     /* [D, n_ff_expert]                   l      e */
    COLIBRI_T_SHARED_GATE,     /* [n_ff_shared, D]                   l     -1 */
    COLIBRI_T_SHARED_UP,       /* [n_ff_shared, D]                   l     -1 */
    COLIBRI_T_SHARED_DOWN,     /* [D, n_ff_shared]                   l     -1 */
    COLIBRI_T_SHARED_ROUTER,   /* [1, D]          (shared_gated)     l     -1 */
    COLIBRI_T_ROUTER_BIAS,     /* [1, E]          (router_bias)      l     -1 */
    COLIBRI_T_ROUTER_SEL_BIAS, /* [1, E]          (router_sel_bias)  l     -1 */
    COLIBRI_T_BO,              /* [1, D]   (attn_out_bias)           l     -1 */
    COLIBRI_T_ATTN_SINKS,      /* [1, n_head] (attn_sinks)           l     -1 */
    COLIBRI_T_EXPERT_GATE_BIAS,  /* [E, n_ff_expert] (expert_bias)   l     -1 */
    COLIBRI_T_EXPERT_UP_BIAS,    /* [E, n_ff_expert] (expert_bias)   l     -1 */
    COLIBRI_T_EXPERT_DOWN_BIAS,  /* [E, D]  (expert_bias)             l     -1 */
    /* latent attention (kv_lora_rank = R > 0; Qh = head_dim_nope + head_dim): WQ is
     * [n_head*Qh, D] when q_lora_rank is 0, WK/WV are unused, WO is [D, n_head*head_dim_v] */
    COLIBRI_T_WQ_A,            /* [q_lora_rank, D]      (q_lora_rank)   l     -1 */
    COLIBRI_T_Q_A_NORM,        /* [1, q_lora_rank]      (q_lora_rank)   l     -1 */
    COLIBRI_T_WQ_B,            /* [n_head*Qh, q_lora_rank] (q_lora_rank) l    -1 */
    COLIBRI_T_WKV_A,           /* [R + head_dim, D]: latent, then RoPE dims  l -1 */
    COLIBRI_T_KV_A_NORM,       /* [1, R]                                 l     -1 */
    COLIBRI_T_WK_B,            /* [n_head*R, head_dim_nope]: per head, the key
                                  up-projection transposed (llama.cpp's attn_k_b) l -1 */
    COLIBRI_T_WV_B,            /* [n_head*head_dim_v, R]: per head, the value
                                  up-projection (llama.cpp's attn_v_b)   l     -1 */
    COLIBRI_T_COUNT
} colibri_tensor_kind;

typedef struct colibri_model colibri_model;
typedef struct colibri_context colibri_context;

/* ---- a batch of tokens for one forward step ------------------------------
 * Token i is `token[i]` at position `pos[i]` of sequence `seq[i]`. Within a
 * sequence, positions must continue its cache: pos <= (tokens already cached
 * for seq), in batch order. A position below the cached length rewinds the
 * sequence to that point. want_logits[i] != 0 asks for token i's logits
 * (NULL: only the last token of the batch). */
typedef struct colibri_batch {
    int32_t n_tokens;
    const int32_t *token;        /* [n_tokens] */
    const int32_t *pos;          /* [n_tokens] */
    const int32_t *seq;          /* [n_tokens] */
    const int8_t *want_logits;   /* [n_tokens] or NULL */
} colibri_batch;

/* ---- what a forward step writes ------------------------------------------
 * Any pointer may be NULL. Route arrays are indexed by layer; rows of dense
 * layers are left untouched. */
typedef struct colibri_outputs {
    float *logits;          /* [n_wanted, n_vocab], wanted tokens in batch order */
    float *router_logits;   /* [n_layer, n_tokens, n_expert] raw router logits */
    int32_t *experts;       /* [n_layer, n_tokens, n_expert_used] selected experts,
                               by descending choice score (the router's probability,
                               plus the selection bias if any), ties to the lower index */
    float *gates;           /* [n_layer, n_tokens, n_expert_used] gate weights */
} colibri_outputs;

/* ---- library ------------------------------------------------------------ */
COLIBRI_API int colibri_api_version(void);
/* One line describing the last failure on this thread ("" if none). */
COLIBRI_API const char *colibri_last_error(void);

/* ---- model ----------------------------------------------------------------
 * create → set every tensor the hyperparameters call for → finalize.
 * set_tensor checks kind/layer/expert ranges, dtype and shape against the
 * hyperparameters; finalize checks that nothing required is missing. */
COLIBRI_API colibri_model *colibri_model_create(const colibri_hparams *hp);
COLIBRI_API int colibri_model_set_tensor(colibri_model *m, int32_t kind, int32_t layer,
                                         int32_t expert, const void *data, int32_t dtype,
                                         int64_t rows, int64_t cols);
/* 1 for the kinds read as vectors (norms, biases, sinks: F32, F16 or BF16 only,
 * block types refused), 0 for the other kinds, -1 for a kind out of range.
 * Converters keep these kinds in f32. */
COLIBRI_API int colibri_tensor_kind_is_vector(int32_t kind);
COLIBRI_API int colibri_model_finalize(colibri_model *m);
COLIBRI_API void colibri_model_free(colibri_model *m);
/* The hyperparameters the model was built with (for a loaded file: its validated
 * hparams block): the one source of every dimension, e.g. to size the
 * colibri_outputs arrays. Valid while the model lives; NULL for NULL. */
COLIBRI_API const colibri_hparams *colibri_model_hparams(const colibri_model *m);

/* ---- context: KV cache for n_seq sequences of up to n_ctx positions,
 * scratch for batches of up to n_batch tokens, a pool of n_threads threads
 * (n_threads <= 0: one per physical core, at most the cgroup CPU quota; COLIBRI_PLACE_CORES). Everything is allocated here; a
 * forward step allocates nothing. The model must outlive the context. */
COLIBRI_API colibri_context *colibri_context_create(const colibri_model *m, int32_t n_ctx,
                                                    int32_t n_seq, int32_t n_batch,
                                                    int32_t n_threads);
/* The same with the KV cache's element type: COLIBRI_DTYPE_F32 (what
 * colibri_context_create uses) or COLIBRI_DTYPE_F16 (half the memory and the
 * attention reads; keys and values rounded to f16 as they are cached, as
 * llama.cpp's default cache does). Results stay bitwise independent of
 * threads and batching either way. */
COLIBRI_API colibri_context *colibri_context_create_kv(const colibri_model *m, int32_t n_ctx,
                                                       int32_t n_seq, int32_t n_batch,
                                                       int32_t n_threads, int32_t kv_dtype);
/* Where a context's threads run (docs/KERNELS.md, "Threads, cores and NUMA
 * nodes"). Every placement gives bitwise the same results; only speed differs. */
typedef enum colibri_placement {
    COLIBRI_PLACE_CORES = 0,       /* one thread per physical core (SMT siblings only past that),
                                      node after node; workers pinned to their CPUs */
    COLIBRI_PLACE_DISTRIBUTE = 1,  /* one core of every NUMA node in turn (all the nodes' memory
                                      bandwidth); scratch interleaved over them; pinned */
    COLIBRI_PLACE_ISOLATE = 2,     /* only the creating thread's NUMA node: its cores, its memory; pinned */
    COLIBRI_PLACE_NONE = 3         /* no pinning: the OS places and moves the threads */
} colibri_placement;

/* Everything colibri_context_create_kv takes, plus the placement. */
typedef struct colibri_context_params {
    int32_t n_ctx, n_seq, n_batch;
    int32_t n_threads;   /* <= 0: one per physical core the placement may use, at most the cgroup CPU quota */
    int32_t kv_dtype;    /* COLIBRI_DTYPE_F32 or COLIBRI_DTYPE_F16 */
    int32_t placement;   /* colibri_placement */
} colibri_context_params;
COLIBRI_API colibri_context *colibri_context_create_params(const colibri_model *m,
                                                           const colibri_context_params *params);
/* Whether the context's worker threads are pinned to CPUs of their own (0 when
 * unpinned: COLIBRI_PLACE_NONE, one thread, more threads than CPUs, or the
 * system refused), -1 for a NULL context. */
COLIBRI_API int32_t colibri_context_pinned(const colibri_context *ctx);

/* exact != 0: block-type weights (Q8_0 ... MXFP4) multiply f32 activations
 * instead of activations quantized per block: each weight row is dequantized
 * (bitwise colibri_dequantize) and dotted in the F32 kernels' order, so the
 * logits are the dequantized model's up to f32 rounding; slower, since every
 * step dequantizes the weights it reads. exact == 0 (the default): the
 * quantized-activation dots. Either way results stay bitwise independent of
 * threads, batching and ISA. Returns 0, or an error for a NULL context. */
COLIBRI_API int colibri_context_set_exact(colibri_context *ctx, int exact);
/* The KV cache's element type (a colibri_dtype), -1 for a NULL context. */
COLIBRI_API int32_t colibri_context_kv_type(const colibri_context *ctx);
COLIBRI_API void colibri_context_free(colibri_context *ctx);
COLIBRI_API int32_t colibri_context_threads(const colibri_context *ctx);
/* 1 if the context's arena (KV cache and scratch, one anonymous mapping) was
 * accepted for transparent huge pages (Linux MADV_HUGEPAGE), 0 if not (other
 * systems, THP disabled), -1 for a NULL context. Best effort, never an error. */
COLIBRI_API int32_t colibri_context_huge_pages(const colibri_context *ctx);
/* Bytes of the context's arena (KV cache and scratch, mapped lazily: what it
 * can grow to), 0 for a NULL context. */
COLIBRI_API uint64_t colibri_context_arena_bytes(const colibri_context *ctx);
/* Number of positions currently cached for sequence `seq` (-1 if out of range). */
COLIBRI_API int32_t colibri_seq_len(const colibri_context *ctx, int32_t seq);
/* Forget everything cached for sequence `seq`. */
COLIBRI_API int colibri_seq_clear(colibri_context *ctx, int32_t seq);

/* One forward step over the batch. Validates the whole batch (token ids,
 * sequence ids, positions, size) before touching the cache. Releases no locks
 * of its own and takes none of the caller's; safe to call without the GIL.
 * The calling thread runs a share of the step, and the kernels keep up to
 * ~255 KiB on its stack: a thread with a stack under 512 KiB is refused
 * (COLIBRI_ERR_INVALID; the context's own workers always get that much).
 * In a child of fork() (its workers stayed in the parent) a context made
 * before the fork runs every thread's share on the caller, one after another:
 * the same logits at one thread's speed; one that pages its experts is
 * refused (COLIBRI_ERR_STATE), its readers being in the parent. Freeing
 * either in the child is safe. One step at a time per context: a call while
 * another thread's step on it runs is refused (COLIBRI_ERR_STATE), as are
 * colibri_seq_clear, colibri_context_set_exact, colibri_profile_enable,
 * colibri_context_page_experts and colibri_paging_pin during one. Freeing a
 * context (colibri_context_free, colibri_free) while a step on it runs is the
 * caller's to prevent: the free cannot be refused. */
COLIBRI_API int colibri_forward(colibri_context *ctx, const colibri_batch *batch,
                                const colibri_outputs *out);

/* ---- layer-sliced steps ------------------------------------------------------
 * A step may run its last span.n_tokens tokens through only layers
 * [layer_begin, layer_end), the rest of the batch through every layer, so that
 * a prompt chunk's work can be spread over several steps beside decoding tokens
 * (each layer's weights are still read once per step for all of them).
 * layer_begin 0: the span's tokens are embedded from their ids, as usual.
 * layer_begin > 0: they continue the hidden states the context carried from its
 *   previous step, which must have been the same tokens (ids, positions,
 *   sequences, in order) stopping at this layer_begin; their sequences must not
 *   appear earlier in the batch, and must not have changed since.
 * layer_end == n_layer: the span's tokens finish like any other (logits when
 *   wanted); layer_end < n_layer: their states are carried to the next step,
 *   they may not want logits, and their sequences' cached length stays where it
 *   was (their positions count once they pass the last layer).
 * Any other step discards the carried states. Results are bitwise those of the
 * unsliced steps. span NULL or span->n_tokens 0: colibri_forward. */
typedef struct colibri_layer_span {
    int32_t n_tokens;      /* the batch's last n_tokens tokens run the span */
    int32_t layer_begin;   /* first layer they run */
    int32_t layer_end;     /* one past the last */
} colibri_layer_span;
COLIBRI_API int colibri_forward_span(colibri_context *ctx, const colibri_batch *batch,
                                     const colibri_layer_span *span, const colibri_outputs *out);

/* Routes n_tokens rows of router logits [n_tokens, n_expert] (ROUTER_BIAS
 * already added) as a MoE layer of a model with these hyperparameters does:
 * experts [n_tokens, n_expert_used] by descending choice score, ties to the
 * lower index, and their gates [n_tokens, n_expert_used]. sel_bias:
 * [n_expert] when router_sel_bias, else NULL. Checks the routing fields
 * only; allocates its scratch (for tests and tools; a forward step routes
 * without allocating). */
COLIBRI_API int colibri_route(const colibri_hparams *hp, const float *logits, const float *sel_bias,
                              int32_t n_tokens, int32_t *experts, float *gates);

/* Converts n f32 values to dtype (the reference quantizer for block types,
 * round-to-nearest-even for F16/BF16); n must be a multiple of the type's
 * block size (32, or 256 for the K types and IQ4_XS). dst holds the stored bytes. Used by
 * converters; not on the inference path. */
COLIBRI_API int colibri_quantize(int32_t dtype, const float *src, void *dst, int64_t n);
/* The inverse: n values of dtype (stored bytes) widened to f32. */
COLIBRI_API int colibri_dequantize(int32_t dtype, const void *src, float *dst, int64_t n);

/* ---- Colibri-native files (docs/FORMAT.md) -------------------------------
 * One file holds a whole model: hyperparameters, every tensor (64-byte
 * aligned, each routed expert's gate, up and down adjacent) and a UTF-8 JSON
 * metadata object (tokenizer, chat template, generation config, source). */
typedef struct colibri_file colibri_file;

/* Maps the file, validates every header field, offset and size, and builds a
 * finalized model whose weights are used in place from the mapping
 * (read-only, zero-copy; on a big-endian host a copy-on-write mapping whose
 * tensors are byte-swapped to host order once validated). NULL on failure,
 * with colibri_last_error() naming the file and the field. The model owns
 * the mapping: colibri_model_free unmaps it. */
COLIBRI_API colibri_model *colibri_model_load(const char *path);
/* colibri_model_load with flags: COLIBRI_LOAD_PAGED when the model's experts
 * will be paged (colibri_context_page_experts): the file is then mapped for
 * random access without huge pages, so validating it reads only the pages it
 * checks, never the expert bytes around them. */
#define COLIBRI_LOAD_PAGED 1u
COLIBRI_API colibri_model *colibri_model_load_flags(const char *path, uint32_t flags);
/* The metadata JSON of a model from colibri_model_load: *json points into the
 * mapping (not NUL-terminated), *len bytes, valid until the model is freed. */
COLIBRI_API int colibri_model_metadata(const colibri_model *m, const char **json, size_t *len);

/* Plain-C convenience: load path and create a context for one sequence of up
 * to n_ctx positions, batches of up to min(n_ctx, 512) tokens, n_threads
 * threads (<= 0: one per physical core, at most the cgroup CPU quota). The context owns the model: release both with
 * colibri_free (not colibri_context_free). Run steps with colibri_forward. */
COLIBRI_API colibri_context *colibri_init(const char *path, int32_t n_ctx, int32_t n_threads);
COLIBRI_API void colibri_free(colibri_context *ctx);
/* The hyperparameters of a context's model (n_vocab sizes the logits rows);
 * valid while the context lives. */
COLIBRI_API const colibri_hparams *colibri_context_hparams(const colibri_context *ctx);

/* The SIMD kernel set in use: "amx", "avx512", "avx_vnni", "avx2",
 * "neon_dotprod", "neon" or "scalar" — the best this build and CPU can run,
 * chosen once per process, or the one the
 * COLIBRI_ISA environment variable names (if it cannot run here, stderr says
 * so and the best is used). Every set gives bitwise the same results. */
COLIBRI_API const char *colibri_isa(void);

/* This machine's read bandwidth in GB/s: n_threads threads stream their
 * shares of one n_bytes buffer (1 MiB..1 TiB; larger than the last-level
 * cache to measure memory) by a plain loop and through the BF16 dot kernel
 * with its software prefetch; the best of `passes` (1..1000) of either. -1 on
 * error (colibri_last_error). */
COLIBRI_API double colibri_read_bandwidth(int32_t n_threads, int64_t n_bytes, int32_t passes);

/* ---- paging: models larger than memory (docs/PAGING.md) -----------------------
 * A context can keep the routed experts of its model in a fixed arena of
 * expert slots instead of reading them from the weights' file mappings: each
 * slot holds one expert (its gate, up and down), filled by positioned reads of
 * the expert's bytes from the file (O_DIRECT where the file system takes it,
 * else buffered reads whose pages are dropped right after), by a pool of
 * reader threads that work while the forward step computes. A MoE layer asks
 * for every expert its router selected; hits are used in place, misses are
 * read, and a step whose layer needs more experts than there are free slots
 * runs them in waves, each expert read once. The next MoE layer's router,
 * applied to this layer's input, predicts which experts to read ahead. When a
 * slot is needed, the victim is the cached expert with the lowest use count
 * (counts are halved every aging_tokens tokens), then the least recently used,
 * then the lowest (layer, expert); pinned experts are never evicted.
 * Paging changes only where the bytes come from: logits are bitwise those of
 * the resident model. Everything else (embeddings, attention, norms, routers,
 * shared experts, lm_head) stays in the file mappings; the mappings are advised
 * for random access without huge pages and the expert bytes dropped from the
 * page cache, so the process holds the resident weights, the slot arena, the
 * context's arena and little else. */

/* Declares that [base, base + size) is a read-only mapping of file `path` from
 * its offset 0: paging reads the experts whose tensors lie there from the
 * file. colibri_model_load declares its own file; a caller that builds a model
 * from its own mappings declares each file. The path is copied. */
COLIBRI_API int colibri_model_add_file(colibri_model *m, const char *path, const void *base,
                                       uint64_t size);

/* What paging the experts of a finalized model costs, in bytes. */
typedef struct colibri_paging_sizes {
    uint64_t slot_bytes;       /* one expert slot: an expert's byte ranges, each widened to
                                  whole 4 KiB pages (the unit of direct reads) */
    uint64_t resident_bytes;   /* the pages of every weight that stays resident */
    uint64_t expert_bytes;     /* every routed expert's weights */
    uint64_t overhead_bytes;   /* a paged context's own tables and scratch, without its slots */
    int64_t n_experts;         /* routed experts over all MoE layers */
    uint64_t read_bytes;       /* the largest single read: a piece (at most 1 MiB) of an expert's window
                                  of adjacent tensors */
} colibri_paging_sizes;

/* Fills *sizes for paging m with contexts of up to n_batch tokens per step. */
COLIBRI_API int colibri_model_paging_sizes(const colibri_model *m, int32_t n_batch,
                                           colibri_paging_sizes *sizes);

typedef struct colibri_paging_options {
    int64_t n_slots;           /* expert slots in the arena, >= 1 */
    int32_t n_io_threads;      /* reader threads; <= 0: 4 */
    int32_t prefetch;          /* read-ahead depth: 1 reads ahead the experts the next MoE
                                  layer's router predicts from this layer's input; 2 also
                                  those of the MoE layer after it (its router on the same
                                  input); 0 none */
    int32_t direct_io;         /* 1: O_DIRECT where the file system takes it; 0: buffered
                                  reads, their pages dropped (POSIX_FADV_DONTNEED) */
    int32_t aging_tokens;      /* use counts halve every this many tokens; <= 0: 256 */
} colibri_paging_options;

/* Turns paging on for ctx, before its first forward step: maps the slot arena
 * (transparent huge pages where offered), starts the readers. Every expert
 * tensor must lie in a file declared with colibri_model_add_file. Fails on a
 * model without MoE layers, a big-endian host, or a context already paging. */
COLIBRI_API int colibri_context_page_experts(colibri_context *ctx, const colibri_paging_options *opt);

/* Reads the n experts (layers[i], experts[i]) into slots now and pins them
 * there (never evicted), e.g. the hot experts of an activation profile. At
 * least one slot must stay unpinned. */
COLIBRI_API int colibri_paging_pin(colibri_context *ctx, const int32_t *layers, const int32_t *experts,
                                   int32_t n);

/* Counters of a paging context since paging began or the last reset. */
typedef struct colibri_paging_stats {
    int64_t n_slots, slot_bytes, pinned;
    int32_t direct_io;         /* 1: every file is read with O_DIRECT */
    int32_t huge_pages;        /* 1: the slot arena was accepted for transparent huge pages */
    int64_t tokens;            /* tokens run through forward steps */
    int64_t lookups;           /* experts MoE layers needed (each once per layer and step) */
    int64_t hits;              /* of those, found in a slot (read earlier, or being read ahead) */
    int64_t misses;            /* read on demand */
    int64_t prefetches;        /* experts read ahead */
    int64_t prefetch_used;     /* read ahead and then needed */
    int64_t predicted;         /* experts predicted for the next MoE layer */
    int64_t predicted_needed;  /* experts needed by a layer that had a prediction, and predicted */
    int64_t needed_after_prediction;   /* experts needed by a layer that had a prediction */
    int64_t reads;             /* expert reads issued (demand + ahead) */
    int64_t bytes_read;        /* bytes read from storage, by finished expert reads (one in flight counts when done) */
    int64_t waves;             /* expert passes beyond one per MoE layer and step, for want
                                  of slots (not the passes over experts read while others
                                  are still being read) */
    double stall_seconds;      /* the forward step waiting for reads */
    int64_t predicted2;        /* experts predicted two MoE layers ahead (prefetch 2) */
    int64_t predicted2_needed; /* experts needed by a layer with such a prediction, and in it */
    int64_t needed_after_prediction2;  /* experts needed by a layer with such a prediction */
    double stall_ahead_seconds;        /* of stall_seconds: waiting for reads ahead not done yet */
    int64_t early_waves;       /* expert passes run while other experts of the same layer step
                                  were still being read (timing-dependent; not in `waves`) */
} colibri_paging_stats;

/* Fills *stats (reset != 0: then zeroes the counters). Fails when ctx does not page. */
COLIBRI_API int colibri_paging_stats_read(colibri_context *ctx, colibri_paging_stats *stats, int reset);

/* What the slots hold: state[l * n_expert + e] = 0 not cached, 1 cached, 2 pinned. */
COLIBRI_API int colibri_paging_residency(const colibri_context *ctx, uint8_t *state);

/* ---- profiling ------------------------------------------------------------
 * Wall time of forward steps, split by stage (and by layer). Off by default;
 * while off the timers cost one NULL test each. Each context has its own
 * timers (allocated by colibri_profile_enable, freed with the context); a
 * context's steps and its profile calls must not run concurrently. Every
 * moment of a step is charged to exactly one stage, so the stages sum to the
 * steps' total time. */
typedef enum colibri_stage {
    COLIBRI_STAGE_ATTENTION = 0,  /* q/k/v/o projections, RoPE, KV cache write, attention */
    COLIBRI_STAGE_ROUTER,         /* router logits, softmax, top-k, gates */
    COLIBRI_STAGE_DISPATCH,       /* counting sort by expert, gathering rows */
    COLIBRI_STAGE_EXPERTS,        /* routed + shared expert matmuls (dense MLP in dense layers) */
    COLIBRI_STAGE_AGGREGATION,    /* gated sum of the slots, shared expert gate, residual add */
    COLIBRI_STAGE_LM_HEAD,        /* final norm and output matmul of the wanted tokens */
    COLIBRI_STAGE_OTHER,          /* batch checks, embedding, RMSNorms */
    COLIBRI_STAGE_EXPERT_WAIT,    /* paged experts: waiting for their weights to be read */
    COLIBRI_STAGE_COUNT
} colibri_stage;

/* on != 0: start (or restart) profiling ctx with every counter at zero;
 * on == 0: stop and free its timers. */
COLIBRI_API int colibri_profile_enable(colibri_context *ctx, int on);
/* seconds[n_stages] (n_stages <= COLIBRI_STAGE_COUNT, stage order above) spent
 * since enabling: layer -1 for the whole steps, or one layer's share. Fails when
 * ctx is not being profiled or layer is out of range. */
COLIBRI_API int colibri_profile_read(const colibri_context *ctx, int32_t layer, double *seconds,
                                     int32_t n_stages);

/* Each thread's time in `stage` since enabling, summed over layers and steps:
 * busy[i] at work (inside pool runs; thread 0, the caller, also in the serial
 * parts between them) and wait[i] idle at the end of runs (spinning or
 * asleep), so busy[i] + wait[i] is the stage's wall time for every thread.
 * n_threads must be colibri_context_threads(ctx). */
COLIBRI_API int colibri_profile_read_threads(const colibri_context *ctx, int32_t stage, double *busy,
                                             double *wait, int32_t n_threads);
/* Per routed expert of one MoE layer since enabling: tokens it ran (summed
 * over steps), weight bytes of its gate, up and down read, and the thread
 * time its matmuls took (seconds summed over the threads that shared them).
 * n_expert must be the model's. */
COLIBRI_API int colibri_profile_read_experts(const colibri_context *ctx, int32_t layer, int64_t *tokens,
                                             int64_t *bytes, double *seconds, int32_t n_expert);

#ifdef __cplusplus
}
#endif
#endif /* COLIBRI_H */
