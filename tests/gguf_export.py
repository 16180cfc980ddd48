"""Write a transformers model as a GGUF file laid out as llama.cpp's converter does (test helper).

Independent of Colibri's reader: names, metadata and the llama q/k row permutation follow
llama.cpp's convert_hf_to_gguf conventions; the bytes are written by the `gguf` package, and
quantized by it where it has a quantizer (block types it lacks one for, such as the K types,
by the `quantizer` the caller passes). The families added later (FAMILIES) take their tensor
names from the `gguf` package's own name table (gguf.get_tensor_name_map, llama.cpp's), after the
converter's renames, expert stacking and splits.
"""
from __future__ import annotations

import json
import re

import numpy as np
import gguf
from gguf import ExpertGatingFuncType, GGMLQuantizationType, GGUFWriter, RopeScalingType
from gguf.quants import quantize

GGUF_ARCH = {"llama": "llama", "mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe",
             "olmoe": "olmoe", "gpt_oss": "gpt-oss", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2"}
QUANT = {"f32": GGMLQuantizationType.F32, "f16": GGMLQuantizationType.F16, "q8_0": GGMLQuantizationType.Q8_0,
         "q4_0": GGMLQuantizationType.Q4_0, "q4_1": GGMLQuantizationType.Q4_1, "mxfp4": GGMLQuantizationType.MXFP4}
GGUF_QUANTIZES = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4"}   # types gguf.quants can write


def _permute_for_interleaved_rope(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's q/k row order for the `llama` arch: per head, halves → interleaved pairs."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _add_byte_level_vocab(w: GGUFWriter, tokenizer) -> None:
    """tokens, types and merges of harmony's byte-level BPE (tests/harmony.py) as llama.cpp's converter
    writes gpt-oss's: model gpt2, pre-tokenizer gpt-4o, added special tokens as control tokens,
    <|return|> the EOS, <|endoftext|> BOS and padding, no BOS added."""
    import json

    model = json.loads(tokenizer.to_str())["model"]
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in special else 1 for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    w.add_eos_token_id(vocab["<|return|>"])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_add_bos_token(False)


def _put(w: GGUFWriter, name: str, array: np.ndarray, qtype, quantizer=None) -> None:
    """A tensor at qtype where its rows are a multiple of 32 wide (and it is a matrix), else F32.
    qtype: one of QUANT, or a function (gguf tensor name, array) -> ggml type name ("Q4_K", "F16",
    ...) for a mixed file; quantizer: (type name, float32 array) -> raw block bytes, for the types
    gguf.quants cannot write."""
    if callable(qtype):
        kind = getattr(GGMLQuantizationType, qtype(name, array))
    else:
        kind = QUANT[qtype] if array.ndim >= 2 and array.shape[-1] % 32 == 0 else GGMLQuantizationType.F32
    array = np.ascontiguousarray(array, dtype=np.float32)
    if kind == GGMLQuantizationType.F32:
        w.add_tensor(name, array)
    elif kind == GGMLQuantizationType.F16:
        w.add_tensor(name, array.astype(np.float16))
    elif kind.name in GGUF_QUANTIZES:
        w.add_tensor(name, quantize(array, kind), raw_dtype=kind)
    else:
        raw = quantizer(kind.name, array.reshape(-1, array.shape[-1]))   # [rows, bytes per row]
        w.add_tensor(name, raw.reshape(*array.shape[:-1], raw.shape[-1]), raw_dtype=kind)


def _export_gpt_oss(w: GGUFWriter, cfg, sd: dict[str, np.ndarray], qtype: str) -> None:
    """gpt-oss as llama.cpp's GptOssModel converter writes it: NEOX-order q/k (no permutation), sinks,
    q/k/v/o and router biases, the FFN norm as post_attention_norm, gate_up split into stacked
    ffn_gate_exps / ffn_up_exps [E, F, D] (even / odd columns of the transposed HF tensor) with
    their biases, ffn_down_exps [E, D, F], YaRN and the sliding window in the metadata."""
    rope = cfg.rope_parameters
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_expert_feed_forward_length(cfg.intermediate_size)
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_sliding_window(cfg.sliding_window)
    if rope.get("rope_type") == "yarn":
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    dense = "f32" if qtype == "mxfp4" else qtype   # MXFP4 is for the experts only
    put = lambda name, array: _put(w, name, array, dense)   # noqa: E731
    put_expert = lambda name, array: _put(w, name, array, qtype)   # noqa: E731
    put_f32 = lambda name, array: _put(w, name, array, "f32")   # noqa: E731  (norms, biases, sinks, router)
    put("token_embd.weight", sd["model.embed_tokens.weight"])
    put_f32("output_norm.weight", sd["model.norm.weight"])
    if not cfg.tie_word_embeddings:
        put("output.weight", sd["lm_head.weight"])
    for l in range(cfg.num_hidden_layers):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        put_f32(b + "attn_norm.weight", sd[p + "input_layernorm.weight"])
        for proj, gguf_name in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("o", "attn_output")):
            put(b + gguf_name + ".weight", sd[p + f"self_attn.{proj}_proj.weight"])
            put_f32(b + gguf_name + ".bias", sd[p + f"self_attn.{proj}_proj.bias"])
        put_f32(b + "attn_sinks.weight", sd[p + "self_attn.sinks"])
        put_f32(b + "post_attention_norm.weight", sd[p + "post_attention_layernorm.weight"])
        put_f32(b + "ffn_gate_inp.weight", sd[p + "mlp.router.weight"])
        put_f32(b + "ffn_gate_inp.bias", sd[p + "mlp.router.bias"])
        gate_up = sd[p + "mlp.experts.gate_up_proj"].transpose(0, 2, 1)   # [E, 2F, D]
        gate_up_bias = sd[p + "mlp.experts.gate_up_proj_bias"]             # [E, 2F]
        put_expert(b + "ffn_gate_exps.weight", gate_up[:, 0::2])
        put_expert(b + "ffn_up_exps.weight", gate_up[:, 1::2])
        put_f32(b + "ffn_gate_exps.bias", gate_up_bias[:, 0::2])
        put_f32(b + "ffn_up_exps.bias", gate_up_bias[:, 1::2])
        put_expert(b + "ffn_down_exps.weight", sd[p + "mlp.experts.down_proj"].transpose(0, 2, 1))   # [E, D, F]
        put_f32(b + "ffn_down_exps.bias", sd[p + "mlp.experts.down_proj_bias"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _deepseek2_metadata(w: GGUFWriter, cfg) -> None:
    """llama.cpp's deepseek2 hyperparameters: latent attention as MQA (one KV head) with
    key_length = kv_lora_rank + RoPE dims, the per-head sizes under *_mla, YaRN's mscale_all_dim
    as 0.1 * it in yarn_log_multiplier."""
    w.add_head_count_kv(1)
    w.add_key_length(cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    w.add_value_length(cfg.kv_lora_rank)
    w.add_key_length_mla(cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
    w.add_value_length_mla(cfg.v_head_dim)
    w.add_rope_dimension_count(cfg.qk_rope_head_dim)
    w.add_kv_lora_rank(cfg.kv_lora_rank)
    if cfg.q_lora_rank is not None:
        w.add_q_lora_rank(cfg.q_lora_rank)
    w.add_leading_dense_block_count(cfg.first_k_dense_replace)
    w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    w.add_expert_shared_count(cfg.n_shared_experts)
    w.add_expert_weights_scale(cfg.routed_scaling_factor)
    if cfg.n_group is not None:
        w.add_expert_group_count(cfg.n_group)
        w.add_expert_group_used_count(cfg.topk_group)
    if cfg.model_type == "deepseek_v3":
        w.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
    rope = cfg.rope_parameters
    if rope.get("rope_type", "default") == "yarn":
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        if rope.get("mscale_all_dim"):
            w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])


def _latent_attention(put, sd, p: str, b: str, cfg, joint_kv_b: bool) -> None:
    """One layer's latent attention tensors under llama.cpp's names: kv_b_proj split per head into
    attn_k_b [H, R, nope] (transposed) and attn_v_b [H, v, R], or kept joint as attn_kv_b."""
    if cfg.q_lora_rank is None:
        put(b + "attn_q.weight", sd[p + "self_attn.q_proj.weight"])
    else:
        put(b + "attn_q_a.weight", sd[p + "self_attn.q_a_proj.weight"])
        put(b + "attn_q_a_norm.weight", sd[p + "self_attn.q_a_layernorm.weight"])
        put(b + "attn_q_b.weight", sd[p + "self_attn.q_b_proj.weight"])
    put(b + "attn_kv_a_mqa.weight", sd[p + "self_attn.kv_a_proj_with_mqa.weight"])
    put(b + "attn_kv_a_norm.weight", sd[p + "self_attn.kv_a_layernorm.weight"])
    kv_b = sd[p + "self_attn.kv_b_proj.weight"]
    if joint_kv_b:
        put(b + "attn_kv_b.weight", kv_b)
    else:
        heads = kv_b.reshape(cfg.num_attention_heads, cfg.qk_nope_head_dim + cfg.v_head_dim, kv_b.shape[-1])
        put(b + "attn_k_b.weight", heads[:, :cfg.qk_nope_head_dim, :].transpose(0, 2, 1))
        put(b + "attn_v_b.weight", heads[:, cfg.qk_nope_head_dim:, :])
    put(b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"])


def export_gguf(model, checkpoint_dir, path, qtype="f32", tokenizer=None, joint_kv_b: bool = False,
                quantizer=None, state=None, bare_vocab: bool = False) -> None:
    """model: the transformers model (for its config); checkpoint_dir: its save_pretrained output;
    qtype, quantizer: as _put takes them (qtype "mxfp4" for gpt-oss: the routed experts in MXFP4,
    everything else F32, as llama.cpp's MXFP4_MOE files); tokenizer: a byte-level BPE
    `tokenizers.Tokenizer` whose vocabulary is written as llama.cpp's `gpt2` model with the
    `gpt-4o` pre-tokenizer (o200k), or None for none; joint_kv_b: write latent attention's
    up-projections as older llama.cpp did (attn_kv_b); state: the weights (a state dict) instead
    of checkpoint_dir's; bare_vocab (FAMILIES only): no tokens, but tokenizer.ggml.model 'none' and
    the vocabulary size, which llama.cpp needs to load a file."""
    from safetensors.numpy import load_file

    cfg = model.config
    model_type = cfg.model_type
    if model_type in FAMILIES:
        _export_family(checkpoint_dir, path, qtype, bare_vocab)
        return
    arch = GGUF_ARCH[model_type]
    if state is not None:
        sd = {k: v.detach().float().numpy() for k, v in state.items()}
    else:
        sd = {k: v.astype(np.float32) for k, v in load_file(f"{checkpoint_dir}/model.safetensors").items()}
    w = GGUFWriter(str(path), arch)
    L = cfg.num_hidden_layers
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_block_count(L)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_head_count(cfg.num_attention_heads)
    latent = arch == "deepseek2"
    if latent:
        _deepseek2_metadata(w, cfg)
    else:
        w.add_head_count_kv(cfg.num_key_value_heads)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    if tokenizer is not None:
        _add_byte_level_vocab(w, tokenizer)
    experts = (getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
               or getattr(cfg, "n_routed_experts", None) or 0)
    if model_type == "gpt_oss":
        _export_gpt_oss(w, cfg, sd, qtype)
        return
    if latent:
        w.add_feed_forward_length(cfg.intermediate_size)
    elif model_type == "mixtral":
        w.add_feed_forward_length(cfg.intermediate_size)
    elif model_type == "olmoe":
        w.add_feed_forward_length(cfg.intermediate_size)
    elif model_type == "llama":
        w.add_feed_forward_length(cfg.intermediate_size)
    else:
        w.add_feed_forward_length(cfg.intermediate_size)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        if model_type == "qwen2_moe":
            w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    if getattr(cfg, "norm_topk_prob", False) and model_type != "qwen3_moe":
        w.add_bool(f"{arch}.expert_weights_norm", True)
    if experts:
        w.add_expert_count(experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)

    def put(name: str, array: np.ndarray) -> None:
        _put(w, name, array, qtype, quantizer)

    interleave = arch == "llama"
    put("token_embd.weight", sd["model.embed_tokens.weight"])
    put("output_norm.weight", sd["model.norm.weight"])
    if not cfg.tie_word_embeddings:
        put("output.weight", sd["lm_head.weight"])
    for l in range(L):
        p = f"model.layers.{l}."
        b = f"blk.{l}."
        put(b + "attn_norm.weight", sd[p + "input_layernorm.weight"])
        if latent:
            _latent_attention(put, sd, p, b, cfg, joint_kv_b)
        else:
            q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
            if interleave:
                q = _permute_for_interleaved_rope(q, cfg.num_attention_heads)
                k = _permute_for_interleaved_rope(k, cfg.num_key_value_heads)
            put(b + "attn_q.weight", q)
            put(b + "attn_k.weight", k)
            put(b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"])
            put(b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        for proj in "qkv":
            if p + f"self_attn.{proj}_proj.bias" in sd:
                put(b + f"attn_{proj}.bias", sd[p + f"self_attn.{proj}_proj.bias"])
        if p + "self_attn.q_norm.weight" in sd:
            put(b + "attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"])
            put(b + "attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"])
        put(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        moe = "block_sparse_moe." if model_type == "mixtral" else "mlp."
        if p + moe + "gate.weight" in sd:
            put(b + "ffn_gate_inp.weight", sd[p + moe + "gate.weight"])
            names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
            for gguf_name, hf in zip(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), names):
                stacked = np.stack([sd[p + moe + f"experts.{e}.{hf}.weight"] for e in range(experts)])
                put(b + gguf_name + ".weight", stacked)
            if p + "mlp.shared_expert.gate_proj.weight" in sd:
                for gguf_name, hf in (("ffn_gate_shexp", "gate_proj"), ("ffn_up_shexp", "up_proj"),
                                      ("ffn_down_shexp", "down_proj")):
                    put(b + gguf_name + ".weight", sd[p + f"mlp.shared_expert.{hf}.weight"])
                put(b + "ffn_gate_inp_shexp.weight", sd[p + "mlp.shared_expert_gate.weight"][0])
            if p + "mlp.shared_experts.gate_proj.weight" in sd:   # DeepSeek's: one ungated MLP
                for gguf_name, hf in (("ffn_gate_shexp", "gate_proj"), ("ffn_up_shexp", "up_proj"),
                                      ("ffn_down_shexp", "down_proj")):
                    put(b + gguf_name + ".weight", sd[p + f"mlp.shared_experts.{hf}.weight"])
            if p + "mlp.gate.e_score_correction_bias" in sd:
                put(b + "exp_probs_b.bias", sd[p + "mlp.gate.e_score_correction_bias"])
        else:
            put(b + "ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
            put(b + "ffn_up.weight", sd[p + "mlp.up_proj.weight"])
            put(b + "ffn_down.weight", sd[p + "mlp.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- the later families: metadata as each converter class writes it, names from gguf's table ----

FAMILIES = {"glm4_moe": gguf.MODEL_ARCH.GLM4_MOE, "granitemoe": gguf.MODEL_ARCH.GRANITE_MOE,
            "granitemoeshared": gguf.MODEL_ARCH.GRANITE_MOE, "ernie4_5_moe": gguf.MODEL_ARCH.ERNIE4_5_MOE,
            "dots1": gguf.MODEL_ARCH.DOTS1, "minimax_m2": gguf.MODEL_ARCH.MINIMAXM2}


def _common_metadata(w: GGUFWriter, hp: dict, block_count: int) -> None:
    """TextModel.set_gguf_parameters: the keys every converter class starts from."""
    w.add_block_count(block_count)
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_head_count_kv(hp["num_key_value_heads"])
    w.add_rope_freq_base(hp["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
    for key, add in ((("num_local_experts", "num_experts", "n_routed_experts"), w.add_expert_count),
                     (("num_experts_per_tok",), w.add_expert_used_count),
                     (("n_group",), w.add_expert_group_count), (("topk_group",), w.add_expert_group_used_count)):
        value = next((hp[k] for k in key if hp.get(k) is not None), None)
        if value is not None:
            add(value)
    if hp.get("head_dim") is not None:
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])


def _glm4_moe(w: GGUFWriter, hp: dict) -> int:
    """Glm4MoeModel: block_count counts the MTP layers; partial RoPE dims; sigmoid gating."""
    nextn = hp.get("num_nextn_predict_layers") or 0
    _common_metadata(w, hp, hp["num_hidden_layers"] + nextn)
    head_dim = hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]
    w.add_rope_dimension_count(int(head_dim * hp["rope_parameters"].get("partial_rotary_factor", 0.5)))
    w.add_expert_feed_forward_length(hp["moe_intermediate_size"])   # (expert_count: written above)
    w.add_expert_shared_count(hp["n_shared_experts"])
    w.add_leading_dense_block_count(hp["first_k_dense_replace"])
    w.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
    w.add_expert_weights_scale(hp["routed_scaling_factor"])
    w.add_expert_weights_norm(hp["norm_topk_prob"])
    if nextn:
        w.add_nextn_predict_layers(nextn)
    return hp["num_hidden_layers"] + nextn


def _granitemoe(w: GGUFWriter, hp: dict) -> int:
    """GraniteMoeModel (over GraniteModel, LlamaModel): llama's keys, the four multipliers, the shared
    expert's width."""
    _common_metadata(w, hp, hp["num_hidden_layers"])
    w.add_vocab_size(hp["vocab_size"])
    w.add_rope_dimension_count(hp["hidden_size"] // hp["num_attention_heads"])
    for key, add in (("attention_multiplier", w.add_attention_scale), ("embedding_multiplier", w.add_embedding_scale),
                     ("residual_multiplier", w.add_residual_scale), ("logits_scaling", w.add_logit_scale),
                     ("shared_intermediate_size", w.add_expert_shared_feed_forward_length)):
        if hp.get(key):
            add(hp[key])
    return hp["num_hidden_layers"]


def _granite_tensor(name: str, array: np.ndarray, hp: dict) -> list[tuple[str, np.ndarray]]:
    """GraniteMoeModel.modify_tensors: the fused gate+up split in two (named directly); LlamaModel's q/k
    rows permuted for adjacent-pair RoPE."""
    bid = name.split(".")[2] if name.startswith("model.layers.") else None
    if name.endswith("block_sparse_moe.input_linear.weight"):
        gate, up = np.split(array, 2, axis=-2)
        return [(f"blk.{bid}.ffn_gate_exps.weight", gate), (f"blk.{bid}.ffn_up_exps.weight", up)]
    if name.endswith("shared_mlp.input_linear.weight"):
        gate, up = np.split(array, 2, axis=-2)
        return [(f"blk.{bid}.ffn_gate_shexp.weight", gate), (f"blk.{bid}.ffn_up_shexp.weight", up)]
    if name.endswith("q_proj.weight"):
        return [(name, _permute_for_interleaved_rope(array, hp["num_attention_heads"]))]
    if name.endswith("k_proj.weight"):
        return [(name, _permute_for_interleaved_rope(array, hp["num_key_value_heads"]))]
    return [(name, array)]


def _ernie4_5_moe(w: GGUFWriter, hp: dict) -> int:
    """Ernie4_5MoeModel: the MoE layer pattern as leading dense blocks + an interleave step (no end
    index), and the shared width as llama.cpp computes it (intermediate_size // kv heads)."""
    _common_metadata(w, hp, hp["num_hidden_layers"])
    w.add_expert_count(hp["moe_num_experts"])
    w.add_expert_used_count(hp["moe_k"])
    w.add_interleave_moe_layer_step(hp["moe_layer_interval"])
    w.add_leading_dense_block_count(hp["moe_layer_start_index"])
    w.add_expert_feed_forward_length(hp["moe_intermediate_size"])
    w.add_expert_shared_count(hp["moe_num_shared_experts"])
    if hp["moe_num_shared_experts"] > 0:
        w.add_expert_shared_feed_forward_length(hp["intermediate_size"] // hp["num_key_value_heads"])
    return hp["num_hidden_layers"]


def _dots1(w: GGUFWriter, hp: dict) -> int:
    """Dots1Model (over Qwen2MoeModel): the V3 routing keys; sigmoid gating (its noaux_tc)."""
    _common_metadata(w, hp, hp["num_hidden_layers"])
    w.add_expert_feed_forward_length(hp["moe_intermediate_size"])
    w.add_leading_dense_block_count(hp["first_k_dense_replace"])
    w.add_expert_shared_count(hp["n_shared_experts"])
    w.add_expert_weights_scale(hp["routed_scaling_factor"])
    w.add_expert_weights_norm(hp["norm_topk_prob"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    return hp["num_hidden_layers"]


def _minimax_m2(w: GGUFWriter, hp: dict) -> int:
    """MiniMaxM2Model: sigmoid gating, experts of intermediate_size, the rotated dims."""
    _common_metadata(w, hp, hp["num_hidden_layers"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_feed_forward_length(hp["intermediate_size"])
    w.add_rope_dimension_count(int(hp["head_dim"] * hp["rope_parameters"].get("partial_rotary_factor", 1.0)))
    return hp["num_hidden_layers"]


METADATA = {"glm4_moe": _glm4_moe, "granitemoe": _granitemoe, "granitemoeshared": _granitemoe,
            "ernie4_5_moe": _ernie4_5_moe, "dots1": _dots1, "minimax_m2": _minimax_m2}
MODIFY = {"granitemoe": _granite_tensor, "granitemoeshared": _granite_tensor}


def _hf_tensors(sd: dict[str, np.ndarray], hp: dict) -> list[tuple[str, np.ndarray]]:
    """The converter's modify_tensors steps before the name lookup: per-expert matrices stacked
    into one [E, rows, cols] tensor per projection, e_score_correction_bias renamed to a .bias."""
    out: list[tuple[str, np.ndarray]] = []
    stacks: dict[str, list[tuple[int, np.ndarray]]] = {}
    for name, array in sd.items():
        m = re.match(r"(.*\.experts)\.(\d+)\.(\w+)\.weight$", name)
        if m:
            stacks.setdefault(f"{m.group(1)}.{m.group(3)}.weight", []).append((int(m.group(2)), array))
            continue
        out.append((name.replace("e_score_correction_bias", "e_score_correction.bias"), array))
    for name, parts in stacks.items():
        out.append((name, np.stack([a for _, a in sorted(parts, key=lambda p: p[0])])))
    return out


def _export_family(checkpoint_dir, path, qtype: str, bare_vocab: bool) -> None:
    from safetensors.numpy import load_file

    hp = json.loads((checkpoint_dir / "config.json").read_text())
    arch = FAMILIES[hp["model_type"]]
    sd = {k: v.astype(np.float32) for k, v in load_file(f"{checkpoint_dir}/model.safetensors").items()}
    w = GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    block_count = METADATA[hp["model_type"]](w, hp)
    if bare_vocab:
        w.add_tokenizer_model("none")
        if hp["model_type"] not in ("granitemoe", "granitemoeshared"):   # Granite's converter writes it already
            w.add_vocab_size(hp["vocab_size"])
    names = gguf.get_tensor_name_map(arch, block_count)
    modify = MODIFY.get(hp["model_type"], lambda name, array, hp: [(name, array)])
    for hf_name, hf_array in _hf_tensors(sd, hp):
        for name, array in modify(hf_name, hf_array, hp):
            if name.startswith("blk."):
                gguf_name = name   # named by the converter itself
            elif name == "model.embed_tokens.weight":
                gguf_name = "token_embd.weight"
            else:
                gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
            assert gguf_name is not None, f"llama.cpp has no name for {name}"
            _put(w, gguf_name, array, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
