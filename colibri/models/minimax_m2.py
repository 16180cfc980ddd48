"""MiniMax-M2 (minimax_m2): sigmoid scores, the choice made on them plus e_score_correction_bias,
gates the unbiased scores renormalised; q/k RMSNorm over all heads at once (weights [n_head *
head_dim] and [n_kv_head * head_dim]); partial RoPE (rotary_dim in released configs); every
layer routed, experts of intermediate_size."""
from ..errors import ModelError
from .spec import (LLAMA_NAMES, QK_NORM_WHOLE, ROUTER_SIGMOID, Architecture, ConfigReader, GGUFMapping,
                   ModelConfig, read_common)


def read_config(cfg: ConfigReader) -> ModelConfig:
    # fields of the released configs that transformers reads implicitly: only their one value works
    cfg.require_value("scoring_func", ("sigmoid",), "sigmoid")
    cfg.require_value("use_routing_bias", (True,), True)
    cfg.require_value("use_qk_norm", (True,), True)
    layers = cfg.int("num_hidden_layers", max=4096)
    return read_common(
        cfg, "minimax_m2",
        intermediate_size=0,
        num_experts=cfg.int("num_local_experts", max=4096),
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        shared_expert_intermediate_size=0,
        moe_layers=tuple(range(layers)),
        router_renormalize=True,
        router_score=ROUTER_SIGMOID,
        router_selection_bias=True,
        qk_norm=QK_NORM_WHOLE,
    )


def _from_gguf(meta: dict, prefix: str, tensors, config: dict) -> None:
    gating = meta.get(prefix + "expert_gating_func", 2)
    if gating != 2:
        raise ModelError(f"{prefix}expert_gating_func = {gating!r} is not sigmoid (2), the only rule of minimax-m2")


ARCHITECTURE = Architecture(
    model_type="minimax_m2", read_config=read_config,
    names={
        **LLAMA_NAMES,
        "ROUTER": "model.layers.{l}.block_sparse_moe.gate.weight",
        "ROUTER_SEL_BIAS": "model.layers.{l}.block_sparse_moe.e_score_correction_bias",
        "EXPERT_GATE": "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight",
        "EXPERT_DOWN": "model.layers.{l}.block_sparse_moe.experts.{e}.w2.weight",
        "EXPERT_UP": "model.layers.{l}.block_sparse_moe.experts.{e}.w3.weight",
    },
    gguf=GGUFMapping("minimax-m2", keys={"expert_count": "num_local_experts",
                                         "expert_used_count": "num_experts_per_tok",
                                         "expert_feed_forward_length": "intermediate_size"},
                     adjust=_from_gguf),
)
