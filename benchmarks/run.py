"""Colibri vs llama.cpp vs transformers on the same random weights, in one run.

    python benchmarks/run.py [--models /work/bench_models] [--threads 1,2] [--repeat 5]
    python benchmarks/run.py --files gguf-q4_k_m,gguf-q6_k --threads 2    # the K-quant rows

1. measures the machine's read bandwidth (colibri_read_bandwidth: a 1 GiB buffer read by
   1 and 2 threads, by a plain loop and by a prefetching kernel, the faster counting), and
   again in every measuring process right after each round's decode: a row's % of roofline
   is the median over its rounds of that round's rate against its own probe, since this VM's
   bandwidth drifts from minute to minute;
2. writes the random-weight models it lacks (benchmarks/models.py): a small Mixtral and
   OLMoE-1B-7B, as GGUF and Colibri-native at q8_0 and q4_0, plus a bf16 Hugging Face
   directory where transformers fits in memory; gpt-oss-20b (GGUF, MXFP4 experts) and
   DeepSeek-V2-Lite (GGUF and Colibri-native at q4_0);
3. runs every measurement in a fresh process, after reading its file once (warm page
   cache): `colibri bench` on each format Colibri loads, llama.cpp (llama-cpp-python) on
   the GGUF files, transformers (bf16 and f32) on the Hugging Face directory;
4. prints the machine, a Markdown table (medians of --repeat rounds per process) with %
   of roofline and Colibri / llama.cpp ratios, then the same comparison over only the rounds
   the hypervisor took no CPU time from (/proc/stat steal), and writes everything as JSON
   (--out; --tables-from prints the tables of such a file again).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402  (benchmarks/models.py)
from colibri.bench import paired_roofline  # noqa: E402
from colibri.summary import KV_ELEM_BYTES  # noqa: E402

# Per shape: prompt and decode lengths (prefill-512 on both shapes, as the targets are stated;
# the whole run takes about 10 minutes on 2 cores).
RUN_LENGTHS = {"mixtral-small": (512, 32), "olmoe-1b-7b": (512, 32), "gpt-oss-20b": (128, 16),
               "deepseek-v2-lite": (512, 32)}
GIB = 1 << 30


# ---- machine ---------------------------------------------------------------------------
def machine() -> dict:
    """CPU, cores, memory, load and the busiest other processes, as plain text fields."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kib = int(next(l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines()
                       if l.startswith("MemTotal")))
    top = subprocess.run(["ps", "-eo", "pcpu,ni,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout
    return dict(cpu=cpu, cores=os.cpu_count(), memory_gib=round(mem_kib / (1 << 20), 1),
                kernel=platform.release(), python=platform.python_version(),
                load_average=" ".join(f"{x:.2f}" for x in os.getloadavg()),
                busiest_processes=[" ".join(l.split()) for l in top.splitlines()[1:7]])


def read_bandwidth(threads: int) -> float:
    """GB/s reading a 1 GiB buffer with `threads` threads, in a child (the buffer must not linger)."""
    code = f"from colibri.bench import measure_read_bandwidth as m; print(m({threads}, {GIB}, 5))"
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.strip())


def warm(path: Path) -> None:
    """Read every byte of a model file or directory once, so each engine starts from the page cache."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    for f in files:
        with open(f, "rb", buffering=0) as stream:
            while stream.read(64 << 20):
                pass


def drop_page_cache() -> None:
    """Write back and drop the page cache (root only), so that every model file is read in
    afresh by warm(): pages cached since a file was written can be small folios, mapped 4 KiB at
    a time, while a fresh read brings large folios that map as 2 MiB pages (this VM, Linux 6.18:
    decode 15-20% faster for every engine that reads weights through mmap)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        raise SystemExit(f"--drop-caches: cannot write /proc/sys/vm/drop_caches ({exc}); run as root or without it")


# ---- one measurement --------------------------------------------------------------------
def _last_json(command: list[str], timeout: float) -> dict:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def colibri_run(path: Path, threads: int, prompt: int, gen: int, repeat: int, kv_type: str) -> dict:
    """`colibri bench --json`; it probes the read bandwidth itself, right after each round."""
    return _last_json([sys.executable, "-m", "colibri", "bench", str(path), "-t", str(threads), "--prompt",
                       str(prompt), "--gen", str(gen), "--repeat", str(repeat), "--kv-type", kv_type, "--json"],
                      timeout=900)


def reference_run(engine: str, path: Path, vocab: int, threads: int, prompt: int, gen: int, repeat: int,
                  dtype: str) -> dict:
    return _last_json([sys.executable, str(HERE / "reference_engines.py"), engine, str(path), "--vocab",
                       str(vocab), "-t", str(threads), "--prompt", str(prompt), "--gen", str(gen), "--repeat",
                       str(repeat), "--dtype", dtype], timeout=900)


def colibri_reads(path: Path) -> str | None:
    """None when colibri.load opens `path` here, else the one-line reason ("not yet" in the table)."""
    import colibri

    try:
        colibri.load(path, threads=1, n_ctx=16).close()
        return None
    except (colibri.ModelError, ValueError) as exc:
        return str(exc).splitlines()[0]


def transformers_fits(shape: models.Shape, limit_gb: float) -> tuple[bool, float]:
    """(bf16 weights fit under limit_gb and in the memory available now, their size in GB)."""
    import psutil

    params = sum(int(np.prod(slot.shape)) for slot in shape.slots)
    bf16_gb = 2 * params / 1e9
    return bf16_gb <= limit_gb and 2 * bf16_gb * 1e9 < psutil.virtual_memory().available, bf16_gb


def _progress(row: dict) -> str:
    """One line per finished measurement (times since the run started are in the JSON)."""
    where = f"{row['shape']} {row['engine']} {row['weights']} t={row.get('threads', '-')}"
    if "error" in row or "skipped" in row:
        return f"{where}: {row.get('skipped') or row['error']}"
    return (f"{where}: load {row['load_s']:.2f} s, prefill {row['prefill_tok_s']:.1f} tok/s, "
            f"decode {row['decode_tok_s']:.2f} tok/s")


# ---- the table ----------------------------------------------------------------------------
def _ratio(a: dict, b: dict | None, key: str) -> str:
    if not b or "error" in b or "error" in a:
        return ""
    return f"{a[key] / b[key]:.2f}"


def _roofline(r: dict, bandwidth: dict[int, float]) -> float:
    """A row's share of the bandwidth on weight bytes: the median over its rounds of each
    round's rate against the probe right after it (the run's first probe when it has none)."""
    if "bandwidth_rounds_gb_s" in r:
        return paired_roofline(r["bytes_per_token"], r["decode_rounds_tok_s"], r["bandwidth_rounds_gb_s"])
    return r["bytes_per_token"] * r["decode_tok_s"] / (bandwidth[r["threads"]] * 1e9)


def _stolen_ms(r: dict) -> str:
    """CPU time the hypervisor took during the row's decode rounds, in ms (blank: not reported)."""
    steals = r.get("steal_rounds_s")
    return "" if steals is None else f"{1e3 * sum(steals):.0f}"


def table(rows: list[dict], bandwidth: dict[int, float]) -> list[str]:
    """Markdown rows: one per measurement; ratios of each Colibri row to llama.cpp (same file
    type and threads) or, for the bf16 directory, to transformers bf16; % roofline: the median
    over the row's rounds of each round's rate against the bandwidth probed right after it
    (against the run's first probe when a row has no probes); bandwidth: the median of the
    row's probes; "at equal bandwidth": the ratio of the two rows' % roofline, each round
    against its own moment's bandwidth, which takes the drift between the two processes
    out of the decode ratio; CPU stolen: what the hypervisor took during the decode rounds (a
    stalled thread holds the other at the next barrier); machine load is the 1-minute load average when the measurement ended (2 = both
    cores busy)."""
    head = ("| shape | engine | weights | threads | load s | prefill tok/s | decode tok/s | p50 ms | p99 ms | "
            "peak RSS GiB | read/token MiB | KV/token MiB | bandwidth GB/s | % roofline | % roofline w/ KV | "
            "decode ratio | decode ratio at equal bandwidth | prefill ratio | CPU stolen ms | machine load |")
    out = [head, "|" + "---|" * 20]
    for r in rows:
        if "error" in r or "skipped" in r:
            out.append(f"| {r['shape']} | {r['engine']} | {r['weights']} | {r.get('threads', '')} | "
                       f"{r.get('skipped') or r['error']} |" + " |" * 15)
            continue
        peer = None
        if r["engine"] == "colibri":
            peer_engine, peer_weights = (("transformers", "hf-bf16") if r["weights"] == "hf-bf16"
                                         else ("llama.cpp", "gguf-" + r["weights"].split("-")[1]))
            peer = next((p for p in rows if p["shape"] == r["shape"] and p["engine"] == peer_engine
                         and p["weights"] == peer_weights and p.get("threads") == r["threads"]), None)
        bpt, kv = r["bytes_per_token"], r.get("kv_bytes_per_token", 0)
        bw = r.get("read_bandwidth_gb_s") or bandwidth[r["threads"]]
        roof = 100 * _roofline(r, bandwidth)
        roof_kv = roof * (bpt + kv) / bpt
        same_bw = (f"{roof / (100 * _roofline(peer, bandwidth)):.2f}"
                   if peer and "error" not in peer and peer.get("bytes_per_token") else "")
        note = " (vs transformers)" if peer and peer["engine"] == "transformers" else ""
        out.append(f"| {r['shape']} | {r['engine']} | {r['weights']} | {r['threads']} | {r['load_s']:.2f} | "
                   f"{r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                   f"{r['peak_rss_bytes'] / GIB:.2f} | {bpt / (1 << 20):.0f} | {kv / (1 << 20):.1f} | {bw:.1f} | "
                   f"{roof:.0f}% | {roof_kv:.0f}% | "
                   f"{_ratio(r, peer, 'decode_tok_s')}{note} | {same_bw} | {_ratio(r, peer, 'prefill_tok_s')} | "
                   f"{_stolen_ms(r)} | "
                   f"{r['load_1min']:.1f} |")
    return out


def _quiet_rounds(r: dict) -> tuple[list[float], list[float]]:
    """(decode tok/s, probe GB/s) of the row's rounds during which the hypervisor took no CPU time
    (every round where steal is not reported)."""
    steals = r.get("steal_rounds_s") or [0.0] * len(r.get("decode_rounds_tok_s", []))
    pairs = [(rate, bw) for rate, bw, s in zip(r.get("decode_rounds_tok_s", []), r.get("bandwidth_rounds_gb_s", []),
                                                steals) if s == 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def quiet_table(rows: list[dict]) -> list[str]:
    """Markdown rows: each Colibri row beside its peer over the rounds the hypervisor left alone
    (a thread descheduled for tens of milliseconds stalls the other at the next barrier, so a
    round with stolen CPU time measures the host): decode tok/s as the median of those rounds,
    % roofline as their paired median, and the two ratios."""
    out = ["| shape | weights | threads | Colibri decode tok/s (rounds) | peer decode tok/s (rounds) | "
           "decode ratio | Colibri % roofline | peer % roofline | ratio at equal bandwidth |", "|" + "---|" * 9]
    for r in rows:
        if (r.get("engine") != "colibri" or "error" in r or "skipped" in r or r["weights"] == "hf-bf16"
                or "decode_rounds_tok_s" not in r):
            continue
        peer = next((p for p in rows if p["shape"] == r["shape"] and p["engine"] == "llama.cpp" and
                     p["weights"] == "gguf-" + r["weights"].split("-")[1] and p.get("threads") == r["threads"]
                     and "error" not in p), None)
        if peer is None:
            continue
        (cr, cb), (pr, pb) = _quiet_rounds(r), _quiet_rounds(peer)
        if not cr or not pr:
            out.append(f"| {r['shape']} | {r['weights']} | {r['threads']} | {len(cr)} quiet rounds | "
                       f"{len(pr)} quiet rounds |" + " |" * 4)
            continue
        c_roof = paired_roofline(r["bytes_per_token"], cr, cb)
        p_roof = paired_roofline(r["bytes_per_token"], pr, pb)
        c_rate, p_rate = statistics.median(cr), statistics.median(pr)
        out.append(f"| {r['shape']} | {r['weights']} | {r['threads']} | {c_rate:.2f} ({len(cr)}) | "
                   f"{p_rate:.2f} ({len(pr)}) | {c_rate / p_rate:.2f} | {100 * c_roof:.0f}% | {100 * p_roof:.0f}% | "
                   f"{c_roof / p_roof:.2f} |")
    return out


# ---- the run --------------------------------------------------------------------------------
def measure_shape(shape_name: str, args, threads: list[int], add) -> str:
    """Every measurement of one shape, each passed to add(row) as it finishes; llama.cpp's system info."""
    s = models.shape(shape_name)
    fits, bf16_gb = transformers_fits(s, args.transformers_max_gb)
    only = tuple(args.files.split(",")) if args.files else None
    paths = models.ensure(args.models, shape_name, hf=fits and only is None, only=only)
    if args.drop_caches:   # after writing any model, whose pages would stay cached as written
        drop_page_cache()
    prompt, gen = (32, 4) if args.quick else RUN_LENGTHS[shape_name]
    bytes_per_token: dict[str, int] = {}          # from Colibri's run on the same file
    kv_f16_bytes: dict[str, int] = {}             # its KV bytes per decode step, as an f16 cache
    system_info = ""
    for key, path in paths.items():
        warm(path)
        reason = colibri_reads(path)
        for t in threads:
            base = dict(shape=shape_name, weights=key, threads=t, prompt=prompt, gen=gen)
            if reason is not None:
                add({**base, "engine": "colibri", "skipped": f"not yet ({reason})"})
            else:
                result = colibri_run(path, t, prompt, gen, args.repeat, args.kv_type)
                bytes_per_token[key] = result.get("bytes_per_token", 0)
                kv_f16_bytes[key] = (result.get("kv_bytes_per_token", 0) * KV_ELEM_BYTES["f16"]
                                     // KV_ELEM_BYTES[result.get("kv_type", "f16")])
                add({**base, "engine": "colibri", **result})
            if key.startswith("gguf"):
                result = reference_run("llama.cpp", path, s.config.vocab_size, t, prompt, gen, args.repeat, "bf16")
                system_info = result.get("system_info", system_info)
                add({**base, "engine": "llama.cpp", **result, "bytes_per_token": bytes_per_token.get(key, 0),
                     "kv_bytes_per_token": kv_f16_bytes.get(key, 0)})   # llama.cpp's default cache: f16
            if key == "hf-bf16":
                for dtype, scale in (("bf16", 1), ("f32", 2)):
                    result = reference_run("transformers", path, s.config.vocab_size, t, prompt, gen,
                                           args.repeat, dtype)
                    add({**base, "engine": "transformers", "weights": f"hf-{dtype}", **result,
                         "bytes_per_token": scale * bytes_per_token.get(key, 0),
                         "kv_bytes_per_token": scale * kv_f16_bytes.get(key, 0)})
    if not fits and only is None:
        add(dict(shape=shape_name, engine="transformers", weights="hf-bf16",
                 skipped=f"not run: {bf16_gb:.1f} GB of bf16 weights > --transformers-max-gb "
                         f"{args.transformers_max_gb:g} or the memory available"))
    return system_info


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("/work/bench_models"))
    p.add_argument("--shapes", default="mixtral-small,olmoe-1b-7b",
                   help=f"comma-separated, of {', '.join(models.SHAPES)} (gpt-oss-20b: a 12 GB file)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--files", default=None, metavar="KEYS",
                   help="measure only these files of each shape, e.g. gguf-q4_k_m,gguf-q6_k (K-quant files "
                        "are written by llama.cpp's quantizer from the q4_0 GGUF; see models.REQUANTIZED)")
    p.add_argument("--repeat", type=int, default=5, help="rounds per process (medians; more rounds leave more "
                                                          "that the hypervisor did not disturb)")
    p.add_argument("--kv-type", choices=["f16", "f32"], default="f16",
                   help="Colibri's KV cache type (default f16: the type of llama.cpp's default cache)")
    p.add_argument("--transformers-max-gb", type=float, default=8.0,
                   help="run transformers only when the bf16 weights are at most this big")
    p.add_argument("--quick", action="store_true", help="a pipeline check: 32-token prompt, 4 tokens, 1 round")
    p.add_argument("--out", type=Path, default=Path("/work/bench_models/results.json"))
    p.add_argument("--drop-caches", action="store_true",
                   help="drop the page cache first (root), so model files are read afresh (see drop_page_cache)")
    p.add_argument("--tables-from", type=Path, default=None, metavar="JSON",
                   help="measure nothing: print the tables of an earlier run's --out file")
    args = p.parse_args()
    if args.tables_from is not None:
        saved = json.loads(args.tables_from.read_text())
        bandwidth = {int(t): bw for t, bw in saved["bandwidth_gb_s"].items()}
        print("\n".join(table(saved["rows"], bandwidth) + [""] + quiet_table(saved["rows"])))
        return
    threads = [int(t) for t in args.threads.split(",")]
    if args.quick:
        args.repeat = 1
    started = time.time()
    info = machine()
    print(json.dumps(info, indent=1), flush=True)
    bandwidth = {t: read_bandwidth(t) for t in threads}
    print("read bandwidth GB/s: " + ", ".join(f"{t} thread(s) {bw:.2f}" for t, bw in bandwidth.items()), flush=True)
    rows: list[dict] = []

    def add(row: dict) -> None:
        row["load_1min"] = os.getloadavg()[0]        # the machine's load over the measurement's last minute
        rows.append(row)
        print(_progress(row), flush=True)

    system_info = ""
    for shape_name in args.shapes.split(","):
        system_info = measure_shape(shape_name, args, threads, add) or system_info
    lines = table(rows, bandwidth)
    quiet = quiet_table(rows)
    print("\n".join(lines + [""] + quiet))
    print(f"llama.cpp: {system_info}")
    print(f"total {time.time() - started:.0f} s; load average at the end {os.getloadavg()}")
    args.out.write_text(json.dumps(dict(machine=info, bandwidth_gb_s=bandwidth, llama_cpp=system_info,
                                        rows=rows, table=lines, quiet_table=quiet), indent=1))


if __name__ == "__main__":
    main()
