"""OLMoE: q/k RMSNorm over the whole projection, optional clip_qkv, softmax top-k
without renormalisation (unless norm_topk_prob); experts use intermediate_size."""
from .spec import QK_NORM_WHOLE, Architecture, ConfigReader, GGUFMapping, ModelConfig, read_common


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    layers = cfg.int("num_hidden_layers", max=4096)
    return read_common(
        cfg, "olmoe",
        intermediate_size=0,
        num_experts=cfg.int("num_experts", max=4096),
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        shared_expert_intermediate_size=0,
        moe_layers=tuple(range(layers)),
        router_renormalize=cfg.bool("norm_topk_prob", False),
        qk_norm=QK_NORM_WHOLE,
        qkv_clip=cfg.float("clip_qkv", 0.0, min=0.0),
    )


ARCHITECTURE = Architecture(
    model_type="olmoe", read_config=read_config,
    gguf=GGUFMapping("olmoe", keys={"expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
                                    "feed_forward_length": "intermediate_size",
                                    "attention.clamp_kqv": "clip_qkv"},
                     fixed={"norm_topk_prob": False}),
)
