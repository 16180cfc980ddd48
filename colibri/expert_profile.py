"""Expert activation profiles: how often each (layer, expert) was routed to over a text, saved
by `colibri route --profile-out FILE` and loaded (`expert_profile=`, `--expert-profile`) to pin
a paged model's hottest experts in their slots (docs/PAGING.md).

The file is JSON:

    {"format": "colibri-expert-profile", "version": 1,
     "architecture": "olmoe", "num_layers": 16, "num_experts": 64, "top_k": 8,
     "tokens": 1234,
     "counts": [[...], ...]}       # [num_layers][num_experts] tokens routed; dense layers all 0
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .errors import ModelError

FORMAT = "colibri-expert-profile"
VERSION = 1
PIN_SHARE = 0.5      # at most this share of the slots is pinned


def counts_from_routes(config, routes) -> np.ndarray:
    """[num_layers, num_experts] int64: tokens routed to each expert, from Model.route()."""
    counts = np.zeros((config.num_layers, config.num_experts), dtype=np.int64)   # [L, E]
    for r in routes:
        counts[r.layer] += np.bincount(r.experts.reshape(-1), minlength=config.num_experts)[:config.num_experts]
    return counts


def write(path: str | os.PathLike, config, counts: np.ndarray, tokens: int) -> None:
    doc = {"format": FORMAT, "version": VERSION, "architecture": config.architecture,
           "num_layers": config.num_layers, "num_experts": config.num_experts, "top_k": config.top_k,
           "tokens": int(tokens), "counts": counts.astype(int).tolist()}
    Path(path).write_text(json.dumps(doc) + "\n")


def read(path: str | os.PathLike, config) -> np.ndarray:
    """The counts [num_layers, num_experts] of a profile made for this model's shape; ModelError
    with one line for anything else."""
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ModelError(f"{where}: cannot read the expert profile ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelError(f"{where}: not an expert profile (not JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelError(f"{where}: not an expert profile (expected format {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise ModelError(f"{where}: expert profile version {doc.get('version')!r} is not supported (expected {VERSION})")
    shape = (config.num_layers, config.num_experts)
    if (doc.get("num_layers"), doc.get("num_experts")) != shape:
        raise ModelError(f"{where}: the profile is for {doc.get('num_layers')} layers x {doc.get('num_experts')} "
                         f"experts, this model has {shape[0]} x {shape[1]}")
    counts = doc.get("counts")
    if (not isinstance(counts, list) or len(counts) != shape[0]
            or any(not isinstance(row, list) or len(row) != shape[1] for row in counts)
            or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for row in counts for c in row)):
        raise ModelError(f"{where}: counts must be {shape[0]} lists of {shape[1]} non-negative integers")
    return np.array(counts, dtype=np.int64).reshape(shape)   # [L, E]


def hottest(counts: np.ndarray, n_slots: int) -> tuple[list[int], list[int]]:
    """(layers, experts) to pin: the most routed experts (count > 0; ties to the lower (layer,
    expert)), at most PIN_SHARE of the slots and never all of them."""
    limit = min(int(PIN_SHARE * n_slots), n_slots - 1)
    flat = counts.reshape(-1)
    order = np.lexsort((np.arange(flat.size), -flat))          # count descending, then index
    chosen = [int(i) for i in order[:max(limit, 0)] if flat[i] > 0]
    E = counts.shape[1]
    return [i // E for i in chosen], [i % E for i in chosen]
