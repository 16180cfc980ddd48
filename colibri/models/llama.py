"""Llama: the dense degenerate case (no experts), with Llama 3 rope scaling."""
from .spec import Architecture, ConfigReader, GGUFMapping, ModelConfig, read_common


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    if cfg.bool("mlp_bias", False):
        raise cfg.error("mlp_bias", "= true is not supported yet")
    cfg.require_value("pretraining_tp", (1,), 1)
    return read_common(
        cfg, "llama",
        intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        num_experts=0,
        top_k=0,
        expert_intermediate_size=0,
        shared_expert_intermediate_size=0,
        moe_layers=(),
    )


ARCHITECTURE = Architecture(
    model_type="llama", read_config=read_config,
    gguf=GGUFMapping("llama", keys={"feed_forward_length": "intermediate_size"}, rope_interleaved=True,
                     when={"expert_count": False}),
)
