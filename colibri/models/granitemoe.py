"""Granite MoE (granitemoe): top-k on the router logits, then softmax over the chosen; the
embedding, attention, residual and logits multipliers (embedding_multiplier,
attention_multiplier as the attention's softmax scale, residual_multiplier on every block's
output, logits divided by logits_scaling); every layer routed. The experts' gate and up
projections are one tensor [E, 2F, D] (input_linear), used in place as two row blocks.
granitemoeshared.py adds a shared expert."""
from .spec import (LLAMA_NAMES, ROUTER_TOPK_SOFTMAX, Architecture, ConfigReader, Fused, GGUFMapping, ModelConfig,
                   read_common)

NAMES = {
    **LLAMA_NAMES,
    "ROUTER": "model.layers.{l}.block_sparse_moe.router.layer.weight",
    "EXPERT_GATE": Fused("model.layers.{l}.block_sparse_moe.input_linear.weight", 0, 2),
    "EXPERT_UP": Fused("model.layers.{l}.block_sparse_moe.input_linear.weight", 1, 2),
    "EXPERT_DOWN": Fused("model.layers.{l}.block_sparse_moe.output_linear.weight"),
    "SHARED_GATE": Fused("model.layers.{l}.shared_mlp.input_linear.weight", 0, 2),
    "SHARED_UP": Fused("model.layers.{l}.shared_mlp.input_linear.weight", 1, 2),
    "SHARED_DOWN": "model.layers.{l}.shared_mlp.output_linear.weight",
}

# llama.cpp's keys for the multipliers, the expert width and the shared expert's
GGUF_KEYS = {"expert_count": "num_local_experts", "expert_used_count": "num_experts_per_tok",
             "feed_forward_length": "intermediate_size", "attention.scale": "attention_multiplier",
             "embedding_scale": "embedding_multiplier", "residual_scale": "residual_multiplier",
             "logit_scale": "logits_scaling", "expert_shared_feed_forward_length": "shared_intermediate_size"}


def read_granite(cfg: ConfigReader, model_type: str, shared: int) -> ModelConfig:
    """The Granite MoE fields; shared: the shared expert's width (0: none)."""
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    layers = cfg.int("num_hidden_layers", max=4096)

    def multiplier(key: str) -> float:
        value = cfg.float(key, 1.0)
        if value <= 0:
            raise cfg.error(key, f"= {value} must be > 0")
        return value

    return read_common(
        cfg, model_type,
        intermediate_size=0,
        num_experts=cfg.int("num_local_experts", max=4096),
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        shared_expert_intermediate_size=shared,
        moe_layers=tuple(range(layers)),
        router_score=ROUTER_TOPK_SOFTMAX,
        router_renormalize=False,
        attention_scale=multiplier("attention_multiplier"),
        embedding_scale=multiplier("embedding_multiplier"),
        residual_scale=multiplier("residual_multiplier"),
        logit_scale=multiplier("logits_scaling"),
    )


def read_config(cfg: ConfigReader) -> ModelConfig:
    return read_granite(cfg, "granitemoe", 0)


ARCHITECTURE = Architecture(
    model_type="granitemoe", read_config=read_config, names=NAMES,
    # llama.cpp stores Granite's q/k rows permuted for adjacent-pair RoPE, as llama's
    gguf=GGUFMapping("granitemoe", keys=GGUF_KEYS, rope_interleaved=True,
                     when={"expert_count": True, "expert_shared_feed_forward_length": False}),
)
