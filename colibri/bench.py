"""What `colibri bench` measures: load time, prefill and decode speed, per-token
latency, peak RSS, weight bytes read per decode token against the machine's
read bandwidth, and (on request) where a decode step's time goes.

Prompts are seeded random token ids, decoding is greedy (argmax), so a run
needs no tokenizer and repeats exactly. The read bandwidth is probed right
after every round's decode and each round's share of it is computed against
its own probe (the bandwidth of some machines moves from minute to minute);
the roofline fraction is the median over rounds. Peak RSS is the process's
high-water mark after the first round, before the first probe maps its
buffer (later rounds reuse the same context): run one measurement per process
for a meaningful figure (the CLI does).
"""
from __future__ import annotations

import ctypes
import os
import resource
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from . import _native

PROBE_BYTES = 1 << 30        # past the last-level cache (480 MiB on some servers)
PROBE_PASSES = 3
SAMPLING = "sampling"        # the one stage measured in Python
DECODE_INPUTS = ("greedy", "random")


@dataclass
class StepProfile:
    """Seconds per step by stage (a decode token, or a whole prefill); `layers` holds one such
    dict per layer on request. `busy` / `wait`: per stage, each thread's seconds per step at work
    and idle at the ends of pool runs (thread 0 is the caller). `experts`: per MoE layer, per
    expert, its tokens, weight bytes read and thread-seconds per step (empty lists for dense
    layers)."""

    seconds: dict[str, float]
    layers: list[dict[str, float]] = field(default_factory=list)
    busy: dict[str, list[float]] = field(default_factory=dict)
    wait: dict[str, list[float]] = field(default_factory=dict)
    experts: list[dict[str, list[float]]] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


@dataclass
class BenchResult:
    model: str
    architecture: str
    isa: str
    threads: int
    prompt_tokens: int
    gen_tokens: int
    repeat: int
    load_s: float
    prefill_tok_s: float          # median over repeats
    decode_tok_s: float           # median over repeats
    p50_ms: float                 # per decode token (forward + sampling), all repeats pooled
    p99_ms: float
    peak_rss_bytes: int
    bytes_per_token: int          # weight bytes one decode step reads
    kv_bytes_per_token: int       # KV cache bytes one decode step reads, mean over the decode
    read_bandwidth_gb_s: float | None    # the machine's read bandwidth with this many threads, median of the
                                         # rounds' probes (None: a paged model, not probed: see paging)
    roofline_fraction: float | None      # median over rounds of bytes_per_token * decode tok/s / that round's bandwidth
    roofline_kv_fraction: float | None   # the same with the KV bytes counted too
    decode_rounds_tok_s: list[float]      # [repeat] each round's decode tok/s
    bandwidth_rounds_gb_s: list[float] | None   # [repeat] the bandwidth probed right after each round
    steal_rounds_s: list[float] | None    # [repeat] CPU time the hypervisor took from this machine
                                          # during each round's decode (None: not reported here)
    io_read_rounds_bytes_per_token: list[float | None]   # [repeat] bytes read from storage per decode token
                                                         # (/proc/self/io: page-cache misses and direct reads)
    huge_pages: bool              # the KV + scratch arena got transparent huge pages
    kv_type: str                  # the KV cache's element type, "f32" or "f16"
    pinned: bool = False          # the worker threads were pinned to CPUs of their own
    placement: str = "cores"      # the threads' placement (--numa)
    decode_input: str = "greedy"  # what each decode step was fed: "greedy" (the argmax) or "random" ids
    precision: str = "default"    # "default" or "exact" (f32 activations for block-type weights)
    profile: StepProfile | None = None           # per decode token, the last round
    prefill_profile: StepProfile | None = None   # per prefill of the prompt, the last round
    paging: dict | None = None    # a paged model: its plan, the expert cache's counters, the storage
                                  # rate probed after each round and the decode's share of that limit
                                  # (colibri.bench_paging.report)

    def as_json(self) -> dict:
        out = asdict(self)
        for key in ("profile", "prefill_profile", "paging"):
            if out[key] is None:
                out.pop(key)
        return out


# ---- machine ----------------------------------------------------------------
def measure_read_bandwidth(threads: int, nbytes: int = PROBE_BYTES, passes: int = PROBE_PASSES) -> float:
    """Best-of-`passes` read bandwidth in GB/s: `threads` threads of libcolibri
    read their shares of one nbytes buffer, by a plain loop and through the
    BF16 dot kernel's prefetching stream (colibri_read_bandwidth)."""
    rate = _native.lib().colibri_read_bandwidth(threads, nbytes, passes)
    if rate < 0:
        raise RuntimeError(_native.last_error())
    return rate


def paired_roofline(bytes_per_token: float, decode_rounds_tok_s: list[float],
                    bandwidth_rounds_gb_s: list[float]) -> float:
    """Median over rounds of bytes_per_token x the round's decode tok/s / the bandwidth probed
    right after that round: each round against the bandwidth of its own moment."""
    return statistics.median(bytes_per_token * rate / (bw * 1e9)
                             for rate, bw in zip(decode_rounds_tok_s, bandwidth_rounds_gb_s, strict=True))


def cpu_steal_seconds() -> float | None:
    """CPU time the hypervisor has run other guests on this machine's CPUs since boot, summed
    over CPUs (Linux /proc/stat `steal`); None where the system does not report it. A decode
    round that loses a thread for tens of milliseconds stalls the other one at the next
    barrier, so rounds with steal read slow for reasons outside the engine."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def steal_since(before: float | None) -> float | None:
    """Seconds stolen since cpu_steal_seconds() read `before` (None where not reported)."""
    after = cpu_steal_seconds()
    return after - before if before is not None and after is not None else None


def colibri_isa() -> str:
    """The SIMD kernel set libcolibri runs with here."""
    return _native.lib().colibri_isa().decode()


def process_read_bytes() -> int | None:
    """Bytes this process has had read from storage (Linux /proc/self/io read_bytes: page-cache
    misses and direct reads, every thread), None where it is not reported."""
    try:
        for line in open("/proc/self/io"):
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_bytes() -> int:
    """This process's resident-set high-water mark."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024     # Linux reports KiB


# ---- steps --------------------------------------------------------------------
def _prefill(model, prompt: np.ndarray) -> np.ndarray:
    """Run `prompt` [T] into sequence 0 from position 0; the last token's logits [V]."""
    step = model._context().n_batch
    logits = None
    for start in range(0, len(prompt), step):
        chunk = prompt[start:start + step]                                    # [n]
        want = np.zeros(len(chunk), dtype=bool)                               # [n]
        want[-1] = start + len(chunk) == len(prompt)
        logits = model.forward(chunk, np.arange(start, start + len(chunk)), np.zeros(len(chunk), int), want)
    return logits[0]


def decode_inputs(vocab: int, n: int, seed: int) -> list[int]:
    """The token ids `--decode-input random` feeds the decode steps (seeded, one per step)."""
    return np.random.default_rng(seed + 1).integers(0, vocab, size=n).tolist()


def _decode(model, logits: np.ndarray, first_pos: int, n: int,
            inputs: list[int] | None = None) -> tuple[list[float], float]:
    """Decode n tokens after the prompt, each step's input its predecessor's argmax (greedy) or,
    given `inputs`, inputs[i] (the argmax still taken); (seconds per token, seconds sampling)."""
    latencies, sampling = [], 0.0
    token = int(np.argmax(logits))
    for i in range(n):
        if inputs is not None:
            token = inputs[i]
        start = time.perf_counter()
        logits = model.forward([token], [first_pos + i], [0])[0]              # [V]
        picked = time.perf_counter()
        token = int(np.argmax(logits))
        done = time.perf_counter()
        sampling += done - picked
        latencies.append(done - start)
    return latencies, sampling


class _Profiler:
    """libcolibri's stage timers on one context, over the steps run inside `with`."""

    def __init__(self, model, per_layer: bool):
        self.handle = model._context().handle
        self.n_layers = model.config.num_layers
        self.n_threads = model.threads
        self.n_experts = model.config.num_experts or 0
        self.per_layer = per_layer
        self.lib = _native.lib()

    def __enter__(self) -> "_Profiler":
        if self.lib.colibri_profile_enable(self.handle, 1):
            raise RuntimeError(_native.last_error())
        return self

    def __exit__(self, *exc) -> None:
        self.lib.colibri_profile_enable(self.handle, 0)

    def read(self, layer: int) -> dict[str, float]:
        n = len(_native.PROFILE_STAGES)
        seconds = (ctypes.c_double * n)()
        if self.lib.colibri_profile_read(self.handle, layer, seconds, n):
            raise RuntimeError(_native.last_error())
        return dict(zip(_native.PROFILE_STAGES, seconds))

    def read_threads(self, stage: int) -> tuple[list[float], list[float]]:
        """Each thread's (busy, waiting) seconds in `stage`."""
        busy, wait = (ctypes.c_double * self.n_threads)(), (ctypes.c_double * self.n_threads)()
        if self.lib.colibri_profile_read_threads(self.handle, stage, busy, wait, self.n_threads):
            raise RuntimeError(_native.last_error())
        return list(busy), list(wait)

    def read_experts(self, layer: int) -> dict[str, list[float]]:
        """Per expert of `layer`: tokens, weight bytes and thread-seconds."""
        n = self.n_experts
        tokens, nbytes, seconds = (ctypes.c_int64 * n)(), (ctypes.c_int64 * n)(), (ctypes.c_double * n)()
        if self.lib.colibri_profile_read_experts(self.handle, layer, tokens, nbytes, seconds, n):
            raise RuntimeError(_native.last_error())
        return {"tokens": list(tokens), "bytes": list(nbytes), "seconds": list(seconds)}

    def step_profile(self, n_steps: int, wall: float, sampling: float) -> StepProfile:
        """Seconds per step by stage; Python's share of the wall time beyond the C
        step and the sampling is counted as 'other', so the stages sum to the wall time."""
        core = self.read(-1)
        seconds = {stage: s / n_steps for stage, s in core.items()}
        seconds[SAMPLING] = sampling / n_steps
        seconds["other"] += max(0.0, wall - sum(core.values()) - sampling) / n_steps
        layers = []
        if self.per_layer:
            layers = [{stage: s / n_steps for stage, s in self.read(l).items()} for l in range(self.n_layers)]
        busy, wait = {}, {}
        for index, stage in enumerate(_native.PROFILE_STAGES):
            b, w = self.read_threads(index)
            busy[stage], wait[stage] = [x / n_steps for x in b], [x / n_steps for x in w]
        experts = []
        for layer in range(self.n_layers if self.n_experts else 0):
            e = self.read_experts(layer)
            experts.append({key: [x / n_steps for x in values] for key, values in e.items()})
        return StepProfile(seconds, layers, busy, wait, experts)


# ---- the benchmark -------------------------------------------------------------
def kv_read_bytes(config, kv_type: str, prompt_tokens: int, gen_tokens: int) -> int:
    """The KV cache bytes a decode step reads, averaged over gen_tokens steps after a
    prompt_tokens prompt: step i attends, in each layer, prompt + i + 1 positions (at most
    that layer's sliding window), each holding the layer's K and V in kv_type."""
    from .summary import kv_bytes_per_position

    per_layer_position = kv_bytes_per_position(config, kv_type) / config.num_layers
    windows = config.layer_windows or (config.sliding_window,) * config.num_layers   # 0: full attention
    attended = sum(min(prompt_tokens + i + 1, w or prompt_tokens + gen_tokens)
                   for w in windows for i in range(gen_tokens))
    return round(per_layer_position * attended / gen_tokens)


def run(path, *, threads: int | None = None, prompt_tokens: int = 512, gen_tokens: int = 128,
        repeat: int = 3, bandwidth_gb_s: float | None = None, profile: bool = False,
        profile_layers: bool = False, seed: int = 0, kv_type: str = "f32", numa: str | None = None,
        mem_budget="auto", expert_slots: int | None = None, expert_profile=None, prefetch: bool | int = True,
        decode_input: str = "greedy", precision: str = "default") -> BenchResult:
    """Load `path` and measure it; `repeat` rounds of prefill + decode from an empty cache.

    bandwidth_gb_s: the read bandwidth to compare against (None: probe it after
    every round; the first probe follows the peak RSS reading). profile: time the
    decode steps of the last round by stage (profile_layers: also per layer).
    mem_budget, expert_slots, expert_profile, prefetch: as colibri.load. A paged
    model's memory bandwidth is not probed (its 1 GiB buffer would break the
    budget); the storage read rate is, after every round (bench_paging).
    decode_input: "greedy" feeds each decode step its predecessor's argmax;
    "random" feeds seeded random ids (decode_inputs) — greedy decoding of a
    random-weight model soon loops over a few tokens, and so would its routing.
    precision: as colibri.load ("exact": f32 activations for block-type weights).
    """
    import colibri

    from . import bench_paging

    from .summary import summarize

    for name, value in (("prompt", prompt_tokens), ("gen", gen_tokens), ("repeat", repeat)):
        if value < 1:
            raise ValueError(f"--{name} must be a positive integer, got {value}")
    if decode_input not in DECODE_INPUTS:
        raise ValueError(f"--decode-input must be one of {', '.join(DECODE_INPUTS)}, got {decode_input!r}")
    if bandwidth_gb_s is not None and not bandwidth_gb_s > 0:
        raise ValueError(f"--bandwidth must be a positive number of GB/s, got {bandwidth_gb_s}")
    n_ctx = prompt_tokens + gen_tokens
    start = time.perf_counter()
    model = colibri.load(path, threads=threads, n_ctx=n_ctx, n_batch=min(prompt_tokens, 512), kv_type=kv_type,
                         numa=numa, mem_budget=mem_budget, expert_slots=expert_slots,
                         expert_profile=expert_profile, prefetch=prefetch, precision=precision)
    load_s = time.perf_counter() - start
    with model:
        c = model.config
        if model.n_ctx < n_ctx:
            raise ValueError(f"--prompt {prompt_tokens} + --gen {gen_tokens} exceed the model's context "
                             f"length {model.n_ctx}")
        prompt = np.random.default_rng(seed).integers(0, c.vocab_size, size=prompt_tokens)  # [P]
        inputs = decode_inputs(c.vocab_size, gen_tokens, seed) if decode_input == "random" else None
        prefill_rates, decode_rates, latencies, bandwidths, steals, io_rounds = [], [], [], [], [], []
        step_profile, peak = None, 0
        prefill_profile = None
        paged = model.paging is not None
        prefill_stats = decode_stats = None
        read_rounds, storage_rounds = [], []     # paged: bytes read per decode token, storage GB/s, per round
        model.paging_stats(reset=True)
        for round_index in range(repeat):
            last = round_index == repeat - 1
            start = time.perf_counter()
            if profile and last:
                with _Profiler(model, profile_layers) as profiler:
                    logits = _prefill(model, prompt)
                    prefill_profile = profiler.step_profile(1, time.perf_counter() - start, 0.0)
            else:
                logits = _prefill(model, prompt)
            prefill_rates.append(prompt_tokens / (time.perf_counter() - start))
            if paged:
                prefill_stats = bench_paging.add_stats(prefill_stats, model.paging_stats(reset=True))
            steal_before, io_before = cpu_steal_seconds(), process_read_bytes()
            if profile and last:
                with _Profiler(model, profile_layers) as profiler:
                    steps, sampling = _decode(model, logits, prompt_tokens, gen_tokens, inputs)
                    step_profile = profiler.step_profile(gen_tokens, sum(steps), sampling)
            else:
                steps, _ = _decode(model, logits, prompt_tokens, gen_tokens, inputs)
            decode_rates.append(gen_tokens / sum(steps))
            steals.append(steal_since(steal_before))
            io_after = process_read_bytes()
            io_rounds.append(None if io_before is None or io_after is None else (io_after - io_before) / gen_tokens)
            latencies += steps
            if round_index == 0:
                peak = peak_rss_bytes()   # before any probe maps its buffer
            if paged:
                stats = model.paging_stats(reset=True)
                decode_stats = bench_paging.add_stats(decode_stats, stats)
                read_rounds.append(stats.bytes_read_per_token)
                storage_rounds.append(bench_paging.measure_storage_read(bench_paging.model_files(model),
                                                                        model.paging.read_bytes))
            if bandwidth_gb_s or not paged:
                bandwidths.append(bandwidth_gb_s or measure_read_bandwidth(model.threads))
        summary = summarize(model)
        threads_used, huge_pages, kv_used = model.threads, model.huge_pages, model.kv_type
        pinned, placement = model._context().pinned, model._context().placement
        paging = (bench_paging.report(model.paging, prefill_stats, decode_stats, decode_rates, read_rounds,
                                      storage_rounds) if paged else None)
    decode = statistics.median(decode_rates)
    kv_bytes = kv_read_bytes(c, kv_used, prompt_tokens, gen_tokens)
    roofline = paired_roofline(summary.bytes_per_token, decode_rates, bandwidths) if bandwidths else None
    lat_ms = np.array(latencies) * 1e3                                                # [repeat * gen]
    return BenchResult(
        model=str(path), architecture=c.architecture, isa=colibri_isa(), threads=threads_used,
        prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, repeat=repeat, load_s=load_s,
        prefill_tok_s=statistics.median(prefill_rates), decode_tok_s=decode,
        p50_ms=float(np.percentile(lat_ms, 50)), p99_ms=float(np.percentile(lat_ms, 99)),
        peak_rss_bytes=peak, bytes_per_token=summary.bytes_per_token, kv_bytes_per_token=kv_bytes,
        read_bandwidth_gb_s=statistics.median(bandwidths) if bandwidths else None, roofline_fraction=roofline,
        roofline_kv_fraction=(roofline * (summary.bytes_per_token + kv_bytes) / summary.bytes_per_token
                              if bandwidths else None),
        decode_rounds_tok_s=decode_rates, bandwidth_rounds_gb_s=bandwidths or None,
        steal_rounds_s=None if None in steals else steals, io_read_rounds_bytes_per_token=io_rounds,
        huge_pages=huge_pages, kv_type=kv_used, pinned=pinned, placement=placement, decode_input=decode_input,
        precision=precision,
        profile=step_profile, prefill_profile=prefill_profile, paging=paging)


# ---- report ------------------------------------------------------------------------
def report_lines(r: BenchResult) -> list[str]:
    """The human-readable report of one run."""
    from .summary import human_bytes

    rows = [
        ("model", f"{r.model} ({r.architecture})"),
        ("kernels", f"{r.isa}, {r.threads} thread{'s' if r.threads != 1 else ''}"
                    f"{', pinned' if r.pinned else ''}{'' if r.placement == 'cores' else ', ' + r.placement}"),
        ("load", f"{r.load_s:.3f} s"),
        ("prefill", f"{r.prefill_tok_s:.1f} tok/s ({r.prompt_tokens} tokens, median of {r.repeat})"),
        ("decode", f"{r.decode_tok_s:.2f} tok/s ({r.gen_tokens} tokens, median of {r.repeat})"),
        ("per token", f"p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms"),
        ("peak RSS", human_bytes(r.peak_rss_bytes)),
        ("KV + scratch", ("transparent huge pages" if r.huge_pages else "normal pages") + f", {r.kv_type} KV"
         + (", exact (f32 activations)" if r.precision == "exact" else "")),
    ]
    if r.roofline_fraction is not None:
        rows += [
            ("read per token", f"{human_bytes(r.bytes_per_token)} -> {r.bytes_per_token * r.decode_tok_s / 1e9:.2f} "
                               f"GB/s, {100 * r.roofline_fraction:.1f}% of the read bandwidth probed after each round "
                               f"(median {r.read_bandwidth_gb_s:.2f} GB/s)"),
            ("KV read per token", f"{human_bytes(r.kv_bytes_per_token)} ({r.kv_type}, mean over the decode) -> "
                                  f"weights and KV {100 * r.roofline_kv_fraction:.1f}% of the read bandwidth"),
        ]
    if r.paging is not None:
        from .bench_paging import report_lines as paging_lines
        rows += paging_lines(r.paging)
    if r.steal_rounds_s is not None and sum(r.steal_rounds_s) > 0:
        rows.append(("CPU stolen", f"{1e3 * sum(r.steal_rounds_s):.0f} ms during the decode rounds (by the "
                                   f"hypervisor; rounds: {', '.join(f'{1e3 * s:.0f}' for s in r.steal_rounds_s)} ms)"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{key:<{width}}  {value}" for key, value in rows]
    if r.profile is not None:
        lines += [""] + profile_lines(r.profile)
    if r.prefill_profile is not None:
        lines += [""] + profile_lines(r.prefill_profile, f"prefill profile ({r.prompt_tokens} tokens)", "step")
    return lines


def profile_lines(p: StepProfile, title: str = "decode step profile", unit: str = "token") -> list[str]:
    """Per-stage time and share of a step; each thread's busy and waiting time per stage; the
    routed experts' bytes and time; per layer when recorded."""
    stages = list(p.seconds)
    total = p.total
    lines = [f"{title} ({1e3 * total:.3f} ms per {unit})",
             f"  {'stage':<12} {'ms/' + unit:>10} {'share':>7}"]
    for stage in stages:
        lines.append(f"  {stage:<12} {1e3 * p.seconds[stage]:>10.3f} {100 * p.seconds[stage] / total:>6.1f}%")
    if p.busy:
        lines += [""] + thread_lines(p, unit)
    if any(layer["seconds"] for layer in p.experts):
        lines += [""] + expert_lines(p, unit)
    if p.layers:
        core = [stage for stage in p.layers[0] if stage != "lm_head"]   # lm_head runs after the layers
        lines += ["", f"per layer (ms/{unit})", f"  {'layer':<6}" + "".join(f"{s:>12}" for s in core)]
        for l, seconds in enumerate(p.layers):
            lines.append(f"  {l:<6}" + "".join(f"{1e3 * seconds[s]:>12.3f}" for s in core))
    return lines


def thread_lines(p: StepProfile, unit: str) -> list[str]:
    """Per stage: the threads' mean busy and waiting time and how far the busiest is from the mean
    ("spread"); then each thread's waiting time per stage (thread 0 is the caller, which also runs
    the serial parts between pool runs, while the others wait)."""
    stages = [s for s in p.busy if max(p.busy[s] + p.wait[s]) > 0]
    lines = [f"threads (ms/{unit}): mean busy, mean waiting, busiest thread vs the mean",
             f"  {'stage':<12} {'busy':>9} {'waiting':>9} {'spread':>8}"]
    for stage in stages:
        busy, wait = p.busy[stage], p.wait[stage]
        mean = sum(busy) / len(busy)
        spread = f"{100 * (max(busy) / mean - 1):+.0f}%" if mean > 0 else "-"
        lines.append(f"  {stage:<12} {1e3 * mean:>9.3f} {1e3 * sum(wait) / len(wait):>9.3f} {spread:>8}")
    lines += ["", f"waiting per thread (ms/{unit})", "  " + f"{'thread':<7}" + "".join(f"{s:>12}" for s in stages)]
    for i in range(len(p.busy[stages[0]]) if stages else 0):
        lines.append(f"  {i:<7}" + "".join(f"{1e3 * p.wait[s][i]:>12.3f}" for s in stages))
    return lines


def expert_lines(p: StepProfile, unit: str) -> list[str]:
    """The routed experts' work per step: per MoE layer, the experts run, their tokens, weight bytes,
    thread time and GB/s per thread-second (min / median / max over the layer's experts)."""
    lines = [f"routed experts per {unit} (per layer: experts run, tokens, MiB read, thread-ms, "
             "GB/s per thread-second min / median / max)"]
    for l, e in enumerate(p.experts):
        ran = [i for i, s in enumerate(e["seconds"]) if s > 0]
        if not ran:
            continue
        rates = sorted(e["bytes"][i] / e["seconds"][i] / 1e9 for i in ran)
        lines.append(f"  layer {l:<3} {len(ran):>4} experts {sum(e['tokens']):>8.1f} tok "
                     f"{sum(e['bytes']) / (1 << 20):>9.2f} MiB {1e3 * sum(e['seconds']):>9.3f} ms  "
                     f"{rates[0]:.1f} / {statistics.median(rates):.1f} / {rates[-1]:.1f} GB/s")
    return lines
