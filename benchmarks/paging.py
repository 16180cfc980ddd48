"""Models larger than memory (docs/PAGING.md): Colibri and llama.cpp each in a real memory cgroup
of the budget, on the same GGUF file.

    python benchmarks/paging.py [--models /work/paging_models] [--cases olmoe-zipf,olmoe-uniform,qwen3-zipf]
                                [--threads 2] [--prompt 64] [--gen 16] [--repeat 3] [--cold] [--out FILE]
                                [--prefetch-depth N] [--engines colibri,llama.cpp]

Per case (shape, routing, budget; CASES):
  1. the model file (benchmarks/models.py: GGUF Q4_0, written once; routing led by the token,
     routers "uniform" or "zipf" as its docstring says), and how skewed its routing measures:
     Colibri's routes over 8 prompts of 64 random tokens, the share of routings the 20% most used
     experts of each layer draw (mean over layers);
  2. the storage read rate, probed by this process right before and right after each engine's
     run (random O_DIRECT reads of one expert window's size, 4 threads, 2 s; `colibri bench` also
     probes right after each of its rounds, and its share of the storage limit pairs each round
     with its own probe); and the memory read bandwidth with the run's threads, probed by this
     process (outside the cgroup: the probe's 1 GiB would break the budget) right before and
     after Colibri's run. A decode step reads every weight it uses from memory, cached experts
     included, so however fast the storage, it cannot beat the memory limit (bandwidth / weight
     bytes per decode token); the table gives both limits and the decode's share of the lower;
  3. `colibri bench --mem-budget B` inside a fresh cgroup of B, then llama.cpp (llama-cpp-python
     with --no-repack: the weights stay in their mmap; repacking copies them and is OOM-killed)
     inside a fresh cgroup of B, the same protocol (benchmarks/reference_engines.py; the decode
     steps fed seeded random token ids, since greedy decoding of these random models soon loops
     over a few tokens and so would their routing): decode and prefill tok/s, bytes read from
     storage per decode token (/proc/self/io), and the cgroup's peak memory, failcnt (times the
     kernel had to enforce the limit) and OOM kills;
  4. logits: Colibri paged inside a cgroup of B against Colibri resident (no cgroup, no budget),
     a 12-token prompt, bitwise;
  5. with --cold: each engine's time to first token inside a cgroup of B, from a page cache
     without the model file: process start to the argmax of a 16-token prompt, load included.
Before every run the model file's pages are dropped from the page cache (POSIX_FADV_DONTNEED), so
no engine uses pages an earlier run read in (charged to another cgroup, they would not count
against its limit).
Prints the machine's load, a Markdown table, and writes everything as JSON (--out).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402  (benchmarks/models.py)
from cgroup import CgroupUnavailable, MemoryCgroup  # noqa: E402
from colibri.bench import measure_read_bandwidth  # noqa: E402
from colibri.bench_paging import measure_storage_read  # noqa: E402

GIB, MIB = 1 << 30, 1 << 20
CASES = {   # name: (shape, routing, budget bytes)
    "olmoe-zipf": ("olmoe-1b-7b", "zipf", 3 * GIB // 2),
    "olmoe-uniform": ("olmoe-1b-7b", "uniform", 3 * GIB // 2),
    "qwen3-zipf": ("qwen3-30b-a3b", "zipf", 8 * GIB),
}
LOGITS_PROMPT = 12
TTFT_PROMPT = 16


# ---- children (run inside a cgroup) ----------------------------------------------------------
def child_logits(path: str, budget: str, out: str) -> None:
    """Colibri's logits of a fixed prompt, every position, into out (.npy)."""
    import colibri

    with colibri.load(path, threads=2, n_ctx=64, mem_budget=budget) as m:
        ids = np.random.default_rng(7).integers(0, m.config.vocab_size, LOGITS_PROMPT).tolist()
        np.save(out, m.logits(ids))
        print(json.dumps({"paged": m.paging is not None}))


def child_popularity(path: str, budget: str) -> None:
    """How skewed the routing is: per MoE layer, the share of the routings of 8 prompts of 64
    random tokens (other than the calibration's) that the 10% / 20% / 50% most used experts
    draw; means over the layers."""
    c, _, experts = models.batched_routes(Path(path), 8, 64, seed=3, mem_budget=budget)
    shares = {10: [], 20: [], 50: []}
    for layer in c.moe_layers:
        ranked = np.sort(np.bincount(experts[layer].reshape(-1), minlength=c.num_experts))[::-1]   # [E]
        for pct in shares:
            shares[pct].append(ranked[:max(1, c.num_experts * pct // 100)].sum() / ranked.sum())
    print(json.dumps({f"top{pct}_share": float(np.mean(v)) for pct, v in shares.items()}))


def child_ttft(engine: str, path: str, budget: str, vocab: str) -> None:
    """Load and run a prompt to its first token (the parent times the process, Python's start
    included)."""
    prompt = np.random.default_rng(5).integers(0, int(vocab), TTFT_PROMPT).tolist()
    if engine == "colibri":
        import colibri

        m = colibri.load(path, threads=2, n_ctx=64, mem_budget=budget)
        token = int(np.argmax(m.logits(prompt)[-1]))
    else:
        from reference_engines import LlamaCpp

        token = int(np.argmax(LlamaCpp(path, 2, 64, TTFT_PROMPT, "bf16", no_repack=True).prefill(prompt)))
    print(json.dumps({"token": token}))


CHILDREN = {"logits": child_logits, "popularity": child_popularity, "ttft": child_ttft}


# ---- the parent -----------------------------------------------------------------------------
def machine() -> dict:
    from run import machine as run_machine

    return run_machine()


def in_cgroup(name: str, budget: int, command: list[str], timeout: float) -> dict:
    """Runs command in a fresh memory cgroup of `budget`: its last JSON line (or its error), the
    wall time, and the group's peak memory, failcnt and OOM kills."""
    group = MemoryCgroup.create(f"colibri-paging-{name}-{os.getpid()}", budget)
    try:
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, preexec_fn=group.join,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])})
        except subprocess.TimeoutExpired:
            return {"wall_s": time.perf_counter() - start, "exit": None, "error": f"timed out after {timeout:.0f} s",
                    "cgroup_peak_bytes": group.peak(), "cgroup_failcnt": group.failcnt(),
                    "cgroup_oom_kills": group.oom_kills()}
        wall = time.perf_counter() - start
        out = {"wall_s": wall, "exit": proc.returncode, "cgroup_peak_bytes": group.peak(),
               "cgroup_failcnt": group.failcnt(), "cgroup_oom_kills": group.oom_kills()}
        lines = proc.stdout.strip().splitlines()
        if proc.returncode == 0 and lines:
            out.update(json.loads(lines[-1]))
        else:
            out["error"] = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return out
    finally:
        group.remove()


def storage_probe(path: Path, read_bytes: int) -> float:
    return measure_storage_read([str(path)], read_bytes, threads=4, seconds=2.0)


def evict(path: Path) -> None:
    """Drops the file's pages from the page cache (POSIX_FADV_DONTNEED), so that no run finds
    pages an earlier one read in, charged to another cgroup: each engine starts cold and pays,
    inside its own limit, for every page of the file it uses."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def expert_read_bytes(path: Path) -> int:
    """The largest single read Colibri makes for one expert of this file (an expert window)."""
    import colibri

    with colibri.load(path, threads=1, n_ctx=16, expert_slots=1) as m:
        return m.paging.read_bytes


def run_case(name: str, args, log) -> dict:
    shape_name, routing, budget = CASES[name]
    path = models.ensure(args.models, shape_name, hf=False, routing=routing, only=("gguf-q4_0",), log=log)["gguf-q4_0"]
    vocab = models.shape(shape_name).config.vocab_size
    me = [sys.executable, str(HERE / "paging.py")]
    result = dict(case=name, shape=shape_name, routing=routing, budget_bytes=budget, file=str(path),
                  file_bytes=path.stat().st_size, load_1min_start=os.getloadavg()[0],
                  prefetch_depth=args.prefetch_depth)
    read_bytes = expert_read_bytes(path)
    if not args.speed_only:
        result["popularity"] = in_cgroup(name, budget, [*me, "popularity", str(path), str(budget)], 1800)
        log(f"{name}: routing popularity {result['popularity']}")
    rows = []
    for engine in args.engines.split(","):
        before = storage_probe(path, read_bytes)
        memory = [measure_read_bandwidth(args.threads)] if engine == "colibri" else []   # GB/s
        evict(path)
        if engine == "colibri":
            command = [sys.executable, "-m", "colibri", "bench", str(path), "--mem-budget", str(budget), "-t",
                       str(args.threads), "--prompt", str(args.prompt), "--gen", str(args.gen), "--repeat",
                       str(args.repeat), "--decode-input", args.decode_input, "--bandwidth", f"{memory[0]:.3f}",
                       "--json"]
            if args.prefetch_depth is not None:
                command += ["--prefetch-depth", str(args.prefetch_depth)]
        else:
            command = [sys.executable, str(HERE / "reference_engines.py"), "llama.cpp", str(path), "--vocab",
                       str(vocab), "-t", str(args.threads), "--prompt", str(args.prompt), "--gen", str(args.gen),
                       "--repeat", str(args.llama_repeat), "--no-repack", "--no-probe", "--decode-input",
                       args.decode_input]
        row = {"engine": engine, **in_cgroup(name, budget, command, args.timeout)}
        row["storage_probe_gb_s"] = [before, storage_probe(path, read_bytes)]
        if memory:
            row["memory_probe_gb_s"] = memory + [measure_read_bandwidth(args.threads)]
        row["load_1min"] = os.getloadavg()[0]
        rows.append(row)
        log(f"{name} {engine}: " + (row.get("error") or f"decode {row['decode_tok_s']:.3f} tok/s, peak "
                                    f"{row['cgroup_peak_bytes'] / MIB:.0f} MiB, failcnt {row['cgroup_failcnt']}"))
    result["rows"] = rows
    if args.speed_only:
        return result
    out = args.models / f"{name}-logits.npy"
    evict(path)
    check = in_cgroup(name, budget, [*me, "logits", str(path), str(budget), str(out)], 1800)
    if "error" not in check:
        paged = np.load(out)
        check["resident_run"] = subprocess.run([*me, "logits", str(path), "off", str(out)], capture_output=True,
                                               text=True, env={**os.environ, "PYTHONPATH": str(HERE.parent)}).returncode
        check["bitwise_equal"] = bool(np.array_equal(paged, np.load(out)))
        out.unlink()
    result["logits"] = check
    log(f"{name}: logits paged == resident: {check.get('bitwise_equal')} ({check.get('error', 'ok')})")
    if args.cold:
        result["cold"] = {}
        for engine in args.engines.split(","):
            evict(path)
            result["cold"][engine] = in_cgroup(name, budget, [*me, "ttft", engine, str(path), str(budget),
                                                              str(vocab)], args.timeout)
            log(f"{name} cold {engine}: {result['cold'][engine].get('wall_s'):.1f} s to the first token")
    return result


def table(results: list[dict]) -> list[str]:
    """One Markdown row per engine and case."""
    head = ("| case | file | budget | engine | decode tok/s | prefill tok/s | read/token MB | storage GB/s "
            "| storage limit tok/s | % of limit | memory GB/s | memory limit tok/s | % of the lower limit "
            "| hit rate | prefetch accuracy (2 ahead) | stall ms/token (reads ahead) "
            "| peak cgroup MiB | failcnt | OOM kills | decode vs llama.cpp | machine load |")
    out = [head, "|" + "---|" * 21]
    for res in results:
        by = {r["engine"]: r for r in res["rows"]}
        for r in res["rows"]:
            cells = [res["case"], f"{res['file_bytes'] / 1e9:.1f} GB", f"{res['budget_bytes'] / GIB:.1f} GiB",
                     r["engine"]]
            if "error" in r:
                out.append("| " + " | ".join(cells + [r["error"]] + [""] * 12 +
                                             [f"{r['cgroup_peak_bytes'] / MIB:.0f}", str(r["cgroup_failcnt"]),
                                              str(r["cgroup_oom_kills"]), "", f"{r['load_1min']:.1f}"]) + " |")
                continue
            io = [x for x in r.get("io_read_rounds_bytes_per_token") or [] if x is not None]
            paging = r.get("paging")
            per_token = paging["decode"]["bytes_read_per_token"] if paging else (statistics.median(io) if io else 0)
            storage = paging["storage_read_gb_s"] if paging else statistics.median(r["storage_probe_gb_s"])
            limit = storage * 1e9 / per_token if per_token else float("inf")
            share = (paging["storage_limit_fraction"] if paging and paging["storage_limit_fraction"] is not None
                     else r["decode_tok_s"] / limit)
            memory = statistics.median(r["memory_probe_gb_s"]) if "memory_probe_gb_s" in r else None
            memory_limit = memory * 1e9 / r["bytes_per_token"] if memory else None
            lower = min(limit, memory_limit) if memory_limit else None
            ratio = (f"{r['decode_tok_s'] / by['llama.cpp']['decode_tok_s']:.1f}x"
                     if r["engine"] == "colibri" and "decode_tok_s" in by.get("llama.cpp", {}) else "")
            d = paging["decode"] if paging else None
            cells += [f"{r['decode_tok_s']:.3f}", f"{r['prefill_tok_s']:.1f}", f"{per_token / 1e6:.0f}",
                      f"{storage:.2f}", f"{limit:.2f}", f"{100 * share:.0f}%",
                      f"{memory:.2f}" if memory else "", f"{memory_limit:.2f}" if memory_limit else "",
                      f"{100 * r['decode_tok_s'] / lower:.0f}%" if lower else "",
                      f"{100 * d['hit_rate']:.0f}%" if d else "",
                      (f"{100 * d['prefetch_accuracy']:.0f}%" + (f" ({100 * d['prefetch2_accuracy']:.0f}%)"
                                                                if d.get("needed_after_prediction2") else ""))
                      if d else "",
                      f"{d['stall_ms_per_token']:.0f} ({d.get('stall_ahead_ms_per_token', 0):.0f})" if d else "",
                      f"{r['cgroup_peak_bytes'] / MIB:.0f}",
                      str(r["cgroup_failcnt"]), str(r["cgroup_oom_kills"]), ratio, f"{r['load_1min']:.1f}"]
            out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in CHILDREN:   # a measuring process the parent started
        CHILDREN[sys.argv[1]](*sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("/work/paging_models"))
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--gen", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3, help="Colibri's rounds (medians)")
    p.add_argument("--llama-repeat", type=int, default=1, help="llama.cpp's rounds (slow under the limit)")
    p.add_argument("--decode-input", choices=["greedy", "random"], default="random",
                   help="what each decode step is fed (colibri bench --decode-input): greedy decoding of these "
                        "random models soon loops over a few tokens, and so would their routing")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--engines", default="colibri,llama.cpp", help="which engines to run (comma-separated)")
    p.add_argument("--prefetch-depth", type=int, choices=(0, 1, 2), default=None,
                   help="Colibri's read-ahead depth (colibri bench --prefetch-depth; default: Colibri's)")
    p.add_argument("--speed-only", action="store_true",
                   help="skip the routing popularity and the logits check (A/B runs of the same file)")
    p.add_argument("--cold", action="store_true", help="also time to the first token, the file not in the page cache")
    p.add_argument("--out", type=Path, default=None, help="JSON (default: MODELS/paging-results.json)")
    args = p.parse_args()
    try:
        MemoryCgroup.create(f"colibri-paging-check-{os.getpid()}", GIB).remove()
    except CgroupUnavailable as reason:
        raise SystemExit(f"paging benchmark skipped: {reason}")
    info = machine()
    print(json.dumps(info, indent=1), flush=True)
    results = []
    for name in args.cases.split(","):
        results.append(run_case(name, args, lambda line: print(line, flush=True)))
    lines = table(results)
    print("\n".join(lines))
    print(f"load average at the end {os.getloadavg()}")
    out = args.out or args.models / "paging-results.json"
    out.write_text(json.dumps(dict(machine=info, results=results, table=lines), indent=1))


if __name__ == "__main__":
    main()
