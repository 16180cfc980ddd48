"""What `colibri bench` adds for a paged model (docs/PAGING.md): the expert cache's counters over
the prefills and the decodes, and the storage read rate probed right after every round, the
decode set against it.

A paged decode is bound by storage, not memory bandwidth: each token reads the experts it
misses. The storage limit is the read rate divided by the bytes read per token; each round's
share of it is that round's decode rate x its bytes read per token / the rate probed right after
it, and the reported share is the median over rounds (as the memory roofline is paired).
"""
from __future__ import annotations

import mmap
import os
import random
import statistics
import threading
import time
from dataclasses import fields

from .paging import PagingStats

PROBE_SECONDS = 2.0
PAGE = 4096


def measure_storage_read(paths: list[str], block_bytes: int, threads: int = 4, seconds: float = PROBE_SECONDS,
                         seed: int = 0) -> float:
    """GB/s of `threads` threads reading random page-aligned blocks of block_bytes from the files
    (chosen by size) for about `seconds`: the reads an expert cache makes, with O_DIRECT where
    the file system takes it, else buffered with the pages dropped after each read."""
    block = -(-block_bytes // PAGE) * PAGE
    files = [(p, os.path.getsize(p)) for p in paths]
    weights = [size for _, size in files]
    done = [0] * threads
    deadline = time.perf_counter() + seconds

    def reader(i: int) -> None:
        rng = random.Random(seed + i)
        buffer = mmap.mmap(-1, block)                 # page-aligned, as O_DIRECT needs
        handles = {}
        try:
            while time.perf_counter() < deadline:
                path, size = rng.choices(files, weights)[0]
                if path not in handles:
                    handles[path] = _open(path)
                fd, direct = handles[path]
                offset = rng.randrange(0, max(size - block, 0) // PAGE + 1) * PAGE
                done[i] += os.preadv(fd, [buffer], offset)
                if not direct:
                    os.posix_fadvise(fd, offset, block, os.POSIX_FADV_DONTNEED)
        finally:
            for fd, _ in handles.values():
                os.close(fd)
            buffer.close()

    start = time.perf_counter()
    workers = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(done) / (time.perf_counter() - start) / 1e9


def _open(path: str) -> tuple[int, bool]:
    """(descriptor, O_DIRECT?) of a file, O_DIRECT where the file system takes it."""
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(path, os.O_RDONLY | direct), True
        except OSError:
            pass
    return os.open(path, os.O_RDONLY), False


def model_files(model) -> list[str]:
    """The files a model's weights are read from."""
    path = model.path
    if path.is_dir():
        return [str(p) for p in sorted(path.glob("*.safetensors"))]
    return [str(path)]


def add_stats(a: PagingStats | None, b: PagingStats) -> PagingStats:
    """Counters of a and b summed (the static fields are b's)."""
    if a is None:
        return b
    static = {"n_slots", "slot_bytes", "pinned", "direct_io", "huge_pages"}
    return PagingStats(**{f.name: getattr(b, f.name) if f.name in static else getattr(a, f.name) + getattr(b, f.name)
                          for f in fields(PagingStats)})


def storage_share(decode_rounds_tok_s: list[float], read_rounds_bytes_per_token: list[float],
                  storage_rounds_gb_s: list[float]) -> float:
    """Median over rounds of decode tok/s x bytes read per token / the storage rate probed right
    after the round: the share of the storage limit the decode reached."""
    return statistics.median(rate * per_token / (storage * 1e9) for rate, per_token, storage
                             in zip(decode_rounds_tok_s, read_rounds_bytes_per_token, storage_rounds_gb_s,
                                    strict=True))


def report(plan, prefill: PagingStats, decode: PagingStats, decode_rounds_tok_s: list[float],
           read_rounds: list[float], storage_rounds: list[float]) -> dict:
    """The `paging` object of bench --json."""
    from dataclasses import asdict

    limit = [s * 1e9 / b if b else None for s, b in zip(storage_rounds, read_rounds)]
    return dict(plan=asdict(plan), prefill=prefill.as_dict(), decode=decode.as_dict(),
                decode_read_rounds_bytes_per_token=read_rounds, storage_rounds_gb_s=storage_rounds,
                storage_read_gb_s=statistics.median(storage_rounds),
                storage_limit_rounds_tok_s=limit,
                storage_limit_fraction=(storage_share(decode_rounds_tok_s, read_rounds, storage_rounds)
                                        if all(read_rounds) else None))


def report_lines(p: dict) -> list[tuple[str, str]]:
    """Rows of the human-readable report."""
    from .summary import human_bytes

    plan, d = p["plan"], p["decode"]
    budget = f"{human_bytes(plan['budget'])} budget" if plan["budget"] else f"{plan['n_slots']} slots asked for"
    rows = [
        ("expert cache", f"{plan['n_slots']} of {plan['n_experts']} experts in slots of {human_bytes(plan['slot_bytes'])} "
                         f"({budget}; resident weights {human_bytes(plan['resident_bytes'])}, "
                         f"{'O_DIRECT' if d['direct_io'] else 'buffered'} reads, "
                         f"{'huge pages' if d['huge_pages'] else 'normal pages'}, {d['pinned']} pinned)"),
        ("decode hits", f"{100 * d['hit_rate']:.1f}% of {d['lookups']} expert lookups in a slot "
                        f"({100 * d['cache_hit_rate']:.1f}% cached before, the rest read ahead), "
                        f"{human_bytes(d['bytes_read_per_token'])} read per token, "
                        f"stalled {d['stall_ms_per_token']:.2f} ms per token "
                        f"({d['stall_ahead_ms_per_token']:.2f} on reads ahead not done yet), "
                        f"{d.get('early_waves', 0) / max(d['tokens'], 1):.1f} early expert passes per token"),
        ("read-ahead", f"{100 * d['prefetch_accuracy']:.1f}% of the needed experts predicted "
                       f"({100 * d['prefetch_precision']:.1f}% of predictions needed)"
                       + (f", {100 * d['prefetch2_accuracy']:.1f}% two layers ahead"
                          if d.get('needed_after_prediction2') else "")
                       + f", {d['prefetches']} read ahead, {d['prefetch_used']} used"),
    ]
    if p["storage_limit_fraction"] is not None:
        limit = statistics.median(x for x in p["storage_limit_rounds_tok_s"] if x)
        rows.append(("storage", f"{p['storage_read_gb_s']:.2f} GB/s probed after each round -> limit "
                                f"{limit:.2f} tok/s; decode at {100 * p['storage_limit_fraction']:.0f}% of it"))
    return rows
