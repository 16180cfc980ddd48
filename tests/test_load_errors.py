"""colibri.load refuses broken configs and checkpoints with one line naming the fault."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import colibri
from colibri import ModelError


@pytest.fixture()
def model_copy(tiny_model_factory, tmp_path):
    """A writable copy of a small Qwen2-MoE checkpoint (shared expert, bias, dense layer)."""
    src = tiny_model_factory("qwen2_moe-a").path
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


def _edit_config(path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    for key, value in changes.items():
        if value is _DELETE:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (path / "config.json").write_text(json.dumps(cfg))


_DELETE = object()

CONFIG_CASES = [
    ("unsupported-arch", dict(model_type="gpt_neox"), r"model_type 'gpt_neox' is not supported \(supported: mixtral"),
    ("no-model-type", dict(model_type=_DELETE), r"model_type None is not supported"),
    ("topk-gt-experts", dict(num_experts_per_tok=7), r"'num_experts_per_tok' = 7 must be between 1 and the number of experts \(6\)"),
    ("heads-not-dividing", dict(num_attention_heads=3), r"'num_key_value_heads' = 2 must divide num_attention_heads \(3\)"),
    ("hidden-not-divisible", dict(num_attention_heads=6, num_key_value_heads=6), r"'num_attention_heads' = 6 must divide hidden_size \(40\)"),
    ("negative-layers", dict(num_hidden_layers=-1), r"'num_hidden_layers' = -1 is out of range"),
    ("string-hidden", dict(hidden_size="40"), r"'hidden_size' must be an integer"),
    ("bool-vocab", dict(vocab_size=True), r"'vocab_size' must be an integer"),
    ("missing-hidden", dict(hidden_size=_DELETE), r"'hidden_size' is missing"),
    ("bad-activation", dict(hidden_act="gelu"), r"'hidden_act' = 'gelu' is not supported"),
    ("nan-eps", dict(rms_norm_eps=float("nan")), r"not valid JSON \(NaN is not JSON\)"),
    ("string-eps", dict(rms_norm_eps="1e-5"), r"'rms_norm_eps' must be a finite number"),
    ("eps-out-of-range", dict(rms_norm_eps=2.0), r"'rms_norm_eps' = 2.0 is out of range"),
    ("mlp-only-out-of-range", dict(mlp_only_layers=[9]), r"'mlp_only_layers' holds 9, out of range"),
    ("bad-rope-type", dict(rope_parameters={"rope_type": "longrope", "rope_theta": 1e4}), r"rope_type' = 'longrope' is not supported"),
    ("bad-rope-theta", dict(rope_parameters={"rope_type": "default", "rope_theta": -1}), r"rope_theta' must be a positive number"),
    ("sliding-window", dict(use_sliding_window=True), r"'use_sliding_window' = true is not supported"),
]


@pytest.mark.parametrize("changes,match", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_broken_config_is_refused(model_copy, changes, match):
    _edit_config(model_copy, **changes)
    with pytest.raises(ModelError, match=match) as info:
        colibri.load(model_copy)
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


# (tiny model, config changes, the error) for the later families' own fields
FAMILY_CASES = [
    ("group-not-dividing", "glm4_moe-a", dict(n_group=5), r"'n_group' = 5 must divide the number of experts \(12\)"),
    ("groups-too-few", "glm4_moe-a", dict(topk_group=1, num_experts_per_tok=4),
     r"'topk_group' = 1 groups of 3 experts cannot hold num_experts_per_tok=4"),
    ("partial-rope-odd", "glm4_moe-a", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                             "partial_rotary_factor": 0.25}),
     r"partial_rotary_factor' = 0.25 rotates 3 of head_dim=12 dims; that must be even"),
    ("granite-zero-logits-scaling", "granitemoe-a", dict(logits_scaling=0.0), r"'logits_scaling' = 0.0 must be > 0"),
    ("granite-o-bias", "granitemoe-a", dict(attention_bias=True), r"'attention_bias' = true is not supported"),
    ("ernie-bias", "ernie4_5_moe-a", dict(use_bias=True), r"'use_bias' = true is not supported"),
    ("dots1-layer-types", "dots1-a", dict(layer_types=["full_attention"]), r"'layer_types' must list"),
    ("dots1-window-missing", "dots1-a", dict(layer_types=["sliding_attention"] * 3, sliding_window=None),
     r"'sliding_window' is missing or 0, but layer_types has sliding_attention layers"),
    ("minimax-softmax", "minimax_m2-a", dict(scoring_func="softmax"), r"'scoring_func' = 'softmax' is not supported"),
]


@pytest.mark.parametrize("name,changes,match", [c[1:] for c in FAMILY_CASES], ids=[c[0] for c in FAMILY_CASES])
def test_broken_family_config_is_refused(tiny_model_factory, tmp_path, name, changes, match):
    path = tmp_path / "model"
    shutil.copytree(tiny_model_factory(name).path, path)
    _edit_config(path, **changes)
    with pytest.raises(ModelError, match=match) as info:
        colibri.load(path)
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


def _rewrite_tensors(path, edit):
    """Rewrite model.safetensors after applying edit(dict name -> array) (uses the safetensors package)."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path / "model.safetensors")
    edit(tensors)
    save_file(tensors, path / "model.safetensors")


def test_missing_tensor_is_named(model_copy):
    _rewrite_tensors(model_copy, lambda t: t.pop("model.layers.2.mlp.experts.5.up_proj.weight"))
    with pytest.raises(ModelError, match=r"model.layers.2.mlp.experts.5.up_proj.weight"):
        colibri.load(model_copy)


def test_wrong_shape_is_named(model_copy):
    def edit(t):
        t["model.layers.0.self_attn.q_proj.weight"] = t["model.layers.0.self_attn.q_proj.weight"][:, :-1].copy()
    _rewrite_tensors(model_copy, edit)
    with pytest.raises(ModelError, match=r"tensor 'model.layers.0.self_attn.q_proj.weight': shape \[40, 39\], expected \[40, 40\]"):
        colibri.load(model_copy)


def test_wrong_dtype_is_named(model_copy):
    def edit(t):
        t["model.norm.weight"] = t["model.norm.weight"].astype(np.int64)
    _rewrite_tensors(model_copy, edit)
    with pytest.raises(ModelError, match=r"tensor 'model.norm.weight': dtype I64 is not supported"):
        colibri.load(model_copy)


def test_missing_path(tmp_path):
    with pytest.raises(ModelError, match=r"no such file or directory"):
        colibri.load(tmp_path / "nope")


def test_pickle_file_refused(tmp_path):
    f = tmp_path / "pytorch_model.bin"
    f.write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(ModelError, match=r"never unpickl|unpickling can run arbitrary code"):
        colibri.load(f)


def test_invalid_runtime_arguments(model_copy):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        colibri.load(model_copy, threads=0)
    with colibri.load(model_copy, threads=1) as m:
        with pytest.raises(ValueError, match="token id out of range"):
            m.logits([0, m.config.vocab_size])
        with pytest.raises(ValueError, match="max_tokens must be a non-negative integer"):
            m.generate([1, 2], max_tokens=-1)
        with pytest.raises(ValueError, match="temperature"):
            m.generate([1, 2], max_tokens=2, temperature=-1.0)


def test_big_endian_host_refuses_in_place_formats_and_convert(model_copy, tmp_path, monkeypatch):
    # HF / GGUF tensors go to the C core as stored (little-endian): a big-endian host must get a
    # clear error, not garbage. Native files are byte-swapped by the C loader instead
    # (tests/test_big_endian.py runs that under qemu-s390x).
    import sys

    from colibri.convert import convert

    monkeypatch.setattr(sys, "byteorder", "big")
    with pytest.raises(ModelError, match="little-endian host"):
        colibri.load(model_copy)
    with pytest.raises(ModelError, match="little-endian host"):
        convert(model_copy, tmp_path / "x.colibri", "bf16", progress=False)
