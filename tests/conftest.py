"""Shared fixtures: tiny random Hugging Face models built with transformers' own classes."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

# Tiny random checkpoints, one family per architecture: odd sizes, GQA ratios,
# top-k from 1 to 4, tied and untied embeddings, shared experts on and off,
# dense layers mixed into MoE stacks. initializer_range is raised so logits are
# well separated (argmax comparisons in bf16 are then meaningful).
COMMON = dict(initializer_range=0.08, max_position_embeddings=256, bos_token_id=None, pad_token_id=None)

TINY_MODELS = {
    "mixtral-a": ("mixtral", dict(vocab_size=97, hidden_size=48, intermediate_size=40, num_hidden_layers=2,
                                  num_attention_heads=6, num_key_value_heads=2, num_local_experts=5,
                                  num_experts_per_tok=2, eos_token_id=96)),
    "mixtral-b": ("mixtral", dict(vocab_size=131, hidden_size=36, intermediate_size=52, num_hidden_layers=3,
                                  num_attention_heads=3, num_key_value_heads=3, num_local_experts=4,
                                  num_experts_per_tok=1, tie_word_embeddings=True, eos_token_id=130,
                                  rope_theta=500.0, sliding_window=7)),
    "mixtral-c": ("mixtral", dict(vocab_size=150, hidden_size=64, intermediate_size=33, num_hidden_layers=2,
                                  num_attention_heads=8, num_key_value_heads=4, num_local_experts=9,
                                  num_experts_per_tok=4, eos_token_id=149)),
    "qwen2_moe-a": ("qwen2_moe", dict(vocab_size=113, hidden_size=40, intermediate_size=56, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, num_experts=6,
                                      num_experts_per_tok=3, moe_intermediate_size=20,
                                      shared_expert_intermediate_size=44, norm_topk_prob=False,
                                      mlp_only_layers=[1], eos_token_id=112)),
    "qwen2_moe-b": ("qwen2_moe", dict(vocab_size=89, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=1, num_experts=8,
                                      num_experts_per_tok=4, moe_intermediate_size=12,
                                      shared_expert_intermediate_size=28, norm_topk_prob=True,
                                      decoder_sparse_step=2, tie_word_embeddings=True, eos_token_id=88)),
    "qwen2_moe-c": ("qwen2_moe", dict(vocab_size=120, hidden_size=28, intermediate_size=36, num_hidden_layers=2,
                                      num_attention_heads=7, num_key_value_heads=7, num_experts=3,
                                      num_experts_per_tok=1, moe_intermediate_size=16,
                                      shared_expert_intermediate_size=20, norm_topk_prob=True,
                                      eos_token_id=119)),
    "qwen3_moe-a": ("qwen3_moe", dict(vocab_size=101, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=10,
                                      num_experts=7, num_experts_per_tok=2, moe_intermediate_size=22,
                                      norm_topk_prob=True, eos_token_id=100)),
    "qwen3_moe-b": ("qwen3_moe", dict(vocab_size=77, hidden_size=30, intermediate_size=34, num_hidden_layers=3,
                                      num_attention_heads=5, num_key_value_heads=5, head_dim=6,
                                      num_experts=4, num_experts_per_tok=4, moe_intermediate_size=18,
                                      norm_topk_prob=False, mlp_only_layers=[0], tie_word_embeddings=True,
                                      eos_token_id=76,
                                      rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                           original_max_position_embeddings=64))),
    "qwen3_moe-c": ("qwen3_moe", dict(vocab_size=140, hidden_size=40, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, head_dim=12,
                                      num_experts=10, num_experts_per_tok=3, moe_intermediate_size=14,
                                      norm_topk_prob=True, decoder_sparse_step=2, eos_token_id=139)),
    "olmoe-a": ("olmoe", dict(vocab_size=109, hidden_size=56, intermediate_size=26, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=4, num_experts=6, num_experts_per_tok=2,
                              eos_token_id=108)),
    "olmoe-b": ("olmoe", dict(vocab_size=83, hidden_size=36, intermediate_size=20, num_hidden_layers=3,
                              num_attention_heads=6, num_key_value_heads=3, num_experts=5, num_experts_per_tok=3,
                              norm_topk_prob=True, clip_qkv=0.5, tie_word_embeddings=True, eos_token_id=82)),
    "olmoe-c": ("olmoe", dict(vocab_size=95, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                              num_attention_heads=8, num_key_value_heads=2, num_experts=8, num_experts_per_tok=4,
                              eos_token_id=94)),
    # V3 routing in 4 groups of 3 (2 kept), scaled; qk-norm, q/k/v biases, half the head rotated, one
    # leading dense layer, one shared expert
    "glm4_moe-a": ("glm4_moe", dict(vocab_size=103, hidden_size=40, intermediate_size=52, moe_intermediate_size=18,
                                    num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
                                    n_routed_experts=12, num_experts_per_tok=3, n_group=4, topk_group=2,
                                    first_k_dense_replace=1, n_shared_experts=1, norm_topk_prob=True,
                                    routed_scaling_factor=2.5, use_qk_norm=True, attention_bias=True,
                                    eos_token_id=102)),
    # no groups, not renormalised, no leading dense layer, two shared experts, 3/4 of the head rotated, tied
    "glm4_moe-b": ("glm4_moe", dict(vocab_size=90, hidden_size=64, intermediate_size=44, moe_intermediate_size=32,
                                    num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                                    n_routed_experts=6, num_experts_per_tok=2, n_group=1, topk_group=1,
                                    first_k_dense_replace=0, n_shared_experts=2, norm_topk_prob=False,
                                    tie_word_embeddings=True, eos_token_id=89,
                                    rope_parameters=dict(rope_type="default", rope_theta=5000.0,
                                                         partial_rotary_factor=0.75))),
    # the four multipliers away from 1; top-k softmax routing
    "granitemoe-a": ("granitemoe", dict(vocab_size=97, hidden_size=48, intermediate_size=20, num_hidden_layers=2,
                                        num_attention_heads=6, num_key_value_heads=2, num_local_experts=6,
                                        num_experts_per_tok=2, embedding_multiplier=3.0, attention_multiplier=0.2,
                                        residual_multiplier=0.5, logits_scaling=2.5, eos_token_id=96)),
    "granitemoe-b": ("granitemoe", dict(vocab_size=80, hidden_size=64, intermediate_size=32, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=4, num_local_experts=4,
                                        num_experts_per_tok=1, embedding_multiplier=12.0,
                                        attention_multiplier=0.015625, residual_multiplier=0.22, logits_scaling=8.0,
                                        tie_word_embeddings=True, eos_token_id=79)),
    "granitemoeshared-a": ("granitemoeshared", dict(vocab_size=88, hidden_size=40, intermediate_size=18,
                                                    shared_intermediate_size=26, num_hidden_layers=2,
                                                    num_attention_heads=5, num_key_value_heads=1,
                                                    num_local_experts=5, num_experts_per_tok=3,
                                                    embedding_multiplier=2.0, attention_multiplier=0.3,
                                                    residual_multiplier=0.7, logits_scaling=1.5, eos_token_id=87)),
    # softmax + selection bias, renormalised with a floor; a leading dense layer, a shared expert, tied
    "ernie4_5_moe-a": ("ernie4_5_moe", dict(vocab_size=99, hidden_size=48, intermediate_size=32,
                                            moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=6,
                                            num_key_value_heads=2, moe_num_experts=6, moe_k=2,
                                            moe_num_shared_experts=1, moe_layer_start_index=1,
                                            moe_layer_interval=1, eos_token_id=98)),
    # MoE only where (l + 1) % 2 == 0 and l <= 2 (layer 1 of 4); no shared expert; untied
    "ernie4_5_moe-b": ("ernie4_5_moe", dict(vocab_size=86, hidden_size=64, intermediate_size=36,
                                            moe_intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
                                            num_key_value_heads=4, moe_num_experts=8, moe_k=3,
                                            moe_num_shared_experts=0, moe_layer_start_index=0,
                                            moe_layer_end_index=2, moe_layer_interval=2, tie_word_embeddings=False,
                                            eos_token_id=85)),
    # V3 routing in 4 groups of 2 (2 kept), renormalised, scaled; a leading dense layer; a shared expert
    "dots1-a": ("dots1", dict(vocab_size=93, hidden_size=40, intermediate_size=48, moe_intermediate_size=14,
                              num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                              num_experts_per_tok=3, n_group=4, topk_group=2, first_k_dense_replace=1,
                              n_shared_experts=1, norm_topk_prob=True, routed_scaling_factor=2.0,
                              eos_token_id=92)),
    # no groups, not renormalised, two shared experts, GQA, layer 0 full attention and layer 1 a
    # sliding window of 6
    "dots1-b": ("dots1", dict(vocab_size=75, hidden_size=64, intermediate_size=40, moe_intermediate_size=32,
                              num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, n_routed_experts=5,
                              num_experts_per_tok=2, first_k_dense_replace=0, n_shared_experts=2,
                              norm_topk_prob=False, sliding_window=6, max_window_layers=1, tie_word_embeddings=True,
                              eos_token_id=74)),
    # sigmoid + selection bias, q/k norm over all heads, half the head rotated
    "minimax_m2-a": ("minimax_m2", dict(vocab_size=101, hidden_size=48, intermediate_size=20, num_hidden_layers=2,
                                        num_attention_heads=6, num_key_value_heads=2, head_dim=8,
                                        num_local_experts=6, num_experts_per_tok=2, bos_token_id=None,
                                        eos_token_id=100,
                                        rope_parameters=dict(rope_type="default", rope_theta=5000000.0,
                                                             partial_rotary_factor=0.5))),
    "minimax_m2-b": ("minimax_m2", dict(vocab_size=84, hidden_size=64, intermediate_size=32, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                        num_local_experts=4, num_experts_per_tok=3, bos_token_id=None,
                                        eos_token_id=83, tie_word_embeddings=True)),
    "llama-a": ("llama", dict(vocab_size=91, hidden_size=40, intermediate_size=72, num_hidden_layers=2,
                              num_attention_heads=5, num_key_value_heads=1, eos_token_id=90,
                              rope_parameters=dict(rope_type="llama3", rope_theta=50000.0, factor=8.0,
                                                   low_freq_factor=1.0, high_freq_factor=4.0,
                                                   original_max_position_embeddings=32))),
    "llama-b": ("llama", dict(vocab_size=67, hidden_size=24, intermediate_size=30, num_hidden_layers=3,
                              num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                              eos_token_id=66,
                              rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0))),
    "llama-c": ("llama", dict(vocab_size=128, hidden_size=48, intermediate_size=100, num_hidden_layers=2,
                              num_attention_heads=6, num_key_value_heads=6, eos_token_id=127)),
    # gpt-oss: eager attention (transformers' reference path with sinks); windows shorter than the
    # cache tests' sequences; the first with gpt-oss's own YaRN (factor 32 over 4096 positions)
    "gpt_oss-a": ("gpt_oss", dict(vocab_size=103, hidden_size=48, intermediate_size=40, num_hidden_layers=3,
                                  num_attention_heads=6, num_key_value_heads=2, head_dim=16, num_local_experts=5,
                                  num_experts_per_tok=2, sliding_window=5, eos_token_id=102,
                                  attn_implementation="eager")),
    "gpt_oss-b": ("gpt_oss", dict(vocab_size=89, hidden_size=36, intermediate_size=28, num_hidden_layers=4,
                                  num_attention_heads=4, num_key_value_heads=4, head_dim=10, num_local_experts=7,
                                  num_experts_per_tok=3, sliding_window=7, tie_word_embeddings=True,
                                  eos_token_id=88, swiglu_limit=1.5, swiglu_alpha=2.5, attn_implementation="eager",
                                  layer_types=["full_attention", "sliding_attention", "sliding_attention",
                                               "full_attention"],
                                  rope_parameters=dict(rope_type="yarn", rope_theta=50000.0, factor=4.0,
                                                       beta_fast=32.0, beta_slow=1.0, truncate=False,
                                                       original_max_position_embeddings=64))),
    # latent attention: q straight from x or through a q LoRA, YaRN with mscale_all_dim folded into
    # the softmax scale (and mscale != mscale_all_dim scaling cos/sin), dense leading layers
    "deepseek_v2-a": ("deepseek_v2", dict(vocab_size=103, hidden_size=40, intermediate_size=56,
                                          moe_intermediate_size=18, num_hidden_layers=3, num_attention_heads=5,
                                          kv_lora_rank=24, q_lora_rank=None, qk_nope_head_dim=10,
                                          qk_rope_head_dim=6, v_head_dim=12, n_routed_experts=6,
                                          n_shared_experts=2, num_experts_per_tok=2, first_k_dense_replace=1,
                                          eos_token_id=102,
                                          rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                               mscale=1.0, mscale_all_dim=0.707, beta_fast=32,
                                                               beta_slow=1, original_max_position_embeddings=64))),
    "deepseek_v2-b": ("deepseek_v2", dict(vocab_size=79, hidden_size=36, intermediate_size=30,
                                          moe_intermediate_size=14, num_hidden_layers=2, num_attention_heads=3,
                                          kv_lora_rank=20, q_lora_rank=28, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                          v_head_dim=10, n_routed_experts=8, n_shared_experts=1,
                                          num_experts_per_tok=3, first_k_dense_replace=0, tie_word_embeddings=True,
                                          eos_token_id=78,
                                          rope_parameters=dict(rope_type="yarn", rope_theta=500.0, factor=8.0,
                                                               mscale=1.0, mscale_all_dim=1.0,
                                                               original_max_position_embeddings=32))),
    "deepseek_v2-c": ("deepseek_v2", dict(vocab_size=91, hidden_size=32, intermediate_size=40,
                                          moe_intermediate_size=12, num_hidden_layers=2, num_attention_heads=4,
                                          kv_lora_rank=16, q_lora_rank=20, qk_nope_head_dim=6, qk_rope_head_dim=8,
                                          v_head_dim=7, n_routed_experts=12, n_shared_experts=2,
                                          num_experts_per_tok=4, first_k_dense_replace=0, n_group=4, topk_group=2,
                                          topk_method="group_limited_greedy", routed_scaling_factor=1.75,
                                          eos_token_id=90)),
    # V3 routing: sigmoid + selection bias (randomised below), groups scored by their best two,
    # renormalised or not, scaled; RoPE on adjacent pairs or on halves
    "deepseek_v3-a": ("deepseek_v3", dict(vocab_size=97, hidden_size=40, intermediate_size=48,
                                          moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                                          num_key_value_heads=4, kv_lora_rank=24, q_lora_rank=20, qk_nope_head_dim=8, qk_rope_head_dim=6,
                                          v_head_dim=10, n_routed_experts=8, n_shared_experts=1,
                                          num_experts_per_tok=3, first_k_dense_replace=1, n_group=4, topk_group=2,
                                          norm_topk_prob=True, routed_scaling_factor=2.5, eos_token_id=96,
                                          rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                               mscale=0.707, mscale_all_dim=0.707,
                                                               original_max_position_embeddings=64))),
    "deepseek_v3-b": ("deepseek_v3", dict(vocab_size=85, hidden_size=36, intermediate_size=30,
                                          moe_intermediate_size=14, num_hidden_layers=2, num_attention_heads=3,
                                          num_key_value_heads=3, kv_lora_rank=18, q_lora_rank=None, qk_nope_head_dim=10,
                                          qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=6, n_shared_experts=2,
                                          num_experts_per_tok=2, first_k_dense_replace=0, n_group=1, topk_group=1,
                                          norm_topk_prob=False, routed_scaling_factor=1.5, rope_interleave=False,
                                          tie_word_embeddings=True, eos_token_id=84)),
}

# Models whose every matrix is whole 256-element blocks (K types, IQ4_XS), built on request only
# (not in the `tiny` / `tiny_moe` parametrisations): routed experts, GQA, tied nothing.
WIDE_MODELS = {
    "qwen3_moe-wide": ("qwen3_moe", dict(vocab_size=128, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=4,
                                         num_experts_per_tok=2, moe_intermediate_size=256, norm_topk_prob=True,
                                         eos_token_id=127)),
    # 8 experts and 9 layers: what llama.cpp's K-quant mixes single out (tests/test_convert_kquant.py)
    "mixtral-wide8": ("mixtral", dict(vocab_size=128, hidden_size=256, intermediate_size=512, num_hidden_layers=9,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_local_experts=8,
                                      num_experts_per_tok=2, eos_token_id=127)),
}

_CLASSES = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM"),
    "granitemoeshared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM"),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM"),
    "dots1": ("Dots1Config", "Dots1ForCausalLM"),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM"),
}


@dataclass
class TinyModel:
    name: str
    model_type: str
    path: Path             # f32 checkpoint directory
    path_bf16: Path        # the same weights rounded to bf16
    reference: object      # transformers model, float32, eval mode
    reference_bf16: object # transformers model, bfloat16


def _eager_experts(model):
    """Use transformers' plain per-expert loop (its grouped_mm path rejects odd bf16 sizes)."""
    if model_type_has_experts(model):
        model.set_experts_implementation("eager")
    return model


def model_type_has_experts(model) -> bool:
    return model.config.model_type != "llama"


def build_tiny_model(name: str, root: Path) -> TinyModel:
    """Create, save (f32 and bf16) and return one of TINY_MODELS with its transformers reference."""
    import torch
    import transformers

    model_type, kwargs = {**TINY_MODELS, **WIDE_MODELS}[name]
    config_cls, model_cls = (getattr(transformers, n) for n in _CLASSES[model_type])
    config = config_cls(**{**COMMON, **kwargs})
    torch.manual_seed(sum(map(ord, name)))
    model = _eager_experts(model_cls(config).eval())
    # Norm weights default to ones and biases (selection biases included) to zeros; randomise them so
    # a mis-applied norm or bias cannot pass. Attention sinks get logits as large as the scores they
    # compete with.
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("norm.weight"):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif pname.endswith("bias") and not param.any():
                param.copy_(0.2 * torch.randn_like(param))
            elif pname.endswith("sinks"):
                param.copy_(torch.randn_like(param))
        for pname, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if pname.endswith("e_score_correction_bias"):
                tensor.copy_(0.1 * torch.randn_like(tensor))
    path = root / name
    model.save_pretrained(path)
    model_bf16 = _eager_experts(model_cls(config).eval())
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)
    path_bf16 = root / f"{name}-bf16"
    model_bf16.save_pretrained(path_bf16)
    return TinyModel(name, model_type, path, path_bf16, model, model_bf16)


_cache: dict[str, TinyModel] = {}


@pytest.fixture(scope="session")
def tiny_model_factory(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_models")

    def get(name: str) -> TinyModel:
        if name not in _cache:
            _cache[name] = build_tiny_model(name, root)
        return _cache[name]

    return get


@pytest.fixture(params=sorted(TINY_MODELS), scope="session")
def tiny(request, tiny_model_factory) -> TinyModel:
    return tiny_model_factory(request.param)


@pytest.fixture(params=sorted(n for n, (t, _) in TINY_MODELS.items() if t != "llama"), scope="session")
def tiny_moe(request, tiny_model_factory) -> TinyModel:
    return tiny_model_factory(request.param)


def token_ids(vocab_size: int, n: int, seed: int) -> list[int]:
    import numpy as np

    return np.random.default_rng(seed).integers(0, vocab_size, size=n).tolist()


# ---- C builds (plain CMake), shared by the tests that run C programs or the sanitized library ----

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _build(build_dir: Path, sanitize: bool) -> Path:
    subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
         f"-DCOLIBRI_SANITIZE={'ON' if sanitize else 'OFF'}"],
        check=True, capture_output=True, text=True,
    )
    done = subprocess.run(["cmake", "--build", str(build_dir), "-j2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return build_dir


def _leak_detection_works(tmp: Path) -> bool:
    """Whether LeakSanitizer can run here: a leaking probe must be reported."""
    probe = tmp / "leak.c"
    probe.write_text("#include <stdlib.h>\nint main(void){void*p=malloc(7);p=0;return p!=0;}\n")
    exe = tmp / "leak"
    built = subprocess.run([CC, "-fsanitize=address", "-o", str(exe), str(probe)], capture_output=True)
    if built.returncode != 0:
        return False
    ran = subprocess.run([str(exe)], capture_output=True, text=True,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
    return "LeakSanitizer: detected memory leaks" in ran.stderr


@pytest.fixture(scope="session")
def c_builds(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """The plain and the ASan+UBSan CMake builds, once per session: name → (build dir,
    environment to run its programs in)."""
    if shutil.which("cmake") is None or CC is None:
        pytest.skip(f"needs cmake and a C compiler (cmake: {shutil.which('cmake')}, cc: {CC})")
    result = {}
    for name in ("normal", "sanitize"):
        tmp = tmp_path_factory.mktemp(f"build-{name}")
        env = dict(os.environ)
        if name == "sanitize":
            leaks = _leak_detection_works(tmp)
            print(f"LeakSanitizer {'works' if leaks else 'does not work here: detect_leaks=0'}")
            env["ASAN_OPTIONS"] = f"detect_leaks={int(leaks)}:abort_on_error=1"
            env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        result[name] = (_build(tmp, name == "sanitize"), env)
    return result


def pytest_configure(config):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
