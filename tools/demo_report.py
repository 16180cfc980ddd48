"""Per-layer expert-usage heatmap of the demo model on held-out text -> docs/demo_experts.png.

    python tools/demo_report.py                          # routes through colibri (the default)
    python tools/demo_report.py --backend transformers   # same numbers from HF router logits

Usage of expert e in layer l = fraction of that layer's routed (token, slot) pairs that chose
e, over the first --tokens tokens of the held-out split (tools/demo_data.py), fed in windows
of --window tokens (the training context). Uniform usage is 1/E per expert.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def _windows(ids: np.ndarray, window: int):
    for start in range(0, len(ids), window):
        yield [int(t) for t in ids[start:start + window]]


def _model_shape(model_dir: Path) -> tuple[int, int]:
    """(num MoE layers, num experts) from config.json (transformers 5 writes num_local_experts)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return config["num_hidden_layers"], config.get("num_local_experts", config.get("num_experts"))


def usage_from_colibri(model_dir: Path, ids: np.ndarray, window: int = 256) -> np.ndarray:
    """Routed-slot fractions through colibri's route API (the installed package, else this
    checkout's).  out: [L, E] float64, rows sum to 1."""
    sys.path.append(str(REPO))
    import colibri

    model = colibri.load(str(model_dir))
    layers, experts = _model_shape(model_dir)
    counts = np.zeros((layers, experts), dtype=np.int64)  # [L, E]
    for chunk in _windows(ids, window):
        for route in model.route(chunk):
            counts[route.layer] += np.bincount(route.experts.ravel(), minlength=experts)
    return counts / counts.sum(axis=1, keepdims=True)


def usage_from_transformers(model_dir: Path, ids: np.ndarray, window: int = 256) -> np.ndarray:
    """Routed-slot fractions from transformers' router logits (top-k of the softmax, as
    Qwen3-MoE routes).  out: [L, E] float64, rows sum to 1."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    layers, experts = _model_shape(model_dir)
    top_k = model.config.num_experts_per_tok
    counts = np.zeros((layers, experts), dtype=np.int64)  # [L, E]
    with torch.no_grad():
        for chunk in _windows(ids, window):
            out = model(input_ids=torch.tensor([chunk]), output_router_logits=True)
            for layer, router_logits in enumerate(out.router_logits):  # each [T, E]
                chosen = router_logits.topk(top_k, dim=-1).indices  # [T, k]
                counts[layer] += np.bincount(chosen.flatten().numpy(), minlength=experts)
    return counts / counts.sum(axis=1, keepdims=True)


def plot_heatmap(usage: np.ndarray, path: Path, subtitle: str) -> None:
    """usage: [L, E] fractions -> annotated heatmap PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers, experts = usage.shape
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * experts, 1.4 + 0.6 * layers), dpi=110)
    image = ax.imshow(usage, cmap="viridis", vmin=0.0, vmax=max(2.0 / experts, usage.max()))
    for layer in range(layers):
        for expert in range(experts):
            ax.text(expert, layer, f"{100 * usage[layer, expert]:.1f}", ha="center",
                    va="center", fontsize=8, color="white" if usage[layer, expert] < 1.2 / experts
                    else "black")
    ax.set_xticks(range(experts))
    ax.set_yticks(range(layers))
    ax.set_xlabel("expert")
    ax.set_ylabel("layer")
    ax.set_title(f"Share of routed slots per expert (%), uniform = {100 / experts:.1f}%\n{subtitle}",
                 fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def heldout_ids(model_dir: Path, tokens: int) -> np.ndarray:
    """The first `tokens` token ids of the held-out split, encoded with the model's tokenizer.
    out: [N] int64."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import demo_data
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    text = demo_data.build_corpus()["val"]
    return np.asarray(tokenizer.encode(text[: tokens * 8]).ids[:tokens], dtype=np.int64)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=REPO / "colibri" / "demo_model")
    p.add_argument("--backend", choices=["colibri", "transformers"], default="colibri")
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--out", type=Path, default=REPO / "docs" / "demo_experts.png")
    args = p.parse_args(argv)
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"{args.model}: no config.json (train it with tools/train_demo.py)")
    ids = heldout_ids(args.model, args.tokens)
    compute = usage_from_colibri if args.backend == "colibri" else usage_from_transformers
    usage = compute(args.model, ids, args.window)
    plot_heatmap(usage, args.out, f"{len(ids)} held-out tokens, routed by {args.backend}")
    print(json.dumps({"backend": args.backend, "tokens": len(ids), "usage": usage.round(4).tolist(),
                      "min": float(usage.min()), "max": float(usage.max()),
                      "dead_experts": int((usage == 0).sum())}))


if __name__ == "__main__":
    main()
