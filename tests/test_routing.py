"""The C router (colibri_route) against transformers' own router modules, family by family.

Each router module gets an identity weight (hidden_size = number of experts), so the logits it
computes are its input, plus its bias if it has one; those logits (its own first output) go to
colibri_route with the routing rule Colibri uses for that family: the family's config mapping
(read_config → hparams) where Colibri supports the family, else the rule written out here.
Random logits at three scales (near-ties, ordinary, saturated) and random selection biases.

Tolerances: identical experts (as sets where transformers' top-k is unsorted, else in order);
gates within 1e-6 absolute (the scores are at most 1 before scaling; softmax sums differ in
order only).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import transformers

from colibri import _native
from colibri.models import ConfigReader, architecture
from colibri.native_model import hparams_for

TOKENS = 96


@dataclass
class Case:
    config_class: str
    module: str               # transformers.models.<module>.modeling_<module>
    router_class: str
    kwargs: dict
    unsorted: bool = False    # transformers' top-k runs with sorted=False: compare experts as sets
    rule: dict | None = None  # routing fields for a family Colibri has no model file for (yet)
    bias_argument: bool = False  # the selection bias is passed to forward (MiniMax-M2 keeps it in the MoE block)


CASES = {
    "mixtral": Case("MixtralConfig", "mixtral", "MixtralTopKRouter",
                    dict(num_local_experts=8, num_experts_per_tok=2)),
    "qwen2_moe": Case("Qwen2MoeConfig", "qwen2_moe", "Qwen2MoeTopKRouter",
                      dict(num_experts=12, num_experts_per_tok=3, norm_topk_prob=False)),
    "qwen3_moe": Case("Qwen3MoeConfig", "qwen3_moe", "Qwen3MoeTopKRouter",
                      dict(num_experts=10, num_experts_per_tok=4, norm_topk_prob=True)),
    "olmoe": Case("OlmoeConfig", "olmoe", "OlmoeTopKRouter", dict(num_experts=9, num_experts_per_tok=3)),
    "glm4_moe": Case("Glm4MoeConfig", "glm4_moe", "Glm4MoeTopkRouter",
                     dict(n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2, norm_topk_prob=True,
                          routed_scaling_factor=2.5),
                     unsorted=True),
    "ernie4_5_moe": Case("Ernie4_5_MoeConfig", "ernie4_5_moe", "Ernie4_5_MoeTopKRouter",
                         dict(moe_num_experts=12, moe_k=4)),
    "dots1": Case("Dots1Config", "dots1", "Dots1TopkRouter",
                  dict(n_routed_experts=16, num_experts_per_tok=3, n_group=8, topk_group=3, norm_topk_prob=True,
                       routed_scaling_factor=2.5, moe_intermediate_size=8, n_shared_experts=1),
                  unsorted=True),
    "minimax_m2": Case("MiniMaxM2Config", "minimax_m2", "MiniMaxM2TopKRouter",
                       dict(num_local_experts=10, num_experts_per_tok=3), unsorted=True, bias_argument=True),
    "granitemoe": Case("GraniteMoeConfig", "granitemoe", "GraniteMoeTopKRouter",
                       dict(num_local_experts=10, num_experts_per_tok=3)),
    # DeepSeek-V2: softmax, group-limited greedy (a group scored by its best), scaled, not renormalised
    "deepseek_v2": Case("DeepseekV2Config", "deepseek_v2", "DeepseekV2TopkRouter",
                        dict(n_routed_experts=16, num_experts_per_tok=3, n_group=4, topk_group=2,
                             topk_method="group_limited_greedy", routed_scaling_factor=2.5),
                        unsorted=True),
    # DeepSeek-V3: sigmoid + selection bias, groups scored by their best two, renormalised + eps, scaled
    "deepseek_v3": Case("DeepseekV3Config", "deepseek_v3", "DeepseekV3TopkRouter",
                        dict(n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
                             norm_topk_prob=True, routed_scaling_factor=2.5),
                        unsorted=True),
    # gpt-oss: router bias, top-k on the logits, softmax over the chosen
    "gpt_oss": Case("GptOssConfig", "gpt_oss", "GptOssTopKRouter", dict(num_local_experts=8, num_experts_per_tok=4)),
}


def _router(case: Case, hidden: int):
    config = getattr(transformers, case.config_class)(hidden_size=hidden, num_attention_heads=1,
                                                      num_key_value_heads=1, **case.kwargs)
    module = __import__(f"transformers.models.{case.module}.modeling_{case.module}", fromlist=[case.router_class])
    router = getattr(module, case.router_class)(config).eval()
    return config, router


def _hparams(case: Case, config, num_experts: int, top_k: int):
    """The C hyperparameters Colibri routes this family with (and what they point into)."""
    if case.rule is None:
        raw = {**config.to_dict(), "head_dim": 8}   # attention is not used here: any even head size
        model_config = architecture(config.model_type).read_config(ConfigReader(raw))
        return hparams_for(model_config)
    hp = _native.Hparams(n_expert=num_experts, n_expert_used=top_k, **case.rule)
    return hp, ()


def _colibri_route(hp, logits: np.ndarray, sel_bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    T, k = logits.shape[0], hp.n_expert_used
    experts = np.zeros((T, k), dtype=np.int32)
    gates = np.zeros((T, k), dtype=np.float32)
    status = _native.lib().colibri_route(ctypes.byref(hp), logits.ctypes.data, None if sel_bias is None else
                                         sel_bias.ctypes.data, T, experts.ctypes.data, gates.ctypes.data)
    assert status == 0, _native.last_error()
    return experts, gates


def _as_sets(experts: np.ndarray, gates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(experts, axis=1, kind="stable")
    return np.take_along_axis(experts, order, 1), np.take_along_axis(gates, order, 1)


@pytest.mark.parametrize("family", sorted(CASES))
@pytest.mark.parametrize("spread", [0.05, 1.0, 8.0])
def test_router_matches_transformers(family, spread):
    case = CASES[family]
    num_experts = next(v for k, v in case.kwargs.items() if k in ("num_local_experts", "num_experts",
                                                                 "n_routed_experts", "moe_num_experts"))
    config, router = _router(case, num_experts)
    generator = torch.Generator().manual_seed(hash((family, spread)) % 2**31)
    sel_bias = None
    with torch.no_grad():
        router.weight.copy_(torch.eye(num_experts))
        if getattr(router, "bias", None) is not None:
            router.bias.copy_(torch.randn(num_experts, generator=generator))
        held = [t for n, t in [*router.named_parameters(), *router.named_buffers()]
                if n.endswith("e_score_correction_bias")]
        bias = held[0] if held else torch.zeros(num_experts) if case.bias_argument else None
        if bias is not None:
            bias.copy_(0.3 * torch.randn(bias.shape, generator=generator))
            sel_bias = bias.numpy().astype(np.float32).reshape(num_experts)
        x = spread * torch.randn(TOKENS, num_experts, generator=generator)
        logits, weights, indices = router(x, bias) if case.bias_argument else router(x)
    hp, keepalive = _hparams(case, config, num_experts, config.num_experts_per_tok)
    got_experts, got_gates = _colibri_route(hp, np.ascontiguousarray(logits.float().numpy()), sel_bias)
    del keepalive
    want_experts, want_gates = indices.numpy().astype(np.int32), weights.float().numpy()
    if case.unsorted:
        got_experts, got_gates = _as_sets(got_experts, got_gates)
        want_experts, want_gates = _as_sets(want_experts, want_gates)
    np.testing.assert_array_equal(got_experts, want_experts)
    scale = case.kwargs.get("routed_scaling_factor", 1.0)   # gates are compared after it
    np.testing.assert_allclose(got_gates, want_gates, rtol=0, atol=1e-6 * scale)


def test_router_ties_go_to_the_lower_index():
    """Exactly equal scores: Colibri's order is by index, whatever the batch (transformers' order on ties is
    unspecified, so this is checked against the stated rule, not against it)."""
    hp = _native.Hparams(n_expert=6, n_expert_used=3, router_score=_native.ROUTER_SIGMOID, router_sel_bias=1)
    logits = np.array([[0.0, 1.0, 1.0, 1.0, 1.0, 0.0]] * 2, dtype=np.float32)
    bias = np.array([0, 0, 0.5, 0, 0.5, 0], dtype=np.float32)
    experts, gates = _colibri_route(hp, logits, bias)
    assert experts.tolist() == [[2, 4, 1]] * 2
    assert gates[0].tolist() == [gates[0, 0]] * 3
