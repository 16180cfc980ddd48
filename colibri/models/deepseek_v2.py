"""DeepSeek-V2 (V2, V2-Lite, V2.5): latent KV attention (multi-head latent attention: q and kv
LoRA, decoupled RoPE on adjacent pairs, YaRN with mscale_all_dim folded into the softmax
scale), shared experts, the first first_k_dense_replace layers dense; softmax routing, top-k
greedy or group-limited greedy (a group scored by its best expert), gates times
routed_scaling_factor, never renormalised."""
from __future__ import annotations

from typing import Any

from . import latent, rope
from .spec import (LLAMA_NAMES, ROUTER_SOFTMAX, Architecture, ConfigReader, GGUFMapping, ModelConfig,
                   deepseek_moe_fields, read_common, router_groups)

# Hugging Face names of the latent attention tensors and of DeepSeek's shared experts
DEEPSEEK_NAMES = {
    **LLAMA_NAMES,
    "WQ_A": "model.layers.{l}.self_attn.q_a_proj.weight",
    "Q_A_NORM": "model.layers.{l}.self_attn.q_a_layernorm.weight",
    "WQ_B": "model.layers.{l}.self_attn.q_b_proj.weight",
    "WKV_A": "model.layers.{l}.self_attn.kv_a_proj_with_mqa.weight",
    "KV_A_NORM": "model.layers.{l}.self_attn.kv_a_layernorm.weight",
    "WK_B": latent.from_joint("model.layers.{l}.self_attn.kv_b_proj.weight"),
    "WV_B": latent.from_joint("model.layers.{l}.self_attn.kv_b_proj.weight"),
    "SHARED_GATE": "model.layers.{l}.mlp.shared_experts.gate_proj.weight",
    "SHARED_UP": "model.layers.{l}.mlp.shared_experts.up_proj.weight",
    "SHARED_DOWN": "model.layers.{l}.mlp.shared_experts.down_proj.weight",
}


def latent_fields(cfg: ConfigReader) -> dict[str, Any]:
    """The latent attention fields DeepSeek-V2 and V3 configs share (head_dim: the RoPE dims)."""
    for key in ("attention_bias", "mlp_bias"):
        if cfg.bool(key, False):
            raise cfg.error(key, "= true is not supported yet")
    cfg.require_value("pretraining_tp", (1,), 1)
    rope_dim = cfg.int("qk_rope_head_dim", max=4096)
    if rope_dim % 2:
        raise cfg.error("qk_rope_head_dim", f"= {rope_dim} must be even for rotary embeddings")
    nope = cfg.int("qk_nope_head_dim", max=4096)
    if "q_lora_rank" not in cfg.raw:   # null is meaningful (no q LoRA); absent is not
        raise cfg.error("q_lora_rank", "is missing (null: queries projected straight from the hidden state)")
    return dict(
        head_dim=rope_dim,
        num_kv_heads=1,   # one latent row per token, shared by every head
        kv_lora_rank=cfg.int("kv_lora_rank", max=1 << 16),
        q_lora_rank=cfg.int("q_lora_rank", 0, min=0, max=1 << 16),
        qk_nope_head_dim=nope,
        v_head_dim=cfg.int("v_head_dim", max=4096),
        # transformers: 1/sqrt(q head width), times YaRN's mscale_all_dim squared
        attention_scale=(nope + rope_dim) ** -0.5 * rope.softmax_mscale(cfg),
    )


def read_config(cfg: ConfigReader) -> ModelConfig:
    cfg.require_value("scoring_func", ("softmax",), "softmax")
    method = cfg.require_value("topk_method", ("greedy", "group_limited_greedy"), "greedy")
    # transformers' V2 router ignores norm_topk_prob; DeepSeek's own code renormalises with it
    cfg.require_value("norm_topk_prob", (False,), False)
    moe = deepseek_moe_fields(cfg, first_dense=0, shared=2, scale=1.0)
    groups = (router_groups(cfg, moe["num_experts"], moe["top_k"], group_top=1)
              if method == "group_limited_greedy" else {})
    # transformers' V2 rotates complex (adjacent) pairs of the RoPE dims
    return read_common(cfg, "deepseek_v2", **latent_fields(cfg), **moe, **groups, router_score=ROUTER_SOFTMAX,
                       router_renormalize=False, rope_interleaved=True)


def fill_from_gguf(meta: dict[str, Any], prefix: str, tensors, config: dict[str, Any]) -> None:
    """The config fields of llama.cpp's deepseek2 metadata that are not one key each: the nope
    dims (key_length_mla minus the RoPE dims), YaRN's mscale_all_dim (written as
    0.1 * mscale_all_dim in rope.scaling.yarn_log_multiplier; DeepSeek's mscale equals it),
    q_lora_rank (absent: none), and the expert groups (absent: none; with groups, V2 routes
    group-limited)."""
    mla, rot = meta.get(prefix + "attention.key_length_mla"), meta.get(prefix + "rope.dimension_count")
    if isinstance(mla, int) and isinstance(rot, int):
        config["qk_nope_head_dim"] = mla - rot
    log_mul = meta.get(prefix + "rope.scaling.yarn_log_multiplier")
    if isinstance(config.get("rope_scaling"), dict) and isinstance(log_mul, (int, float)) and log_mul:
        config["rope_scaling"]["mscale_all_dim"] = config["rope_scaling"]["mscale"] = log_mul / 0.1
    config.setdefault("q_lora_rank", None)
    config.setdefault("n_group", 1)
    config.setdefault("topk_group", 1)
    config.setdefault("norm_topk_prob", False)
    softmax = meta.get(prefix + "expert_gating_func") in (None, 1)   # V2 (V3 gates by sigmoid)
    if softmax and isinstance(config["n_group"], int) and config["n_group"] > 1:
        config["topk_method"] = "group_limited_greedy"


# llama.cpp's deepseek2 metadata, by config.json field (DeepSeek-V2 and V3 alike)
DEEPSEEK2_KEYS = {
    "attention.q_lora_rank": "q_lora_rank", "attention.kv_lora_rank": "kv_lora_rank",
    "attention.value_length_mla": "v_head_dim", "rope.dimension_count": "qk_rope_head_dim",
    "leading_dense_block_count": "first_k_dense_replace", "feed_forward_length": "intermediate_size",
    "expert_feed_forward_length": "moe_intermediate_size", "expert_count": "n_routed_experts",
    "expert_used_count": "num_experts_per_tok", "expert_shared_count": "n_shared_experts",
    "expert_weights_scale": "routed_scaling_factor", "expert_group_count": "n_group",
    "expert_group_used_count": "topk_group",
}

# llama.cpp's deepseek2 tensors (beyond gguf_source.GGUF_NAMES): the up-projections per head,
# or an older converter's joint attn_kv_b
DEEPSEEK2_NAMES = {
    "WK_B": latent.from_gguf("blk.{l}.attn_k_b.weight", "blk.{l}.attn_kv_b.weight"),
    "WV_B": latent.from_gguf("blk.{l}.attn_v_b.weight", "blk.{l}.attn_kv_b.weight"),
}

ARCHITECTURE = Architecture(
    model_type="deepseek_v2", read_config=read_config, names=DEEPSEEK_NAMES,
    # llama.cpp rotates adjacent pairs (transformers' V2 rotates complex pairs: the same);
    # softmax gating is llama.cpp's default when expert_gating_func is absent
    gguf=GGUFMapping("deepseek2", keys=DEEPSEEK2_KEYS, names=DEEPSEEK2_NAMES, rope_interleaved=True,
                     when={"expert_count": True, "expert_gating_func": (None, 1)},
                     adjust=fill_from_gguf),
)
