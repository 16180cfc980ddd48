"""Granite MoE with a shared expert (granitemoeshared): granitemoe plus an ungated shared MLP of
shared_intermediate_size (its gate and up one tensor, shared_mlp.input_linear [2S, D]), added
after the routed experts. llama.cpp stores it under granitemoe, with
expert_shared_feed_forward_length set."""
from .granitemoe import GGUF_KEYS, NAMES, read_granite
from .spec import Architecture, ConfigReader, GGUFMapping, ModelConfig


def read_config(cfg: ConfigReader) -> ModelConfig:
    return read_granite(cfg, "granitemoeshared", cfg.int("shared_intermediate_size", 0, min=0, max=1 << 20))


ARCHITECTURE = Architecture(
    model_type="granitemoeshared", read_config=read_config, names=NAMES,
    gguf=GGUFMapping("granitemoe", keys=GGUF_KEYS, rope_interleaved=True,
                     when={"expert_count": True, "expert_shared_feed_forward_length": True}),
)
