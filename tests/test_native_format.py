"""The Colibri-native file (docs/FORMAT.md): convert, load (C loader and Python reader), layout, errors.

  parity     logits of the native file == logits of its Hugging Face source at the same dtype,
             BITWISE (f32 -> f32, bf16 -> bf16), through colibri_model_load (zero-copy mmap)
  layout     every tensor 64-byte aligned; each expert's gate, up, down adjacent, experts in order
  C example  examples/c/colibri_run_file (colibri_init / colibri_forward / colibri_free) generates
             the same greedy ids as Python
  errors     malformed files: a clean one-line error from the C loader (NULL + message) AND the
             Python reader (ModelError), each naming the field
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import colibri
from colibri.convert import convert, f32_kinds
from colibri.errors import ModelError
from colibri.formats import native
from colibri.model import Model

from conftest import token_ids

ROOT = Path(__file__).resolve().parent.parent
PARITY_MODELS = ("mixtral-b", "qwen2_moe-a", "qwen3_moe-b", "olmoe-b", "llama-b", "glm4_moe-a", "granitemoeshared-a",
                 "ernie4_5_moe-a", "dots1-a", "minimax_m2-a", "gpt_oss-a", "gpt_oss-b")
SEQ_LEN = 24


def _native_model(path: Path) -> Model:
    """colibri.load of a *.colibri file: the C loader (colibri_model_load) maps and validates it."""
    model = colibri.load(path, threads=2, n_ctx=64)
    assert isinstance(model._native, native.NativeFileModel)
    return model


@pytest.fixture(scope="module")
def converted(tiny_model_factory, tmp_path_factory):
    """name -> {dtype: (source dir, native file)}, converted once."""
    root = tmp_path_factory.mktemp("native")
    cache: dict = {}

    def get(name: str, dtype: str) -> tuple[Path, Path]:
        if (name, dtype) not in cache:
            tiny = tiny_model_factory(name)
            source = tiny.path if dtype == "f32" else tiny.path_bf16
            cache[name, dtype] = (source, convert(source, root / f"{name}-{dtype}.colibri", dtype, progress=False))
        return cache[name, dtype]

    return get


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "q4_1"])
def test_quantized_conversion(tiny_model_factory, tmp_path, dtype):
    """Block types for rows that are whole blocks (f16 otherwise); close to the f32 source:
    logits NMSE <= 2e-3 for q8_0 and <= 0.08 for the 4-bit types (measured 5e-4, 0.04, 0.036 on
    this random model, whose unstructured weights are a worst case for 4 bits), and for q8_0
    the same argmax at >= 95% of positions."""
    tiny = tiny_model_factory("mixtral-c")
    path = convert(tiny.path, tmp_path / f"m-{dtype}.colibri", dtype, progress=False)
    agree = total = 0
    err = power = 0.0
    with colibri.load(tiny.path, threads=2) as ref, _native_model(path) as m:
        stored = {slot.kind: ref_.dtype for slot, ref_ in m.weights}
        assert stored["EXPERT_GATE"] == dtype.upper() and stored["WQ"] == dtype.upper()
        assert stored["EXPERT_DOWN"] == "F16"          # rows of 33: not whole blocks
        for seed in range(4):
            ids = token_ids(tiny.reference.config.vocab_size, 40, seed=50 + seed)
            got, want = m.logits(ids), ref.logits(ids)
            err += float(((got - want) ** 2).sum())
            power += float((want ** 2).sum())
            agree += int((got.argmax(-1) == want.argmax(-1)).sum())
            total += len(ids)
    assert err / power <= (2e-3 if dtype == "q8_0" else 0.08), err / power
    if dtype == "q8_0":
        assert agree / total >= 0.95, f"{agree}/{total}"


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name", PARITY_MODELS)
def test_logits_bitwise_equal_to_source(converted, name, dtype):
    source, path = converted(name, dtype)
    with colibri.load(source, threads=2) as reference:
        ids = token_ids(reference.config.vocab_size, SEQ_LEN, seed=3)
        want = reference.logits(ids)                                   # [T, V]
    with _native_model(path) as model:
        got = model.logits(ids)
    assert got.shape == want.shape and np.array_equal(got, want)


def _named_vector(kind: str) -> bool:
    """A kind named as a norm, a bias or a sink."""
    return kind.endswith(("_NORM", "_BIAS", "_SINKS")) or kind in ("BQ", "BK", "BV", "BO")


def test_vector_kinds_cover_every_norm_bias_and_sink():
    """The C core's list of vector kinds (colibri_tensor_kind_is_vector), which the converter keeps
    in f32 and both readers refuse in block types, holds every kind named as a norm, bias or sink,
    and no other."""
    from colibri import _native

    assert _native.vector_kinds() == {kind for kind in native.KINDS if _named_vector(kind)}
    assert {"ROUTER_BIAS", "ROUTER_SEL_BIAS", "ATTN_SINKS", "EXPERT_DOWN_BIAS", "Q_A_NORM"} <= f32_kinds()
    assert {"ROUTER", "SHARED_ROUTER"} <= f32_kinds() and "WQ" not in f32_kinds()
    assert _native.lib().colibri_tensor_kind_is_vector(len(native.KINDS)) == -1


def _kept_f32(name: str) -> bool:
    """The checkpoint tensors a quantized or bf16 conversion must keep exact, by their Hugging Face
    names alone: norms, biases (router, selection, q/k/v/o, experts'), sinks and routers."""
    return name.endswith(("norm.weight", "bias", "sinks", ".gate.weight", ".router.weight", "expert_gate.weight"))


@pytest.mark.parametrize("name", ["glm4_moe-a", "ernie4_5_moe-a", "deepseek_v3-a", "gpt_oss-a"])
def test_bf16_conversion_keeps_norms_biases_sinks_and_routers_f32(tiny_model_factory, tmp_path, name):
    """An f32 checkpoint converted to bf16: every norm, bias, selection bias, sink and router is
    stored F32 (the rest BF16), and the logits equal BITWISE those of the same checkpoint with
    only its other tensors rounded to bf16 (a rounded norm shows there; a rounded selection
    bias only where it flips a choice, hence the dtype check)."""
    import torch
    from safetensors.torch import load_file, save_file

    tiny = tiny_model_factory(name)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for file in tiny.path.glob("*.json"):
        shutil.copy(file, mixed / file.name)
    tensors = {key: value if _kept_f32(key) else value.to(torch.bfloat16)
               for key, value in load_file(tiny.path / "model.safetensors").items()}
    save_file(tensors, mixed / "model.safetensors", metadata={"format": "pt"})
    path = convert(tiny.path, tmp_path / f"{name}.colibri", "bf16", progress=False)
    file = native.NativeFile.open(path)
    try:
        stored = {(e.kind_name, e.dtype_name) for e in file.entries}
    finally:
        file.close()
    exact = {kind for kind, _ in stored if _named_vector(kind) or kind in ("ROUTER", "SHARED_ROUTER")}
    assert stored == {(kind, "F32" if kind in exact else "BF16") for kind, _ in stored}
    assert exact & {"ROUTER_SEL_BIAS", "BQ", "Q_A_NORM", "ATTN_SINKS"}   # the kinds this test is about are there
    with colibri.load(mixed, threads=2) as reference, _native_model(path) as model:
        ids = token_ids(reference.config.vocab_size, SEQ_LEN, seed=4)
        assert np.array_equal(model.logits(ids), reference.logits(ids))


@pytest.mark.parametrize("name", ["qwen2_moe-a", "mixtral-a"])
def test_layout_aligned_and_experts_contiguous(converted, name):
    _, path = converted(name, "bf16")
    file = native.NativeFile.open(path)
    try:
        entries = file.entries
        assert all(e.offset % 64 == 0 for e in entries)
        for prev, e in zip(entries, entries[1:]):
            assert e.offset == native.align64(prev.offset + prev.nbytes)   # packed in directory order
        experts = [e for e in entries if e.kind_name.startswith("EXPERT_")]
        hp = file.hparams
        assert len(experts) == 3 * hp["n_expert"] * sum(hp["layer_is_moe"])
        for i in range(0, len(experts), 3):
            gate, up, down = experts[i:i + 3]
            assert [x.kind_name for x in (gate, up, down)] == ["EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN"]
            assert gate.layer == up.layer == down.layer and gate.expert == up.expert == down.expert
            assert entries.index(up) == entries.index(gate) + 1 and entries.index(down) == entries.index(up) + 1
            assert gate.dtype_name == "BF16"
        by_kind = {e.kind_name: e for e in entries}
        assert by_kind["ROUTER"].dtype_name == "F32" and by_kind["ATTN_NORM"].dtype_name == "F32"
        assert file.size == entries[-1].offset + entries[-1].nbytes
    finally:
        file.close()


def test_metadata_through_c_equals_python_reader(converted):
    source, path = converted("qwen2_moe-a", "f32")
    file = native.NativeFile.open(path)
    c_model = native.NativeFileModel(path)
    try:
        assert c_model.metadata == file.metadata
        assert file.metadata["architecture"] == "qwen2_moe"
        assert json.loads(file.metadata["files"]["config.json"]) == json.loads((source / "config.json").read_text())
        assert file.metadata["source"]["dtype"] == "f32"
    finally:
        c_model.close()
        file.close()


def test_tokenizer_and_chat_template_travel_in_the_file(tiny_model_factory, tmp_path):
    from tokenizers import Tokenizer as Backend, models, pre_tokenizers

    from colibri.tokenizer import Tokenizer

    source = tmp_path / "with-tokenizer"
    shutil.copytree(tiny_model_factory("llama-b").path, source)
    vocab = {w: i for i, w in enumerate(["<s>", "</s>", "hello", "world", "<unk>"])}
    backend = Backend(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.save(str(source / "tokenizer.json"))
    (source / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    (source / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }} {% endfor %}")
    path = convert(source, tmp_path / "tok.colibri", "f32", progress=False)
    want = Tokenizer.from_dir(source)
    with _native_model(path) as model:
        assert model.tokenizer.encode("hello world hello") == want.encode("hello world hello")
        assert model.tokenizer.chat_template == want.chat_template
        assert model.tokenizer.eos_ids == want.eos_ids


def test_dtype_f16_and_progress(converted, tiny_model_factory, tmp_path, capsys):
    tiny = tiny_model_factory("olmoe-a")
    path = convert(tiny.path, tmp_path / "f16.colibri", "f16")
    assert "100%" in capsys.readouterr().err
    file = native.NativeFile.open(path)
    try:
        wq = next(e for e in file.entries if e.kind_name == "WQ")
        assert wq.dtype_name == "F16"
        want = tiny.reference.model.layers[0].self_attn.q_proj.weight.detach().numpy().astype(np.float16)
        assert np.array_equal(file.tensor_array(wq), want)
    finally:
        file.close()
    with pytest.raises(ModelError, match="dtype 'q3'"):
        convert(tiny.path, tmp_path / "bad.colibri", "q3")


# ---- the C example -------------------------------------------------------------------

def test_c_example_generates_python_greedy_ids(converted, tmp_path):
    if shutil.which("cmake") is None:
        pytest.fail("cmake is required to build examples/c/colibri_run_file")
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"], check=True,
                   capture_output=True)
    done = subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "colibri_run_file"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    _, path = converted("qwen2_moe-a", "bf16")
    prompt = token_ids(113, 7, seed=5)
    n_decode = 10
    with _native_model(path) as model:
        ids = list(prompt)
        for _ in range(n_decode):
            ids.append(int(np.argmax(model.logits(ids)[-1])))
    ran = subprocess.run([str(build / "colibri_run_file"), str(path), str(n_decode)] + [str(t) for t in prompt],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split("generated:")[1].split() == [str(t) for t in ids[len(prompt):]]
    # plain C paging (docs/PAGING.md): 2 expert slots for 2 MoE layers of 6 experts, the same tokens
    paged = subprocess.run([str(build / "colibri_run_file"), "--slots", "2", str(path), str(n_decode)]
                           + [str(t) for t in prompt], capture_output=True, text=True, timeout=60)
    assert paged.returncode == 0, paged.stderr
    generated, counters = paged.stdout.split("generated:")[1].split("paging:")
    assert generated.split() == [str(t) for t in ids[len(prompt):]]
    lookups, hits, misses, read = (int(part.split()[0]) for part in counters.split(","))
    assert lookups == hits + misses and misses > 0 and read >= misses * 4096
    bad = subprocess.run([str(build / "colibri_run_file"), str(tmp_path / "missing.colibri"), "2", "1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "missing.colibri: cannot open" in bad.stderr


# ---- malformed files ------------------------------------------------------------------

HEADER_FIELD = {"version": (8, "<I"), "header_size": (12, "<I"), "n_tensors": (16, "<I"),
                "metadata_size": (40, "<Q"), "n_layer": (56, "<i")}
ENTRY_FIELD = {"kind": (0, "<i"), "layer": (4, "<i"), "expert": (8, "<i"), "dtype": (12, "<i"),
               "offset": (32, "<Q"), "nbytes": (40, "<Q")}


def _set_header(data: bytearray, field: str, value) -> None:
    offset, fmt = HEADER_FIELD[field]
    struct.pack_into(fmt, data, offset, value)


def entry_at(data: bytearray, index: int) -> tuple[int, native.Entry]:
    """Directory entry `index`: its offset in the file and its fields."""
    at = struct.unpack_from("<Q", data, 24)[0] + 48 * index
    return at, native.Entry(*struct.unpack_from("<iiiiqqQQ", data, at))


def _entry(data: bytearray, index: int) -> native.Entry:
    return entry_at(data, index)[1]


def _set_entry(data: bytearray, index: int, field: str, value) -> None:
    directory = struct.unpack_from("<Q", data, 24)[0]
    offset, fmt = ENTRY_FIELD[field]
    struct.pack_into(fmt, data, directory + 48 * index + offset, value)


def _first(data: bytearray, kind: str) -> int:
    n = struct.unpack_from("<I", data, 16)[0]
    return next(i for i in range(n) if native.KINDS[_entry(data, i).kind] == kind)


def _metadata_at(data: bytearray) -> int:
    return struct.unpack_from("<Q", data, 32)[0]


def _corrupt_metadata(data: bytearray) -> None:
    data[_metadata_at(data)] = ord("#")


def _bad_utf8_metadata(data: bytearray) -> None:
    at = _metadata_at(data) + bytes(data[_metadata_at(data):]).index(b'"architecture"') + 1
    data[at] = 0xFF


def _hparam_n_head_kv_zero(data: bytearray) -> None:
    struct.pack_into("<i", data, 64 + 16, 0)


def _unknown_hparams_extension(data: bytearray) -> None:
    """One more extension field than this reader knows, nonzero (as a newer writer would store): inserted
    after the known ones, taken from the zero padding before the directory, which stays where it was."""
    hparams_size = struct.unpack_from("<I", data, 20)[0]
    directory = struct.unpack_from("<Q", data, 24)[0]
    n_ext_at = 64 + native.HPARAMS_V1_BYTES
    n_ext = struct.unpack_from("<I", data, n_ext_at)[0]
    assert directory - (64 + hparams_size) >= 4, "no padding to grow the hparams block into"
    struct.pack_into("<I", data, n_ext_at, n_ext + 1)
    struct.pack_into("<I", data, 20, hparams_size + 4)
    at = n_ext_at + 4 + 4 * n_ext
    data[at:64 + hparams_size + 4] = struct.pack("<f", 1.5) + data[at:64 + hparams_size]


def _layer_windows_flag(value: int):
    """The layer_windows extension field set to `value` (the file stores no windows array)."""
    def mutate(data: bytearray) -> None:
        index = [name for name, _ in native._HP_EXT].index("layer_windows")
        struct.pack_into("<i", data, 64 + native.HPARAMS_FIXED_BYTES + 4 * index, value)
    return mutate


def _repeat_an_expert(data: bytearray) -> None:
    """Expert 1's gate claims to be expert 0's (same shape, so only the order rule catches it)."""
    i = _first(data, "EXPERT_GATE")
    _set_entry(data, i + 3, "expert", 0)


# name -> (mutation, words both error lines must contain)
MALFORMED = {
    "bad magic": (lambda d: d.__setitem__(slice(0, 8), b"COLIBRX\0"), "magic"),
    "future version": (lambda d: _set_header(d, "version", 3), "version: 3"),
    "header size": (lambda d: _set_header(d, "header_size", 128), "header_size"),
    "huge tensor count": (lambda d: _set_header(d, "n_tensors", 0xFFFFFFFF), "n_tensors"),
    "metadata past EOF": (lambda d: _set_header(d, "metadata_size", 1 << 40), "metadata_size"),
    "header n_layer differs": (lambda d: _set_header(d, "n_layer", 9), "n_layer"),
    "hparams insane": (_hparam_n_head_kv_zero, "n_head_kv"),
    "hparams n_ext wrong": (lambda d: struct.pack_into("<I", d, 64 + native.HPARAMS_V1_BYTES, 10), "hparams_size"),
    "hparams extension unknown": (_unknown_hparams_extension, f"extension field {len(native._HP_EXT)} is unknown"),
    "layer_windows flag not 0/1": (_layer_windows_flag(2), "layer_windows must be 0 or 1, got 2"),
    "layer_windows without the array": (_layer_windows_flag(1), "hparams_size"),
    "offset misaligned": (lambda d: _set_entry(d, 3, "offset", _entry(d, 3).offset + 8), "not a multiple of 64"),
    "offset past EOF": (lambda d: _set_entry(d, 3, "offset", 1 << 50), "past the end"),
    "overlap": (lambda d: _set_entry(d, 3, "offset", _entry(d, 2).offset), "overlaps"),
    "nbytes mismatch": (lambda d: _set_entry(d, 3, "nbytes", _entry(d, 3).nbytes + 64), "nbytes"),
    "kind out of range": (lambda d: _set_entry(d, 4, "kind", 99), "kind 99 out of range"),
    "layer out of range": (lambda d: _set_entry(d, _first(d, "WQ"), "layer", 7), "layer 7 out of range"),
    "expert out of range": (lambda d: _set_entry(d, _first(d, "EXPERT_GATE"), "expert", -3), "expert"),
    "unknown dtype": (lambda d: _set_entry(d, 0, "dtype", 17), "unknown dtype 17"),
    "repeated tensor": (_repeat_an_expert, "out of directory order or repeated"),
    "truncated file": (lambda d: d.__delitem__(slice(len(d) - 10, None)), "past the end"),
    "trailing bytes": (lambda d: d.extend(bytes(64)), "after the last tensor"),
    "metadata not JSON": (_corrupt_metadata, "metadata"),
    "metadata not UTF-8": (_bad_utf8_metadata, "UTF-8"),
    "tiny file": (lambda d: d.__delitem__(slice(40, None)), "smaller than the 64-byte header"),
}


def test_fields_whose_zero_is_a_default_load_as_written_before_they_existed(converted, tmp_path):
    """A file written before an extension field existed reads 0 there (docs/FORMAT.md), and for
    router_scale, embd_scale, residual_scale and logit_scale 0 means 1, for rope_dim head_dim:
    such a file (here those fields zeroed, rope_dim set to head_dim) passes the config.json check
    and gives bitwise the logits of the file as written; any other value still has to match."""
    _, path = converted("mixtral-b", "f32")
    data = bytearray(path.read_bytes())
    names = [name for name, _ in native._HP_EXT]
    file = native.NativeFile.open(path)
    try:
        head_dim, rope_dim, scales = (file.hparams["head_dim"], file.hparams["rope_dim"],
                                      [file.hparams[n] for n in ("router_scale", "embd_scale", "logit_scale")])
    finally:
        file.close()
    assert rope_dim == 0 and scales == [1.0, 1.0, 1.0]   # what the test changes is there as assumed
    for name in ("router_scale", "embd_scale", "residual_scale", "logit_scale"):
        struct.pack_into("<f", data, 64 + native.HPARAMS_FIXED_BYTES + 4 * names.index(name), 0.0)
    struct.pack_into("<i", data, 64 + native.HPARAMS_FIXED_BYTES + 4 * names.index("rope_dim"), head_dim)
    older = tmp_path / "older.colibri"
    older.write_bytes(bytes(data))
    with _native_model(path) as want, _native_model(older) as got:
        ids = token_ids(want.config.vocab_size, SEQ_LEN, seed=5)
        assert got.logits(ids).tobytes() == want.logits(ids).tobytes()
    struct.pack_into("<f", data, 64 + native.HPARAMS_FIXED_BYTES + 4 * names.index("embd_scale"), 2.0)
    older.write_bytes(bytes(data))   # a value that is no default still has to match config.json
    with pytest.raises(ModelError, match=r"older\.colibri: config\.json does not match the model's "
                                         r"hyperparameters: embd_scale is 2\.0 in the model, config\.json gives 1\.0$"):
        colibri.load(older, threads=2, n_ctx=64)


def test_layer_windows_travel_and_are_checked(converted, tmp_path):
    """gpt-oss's sliding and full layers are stored as the layer_window array (layer_windows = 1),
    read back by both readers as config.json's layer_types say; a negative window is refused by
    both, each with one line."""
    source, path = converted("gpt_oss-a", "f32")
    config = json.loads((source / "config.json").read_text())
    want = tuple(config["sliding_window"] if t == "sliding_attention" else 0 for t in config["layer_types"])
    assert 0 in want and config["sliding_window"] in want
    file = native.NativeFile.open(path)
    try:
        hp = file.hparams
    finally:
        file.close()
    assert hp["layer_windows"] == 1 and hp["layer_window"] == want
    with _native_model(path) as model:
        assert model._native.hparams()["layer_window"] == want
    data = bytearray(path.read_bytes())
    n_ext = struct.unpack_from("<I", data, 64 + native.HPARAMS_V1_BYTES)[0]
    windows_at = 64 + native.HPARAMS_FIXED_BYTES + 4 * n_ext + 2 * hp["head_dim"] + hp["n_layer"]
    struct.pack_into("<i", data, windows_at + 4, -5)
    bad = tmp_path / "bad.colibri"
    bad.write_bytes(bytes(data))
    for read in (native.NativeFileModel, native.NativeFile.open):
        with pytest.raises(ModelError, match=r"bad\.colibri: hparams: layer_window\[1\] must be >= 0, got -5$"):
            read(bad)


@pytest.fixture(scope="module")
def good_bytes(converted) -> bytes:
    _, path = converted("qwen2_moe-a", "f32")
    return path.read_bytes()


def assert_refused_by_c_and_python(good: bytes, mutate, path: Path, words: str) -> None:
    """The file `good` changed by mutate(bytearray) and written to path is refused by the C loader
    and by the Python reader, each with one line naming the path and containing `words`."""
    data = bytearray(good)
    mutate(data)
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError) as c_error:
        native.NativeFileModel(path)
    with pytest.raises(ModelError) as py_error:
        native.NativeFile.open(path)
    for error in (c_error.value, py_error.value):
        message = str(error)
        assert words in message and str(path) in message and "\n" not in message, message


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_rejected_by_c_and_python(good_bytes, tmp_path, case):
    mutate, words = MALFORMED[case]
    assert_refused_by_c_and_python(good_bytes, mutate, tmp_path / "bad.colibri", words)


def test_good_file_accepted_by_both(good_bytes, tmp_path):
    path = tmp_path / "good.colibri"
    path.write_bytes(good_bytes)
    native.NativeFileModel(path).close()
    native.NativeFile.open(path).close()


@pytest.mark.parametrize("qtype", ["f32", "q8_0", "q4_0"])
def test_gguf_source_kept_as_stored_is_bitwise_equal(tiny_model_factory, tmp_path, qtype):
    from gguf_export import export_gguf

    tiny = tiny_model_factory("mixtral-c")
    gguf_path = tmp_path / f"m-{qtype}.gguf"
    export_gguf(tiny.reference, tiny.path, gguf_path, qtype)
    native_path = convert(gguf_path, tmp_path / f"m-{qtype}.colibri", "keep", progress=False)
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=61)
    with colibri.load(gguf_path, threads=2) as g, _native_model(native_path) as m:
        assert [r.dtype for _, r in g.weights] == [r.dtype for _, r in m.weights]
        assert m.config.rope_interleaved and g.config.rope_interleaved
        assert g.logits(ids).tobytes() == m.logits(ids).tobytes()


def test_gguf_source_dequantized_to_f32(tiny_model_factory, tmp_path):
    from gguf_export import export_gguf

    tiny = tiny_model_factory("olmoe-c")
    gguf_path = tmp_path / "m-q8_0.gguf"
    export_gguf(tiny.reference, tiny.path, gguf_path, "q8_0")
    native_path = convert(gguf_path, tmp_path / "m-f32.colibri", "f32", progress=False)
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=62)
    with colibri.load(gguf_path, threads=2) as g, _native_model(native_path) as m:
        assert {r.dtype for _, r in m.weights} == {"F32"}
        want, got = g.logits(ids), m.logits(ids)
    # the q8_0 weights exactly, but activations no longer quantized: close, not equal
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()
