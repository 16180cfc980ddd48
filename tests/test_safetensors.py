"""colibri.formats reads what the real safetensors package writes: bit-identical, zero-copy."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from colibri.errors import ModelError
from colibri.formats.hf_dir import HFCheckpoint
from colibri.formats.safetensors import SafetensorsFile, scan_nonfinite


def _numpy_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "w32": rng.standard_normal((5, 7)).astype(np.float32),
        "w16": rng.standard_normal((3, 4, 2)).astype(np.float16),
        "ids": rng.integers(-2**62, 2**62, size=(9,), dtype=np.int64),
        "f64": rng.standard_normal((2, 3)),
        "i8": rng.integers(-128, 128, size=(3, 3), dtype=np.int8),
        "mask": rng.integers(0, 2, size=(4,)).astype(bool),
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }


def _whole_mapping(st: SafetensorsFile) -> np.ndarray:
    return np.frombuffer(st._mmap, dtype=np.uint8)   # [file size] bytes, the mapping itself


def test_numpy_roundtrip_bit_identical(tmp_path):
    tensors = _numpy_tensors()
    path = tmp_path / "t.safetensors"
    save_file(tensors, path, metadata={"format": "np", "note": "x"})
    st = SafetensorsFile(path)
    assert st.metadata == {"format": "np", "note": "x"}
    assert set(st.tensors) == set(tensors)
    raw = path.read_bytes()
    for name, ref in tensors.items():
        view = st.tensors[name]
        assert view.name == name and view.file == str(path)
        assert view.array.dtype == ref.dtype and view.shape == ref.shape == view.array.shape
        assert view.array.tobytes() == ref.tobytes()
        assert view.nbytes == ref.nbytes
        assert raw[view.offset:view.offset + view.nbytes] == ref.tobytes()
        assert not view.array.flags.writeable
    assert st.tensors["w32"].dtype == "F32" and st.tensors["w16"].dtype == "F16"
    assert st.tensors["ids"].dtype == "I64" and st.tensors["mask"].dtype == "BOOL"
    st.close()


def test_bf16_is_raw_bits(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    ref = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    ref[0, 0] = float("nan")
    save_torch({"w": ref}, tmp_path / "b.safetensors")
    st = SafetensorsFile(tmp_path / "b.safetensors")
    view = st.tensors["w"]
    assert view.dtype == "BF16" and view.array.dtype == np.uint16 and view.shape == (6, 5)
    np.testing.assert_array_equal(view.array, ref.view(torch.int16).numpy().view(np.uint16))
    # The bits widen exactly to float32.
    widened = (view.array.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(widened, ref.float().numpy())
    st.close()


def test_views_are_zero_copy_into_the_mmap(tmp_path):
    save_file(_numpy_tensors(), tmp_path / "t.safetensors")
    st = SafetensorsFile(tmp_path / "t.safetensors")
    whole = _whole_mapping(st)
    start, end = whole.ctypes.data, whole.ctypes.data + whole.size
    for view in st.tensors.values():
        if view.nbytes == 0:
            continue
        assert np.shares_memory(view.array, whole)
        assert view.address == start + view.offset and view.address + view.nbytes <= end
        base = view.array
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and base.obj is st._mmap
    del whole, base
    st.close()


def test_unaligned_offsets_are_viewed_in_place(tmp_path):
    values = np.array([1.25, -3.5, np.inf], dtype=np.float32)
    header = {"pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
              "x": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]}}
    raw = json.dumps(header).encode()
    (tmp_path / "u.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\x07" + values.tobytes())
    st = SafetensorsFile(tmp_path / "u.safetensors")
    x = st.tensors["x"]
    assert x.offset % 4 != 0 and not x.array.flags.aligned
    np.testing.assert_array_equal(x.array, values)
    assert np.shares_memory(x.array, _whole_mapping(st))
    assert scan_nonfinite(x) == 1
    st.close()


def test_close_with_live_views_keeps_them_valid(tmp_path):
    save_file({"a": np.arange(4, dtype=np.float32)}, tmp_path / "a.safetensors")
    st = SafetensorsFile(tmp_path / "a.safetensors")
    kept = st.tensors["a"].array
    st.close()
    assert st.tensors == {}
    np.testing.assert_array_equal(kept, np.arange(4, dtype=np.float32))
    del kept
    st2 = SafetensorsFile(tmp_path / "a.safetensors")
    st2.close()
    assert st2._mmap.closed


def _model_dir(root, shards: dict[str, dict[str, np.ndarray]], *, index: bool):
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4}))
    for filename, tensors in shards.items():
        save_file(tensors, root / filename)
    if index:
        weight_map = {name: filename for filename, tensors in shards.items() for name in tensors}
        (root / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return root


def test_sharded_directory_via_index(tmp_path):
    rng = np.random.default_rng(3)
    shards = {f"model-0000{i}-of-00003.safetensors":
              {f"layer{i}.{k}": rng.standard_normal((i + 2, 3)).astype(np.float32) for k in ("q", "k")}
              for i in (1, 2, 3)}
    ckpt = HFCheckpoint.open(_model_dir(tmp_path / "m", shards, index=True))
    expected = {name: t for tensors in shards.values() for name, t in tensors.items()}
    assert ckpt.names() == sorted(expected)
    assert ckpt.config == {"model_type": "llama", "hidden_size": 4}
    assert [p.name for p in ckpt.files] == sorted(shards)
    assert ckpt.total_bytes == sum(t.nbytes for t in expected.values())
    for name, ref in expected.items():
        assert name in ckpt
        view = ckpt.tensor(name)
        np.testing.assert_array_equal(view.array, ref)
        assert view.file.endswith(next(f for f, ts in shards.items() if name in ts))
    assert "nope" not in ckpt
    with pytest.raises(ModelError, match=r"missing tensor 'nope'"):
        ckpt.tensor("nope")
    ckpt.close()


def test_single_file_directory_and_side_files(tmp_path):
    d = _model_dir(tmp_path / "m", {"model.safetensors": {"w": np.ones((2, 2), np.float32)}}, index=False)
    (d / "generation_config.json").write_text('{"temperature": 0.7}')
    (d / "tokenizer.json").write_text("{}")
    ckpt = HFCheckpoint.open(d)
    assert ckpt.names() == ["w"] and ckpt.files == [d / "model.safetensors"] and ckpt.total_bytes == 16
    assert ckpt.optional_json("generation_config.json") == {"temperature": 0.7}
    assert ckpt.optional_json("tokenizer_config.json") is None
    assert ckpt.file_path("tokenizer.json") == d / "tokenizer.json"
    assert ckpt.file_path("chat_template.jinja") is None
    (d / "tokenizer_config.json").write_text("[1, 2]")
    with pytest.raises(ModelError, match=r"tokenizer_config.json: expected a JSON object, got list"):
        ckpt.optional_json("tokenizer_config.json")
    ckpt.close()


def test_hub_cache_snapshot_symlinks_are_accepted(tmp_path):
    """models--x/snapshots/<rev>/model.safetensors -> ../../blobs/<hash>, as huggingface_hub stores them."""
    repo = tmp_path / "models--org--tiny"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    save_file({"w": np.arange(3, dtype=np.float32)}, blobs / "h1")
    (blobs / "h2").write_text('{"model_type": "llama"}')
    (snapshot / "model.safetensors").symlink_to("../../blobs/h1")
    (snapshot / "config.json").symlink_to("../../blobs/h2")
    ckpt = HFCheckpoint.open(snapshot)
    np.testing.assert_array_equal(ckpt.tensor("w").array, np.arange(3, dtype=np.float32))
    ckpt.close()


def test_transformers_sharded_save_pretrained(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp_path, max_shard_size="4KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    ckpt = HFCheckpoint.open(tmp_path)
    assert len(ckpt.files) > 1
    state = {k: v for k, v in model.state_dict().items() if k in ckpt}
    assert set(ckpt.names()) == set(state)
    for name, ref in state.items():
        np.testing.assert_array_equal(ckpt.tensor(name).array, ref.view(torch.int16).numpy().view(np.uint16))
    ckpt.close()


def test_scan_nonfinite_counts_nan_and_inf(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    x = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    x[[0, 17, 500, 999]] = [np.nan, np.inf, -np.inf, np.nan]
    bf = torch.from_numpy(x.copy()).to(torch.bfloat16)
    save_torch({"f32": torch.from_numpy(x), "f16": torch.from_numpy(x.astype(np.float16)),
                "f64": torch.from_numpy(x.astype(np.float64)), "bf16": bf,
                "i64": torch.arange(10), "clean": torch.ones(7)}, tmp_path / "s.safetensors")
    st = SafetensorsFile(tmp_path / "s.safetensors")
    for name in ("f32", "f16", "f64", "bf16"):
        assert scan_nonfinite(st.tensors[name]) == 4, name
        assert scan_nonfinite(st.tensors[name], chunk_elems=7) == 4, name   # chunk borders everywhere
    # f16 overflows the large finite values too: compare with numpy on the same data.
    with np.errstate(over="ignore"):
        big = (x * 1e5).astype(np.float16)
    save_file({"big": big}, tmp_path / "big.safetensors")
    big_st = SafetensorsFile(tmp_path / "big.safetensors")
    assert scan_nonfinite(big_st.tensors["big"], chunk_elems=64) == int(np.count_nonzero(~np.isfinite(big)))
    assert scan_nonfinite(st.tensors["i64"]) == 0 and scan_nonfinite(st.tensors["clean"]) == 0
    big_st.close()
    st.close()
