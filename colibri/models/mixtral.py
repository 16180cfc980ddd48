"""Mixtral: every layer routed; softmax over all experts, top-k, renormalised."""
from .spec import LLAMA_NAMES, Architecture, ConfigReader, GGUFMapping, ModelConfig, read_common


def read_config(cfg: ConfigReader) -> ModelConfig:
    layers = cfg.int("num_hidden_layers", max=4096)
    experts = cfg.int("num_local_experts", max=4096)
    return read_common(
        cfg, "mixtral",
        intermediate_size=0,
        num_experts=experts,
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        shared_expert_intermediate_size=0,
        moe_layers=tuple(range(layers)),
        router_renormalize=True,
        sliding_window=cfg.int("sliding_window", 0, min=0, max=1 << 24),
    )


ARCHITECTURE = Architecture(
    model_type="mixtral",
    read_config=read_config,
    names={
        **LLAMA_NAMES,
        "ROUTER": "model.layers.{l}.block_sparse_moe.gate.weight",
        "EXPERT_GATE": "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight",
        "EXPERT_DOWN": "model.layers.{l}.block_sparse_moe.experts.{e}.w2.weight",
        "EXPERT_UP": "model.layers.{l}.block_sparse_moe.experts.{e}.w3.weight",
    },
    # llama.cpp converts Mixtral as "llama" with stacked experts, q/k rows permuted
    gguf=GGUFMapping("llama", keys={"expert_count": "num_local_experts", "expert_used_count": "num_experts_per_tok",
                                    "feed_forward_length": "intermediate_size"},
                     rope_interleaved=True),
)
