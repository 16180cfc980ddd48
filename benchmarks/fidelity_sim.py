"""Where the divergence of benchmarks/fidelity.py comes from: a numpy re-enactment of the llama forward
pass of SmolLM2 (the files fidelity.py writes) in which each matrix product rounds its activations the
way a chosen engine does, or not at all.

    python benchmarks/fidelity_sim.py --work DIR [--types Q4_1,Q5_K_M] [--runs 4]
                                      [--experiments colibri,llama,only:qkv,...] [--out sim.json]

DIR holds fidelity.py's files (smollm2-f16.gguf, smollm2-TYPE.gguf; made here when absent). The weights
are the file's, dequantized by the gguf package; everything but the activations' rounding runs in f64,
so with no rounding the logits match transformers' f32 reading of the file (KL ~1e-11, printed as
"exact"). One activation rounding is a chaotic perturbation: a change of 1e-6 in the input flips some
roundings, whose effect flips others downstream, so one passage's KL is one draw. Each experiment
therefore runs --runs realizations (the token embeddings times 1 + 1e-6 N(0,1), a fresh draw each; the
first unperturbed) and reports their mean and standard deviation.

Activation roundings (per matrix, by the weight's type):
  colibri   libcolibri's act_type table: Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL -> Q8_H (q8h:8),
            every other block type -> Q8_S (f32 d per 32, exact integer half sums)
  llama     llama.cpp's vec_dot_type: Q4_1 / Q5_1 -> Q8_1, Q8_0 / Q4_0 / Q5_0 / IQ4_NL -> Q8_0, K types
            and IQ4_XS -> Q8_K (one f32 d per 256)
  q8s:B     8-bit, one f32 scale per B elements, for every matrix
  q8h:K     one f32 unit d = amax/(127 K) per 32 and an integer multiplier k_h = ceil(K amax_h/amax)
            in 1..K per half of 16 (a format whose dot needs only an integer multiply per half);
            q8h:8 is libcolibri's Q8_H, its reference quantizer bit for bit (quant.h)
  fsum      colibri, but Q4_1 through ggml's Q8_1 rounding with the offset term m_w * s, s the
            float sum of the block's x
Experiments: colibri, llama, q8s:B, q8h:K, fsum, kv16 (colibri with an f16 KV cache), and
only:CLASS (colibri's rounding on one class of matrices, the rest exact) and per16:CLASS (colibri,
with q8s:16 on that class; per16:32, on the 32-element weight types), CLASS one of qkv (attn_q/k/v), o (attn_output), gu (ffn_gate/up),
down (ffn_down), head (the output matrix); layers:A-B (colibri's rounding on layers A..B, the rest
and the output matrix exact).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

CLASSES = {"attn_q": "qkv", "attn_k": "qkv", "attn_v": "qkv", "attn_output": "o", "ffn_gate": "gu",
           "ffn_up": "gu", "ffn_down": "down"}
F32 = np.float32


def f16(x):
    return np.asarray(x, F32).astype(np.float16).astype(F32)


def round_away(v):
    """roundf: halves away from zero."""
    return np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))


class Model:
    """A llama-architecture GGUF, dequantized, plus what the roundings need of its blocks."""

    def __init__(self, path: Path):
        import gguf
        from gguf.quants import dequantize

        reader = gguf.GGUFReader(str(path))
        field = lambda key: reader.fields[key].contents()
        self.L = int(field("llama.block_count"))
        self.H, self.HKV = int(field("llama.attention.head_count")), int(field("llama.attention.head_count_kv"))
        self.HD = int(field("llama.embedding_length")) // self.H
        self.eps, self.theta = float(field("llama.attention.layer_norm_rms_epsilon")), float(field("llama.rope.freq_base"))
        self.w, self.types, self.raw = {}, {}, {}
        for t in reader.tensors:
            shape = [int(d) for d in reversed(t.shape)]
            self.w[t.name] = dequantize(t.data, t.tensor_type).reshape(shape).astype(F32)
            self.types[t.name] = t.tensor_type.name
            self.raw[t.name] = np.array(t.data)
        self.head = "output.weight" if "output.weight" in self.w else "token_embd.weight"

    def block_m(self, name: str) -> np.ndarray:
        """Q4_1 / Q5_1: the f16 offset m of each block, [rows, blocks]."""
        size = {"Q4_1": 20, "Q5_1": 24}[self.types[name]]
        b = self.raw[name].reshape(self.w[name].shape[0], -1, size)
        return b[:, :, 2:4].copy().view(np.float16)[..., 0].astype(F32)


def q8_blocks(x: np.ndarray, bs: int):
    """x: [T, n] -> (d [T, n/bs, 1] f32 = amax/127, q [T, n/bs, bs]) as libcolibri's reference rounds."""
    T, n = x.shape
    xb = x.reshape(T, n // bs, bs).astype(F32)
    d = (np.abs(xb).max(-1, keepdims=True) / F32(127)).astype(F32)
    inv = np.where(d != 0, F32(1) / np.where(d != 0, d, 1), 0).astype(F32)
    return d, np.clip(round_away((xb * inv).astype(F32)), -127, 127)


def q8h_blocks(x: np.ndarray, K: int = 8):
    """x: [T, n] -> (d [T, n/32, 1, 1], k [T, n/32, 2, 1], q [T, n/32, 2, 16]) as libcolibri's Q8_H
    reference rounds for K = 8 (quant.h): every step in f32, in the reference's order."""
    T, n = x.shape
    xb = x.reshape(T, n // 32, 2, 16).astype(F32)
    ah = np.abs(xb).max(-1, keepdims=True)
    amax = ah.max(-2, keepdims=True)
    d = (amax / F32(127 * K)).astype(F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = ((F32(K) * ah).astype(F32) / amax).astype(F32)
    k = np.where(r > 1, np.where(r < K, np.ceil(r), K), 1).astype(F32)   # NaN (0/0): 1
    step = (d * k).astype(F32)
    inv = np.where(step != 0, F32(1) / np.where(step != 0, step, 1), 0).astype(F32)
    q = np.clip(round_away((xb * inv).astype(F32)), -127, 127)
    return d, k, q


def rounded_product(model: Model, name: str, x: np.ndarray, mode: str) -> np.ndarray:
    """x [T, n] times the weight's transpose, the activations rounded by `mode` (module docstring)."""
    W = model.w[name].T.astype(np.float64)
    x = x.astype(F32)
    T, n = x.shape
    kind, _, arg = mode.partition(":")
    if kind == "exact":
        return x.astype(np.float64) @ W
    if kind in ("q8_0", "q8_1", "fsum"):                 # ggml's Q8_0 / Q8_1: f16 d per 32
        d, q = q8_blocks(x, 32)
        y = (f16(d) * q).reshape(T, n).astype(np.float64) @ W
        if kind == "q8_0":
            return y
        # the offset term m_w * s: s = f16(d * sum q) (Q8_1) or the float sum of x (fsum), where
        # the product above has used f16(d) * sum q
        s = x.reshape(T, -1, 32).sum(-1) if kind == "fsum" else f16(d[..., 0] * q.sum(-1))
        extra = s - f16(d[..., 0]) * q.sum(-1)
        return y + extra.astype(np.float64) @ model.block_m(name).T.astype(np.float64)
    if kind == "q8s":                                      # f32 d per B, exact sums (Q8_S; Q8_K for 256)
        bs = int(arg)
        if n % bs:
            return rounded_product(model, name, x, "q8_0")
        d, q = q8_blocks(x, bs)
        return (d * q).reshape(T, n).astype(np.float64) @ W
    if kind == "q8h":                                      # f32 unit per 32, integer multiplier per half
        d, k, q = q8h_blocks(x, int(arg))
        return ((d * k).astype(F32) * q).reshape(T, n).astype(np.float64) @ W
    raise ValueError(f"unknown rounding {mode!r}")


def engine_rounding(engine: str, weight_type: str) -> str:
    if weight_type in ("F32", "F16", "BF16"):
        return "exact"
    if engine == "colibri":
        return "q8h:8" if weight_type in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL") else "q8s:32"
    if engine == "llama":
        if weight_type in ("Q4_1", "Q5_1"):
            return "q8_1"
        return "q8_0" if weight_type in ("Q8_0", "Q4_0", "Q5_0", "IQ4_NL") else "q8s:256"
    raise ValueError(engine)


def matrix_class(name: str) -> str:
    return CLASSES.get(name.split(".")[-2], "head") if name.startswith("blk.") else "head"


def policy_of(model: Model, experiment: str):
    """(name -> rounding, kv) for an experiment name (module docstring)."""
    colibri = lambda n: engine_rounding("colibri", model.types[n])
    kind, _, arg = experiment.partition(":")
    if kind in ("colibri", "kv16"):
        return colibri, "f16" if kind == "kv16" else "f32"
    if kind == "llama":
        return (lambda n: engine_rounding("llama", model.types[n])), "f32"
    if kind in ("q8s", "q8h"):
        return (lambda n: experiment if model.types[n] not in ("F32", "F16", "BF16") else "exact"), "f32"
    if kind == "fsum":
        return (lambda n: "fsum" if model.types[n] == "Q4_1" else colibri(n)), "f32"
    if kind == "only":
        return (lambda n: colibri(n) if matrix_class(n) == arg else "exact"), "f32"
    if kind == "layers":
        lo, _, hi = arg.partition("-")
        inside = lambda n: n.startswith("blk.") and int(lo) <= int(n.split(".")[1]) <= int(hi or lo)
        return (lambda n: colibri(n) if inside(n) else "exact"), "f32"
    if kind == "per16" and arg == "32":   # q8s:16 on the 32-element weight types only
        small = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4")
        return (lambda n: "q8s:16" if model.types[n] in small else colibri(n)), "f32"
    if kind == "per16":
        return (lambda n: "q8s:16" if matrix_class(n) == arg else colibri(n)), "f32"
    raise SystemExit(f"unknown experiment {experiment!r}")


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, pos, theta):
    """x: [T, H, HD] in GGUF's llama layout (rotated pairs adjacent)."""
    hd = x.shape[-1]
    ang = pos[:, None] * theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def forward(m: Model, ids: list[int], rounding, kv: str = "f32", embed=None) -> np.ndarray:
    """Logits [T, vocab] of the teacher-forced ids; rounding(name) -> mode; kv: f32 or f16 cache."""
    T = len(ids)
    mm = lambda name, x: rounded_product(m, name, x, rounding(name))
    h = (m.w["token_embd.weight"] if embed is None else embed)[ids].astype(np.float64)
    pos = np.arange(T, dtype=np.float64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(m.L):
        p = f"blk.{layer}."
        x = rms_norm(h, m.w[p + "attn_norm.weight"], m.eps)
        q = rope(mm(p + "attn_q.weight", x).reshape(T, m.H, m.HD), pos, m.theta)
        k = rope(mm(p + "attn_k.weight", x).reshape(T, m.HKV, m.HD), pos, m.theta)
        v = mm(p + "attn_v.weight", x).reshape(T, m.HKV, m.HD)
        if kv == "f16":
            k, v = f16(k).astype(np.float64), f16(v).astype(np.float64)
        k, v = np.repeat(k, m.H // m.HKV, axis=1), np.repeat(v, m.H // m.HKV, axis=1)
        att = np.einsum("thd,shd->hts", q, k) / np.sqrt(m.HD) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        h = h + mm(p + "attn_output.weight", np.einsum("hts,shd->thd", att, v).reshape(T, m.H * m.HD))
        x = rms_norm(h, m.w[p + "ffn_norm.weight"], m.eps)
        g, u = mm(p + "ffn_gate.weight", x), mm(p + "ffn_up.weight", x)
        h = h + mm(p + "ffn_down.weight", g / (1 + np.exp(-g)) * u)
    return mm(m.head, rms_norm(h, m.w["output_norm.weight"], m.eps))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="fidelity.py's --work directory")
    parser.add_argument("--types", default="Q4_1,Q5_K_M")
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--runs", type=int, default=4, help="realizations per experiment")
    parser.add_argument("--experiments", default="colibri,llama,kv16,fsum,q8s:16,q8h:8,"
                        "only:qkv,only:o,only:gu,only:down,only:head")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import colibri
    from fidelity import PASSAGE, kl_mean, llama_quantize, reference_logits
    from smollm2 import smollm2_path

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    f16_file = work / "smollm2-f16.gguf"
    if not f16_file.exists():
        llama_quantize(smollm2_path(), f16_file, "F16")
    with colibri.load(f16_file, threads=1, n_ctx=16) as m:
        ids = m.tokenizer.encode(PASSAGE, add_special_tokens=False)[:args.tokens]
    results = {"tokens": len(ids), "runs": args.runs, "rows": []}
    for type_name in args.types.split(","):
        path = work / f"smollm2-{type_name}.gguf"
        if not path.exists():
            llama_quantize(f16_file, path, type_name)
        ref = reference_logits(path, ids)
        model = Model(path)
        exact = kl_mean(ref, forward(model, ids, lambda n: "exact"))
        print(f"{type_name}: exact {exact:.2g} (the re-enactment against transformers)", flush=True)
        embed0 = model.w["token_embd.weight"]
        for experiment in args.experiments.split(","):
            rounding, kv = policy_of(model, experiment)
            t0, kls = time.time(), []
            for r in range(args.runs):
                rng = np.random.default_rng(r)
                embed = embed0 if r == 0 else (embed0 * (1 + 1e-6 * rng.standard_normal(embed0.shape))).astype(F32)
                kls.append(kl_mean(ref, forward(model, ids, rounding, kv, embed)))
            row = {"type": type_name, "experiment": experiment, "kl": kls, "mean": float(np.mean(kls)),
                   "sd": float(np.std(kls, ddof=1)) if len(kls) > 1 else 0.0}
            results["rows"].append(row)
            print(f"{type_name:7s} {experiment:12s} mean {row['mean']:.5f} sd {row['sd']:.5f}  "
                  + " ".join(f"{k:.5f}" for k in kls) + f"  ({time.time() - t0:.0f} s)", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
