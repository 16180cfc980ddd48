"""Qwen2-MoE: QKV bias, softmax top-k (renormalised only with norm_topk_prob),
a shared expert scaled by sigmoid(shared_expert_gate · x), dense layers chosen by
mlp_only_layers / decoder_sparse_step."""
from .spec import Architecture, ConfigReader, ModelConfig, read_common, sparse_layers


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("use_sliding_window", False):
        raise cfg.error("use_sliding_window", "= true is not supported yet")
    layers = cfg.int("num_hidden_layers", max=4096)
    experts = cfg.int("num_experts", 0, min=0, max=4096)
    moe_layers = sparse_layers(cfg, layers, experts)
    return read_common(
        cfg, "qwen2_moe",
        intermediate_size=cfg.int("intermediate_size", max=1 << 20) if len(moe_layers) < layers else 0,
        num_experts=experts,
        top_k=cfg.int("num_experts_per_tok", max=4096) if experts else 0,
        expert_intermediate_size=cfg.int("moe_intermediate_size", max=1 << 20) if experts else 0,
        shared_expert_intermediate_size=cfg.int("shared_expert_intermediate_size", max=1 << 20) if experts else 0,
        shared_expert_gated=True,
        moe_layers=moe_layers,
        router_renormalize=cfg.bool("norm_topk_prob", False),
        attention_bias=cfg.bool("qkv_bias", True),
    )


ARCHITECTURE = Architecture(model_type="qwen2_moe", read_config=read_config)
