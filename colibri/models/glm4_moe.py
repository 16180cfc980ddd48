"""GLM-4.5 / GLM-4.6 (glm4_moe): DeepSeek-V3 routing (sigmoid scores, e_score_correction_bias for
the choice only, n_group / topk_group, renormalised with +1e-20, routed_scaling_factor), partial
RoPE, optional per-head q/k RMSNorm, q/k/v biases, an ungated shared expert of
n_shared_experts x moe_intermediate_size, dense layers before first_k_dense_replace.

The checkpoint's extra multi-token-prediction layers (num_nextn_predict_layers, stored after the
num_hidden_layers decoder layers) are not part of next-token inference and are not read; llama.cpp
counts them in block_count, so GGUF files subtract them."""
from ..errors import ModelError
from .spec import (LLAMA_NAMES, QK_NORM_NONE, QK_NORM_PER_HEAD, Architecture, ConfigReader, GGUFMapping,
                   ModelConfig, deepseek_moe_fields, read_common, sigmoid_group_routing)


def read_config(cfg: ConfigReader) -> ModelConfig:
    # absent fields take the defaults of transformers' Glm4MoeConfig
    moe = deepseek_moe_fields(cfg, first_dense=1, shared=1, scale=1.0)
    return read_common(
        cfg, "glm4_moe", **moe,
        **sigmoid_group_routing(cfg, moe, renormalize=cfg.bool("norm_topk_prob", True)),
        qk_norm=QK_NORM_PER_HEAD if cfg.bool("use_qk_norm", False) else QK_NORM_NONE,
        attention_bias=cfg.bool("attention_bias", False),
    )


def _from_gguf(meta: dict, prefix: str, tensors, config: dict) -> None:
    """llama.cpp's glm4moe: block_count counts the MTP layers; sigmoid gating; biases and q/k norms
    are known by their tensors."""
    gating = meta.get(prefix + "expert_gating_func", 2)
    if gating != 2:
        raise ModelError(f"{prefix}expert_gating_func = {gating!r} is not sigmoid (2), the only rule of glm4moe")
    nextn = meta.get(prefix + "nextn_predict_layers", 0)
    if isinstance(nextn, int) and isinstance(config.get("num_hidden_layers"), int):
        config["num_hidden_layers"] -= nextn
    config["attention_bias"] = "blk.0.attn_q.bias" in tensors
    config["use_qk_norm"] = "blk.0.attn_q_norm.weight" in tensors


ARCHITECTURE = Architecture(
    model_type="glm4_moe", read_config=read_config,
    names={
        **LLAMA_NAMES,
        "SHARED_GATE": "model.layers.{l}.mlp.shared_experts.gate_proj.weight",
        "SHARED_UP": "model.layers.{l}.mlp.shared_experts.up_proj.weight",
        "SHARED_DOWN": "model.layers.{l}.mlp.shared_experts.down_proj.weight",
    },
    gguf=GGUFMapping("glm4moe", keys={"expert_count": "n_routed_experts", "expert_used_count": "num_experts_per_tok",
                                      "expert_feed_forward_length": "moe_intermediate_size",
                                      "feed_forward_length": "intermediate_size",
                                      "expert_shared_count": "n_shared_experts",
                                      "leading_dense_block_count": "first_k_dense_replace",
                                      "expert_weights_scale": "routed_scaling_factor",
                                      "expert_group_count": "n_group", "expert_group_used_count": "topk_group"},
                     names={"FFN_NORM": "blk.{l}.post_attention_norm.weight"},
                     adjust=_from_gguf),
)
