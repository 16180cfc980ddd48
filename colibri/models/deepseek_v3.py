"""DeepSeek-V3 (V3, R1, Moonlight; Kimi-K2 through GGUF): DeepSeek-V2's latent KV attention,
shared experts and dense leading layers, with V3's router: sigmoid scores, the
e_score_correction_bias added for the choice only, n_group groups scored by their best two
(topk_group kept), gates the unbiased scores, renormalised with norm_topk_prob (sum + 1e-20),
times routed_scaling_factor. RoPE on adjacent pairs (rope_interleave, transformers' default)
or on halves."""
from __future__ import annotations

from .deepseek_v2 import DEEPSEEK2_KEYS, DEEPSEEK2_NAMES, DEEPSEEK_NAMES, fill_from_gguf, latent_fields
from .spec import (Architecture, ConfigReader, GGUFMapping, ModelConfig, deepseek_moe_fields, read_common,
                   sigmoid_group_routing)


def read_config(cfg: ConfigReader) -> ModelConfig:
    cfg.require_value("scoring_func", ("sigmoid",), "sigmoid")
    cfg.require_value("topk_method", ("noaux_tc",), "noaux_tc")
    # absent fields take the defaults of transformers' DeepseekV3Config
    moe = deepseek_moe_fields(cfg, first_dense=3, shared=1, scale=2.5)
    if "n_group" not in cfg.raw:   # transformers' V3 router always groups (n_group 8, topk_group 4)
        raise cfg.error("n_group", "is missing (1: no expert groups)")
    return read_common(cfg, "deepseek_v3", **latent_fields(cfg), **moe,
                       **sigmoid_group_routing(cfg, moe, renormalize=cfg.bool("norm_topk_prob", True)),
                       rope_interleaved=cfg.bool("rope_interleave", True))


ARCHITECTURE = Architecture(
    model_type="deepseek_v3", read_config=read_config, names=DEEPSEEK_NAMES,
    # llama.cpp writes V3 (and Kimi-K2, Moonlight) as deepseek2 with sigmoid gating (2)
    gguf=GGUFMapping("deepseek2", keys=DEEPSEEK2_KEYS, names=DEEPSEEK2_NAMES, rope_interleaved=True,
                     when={"expert_count": True, "expert_gating_func": (2,)},
                     adjust=fill_from_gguf),
)
