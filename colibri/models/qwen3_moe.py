"""Qwen3-MoE: per-head q/k RMSNorm, explicit head_dim, softmax top-k renormalised
with norm_topk_prob, dense layers chosen by mlp_only_layers / decoder_sparse_step."""
from .spec import QK_NORM_PER_HEAD, Architecture, ConfigReader, ModelConfig, read_common, sparse_layers


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("use_sliding_window", False):
        raise cfg.error("use_sliding_window", "= true is not supported yet")
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    layers = cfg.int("num_hidden_layers", max=4096)
    # transformers 5 saves "num_local_experts"; released checkpoints say "num_experts"
    experts_key = "num_experts" if "num_experts" in cfg.raw else "num_local_experts"
    experts = cfg.int(experts_key, 0, min=0, max=4096)
    moe_layers = sparse_layers(cfg, layers, experts)
    return read_common(
        cfg, "qwen3_moe",
        intermediate_size=cfg.int("intermediate_size", max=1 << 20) if len(moe_layers) < layers else 0,
        num_experts=experts,
        top_k=cfg.int("num_experts_per_tok", max=4096) if experts else 0,
        expert_intermediate_size=cfg.int("moe_intermediate_size", max=1 << 20) if experts else 0,
        shared_expert_intermediate_size=0,
        moe_layers=moe_layers,
        router_renormalize=cfg.bool("norm_topk_prob", False),
        qk_norm=QK_NORM_PER_HEAD,
    )


ARCHITECTURE = Architecture(model_type="qwen3_moe", read_config=read_config)
