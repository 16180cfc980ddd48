"""dots.llm1 (dots1): DeepSeek-V3 routing (sigmoid scores, e_score_correction_bias for the choice
only, n_group / topk_group, renormalised with +1e-20 iff norm_topk_prob, routed_scaling_factor),
per-head q/k RMSNorm, an ungated shared expert of n_shared_experts x moe_intermediate_size, dense
layers before first_k_dense_replace; sliding-window attention in the layers layer_types names (the
released checkpoints use full attention in every layer)."""
from .spec import (LLAMA_NAMES, QK_NORM_PER_HEAD, Architecture, ConfigReader, GGUFMapping, ModelConfig,
                   deepseek_moe_fields, read_common, sigmoid_group_routing)


def _layer_windows(cfg: ConfigReader, layers: int) -> tuple[int, ...]:
    """Each layer's sliding window (0: full attention) from layer_types, else, as transformers
    decides, sliding_window from layer max_window_layers on; () when no layer slides."""
    window = cfg.int("sliding_window", 0, min=0, max=1 << 24)
    types = cfg.raw.get("layer_types")
    if types is None:
        first = cfg.int("max_window_layers", layers, min=0, max=1 << 24)
        types = ["sliding_attention" if window and l >= first else "full_attention" for l in range(layers)]
    if not isinstance(types, list) or len(types) != layers or \
            any(t not in ("full_attention", "sliding_attention") for t in types):
        raise cfg.error("layer_types", f"must list 'full_attention' or 'sliding_attention' for each of the "
                        f"{layers} layers, got {types!r}")
    if "sliding_attention" not in types:
        return ()
    if window == 0:
        raise cfg.error("sliding_window", "is missing or 0, but layer_types has sliding_attention layers")
    return tuple(window if t == "sliding_attention" else 0 for t in types)


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("attention_bias", False):
        raise cfg.error("attention_bias", "= true is not supported yet (o_proj bias)")
    # absent fields take the defaults of transformers' Dots1Config
    moe = deepseek_moe_fields(cfg, first_dense=0, shared=0, scale=1.0)
    return read_common(
        cfg, "dots1", **moe,
        **sigmoid_group_routing(cfg, moe, renormalize=cfg.bool("norm_topk_prob", False)),
        qk_norm=QK_NORM_PER_HEAD,
        layer_windows=_layer_windows(cfg, cfg.int("num_hidden_layers", max=4096)),
    )


ARCHITECTURE = Architecture(
    model_type="dots1", read_config=read_config,
    names={
        **LLAMA_NAMES,
        "SHARED_GATE": "model.layers.{l}.mlp.shared_experts.gate_proj.weight",
        "SHARED_UP": "model.layers.{l}.mlp.shared_experts.up_proj.weight",
        "SHARED_DOWN": "model.layers.{l}.mlp.shared_experts.down_proj.weight",
    },
    gguf=GGUFMapping("dots1", keys={"expert_count": "n_routed_experts", "expert_used_count": "num_experts_per_tok",
                                    "expert_feed_forward_length": "moe_intermediate_size",
                                    "feed_forward_length": "intermediate_size",
                                    "expert_shared_count": "n_shared_experts",
                                    "leading_dense_block_count": "first_k_dense_replace",
                                    "expert_weights_scale": "routed_scaling_factor",
                                    "expert_group_count": "n_group", "expert_group_used_count": "topk_group"}),
)
