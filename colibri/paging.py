"""Models larger than memory: the memory budget, what bounds it here, and how many expert slots
it buys (docs/PAGING.md).

The C core owns the expert cache (csrc/core/expert_cache.c); this module decides whether a
model is paged and with how many slots:

    budget = the process's resident set at load (Python, tokenizer, libraries)
           + the resident weights (everything but the routed experts, page-rounded)
           + the context's arena (KV cache and scratch, at its full size)
           + paging's own tables and reader stacks
           + a margin (32 MiB + 2% of the budget, + one slot per reader for buffered reads)
           + n_slots x slot_bytes

A budget is bytes, or a size with a unit: K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024,
KB/MB/GB/TB powers of 1000 ("6GiB", "1500M", "7.5G"); "auto" (the default) pages only when
the model does not fit in the memory this process may use (its cgroup's limit, v1 or v2, and
the machine's MemAvailable); "off" never pages.
"""
from __future__ import annotations

import ctypes
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import _native
from .errors import ModelError

AUTO = "auto"
OFF = ("off", "none")
UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
         "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
         "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*")
UNLIMITED = 1 << 62             # cgroup v1 writes "no limit" as a number near 2^63
MARGIN_BYTES = 32 << 20
MARGIN_SHARE = 0.02
IO_THREADS = 4
PREFETCH_DEPTH = 1   # prefetch=True: the next MoE layer (2, the next two, read 15% more and decoded slower: PAGING.md)
BUDGET_HELP = "a size like 6GiB, 1500MiB, 7.5G or a number of bytes, 'auto' or 'off'"


def parse_budget(value) -> int | str | None:
    """bytes (int > 0), "auto", or None for "off"; ValueError with one line otherwise."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"mem_budget: expected {BUDGET_HELP}, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"mem_budget: must be positive, got {value}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"mem_budget: expected {BUDGET_HELP}, got {value!r}")
    text = value.strip().lower()
    if text == AUTO:
        return AUTO
    if text in OFF:
        return None
    match = _SIZE.fullmatch(text)
    if not match or match.group(2) not in UNITS:
        raise ValueError(f"mem_budget: expected {BUDGET_HELP}, got {value!r}")
    size = int(float(match.group(1)) * UNITS[match.group(2)])
    if size <= 0:
        raise ValueError(f"mem_budget: must be positive, got {value!r}")
    return size


# ---- what this process may use ------------------------------------------------------------
def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text == "max" or not text.isdigit() else int(text)


def _cgroup_dirs(mount: Path, relative: str) -> list[Path]:
    """The cgroup directory of this process under a controller's mount point, then its ancestors
    (limits of every ancestor apply). A path that is not there (a namespace root) falls back to
    the mount point itself."""
    parts = [p for p in relative.strip("/").split("/") if p]
    dirs = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()] or [mount]


def cgroup_memory_limit() -> tuple[int, str] | None:
    """(bytes, where) of the tightest memory limit over this process's cgroup and its ancestors
    (v2 memory.max, v1 memory.limit_in_bytes), or None where there is none."""
    try:
        groups = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v2_path = v1_path = None
    for line in groups:
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    best = None
    for line in mounts:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount = Path(fields[4])
        fstype, _, options = line.split(" - ", 1)[1].partition(" ")
        candidates = []
        if fstype == "cgroup2" and v2_path is not None:
            candidates = [(d / "memory.max", "cgroup v2") for d in _cgroup_dirs(mount, v2_path)]
        elif fstype == "cgroup" and v1_path is not None and "memory" in options.split(" ", 1)[-1].split(","):
            candidates = [(d / "memory.limit_in_bytes", "cgroup v1") for d in _cgroup_dirs(mount, v1_path)]
        for path, kind in candidates:
            limit = _read_int(path)
            if limit is not None and limit < UNLIMITED and (best is None or limit < best[0]):
                best = (limit, f"{kind} limit {path}")
    return best


def mem_available() -> int | None:
    """The machine's MemAvailable (/proc/meminfo), None where it is not reported."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def process_rss() -> int:
    """This process's resident set now (VmRSS), 0 where it is not reported."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def available_memory() -> tuple[int, str] | None:
    """(bytes, where) this process may use: its cgroup's limit, or MemAvailable plus what it
    already holds, whichever is smaller; None where neither is known."""
    options = []
    limit = cgroup_memory_limit()
    if limit is not None:
        options.append(limit)
    free = mem_available()
    if free is not None:
        options.append((free + process_rss(), "MemAvailable"))
    return min(options) if options else None


# ---- the plan ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PagingPlan:
    """How a paged model spends its budget (bytes)."""

    budget: int | None          # None: the slot count was given (expert_slots), not derived
    source: str                 # where the budget came from
    n_slots: int
    slot_bytes: int
    n_experts: int
    resident_bytes: int         # weights that stay in memory
    arena_bytes: int            # the context's KV cache and scratch
    process_bytes: int          # the process's resident set when paging started
    overhead_bytes: int         # paging's tables, scratch and readers
    margin_bytes: int
    read_bytes: int = 0         # the largest single read (a piece, at most 1 MiB, of an expert's window)

    @property
    def fixed_bytes(self) -> int:
        return (self.resident_bytes + self.arena_bytes + self.process_bytes + self.overhead_bytes
                + self.margin_bytes)


def prefetch_depth(value) -> int:
    """colibri.load's `prefetch` as the C core's read-ahead depth: True the default
    (PREFETCH_DEPTH), False 0, or 0, 1, 2; anything else is refused with one line."""
    if isinstance(value, bool):
        return PREFETCH_DEPTH if value else 0
    if isinstance(value, int) and 0 <= value <= 2:
        return value
    raise ValueError(f"prefetch must be True, False, 0, 1 or 2, got {value!r}")


def margin(budget: int, slot_bytes: int, io_threads: int) -> int:
    return MARGIN_BYTES + int(MARGIN_SHARE * budget) + io_threads * slot_bytes


def model_bytes(weights) -> int:
    """Bytes of every weight the model reads."""
    return sum(ref.nbytes for _, ref in weights)


def sizes_of(native, n_batch: int) -> _native.PagingSizes:
    sizes = _native.PagingSizes()
    if _native.lib().colibri_model_paging_sizes(native.handle, n_batch, ctypes.byref(sizes)):
        raise ModelError(_native.last_error())
    return sizes


def plan(native, context, *, budget: int | None, source: str, expert_slots: int | None, top_k: int,
         io_threads: int, where: str, resident_need: int) -> PagingPlan:
    """The slot count a budget buys once the model and its context exist (or expert_slots);
    ValueError naming the minimum when the budget cannot hold top_k slots (the least budget that
    pages with top_k slots, or holds the whole model (resident_need) if that is less)."""
    from .summary import human_bytes

    sizes = sizes_of(native, context.n_batch)
    arena = _native.lib().colibri_context_arena_bytes(context.handle)
    rss = process_rss()
    slot, fixed_parts = sizes.slot_bytes, (sizes.resident_bytes, arena, rss, sizes.overhead_bytes)
    if budget is None:
        return PagingPlan(None, source, min(expert_slots, sizes.n_experts), slot, sizes.n_experts,
                          *fixed_parts, 0, sizes.read_bytes)
    spare = budget - sum(fixed_parts) - margin(budget, slot, io_threads)
    n_slots = min(max(spare // slot, 0), sizes.n_experts)
    least = min(top_k, sizes.n_experts)
    if n_slots < least:
        need = sum(fixed_parts) + least * slot
        minimum = need
        while minimum < need + margin(minimum, slot, io_threads):   # the margin grows with the budget
            minimum = need + margin(minimum, slot, io_threads)
        if resident_need < minimum:
            raise ValueError(f"mem_budget {human_bytes(budget)} is too small for {where}: loaded whole it needs "
                             f"at least {human_bytes(resident_need)} (paging its experts would need more)")
        raise ValueError(
            f"mem_budget {human_bytes(budget)} is too small for {where}: the resident weights "
            f"({human_bytes(sizes.resident_bytes)}), KV cache and scratch ({human_bytes(arena)}), this process "
            f"({human_bytes(rss)}) and paging's tables ({human_bytes(sizes.overhead_bytes)}) with {least} expert "
            f"slots of {human_bytes(slot)} need at least {human_bytes(minimum)}")
    return PagingPlan(budget, source, int(n_slots), slot, sizes.n_experts, *fixed_parts,
                      margin(budget, slot, io_threads), sizes.read_bytes)


@dataclass(frozen=True)
class PagingRequest:
    """A load's decision to page, before the C model exists."""

    budget: int | None          # bytes, or None when expert_slots sets the count
    source: str                 # "mem_budget", "expert_slots", or the limit `auto` found
    expert_slots: int | None
    need: int                   # what the whole model would take resident (for the notice)
    auto: bool


def decide(config, weights, budget, expert_slots: int | None, kv_bytes: int, where: str) -> PagingRequest | None:
    """Whether to page, before the C model is built: when expert_slots is given, or when the
    weights, the KV cache and this process would not fit the budget ("auto": the memory
    available here). None: load resident."""
    from .summary import human_bytes

    moe = bool(config.moe_layers) and config.num_experts > 0
    # experts stored in another layout (gpt-oss's Hugging Face gate_up_proj) are copied at load:
    # there are no bytes in the file to read them back from
    converted = moe and any(slot.expert >= 0 and not ref.in_place for slot, ref in weights)
    cannot_page = (f"{where}: its routed experts are converted at load (not used in place from the file), "
                   "so they cannot be paged; page a GGUF file of it instead")

    def need(limit: int) -> int:   # the whole model resident, with the margin a budget of `limit` keeps
        return model_bytes(weights) + kv_bytes + process_rss() + margin(limit, 0, 0)

    if expert_slots is not None:
        if not moe:
            raise ValueError(f"expert_slots: {where} has no routed experts to page")
        if converted:
            raise ValueError(f"expert_slots: {cannot_page}")
        return PagingRequest(None, "expert_slots", expert_slots, need(0), False)
    if budget is None:
        return None
    source, auto = "mem_budget", budget == AUTO
    if auto:
        found = available_memory()
        if found is None:
            return None
        budget, source = found
    if need(budget) <= budget:
        return None
    if not moe:
        if auto:
            return None   # nothing to page: run as today, the kernel pages the weights
        raise ValueError(f"mem_budget {human_bytes(budget)} is too small for {where}: it needs about "
                         f"{human_bytes(need(budget))} and has no routed experts to page")
    if converted:
        if not auto:
            raise ValueError(f"mem_budget {human_bytes(budget)}: {cannot_page}")
        sys.stderr.write(f"colibri: {where} needs about {human_bytes(need(budget))}, more than the "
                         f"{human_bytes(budget)} available ({source}); {cannot_page.split(': ', 1)[1]}\n")
        return None
    return PagingRequest(budget, source, None, need(budget), auto)


def notice(where: str, p: PagingPlan, need: int) -> None:
    """The one line `auto` prints when it turns paging on."""
    from .summary import human_bytes

    sys.stderr.write(f"colibri: {where} needs about {human_bytes(need)}, more than the {human_bytes(p.budget)} "
                     f"available ({p.source}): paging its experts, {p.n_slots} of {p.n_experts} in memory "
                     f"(mem_budget / --mem-budget to change)\n")


def start(native, context, request: PagingRequest, *, top_k: int, where: str, prefetch: bool | int,
          profile_counts=None, io_threads: int = IO_THREADS) -> PagingPlan:
    """Plans the slots, turns paging on, pins the profile's hottest experts; the plan."""
    from . import expert_profile

    p = plan(native, context, budget=request.budget, source=request.source, expert_slots=request.expert_slots,
             top_k=top_k, io_threads=io_threads, where=where, resident_need=request.need)
    enable(context, p, prefetch=prefetch, io_threads=io_threads)
    if profile_counts is not None:
        pin(context, *expert_profile.hottest(profile_counts, p.n_slots))
    if request.auto:
        notice(where, p, request.need)
    return p


def enable(context, p: PagingPlan, *, prefetch: bool | int, io_threads: int, direct_io: bool = True,
           aging_tokens: int = 0) -> None:
    """Turns paging on for a context (colibri_context_page_experts); prefetch: prefetch_depth's."""
    options = _native.PagingOptions(n_slots=p.n_slots, n_io_threads=io_threads, prefetch=prefetch_depth(prefetch),
                                    direct_io=int(direct_io), aging_tokens=aging_tokens)
    if _native.lib().colibri_context_page_experts(context.handle, ctypes.byref(options)):
        raise ModelError(_native.last_error())


def pin(context, layers: list[int], experts: list[int]) -> None:
    import numpy as np

    ls = np.ascontiguousarray(layers, dtype=np.int32)    # [n]
    es = np.ascontiguousarray(experts, dtype=np.int32)   # [n]
    if _native.lib().colibri_paging_pin(context.handle, _native.as_ptr(ls, ctypes.c_int32),
                                        _native.as_ptr(es, ctypes.c_int32), len(ls)):
        raise ModelError(_native.last_error())


# ---- telemetry ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PagingStats:
    """A paging context's counters (colibri_paging_stats), with the rates derived from them."""

    n_slots: int
    slot_bytes: int
    pinned: int
    direct_io: bool
    huge_pages: bool
    tokens: int
    lookups: int
    hits: int
    misses: int
    prefetches: int
    prefetch_used: int
    predicted: int
    predicted_needed: int
    needed_after_prediction: int
    reads: int
    bytes_read: int
    waves: int
    stall_seconds: float
    predicted2: int = 0
    predicted2_needed: int = 0
    needed_after_prediction2: int = 0
    stall_ahead_seconds: float = 0.0
    early_waves: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of the needed experts found in a slot (no read on demand), read ahead or not."""
        return self.hits / self.lookups if self.lookups else 0.0

    @property
    def cache_hit_rate(self) -> float:
        """Share of the needed experts that were in a slot before their layer's prediction: the
        cache's own hits, without the read-ahead."""
        return (self.hits - self.prefetch_used) / self.lookups if self.lookups else 0.0

    @property
    def bytes_read_per_token(self) -> float:
        return self.bytes_read / self.tokens if self.tokens else 0.0

    @property
    def prefetch_accuracy(self) -> float:
        """Share of the experts a layer needed that its prediction named."""
        return self.predicted_needed / self.needed_after_prediction if self.needed_after_prediction else 0.0

    @property
    def prefetch_precision(self) -> float:
        """Share of the predicted experts that the layer then needed."""
        return self.predicted_needed / self.predicted if self.predicted else 0.0

    @property
    def prefetch2_accuracy(self) -> float:
        """Share of the experts a layer needed that the prediction made two MoE layers before it
        (the read-ahead depth 2: that layer's router on the input two layers earlier) named."""
        return self.predicted2_needed / self.needed_after_prediction2 if self.needed_after_prediction2 else 0.0

    @property
    def stall_ms_per_token(self) -> float:
        return 1e3 * self.stall_seconds / self.tokens if self.tokens else 0.0

    @property
    def stall_ahead_ms_per_token(self) -> float:
        """Of the stall, waiting for experts read ahead whose read had not finished (the rest:
        reads on demand, and evictions waiting for a read in flight)."""
        return 1e3 * self.stall_ahead_seconds / self.tokens if self.tokens else 0.0

    def as_dict(self) -> dict:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name in ("hit_rate", "cache_hit_rate", "bytes_read_per_token", "prefetch_accuracy",
                     "prefetch_precision", "prefetch2_accuracy", "stall_ms_per_token", "stall_ahead_ms_per_token"):
            out[name] = getattr(self, name)
        return out


def read_stats(context, reset: bool = False) -> PagingStats:
    raw = _native.PagingStats()
    if _native.lib().colibri_paging_stats_read(context.handle, ctypes.byref(raw), int(reset)):
        raise ModelError(_native.last_error())
    values = {name: getattr(raw, name) for name, _ in raw._fields_}
    values["direct_io"], values["huge_pages"] = bool(values["direct_io"]), bool(values["huge_pages"])
    return PagingStats(**values)


def residency(context, n_layers: int, n_experts: int):
    """[n_layers, n_experts] uint8: 0 not cached, 1 cached, 2 pinned."""
    import numpy as np

    state = np.zeros((n_layers, n_experts), dtype=np.uint8)   # [L, E]
    if _native.lib().colibri_paging_residency(context.handle, _native.as_ptr(state, ctypes.c_uint8)):
        raise ModelError(_native.last_error())
    return state
