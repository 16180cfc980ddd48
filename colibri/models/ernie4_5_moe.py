"""ERNIE-4.5-MoE (ernie4_5_moe): softmax over all experts, the choice made on the probabilities
plus e_score_correction_bias (moe_statics), gates the unbiased probabilities renormalised by
max(sum, moe_norm_min); shared experts of moe_num_shared_experts x moe_intermediate_size; MoE
layers from moe_layer_start_index to moe_layer_end_index every moe_layer_interval (the others
dense); RoPE on adjacent pairs; embeddings tied unless the config says otherwise."""
from .spec import LLAMA_NAMES, Architecture, ConfigReader, GGUFMapping, ModelConfig, read_common


def _moe_layers(cfg: ConfigReader, layers: int) -> tuple[int, ...]:
    """(l + 1) % moe_layer_interval == 0 and start <= l <= end, as transformers decides (end -1: the last)."""
    start = cfg.int("moe_layer_start_index", 1, min=0, max=1 << 24)
    end = cfg.int("moe_layer_end_index", -1, min=-1, max=1 << 24)
    interval = cfg.int("moe_layer_interval", 1, max=1 << 24)
    end = layers - 1 if end == -1 else end
    return tuple(l for l in range(layers) if (l + 1) % interval == 0 and start <= l <= end)


def read_config(cfg: ConfigReader) -> ModelConfig:
    if cfg.bool("use_bias", False):
        raise cfg.error("use_bias", "= true is not supported yet (attention and MLP biases)")
    layers = cfg.int("num_hidden_layers", max=4096)
    experts = cfg.int("moe_num_experts", 0, min=0, max=4096)
    moe_layers = _moe_layers(cfg, layers) if experts else ()
    moe_ff = cfg.int("moe_intermediate_size", max=1 << 20) if moe_layers else 0
    return read_common(
        cfg, "ernie4_5_moe",
        intermediate_size=cfg.int("intermediate_size", max=1 << 20) if len(moe_layers) < layers else 0,
        num_experts=experts if moe_layers else 0,
        top_k=cfg.int("moe_k", max=4096) if moe_layers else 0,
        expert_intermediate_size=moe_ff,
        shared_expert_intermediate_size=moe_ff * cfg.int("moe_num_shared_experts", 0, min=0, max=256),
        moe_layers=moe_layers,
        router_renormalize=True,
        router_selection_bias=True,
        router_norm_min=cfg.float("moe_norm_min", 1e-12, min=0.0),
        rope_interleaved=True,
        tied_embeddings=cfg.bool("tie_word_embeddings", True),
    )


def _from_gguf(meta: dict, prefix: str, tensors, config: dict) -> None:
    """llama.cpp stores no end index for the MoE layers: the last layer with a router is it."""
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and 0 < layers <= 4096:
        routed = [l for l in range(layers) if f"blk.{l}.ffn_gate_inp.weight" in tensors]
        config["moe_layer_end_index"] = routed[-1] if routed else -1
        if not routed:
            config["moe_num_experts"] = 0


ARCHITECTURE = Architecture(
    model_type="ernie4_5_moe", read_config=read_config,
    names={
        **LLAMA_NAMES,
        "ROUTER_SEL_BIAS": "model.layers.{l}.mlp.moe_statics.e_score_correction_bias",   # [1, E]
        "SHARED_GATE": "model.layers.{l}.mlp.shared_experts.gate_proj.weight",
        "SHARED_UP": "model.layers.{l}.mlp.shared_experts.up_proj.weight",
        "SHARED_DOWN": "model.layers.{l}.mlp.shared_experts.down_proj.weight",
    },
    # llama.cpp keeps ERNIE's q/k rows as they are (its RoPE pairs adjacent dims, as ERNIE's does);
    # the MoE layers: leading_dense_block_count, then every interleave_moe_layer_step-th
    gguf=GGUFMapping("ernie4_5-moe", keys={"expert_count": "moe_num_experts", "expert_used_count": "moe_k",
                                           "expert_feed_forward_length": "moe_intermediate_size",
                                           "feed_forward_length": "intermediate_size",
                                           "expert_shared_count": "moe_num_shared_experts",
                                           "leading_dense_block_count": "moe_layer_start_index",
                                           "interleave_moe_layer_step": "moe_layer_interval"},
                     rope_interleaved=True, adjust=_from_gguf),
)
