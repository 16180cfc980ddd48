"""Qwen3-MoE: per-head q/k RMSNorm, explicit head_dim, softmax top-k renormalised
with norm_topk_prob, dense layers chosen by mlp_only_layers / decoder_sparse_step."""
from .spec import (QK_NORM_PER_HEAD, Architecture, ConfigReader, GGUFMapping, ModelConfig, qwen_moe_fields,
                   read_common)


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    # transformers 5 saves "num_local_experts"; released checkpoints say "num_experts"
    experts_key = "num_experts" if "num_experts" in cfg.raw else "num_local_experts"
    return read_common(
        cfg, "qwen3_moe", **qwen_moe_fields(cfg, experts_key),
        shared_expert_intermediate_size=0,
        qk_norm=QK_NORM_PER_HEAD,
    )


ARCHITECTURE = Architecture(
    model_type="qwen3_moe", read_config=read_config,
    gguf=GGUFMapping("qwen3moe", keys={"expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
                                       "expert_feed_forward_length": "moe_intermediate_size",
                                       "feed_forward_length": "intermediate_size"},
                     fixed={"norm_topk_prob": True}),
)
