"""Random-weight benchmark models, written once into a cache folder.

Four shapes (a small Mixtral, OLMoE-1B-7B, gpt-oss-20b and DeepSeek-V2-Lite); the first
two each as
  - GGUF at q8_0 and q4_0, with llama.cpp's names and metadata (Mixtral as the
    `llama` arch with stacked experts and permuted q/k rows, OLMoE as `olmoe`)
    and a SentencePiece-style vocabulary llama.cpp accepts, written with the
    `gguf` package;
  - Colibri-native .colibri at q8_0 and q4_0 (the same quantized bytes);
  - a Hugging Face directory in bf16 (for transformers, and Colibri's own
    safetensors path), only where asked for.
gpt-oss-20b as GGUF only (llama.cpp's `gpt-oss` names and metadata), its experts
MXFP4 and its other matrices Q8_0, as llama.cpp's MXFP4_MOE files are (12 GB).
DeepSeek-V2-Lite at q4_0 only, as GGUF (llama.cpp's `deepseek2`: latent attention with
attn_k_b / attn_v_b) and .colibri (8.8 GB each).
Every file of a shape holds the same weights: each matrix row is a row of a
seeded random pool (per row width), picked by a hash of the tensor's Hugging
Face name, so no file needs the others and quantizing is done once per pool.
Norms are ones. Speed does not depend on the values, only on shapes and types
— except, once experts are paged from storage (docs/PAGING.md), on which
experts the routers pick. Random routers do not pick evenly here: the hidden
states of these random models are dominated by what attention averages over
the context, so within a prompt a few experts win most tokens. The paging
benchmark's GGUF files (routing "uniform" or "zipf", files SHAPE-uniform-... /
SHAPE-zipf-...) are changed twice after writing. Their token embeddings are
scaled by EMBEDDING_SCALE (each Q4_0 block's scale), so that every layer's
input is mostly the current token's own embedding and routing follows the
token, as in trained models, rather than the context (on OLMoE's shape the
next layer's router then predicts 88% of a decode token's experts from this
layer's input: x30 gave 69%, x100 74%, x1000 96%; and "uniform" routing draws
31% of the routings to the top 20% of the experts, against 44% at x30). Then their routers are
calibrated (calibrate_routers): each MoE layer's router W [E, D] is replaced by A W, A the
inverse square root of the second moment of its logits over 8 prompts of 64
random tokens (Colibri's own routes, two passes; the benchmarks' prompts are
that long, and these models' hidden states drift with the position), so those
logits become uncorrelated with unit variance and every expert about equally
likely ("uniform"); "zipf" then
scales the row of the expert ranked r (a seeded permutation per layer) by
(r + 1)^-ZIPF_ALPHA[shape] (their mean kept 1): its logits spread wider, so it
lands in the top-k more often, as the popular experts of trained models do.
BENCHMARKS.md gives the popularity this measures.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType
from gguf.quants import quantize

from colibri.convert import f32_kinds
from colibri.formats import native
from colibri.models import ConfigReader, architecture, tensor_slots

SHAPES = {
    "mixtral-small": ("mixtral", dict(vocab_size=32000, hidden_size=1024, intermediate_size=3584,
                                      num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=8,
                                      num_local_experts=8, num_experts_per_tok=2)),
    "olmoe-1b-7b": ("olmoe", dict(vocab_size=50304, hidden_size=2048, intermediate_size=1024,
                                  num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
                                  num_experts=64, num_experts_per_tok=8)),
    # gpt-oss-20b: 24 layers alternating 128-token windows and full attention, 32 experts, top-4, YaRN
    "gpt-oss-20b": ("gpt_oss", dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880,
                                    num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8,
                                    head_dim=64, num_local_experts=32, num_experts_per_tok=4, sliding_window=128)),
    # DeepSeek-V2-Lite: 27 layers (the first dense), latent attention, 64 experts + 2 shared, top-6
    "deepseek-v2-lite": ("deepseek_v2", dict(vocab_size=102400, hidden_size=2048, intermediate_size=10944,
                                             moe_intermediate_size=1408, num_hidden_layers=27,
                                             num_attention_heads=16, kv_lora_rank=512, q_lora_rank=None,
                                             qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                                             n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=6,
                                             first_k_dense_replace=1,
                                             rope_scaling=dict(type="yarn", factor=40.0, mscale=0.707,
                                                               mscale_all_dim=0.707, beta_fast=32, beta_slow=1,
                                                               original_max_position_embeddings=4096))),
    "qwen3-30b-a3b": ("qwen3_moe", dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4,
                                        head_dim=128, num_experts=128, num_experts_per_tok=8,
                                        moe_intermediate_size=768, norm_topk_prob=True)),
}
# The files each shape is measured in (default: GGUF and .colibri at q8_0 and q4_0). gpt-oss is
# measured as it ships: MXFP4 experts, the other matrices at Q8_0 (GGUF only). The Qwen3-30B-A3B shape is for the paging benchmark.
FILES = {"gpt-oss-20b": ("gguf-mxfp4",), "deepseek-v2-lite": ("gguf-q4_0", "colibri-q4_0"),
         "qwen3-30b-a3b": ("gguf-q4_0",)}
# the "zipf" routers' skew per shape (module docstring): the 20% most popular experts of a layer
# draw about half of the routings on random inputs
ZIPF_ALPHA = {"mixtral-small": 0.6, "olmoe-1b-7b": 0.6, "qwen3-30b-a3b": 0.35}
ROUTINGS = ("uniform", "zipf")
CALIBRATION_PROMPTS, CALIBRATION_TOKENS = 8, 64
EMBEDDING_SCALE = 300.0
COMMON = dict(max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=2)
CONFIG_CLASSES = {"mixtral": "MixtralConfig", "olmoe": "OlmoeConfig", "gpt_oss": "GptOssConfig",
                  "deepseek_v2": "DeepseekV2Config", "qwen3_moe": "Qwen3MoeConfig"}
QTYPES = {"q8_0": GGMLQuantizationType.Q8_0, "q4_0": GGMLQuantizationType.Q4_0, "mxfp4": GGMLQuantizationType.MXFP4}
COLIBRI_DTYPE = {"q8_0": "Q8_0", "q4_0": "Q4_0"}
GGUF_ARCH = {"mixtral": "llama", "olmoe": "olmoe", "gpt_oss": "gpt-oss", "deepseek_v2": "deepseek2",
             "qwen3_moe": "qwen3moe"}
FILE_TYPE = {"q8_0": 7, "q4_0": 2, "mxfp4": 38}   # llama_ftype: MOSTLY_Q8_0, MOSTLY_Q4_0, MOSTLY_MXFP4_MOE
# K-quant files (keys "gguf-q4_k_m", "gguf-q6_k"; only when asked for, ensure(only=...)): written by
# llama.cpp's own quantizer (llama_model_quantize, llama-cpp-python) from the shape's q4_0 GGUF, so
# they keep its routers (f32) and routing; the weights are Q4_0's values requantized, which changes
# nothing speed depends on. Its mixes: Q4_K_M is Q4_K with Q6_K for some tensors, Q6_K all Q6_K.
REQUANTIZED = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K"}
# llama.cpp tensor names by Colibri tensor kind ({l}: layer; expert kinds name the stacked tensor)
GGUF_NAMES = {
    "TOKEN_EMBD": "token_embd.weight", "OUTPUT_NORM": "output_norm.weight", "OUTPUT": "output.weight",
    "ATTN_NORM": "blk.{l}.attn_norm.weight", "WQ": "blk.{l}.attn_q.weight", "WK": "blk.{l}.attn_k.weight",
    "WV": "blk.{l}.attn_v.weight", "WO": "blk.{l}.attn_output.weight",
    "Q_NORM": "blk.{l}.attn_q_norm.weight", "K_NORM": "blk.{l}.attn_k_norm.weight",
    "FFN_NORM": "blk.{l}.ffn_norm.weight", "ROUTER": "blk.{l}.ffn_gate_inp.weight",
    "EXPERT_GATE": "blk.{l}.ffn_gate_exps.weight", "EXPERT_UP": "blk.{l}.ffn_up_exps.weight",
    "EXPERT_DOWN": "blk.{l}.ffn_down_exps.weight",
}
# where an architecture's names differ (llama.cpp's gpt-oss: the FFN norm is post_attention_norm)
GGUF_NAMES_BY_ARCH = {
    "gpt-oss": {"FFN_NORM": "blk.{l}.post_attention_norm.weight", "ATTN_SINKS": "blk.{l}.attn_sinks.weight",
                "BQ": "blk.{l}.attn_q.bias", "BK": "blk.{l}.attn_k.bias", "BV": "blk.{l}.attn_v.bias",
                "BO": "blk.{l}.attn_output.bias", "ROUTER_BIAS": "blk.{l}.ffn_gate_inp.bias",
                "EXPERT_GATE_BIAS": "blk.{l}.ffn_gate_exps.bias", "EXPERT_UP_BIAS": "blk.{l}.ffn_up_exps.bias",
                "EXPERT_DOWN_BIAS": "blk.{l}.ffn_down_exps.bias"},
    "deepseek2": {"WKV_A": "blk.{l}.attn_kv_a_mqa.weight", "KV_A_NORM": "blk.{l}.attn_kv_a_norm.weight",
                  "WK_B": "blk.{l}.attn_k_b.weight", "WV_B": "blk.{l}.attn_v_b.weight",
                  "SHARED_GATE": "blk.{l}.ffn_gate_shexp.weight", "SHARED_UP": "blk.{l}.ffn_up_shexp.weight",
                  "SHARED_DOWN": "blk.{l}.ffn_down_shexp.weight", "FFN_GATE": "blk.{l}.ffn_gate.weight",
                  "FFN_UP": "blk.{l}.ffn_up.weight", "FFN_DOWN": "blk.{l}.ffn_down.weight"},
}
# llama.cpp stacks these per head: attn_k_b [H, R, nope], attn_v_b [H, v, R]
PER_HEAD_KINDS = ("WK_B", "WV_B")
EXPERT_KINDS = ("EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN")
POOL_ROWS = 2048
NORM_KINDS = frozenset({"OUTPUT_NORM", "ATTN_NORM", "FFN_NORM", "Q_NORM", "K_NORM", "KV_A_NORM"})


@dataclass
class Shape:
    name: str
    model_type: str
    hf_config: object          # the transformers config object
    config: object             # colibri ModelConfig
    slots: list                # colibri TensorSlots, each with its HF name, kind, layer, expert, shape


def shape(name: str) -> Shape:
    """The shape `name` of SHAPES, through transformers' config class and Colibri's tensor list."""
    import transformers

    model_type, kwargs = SHAPES[name]
    hf_config = getattr(transformers, CONFIG_CLASSES[model_type])(**COMMON, **kwargs)
    raw = hf_config.to_dict()
    arch = architecture(model_type, name)
    config = arch.read_config(ConfigReader(raw, name))
    return Shape(name, model_type, hf_config, config, tensor_slots(arch, config))


class Weights:
    """Deterministic weights: rows of per-width random pools, f32 or quantized once per pool."""

    def __init__(self):
        self._f32: dict[int, np.ndarray] = {}
        self._quant: dict[tuple[int, str], np.ndarray] = {}

    def _pool(self, cols: int) -> np.ndarray:
        if cols not in self._f32:   # pool: [POOL_ROWS, cols]
            rng = np.random.default_rng(cols)
            self._f32[cols] = rng.standard_normal((POOL_ROWS, cols), dtype=np.float32) * np.float32(0.05)
        return self._f32[cols]

    def _rows(self, name: str, n_rows: int) -> np.ndarray:
        return (zlib.crc32(name.encode()) + np.arange(n_rows)) % POOL_ROWS          # [n_rows]

    def f32(self, slot) -> np.ndarray:
        """The tensor of `slot` as float32 [rows, cols] (1-D tensors: [n])."""
        if slot.kind in NORM_KINDS:
            return np.ones(slot.shape, dtype=np.float32)
        if len(slot.shape) == 1:   # biases, sinks: one pool row
            return self._pool(slot.shape[0])[self._rows(slot.name, 1)[0]]
        rows, cols = slot.shape
        return self._pool(cols)[self._rows(slot.name, rows)]

    def quantized(self, slot, qtype: str) -> np.ndarray:
        """The tensor of `slot` as uint8 [rows, row_bytes] blocks of `qtype`."""
        rows, cols = slot.shape
        key = (cols, qtype)
        if key not in self._quant:
            self._quant[key] = quantize(self._pool(cols), QTYPES[qtype])
        return self._quant[key][self._rows(slot.name, rows)]


def stored_as_f32(slot) -> bool:
    """Norms, biases and routers stay f32 in every file, as llama.cpp's converter and `colibri convert`
    keep them."""
    return len(slot.shape) == 1 or slot.kind in f32_kinds()


def stored_type(slot, qtype: str) -> str:
    """The block type of a quantized slot: MXFP4 only for routed experts (the rest Q8_0, as
    llama.cpp's MXFP4_MOE file type), else qtype."""
    if qtype == "mxfp4":
        return "mxfp4" if slot.kind in EXPERT_KINDS else "q8_0"
    return qtype


# ---- Hugging Face directory (bf16) ----------------------------------------------------
def write_hf(s: Shape, weights: Weights, directory: Path) -> None:
    """config.json + one bf16 safetensors shard per layer (+ the index), names as transformers saves them."""
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    s.hf_config.save_pretrained(directory)
    shard_of = {slot.name: f"model-{slot.layer + 1:05d}.safetensors" for slot in s.slots}   # layer -1: 00000
    for shard in sorted(set(shard_of.values())):
        tensors = {slot.name: torch.from_numpy(weights.f32(slot)).to(torch.bfloat16)
                   for slot in s.slots if shard_of[slot.name] == shard}
        save_file(tensors, directory / shard, metadata={"format": "pt"})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": shard_of}))


# ---- GGUF ----------------------------------------------------------------------------
def _vocabulary(n: int) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style vocabulary of n tokens: <unk> <s> </s>, the 256 byte tokens, then words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581w{i}" for i in range(n - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (n - 259)           # unknown, control, byte, normal
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return tokens, scores, types


def _permute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's q/k row order for the `llama` arch: per head, halves -> interleaved pairs."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _gguf_tensors(s: Shape, weights: Weights, qtype: str):
    """(name, uint8-or-f32 array, ggml type) of every GGUF tensor, in file order."""
    c, arch = s.config, GGUF_ARCH[s.model_type]
    names = {**GGUF_NAMES, **GGUF_NAMES_BY_ARCH.get(arch, {})}
    by_key = {(slot.kind, slot.layer, slot.expert): slot for slot in s.slots}
    for slot in s.slots:
        if slot.expert > 0:
            continue
        name = names[slot.kind].format(l=slot.layer)
        members = ([by_key[(slot.kind, slot.layer, e)] for e in range(c.num_experts)]
                   if slot.kind in EXPERT_KINDS else [slot])
        if stored_as_f32(slot):
            yield name, weights.f32(slot), GGMLQuantizationType.F32
            continue
        stored = stored_type(slot, qtype)
        data = np.stack([weights.quantized(m, stored) for m in members]) if len(members) > 1 \
            else weights.quantized(slot, stored)
        if arch == "llama" and slot.kind in ("WQ", "WK"):
            data = _permute_rows(data, c.num_heads if slot.kind == "WQ" else c.num_kv_heads)
        if slot.kind in PER_HEAD_KINDS:
            data = data.reshape(c.num_heads, data.shape[0] // c.num_heads, data.shape[1])
        yield name, data, QTYPES[stored]


def _deepseek2_metadata(w: GGUFWriter, s: Shape) -> None:
    """llama.cpp's deepseek2 hyperparameters beyond the common ones: latent attention as one KV head
    of kv_lora_rank + RoPE dims, the per-head sizes under *_mla, YaRN's mscale_all_dim as 0.1 * it.
    (llama.cpp reads q_lora_rank except from 27-layer models: V2-Lite's shape has none.)"""
    c, hf = s.config, s.hf_config
    w.add_feed_forward_length(c.intermediate_size)
    w.add_expert_feed_forward_length(c.expert_intermediate_size)
    w.add_leading_dense_block_count(hf.first_k_dense_replace)
    w.add_expert_shared_count(hf.n_shared_experts)
    w.add_expert_weights_scale(hf.routed_scaling_factor)
    w.add_kv_lora_rank(c.kv_lora_rank)
    if c.q_lora_rank:
        w.add_q_lora_rank(c.q_lora_rank)
    w.add_key_length(c.kv_lora_rank + c.head_dim)
    w.add_value_length(c.kv_lora_rank)
    w.add_key_length_mla(c.qk_nope_head_dim + c.head_dim)
    w.add_value_length_mla(c.v_head_dim)
    rope = hf.rope_parameters
    w.add_rope_scaling_type(RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])


def write_gguf(s: Shape, weights: Weights, qtype: str, path: Path) -> None:
    """A GGUF file llama.cpp loads, streamed tensor by tensor."""
    c, arch = s.config, GGUF_ARCH[s.model_type]
    w = GGUFWriter(str(path), arch)
    w.add_name(f"{s.name}-random-{qtype}")
    w.add_block_count(c.num_layers)
    w.add_context_length(c.context_length)
    w.add_embedding_length(c.hidden_size)
    w.add_head_count(c.num_heads)
    w.add_head_count_kv(c.num_kv_heads)
    w.add_rope_dimension_count(c.head_dim)
    if arch == "deepseek2":
        _deepseek2_metadata(w, s)
    else:
        w.add_feed_forward_length(c.expert_intermediate_size)
        w.add_key_length(c.head_dim)
        w.add_value_length(c.head_dim)
    if arch == "qwen3moe":
        w.add_expert_feed_forward_length(c.expert_intermediate_size)
    w.add_rope_freq_base(float(s.hf_config.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_expert_count(c.num_experts)
    w.add_expert_used_count(c.top_k)
    w.add_vocab_size(c.vocab_size)
    w.add_file_type(FILE_TYPE[qtype])
    if s.model_type == "olmoe" and c.router_renormalize:
        w.add_bool("olmoe.expert_weights_norm", True)
    if s.model_type == "gpt_oss":
        rope = s.hf_config.rope_parameters
        w.add_expert_feed_forward_length(c.expert_intermediate_size)
        w.add_sliding_window(c.sliding_window)
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    tokens, scores, types = _vocabulary(c.vocab_size)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, data, kind in _gguf_tensors(s, weights, qtype):
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, raw_dtype=None if data.dtype == np.float32
                          else kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in _gguf_tensors(s, weights, qtype):
        w.write_tensor_data(np.ascontiguousarray(data))
    w.close()


# ---- Colibri-native ---------------------------------------------------------------------
def write_colibri(s: Shape, weights: Weights, qtype: str, path: Path) -> None:
    """A .colibri file holding the same quantized bytes as the GGUF (q/k rows in HF order)."""
    def tensor(slot):
        if stored_as_f32(slot):
            return "F32", np.ascontiguousarray(weights.f32(slot))
        return COLIBRI_DTYPE[qtype], np.ascontiguousarray(weights.quantized(slot, qtype))

    metadata = {"architecture": s.model_type, "files": {"config.json": s.hf_config.to_json_string()},
                "source": {"format": "random", "shape": s.name, "dtype": qtype}}
    native.write_native(path, s.config, s.slots, tensor, metadata)


# ---- routers for paging ----------------------------------------------------------------------
def scale_embedding(path: Path, factor: float) -> None:
    """Multiplies the Q4_0 token embedding of a GGUF file by factor in place (each block's f16 scale)."""
    from colibri.formats.gguf import GGUFFile

    with GGUFFile(path) as g:
        t = g.tensors["token_embd.weight"]
        assert t.type_name == "Q4_0", t.type_name
        offset, n_blocks = t.offset, t.nbytes // 18
    blocks = np.memmap(path, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), mode="r+", offset=offset,
                       shape=(n_blocks,))
    blocks["d"] = (blocks["d"].astype(np.float32) * np.float32(factor)).astype(np.float16)
    blocks.flush()
    del blocks


def batched_routes(path: Path, prompts: int, tokens: int, seed: int, mem_budget="auto"):
    """(config, router logits [L, T, E], experts [L, T, k]) of `prompts` random prompts of `tokens`
    ids (T = prompts x tokens), run by Colibri as one batched step: one pass over the experts."""
    import ctypes

    import colibri
    from colibri import _native

    with colibri.load(path, threads=2, n_ctx=tokens, n_seq=prompts, n_batch=prompts * tokens,
                      mem_budget=mem_budget) as m:
        c = m.config
        ids = np.random.default_rng(seed).integers(0, c.vocab_size, prompts * tokens).astype(np.int32)   # [T]
        router = np.zeros((c.num_layers, len(ids), c.num_experts), dtype=np.float32)     # [L, T, E]
        experts = np.zeros((c.num_layers, len(ids), c.top_k), dtype=np.int32)           # [L, T, k]
        out = _native.Outputs(router_logits=_native.as_ptr(router, ctypes.c_float),
                              experts=_native.as_ptr(experts, ctypes.c_int32))
        m._context().forward(ids, np.tile(np.arange(tokens, dtype=np.int32), prompts),
                             np.repeat(np.arange(prompts, dtype=np.int32), tokens), None, out)
    return c, router, experts


def calibrate_routers(path: Path, shape_name: str, routing: str, *, mem_budget="auto", passes: int = 2,
                      log=print) -> None:
    """Rewrites the router tensors of a GGUF file in place (module docstring): whitened on the
    logits Colibri's routes give over CALIBRATION_PROMPTS random prompts of CALIBRATION_TOKENS,
    then Zipf-scaled for routing "zipf"."""
    from colibri.formats.gguf import GGUFFile

    for n in range(passes):
        log(f"{path.name}: calibrating the routers, pass {n + 1} of {passes}")
        c, router, _ = batched_routes(path, CALIBRATION_PROMPTS, CALIBRATION_TOKENS, seed=2024 + n,
                                      mem_budget=mem_budget)
        logits = {layer: router[layer].astype(np.float64) for layer in c.moe_layers}   # layer -> [T, E]
        with GGUFFile(path) as g:
            where = {l: g.tensors[f"blk.{l}.ffn_gate_inp.weight"].offset for l in logits}
        for layer, L in logits.items():
            values, vectors = np.linalg.eigh(L.T @ L / len(L))                  # second moment [E, E]
            inverse_root = (vectors / np.sqrt(np.maximum(values, 1e-12 * values.max()))) @ vectors.T
            w = np.memmap(path, dtype="<f4", mode="r+", offset=where[layer], shape=(c.num_experts, c.hidden_size))
            w[:] = (inverse_root @ w.astype(np.float64)).astype(np.float32)
            w.flush()
            del w
    if routing == "zipf":
        for layer in logits:
            rank = np.random.default_rng(1000 + layer).permutation(c.num_experts)     # [E] each expert's rank
            scale = (rank + 1.0) ** -ZIPF_ALPHA[shape_name]                            # [E]
            w = np.memmap(path, dtype="<f4", mode="r+", offset=where[layer], shape=(c.num_experts, c.hidden_size))
            w[:] = w * (scale / scale.mean()).astype(np.float32)[:, None]
            w.flush()
            del w


# ---- the cache ------------------------------------------------------------------------------
def ensure(root: Path, shape_name: str, *, hf: bool, log=print, routing: str | None = None,
           only: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Paths of every model file of `shape_name` under root, writing the missing ones:
    {"gguf-q8_0", "gguf-q4_0", "colibri-q8_0", "colibri-q4_0"} and, with hf, "hf-bf16"
    (only: just those keys). routing "uniform" / "zipf": GGUF files with calibrated routers
    (calibrate_routers; files SHAPE-uniform-... / SHAPE-zipf-...)."""
    root.mkdir(parents=True, exist_ok=True)
    if only is not None and any(key.split("-")[1] in REQUANTIZED for key in only):
        return _ensure_requantized(root, shape_name, log=log, routing=routing, only=only)
    s, weights = shape(shape_name), Weights()
    stem = shape_name if routing is None else f"{shape_name}-{routing}"
    paths = {}
    for key in FILES.get(shape_name, ("gguf-q8_0", "gguf-q4_0", "colibri-q8_0", "colibri-q4_0")):
        kind, qtype = key.split("-")
        paths[key] = root / f"{stem}-{qtype}.{kind}"
    if hf and shape_name not in FILES:
        paths["hf-bf16"] = root / f"{stem}-hf-bf16"
    if only is not None:
        paths = {key: path for key, path in paths.items() if key in only}
    for key, path in paths.items():
        if path.exists():
            continue
        log(f"writing {path}")
        partial = path.with_name(path.name + ".partial")
        kind, qtype = key.split("-")
        if kind == "hf":
            write_hf(s, weights, partial)
        elif kind == "gguf":
            write_gguf(s, weights, qtype, partial)
            if routing is not None:   # colibri.load knows a GGUF file by its suffix
                calibrating = partial.with_name(path.stem + ".calibrating.gguf")
                partial.rename(calibrating)
                scale_embedding(calibrating, EMBEDDING_SCALE)
                calibrate_routers(calibrating, shape_name, routing, log=log)
                calibrating.rename(partial)
        else:
            write_colibri(s, weights, qtype, partial)
        partial.rename(path)
    return paths


def llama_requantize(src: Path, dst: Path, ftype: str, threads: int = 2) -> None:
    """dst = llama.cpp's quantizer (llama_model_quantize) run on src with llama_ftype `ftype`."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype)
    params.nthread = threads
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize {src} -> {ftype} failed")


def _ensure_requantized(root: Path, shape_name: str, *, log, routing: str | None,
                        only: tuple[str, ...]) -> dict[str, Path]:
    """ensure() for the REQUANTIZED keys of `only` (the others as ensure writes them)."""
    stem = shape_name if routing is None else f"{shape_name}-{routing}"
    paths = {}
    for key in only:
        kind, qtype = key.split("-")
        if qtype not in REQUANTIZED:
            paths.update(ensure(root, shape_name, hf=False, log=log, routing=routing, only=(key,)))
            continue
        if kind != "gguf":
            raise ValueError(f"{key}: K-quant benchmark files are GGUF only")
        path = paths[key] = root / f"{stem}-{qtype}.gguf"
        if path.exists():
            continue
        source = ensure(root, shape_name, hf=False, log=log, routing=routing, only=("gguf-q4_0",))["gguf-q4_0"]
        log(f"writing {path} (llama_model_quantize from {source})")
        partial = path.with_name(path.name + ".partial")
        llama_requantize(source, partial, REQUANTIZED[qtype])
        partial.rename(path)
    return paths
