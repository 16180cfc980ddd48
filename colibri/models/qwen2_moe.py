"""Qwen2-MoE: QKV bias, softmax top-k (renormalised only with norm_topk_prob),
a shared expert scaled by sigmoid(shared_expert_gate · x), dense layers chosen by
mlp_only_layers / decoder_sparse_step."""
from .spec import Architecture, ConfigReader, GGUFMapping, ModelConfig, qwen_moe_fields, read_common


def read_config(cfg: ConfigReader) -> ModelConfig:
    moe = qwen_moe_fields(cfg, "num_experts")
    shared = cfg.int("shared_expert_intermediate_size", max=1 << 20) if moe["num_experts"] else 0
    return read_common(
        cfg, "qwen2_moe", **moe,
        shared_expert_intermediate_size=shared,
        shared_expert_gated=True,
        attention_bias=cfg.bool("qkv_bias", True),
    )


ARCHITECTURE = Architecture(
    model_type="qwen2_moe", read_config=read_config,
    gguf=GGUFMapping("qwen2moe", keys={"expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
                                       "expert_feed_forward_length": "moe_intermediate_size",
                                       "expert_shared_feed_forward_length": "shared_expert_intermediate_size",
                                       "feed_forward_length": "intermediate_size"},
                     fixed={"norm_topk_prob": False}),
)
