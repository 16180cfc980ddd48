"""Latent KV attention (DeepSeek's multi-head latent attention) beyond the parity suite: the
up-projection layouts a checkpoint may store, the cache's size, configs Colibri refuses.

Parity with transformers (logits, routes, greedy, cached == full, determinism) is in
test_parity.py and test_gguf_model.py, over the deepseek_* entries of conftest.TINY_MODELS.
"""
from __future__ import annotations

import ctypes
import json
import shutil

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

import colibri
from colibri import ModelError
from colibri.convert import convert
from colibri.models import ConfigReader, TensorSlot, architecture
from colibri.models.latent import split_joint
from colibri.summary import kv_bytes_per_position, kv_bytes_uncompressed

from conftest import token_ids
from gguf_export import export_gguf


def test_gguf_joint_kv_b_equals_split(tiny_model_factory, tmp_path):
    """Older llama.cpp files keep kv_b joint (attn_kv_b); split at load it gives the same
    tensors as a current file's attn_k_b / attn_v_b, so bitwise the same logits."""
    tiny = tiny_model_factory("deepseek_v2-b")
    ids = token_ids(tiny.reference.config.vocab_size, 24, seed=40)
    logits = {}
    for joint in (False, True):
        path = tmp_path / f"joint-{joint}.gguf"
        export_gguf(tiny.reference, tiny.path, path, "f32", joint_kv_b=joint)
        with colibri.load(path, threads=2) as m:
            logits[joint] = m.logits(ids)
    assert logits[True].tobytes() == logits[False].tobytes()


@pytest.mark.parametrize("joint", [False, True])
def test_q8_0_gguf_argmax_agrees(joint, tmp_path):
    """Latent attention with every matrix Q8_0 (widths multiples of 32): attn_k_b / attn_v_b as
    stored blocks, or an older file's joint attn_kv_b (the key part dequantized and transposed);
    the same argmax as transformers at >= 95% of positions (8-bit weights and activations)."""
    import torch
    import transformers

    config = transformers.DeepseekV2Config(
        vocab_size=96, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, kv_lora_rank=32, q_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=32,
        v_head_dim=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
        initializer_range=0.08, max_position_embeddings=128, bos_token_id=None, pad_token_id=None, eos_token_id=95)
    torch.manual_seed(13)
    model = transformers.DeepseekV2ForCausalLM(config).eval()
    model.set_experts_implementation("eager")
    model.save_pretrained(tmp_path / "hf")
    path = tmp_path / "model.gguf"
    export_gguf(model, tmp_path / "hf", path, "q8_0", joint_kv_b=joint)
    agree = total = 0
    with colibri.load(path, threads=2) as m:
        dtypes = {slot.kind: ref.dtype for slot, ref in m.weights}
        assert dtypes["WV_B"] == "Q8_0" and dtypes["WK_B"] == ("F32" if joint else "Q8_0")
        for seed in range(4):
            ids = token_ids(96, 40, seed=50 + seed)
            with torch.no_grad():
                expected = model(torch.tensor([ids])).logits[0].numpy()
            agree += int((m.logits(ids).argmax(-1) == expected.argmax(-1)).sum())
            total += len(ids)
    assert agree / total >= 0.95, f"{agree}/{total}"


def test_split_joint_of_a_block_type():
    """A Q8_0 joint matrix: the value rows are taken as stored blocks, the key part is
    dequantized and transposed (float32)."""
    heads, nope, v, rank = 3, 8, 5, 64
    config = architecture("deepseek_v2").read_config(ConfigReader(dict(
        model_type="deepseek_v2", vocab_size=16, hidden_size=32, intermediate_size=8, moe_intermediate_size=8,
        num_hidden_layers=1, num_attention_heads=heads, kv_lora_rank=rank, q_lora_rank=None,
        qk_nope_head_dim=nope, qk_rope_head_dim=4, v_head_dim=v, n_routed_experts=2, num_experts_per_tok=1)))
    joint = np.random.default_rng(0).standard_normal((heads * (nope + v), rank)).astype(np.float32)
    blocks = quantize(joint, GGMLQuantizationType.Q8_0)                    # blocks: [rows, row bytes]
    exact = dequantize(blocks, GGMLQuantizationType.Q8_0).reshape(heads, nope + v, rank)
    k_slot = TensorSlot("WK_B", 0, -1, "k", (heads * rank, nope))
    v_slot = TensorSlot("WV_B", 0, -1, "v", (heads * v, rank))
    dtype, k_b = split_joint(k_slot, "Q8_0", blocks, config)
    assert dtype == "F32" and k_b.shape == (heads * rank, nope)
    np.testing.assert_array_equal(k_b.reshape(heads, rank, nope), exact[:, :nope, :].transpose(0, 2, 1))
    dtype, v_b = split_joint(v_slot, "Q8_0", blocks, config)
    assert dtype == "Q8_0"
    np.testing.assert_array_equal(dequantize(v_b, GGMLQuantizationType.Q8_0).reshape(heads, v, rank),
                                  exact[:, nope:, :])


def _v2_lite_config():
    import transformers

    raw = transformers.DeepseekV2Config(
        vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=27, num_attention_heads=16, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128,
        qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=6,
        first_k_dense_replace=1).to_dict()
    return architecture("deepseek_v2").read_config(ConfigReader(raw))


def test_latent_cache_is_a_fifth_or_less_of_per_head_keys_and_values():
    """DeepSeek-V2-Lite: 27 layers x (512 + 64) cached values per position against
    27 x 16 heads x (192 key + 128 value) uncompressed: 8.9x smaller (target: >= 5x)."""
    c = _v2_lite_config()
    for kv_type, elem in (("f32", 4), ("f16", 2)):
        assert kv_bytes_per_position(c, kv_type) == 27 * 576 * elem
        assert kv_bytes_uncompressed(c, kv_type) == 27 * 16 * 320 * elem
        assert kv_bytes_uncompressed(c, kv_type) >= 5 * kv_bytes_per_position(c, kv_type)


def test_inspect_shows_latent_cache(tiny_model_factory, capsys):
    from colibri.cli import main

    assert main(["inspect", str(tiny_model_factory("deepseek_v2-b").path)]) == 0
    out = capsys.readouterr().out
    # 2 layers x (20 + 4) f32 against 2 layers x 3 heads x (8 + 4 + 10)
    assert "KV cache               192 B per position (f32): the latent, 2.8x less than per-head keys and " \
           "values (528 B)" in out
    assert "latent KV attention: kv_lora_rank 20, q_lora_rank 28, head dims 8 + 4 RoPE, value 10" in out


@pytest.mark.parametrize("name", ["deepseek_v2-b", "deepseek_v3-a"])
def test_colibri_file_round_trip(name, tiny_model_factory, tmp_path):
    """colibri convert keeps every tensor (WK_B and WV_B split from kv_b_proj) and the latent
    attention and routing fields (hparams extension fields): the .colibri file's logits are
    bitwise those of the Hugging Face directory it came from."""
    tiny = tiny_model_factory(name)
    ids = token_ids(tiny.reference.config.vocab_size, 24, seed=41)
    path = convert(tiny.path, tmp_path / f"{name}.colibri", "keep", progress=False)
    with colibri.load(tiny.path, threads=2) as hf, colibri.load(path, threads=2) as native:
        assert native.config.kv_lora_rank == hf.config.kv_lora_rank
        assert native.logits(ids).tobytes() == hf.logits(ids).tobytes()


@pytest.mark.parametrize("field, value, message", [
    ("qk_rope_head_dim", 5, "field 'qk_rope_head_dim' = 5 must be even"),
    ("scoring_func", "sigmoid", "field 'scoring_func' = 'sigmoid' is not supported"),
    ("norm_topk_prob", True, "field 'norm_topk_prob' = True is not supported"),
    ("kv_lora_rank", None, "field 'kv_lora_rank' is missing"),
    ("attention_bias", True, "field 'attention_bias' = true is not supported yet"),
])
def test_config_refusals(tiny_model_factory, tmp_path, field, value, message):
    source = tiny_model_factory("deepseek_v2-a").path
    target = tmp_path / "model"
    target.mkdir()
    config = json.loads((source / "config.json").read_text())
    config[field] = value
    (target / "config.json").write_text(json.dumps(config))
    shutil.copyfile(source / "model.safetensors", target / "model.safetensors")
    with pytest.raises(ModelError, match=message):
        colibri.load(target)


def test_partial_rope_refused_with_latent_attention():
    """Latent attention rotates all head_dim (RoPE) dims: a rope_dim short of it is refused by
    colibri_model_create and by the .colibri reader's checks, each with one line."""
    from colibri import _native
    from colibri.formats.native import check_hparams
    from colibri.native_model import hparams_for, hparams_values

    config = _v2_lite_config()
    hp, keep = hparams_for(config)
    hp.rope_dim = config.head_dim - 2
    words = "latent attention rotates all head_dim=64 RoPE dims (rope_dim 0 or 64), got 62"
    assert not _native.lib().colibri_model_create(ctypes.byref(hp))
    assert words in _native.last_error()
    with pytest.raises(ModelError) as error:
        check_hparams(hparams_values(hp), "f.colibri")
    assert words in str(error.value)
    del keep
