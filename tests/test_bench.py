"""`colibri bench`: the report, its JSON line and the decode-step profile (no timing thresholds)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile

import pytest

from colibri import _native

REQUIRED = ("load_s", "prefill_tok_s", "decode_tok_s", "p50_ms", "p99_ms", "peak_rss_bytes", "bytes_per_token")
SMALL_RUN = ["--prompt", "16", "--gen", "8", "--repeat", "1"]


def _bench(*args: str) -> subprocess.CompletedProcess:
    # a fresh process, as benchmarks run it: peak RSS is per process; run outside the source
    # tree so the installed package (with its libcolibri) is the one imported
    return subprocess.run([sys.executable, "-m", "colibri", "bench", *args], capture_output=True, text=True,
                          timeout=120, cwd=tempfile.gettempdir())


@pytest.fixture(scope="module")
def tiny_path(tiny_model_factory):
    return str(tiny_model_factory("mixtral-a").path)


def test_json_has_every_required_field(tiny_path):
    proc = _bench(tiny_path, *SMALL_RUN, "-t", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in REQUIRED:
        assert isinstance(result[key], (int, float)) and result[key] > 0, (key, result[key])
    assert isinstance(result["peak_rss_bytes"], int) and isinstance(result["bytes_per_token"], int)
    assert result["p50_ms"] <= result["p99_ms"]
    assert result["threads"] == 1 and result["prompt_tokens"] == 16 and result["gen_tokens"] == 8
    assert 0 < result["roofline_fraction"] and result["read_bandwidth_gb_s"] > 0
    assert len(result["decode_rounds_tok_s"]) == len(result["bandwidth_rounds_gb_s"]) == 1
    assert result["decode_rounds_tok_s"][0] == result["decode_tok_s"]
    assert result["bandwidth_rounds_gb_s"][0] == result["read_bandwidth_gb_s"]
    assert "profile" not in result
    assert result["huge_pages"] is _thp_available()
    assert result["kv_type"] == "f32"
    # K and V of every layer in f32, for the 17..24 positions the 8 decode steps attend
    import colibri

    with colibri.load(tiny_path) as m:
        c = m.config
    per_position = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4
    assert result["kv_bytes_per_token"] == round(per_position * sum(range(17, 25)) / 8)
    assert result["roofline_kv_fraction"] == pytest.approx(
        result["roofline_fraction"] * (1 + result["kv_bytes_per_token"] / result["bytes_per_token"]))


def test_f16_kv_cache_option(tiny_path):
    proc = _bench(tiny_path, *SMALL_RUN, "-t", "1", "--kv-type", "f16", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["kv_type"] == "f16"
    assert "f16 KV" in proc.stdout and "KV read per token" in proc.stdout
    f32 = json.loads(_bench(tiny_path, *SMALL_RUN, "-t", "1", "--json").stdout.strip().splitlines()[-1])
    assert 2 * result["kv_bytes_per_token"] == f32["kv_bytes_per_token"]


def test_roofline_pairs_each_round_with_its_own_probe():
    from colibri.bench import paired_roofline

    # 100 MB per token: every round read at half of the bandwidth probed after it
    assert paired_roofline(10 ** 8, [100.0, 200.0, 300.0], [20.0, 40.0, 60.0]) == pytest.approx(0.5)
    # rounds 1 and 3 at half their bandwidth, round 2 slow in a fast moment: the median is 0.5,
    # where the pooled medians (100 tok/s against 60 GB/s) would say 0.17
    assert paired_roofline(10 ** 8, [100.0, 100.0, 300.0], [20.0, 60.0, 60.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        paired_roofline(10 ** 8, [100.0], [20.0, 40.0])


def test_repeat_probes_after_every_round(tiny_path):
    result = json.loads(_bench(tiny_path, "--prompt", "8", "--gen", "4", "--repeat", "3", "-t", "1",
                               "--json").stdout.strip().splitlines()[-1])
    rates, probes = result["decode_rounds_tok_s"], result["bandwidth_rounds_gb_s"]
    assert len(rates) == len(probes) == 3 and min(probes) > 0
    assert result["decode_tok_s"] == sorted(rates)[1] and result["read_bandwidth_gb_s"] == sorted(probes)[1]
    assert result["roofline_fraction"] == pytest.approx(
        sorted(result["bytes_per_token"] * r / (b * 1e9) for r, b in zip(rates, probes))[1])
    from colibri.bench import cpu_steal_seconds

    if cpu_steal_seconds() is None:   # not Linux: not reported
        assert result["steal_rounds_s"] is None
    else:
        assert len(result["steal_rounds_s"]) == 3 and min(result["steal_rounds_s"]) >= 0


def test_kv_read_bytes_counts_the_sliding_window():
    from types import SimpleNamespace

    from colibri.bench import kv_read_bytes

    c = SimpleNamespace(num_layers=2, num_kv_heads=3, head_dim=8, sliding_window=0, layer_windows=(),
                        is_latent=False)
    per_position = 2 * 2 * 3 * 8 * 2   # K and V, f16
    assert kv_read_bytes(c, "f16", 4, 2) == per_position * (5 + 6) // 2
    c.sliding_window = 5   # steps at positions 4 and 5 attend 5 positions each
    assert kv_read_bytes(c, "f16", 4, 2) == per_position * 5
    c.layer_windows = (3, 0)   # layer 0 attends 3 positions, layer 1 everything (5, then 6)
    assert kv_read_bytes(c, "f16", 4, 2) == per_position // 2 * (3 + 3 + 5 + 6) // 2


def _thp_available() -> bool:
    """Whether this kernel grants MADV_HUGEPAGE: transparent huge pages not set to 'never'."""
    from pathlib import Path

    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return sys.platform.startswith("linux") and mode.exists() and "[never]" not in mode.read_text()


def test_profile_lists_every_stage_with_shares_summing_to_100(tiny_path):
    proc = _bench(tiny_path, *SMALL_RUN, "--profile", "--bandwidth", "10")
    assert proc.returncode == 0, proc.stderr
    shares = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"\s+(\w+)\s+([\d.]+)\s+([\d.]+)%", line)
        if m:
            shares[m.group(1)] = float(m.group(3))
    assert list(shares) == [*_native.PROFILE_STAGES, "sampling"]
    assert sum(shares.values()) == pytest.approx(100.0, abs=0.5)
    assert shares["experts"] > 0 and shares["attention"] > 0


def test_profile_per_layer_adds_up_to_the_step(tiny_path):
    proc = _bench(tiny_path, *SMALL_RUN, "--profile-layers", "--bandwidth", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "per layer (ms/token)" in proc.stdout
    profile = json.loads(proc.stdout.strip().splitlines()[-1])["profile"]
    assert len(profile["layers"]) == 2                       # mixtral-a has 2 layers
    for stage in ("attention", "router", "experts"):
        assert all(layer[stage] > 0 for layer in profile["layers"])
    for stage in ("attention", "router", "dispatch", "experts", "aggregation"):   # charged only inside layers
        assert sum(layer[stage] for layer in profile["layers"]) == pytest.approx(profile["seconds"][stage])


def test_profile_threads_and_experts(tiny_path):
    """Each thread's busy + waiting time is its stage's wall time; every decode step runs top-k
    (token, expert) pairs per MoE layer, with the routed experts' weight bytes; the prefill is
    profiled too."""
    import colibri

    proc = _bench(tiny_path, *SMALL_RUN, "-t", "2", "--profile", "--bandwidth", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "waiting per thread" in proc.stdout and "routed experts per token" in proc.stdout
    assert "prefill profile (16 tokens)" in proc.stdout
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    with colibri.load(tiny_path) as m:
        c = m.config
    for key, steps in (("profile", 8), ("prefill_profile", 1)):
        p = result[key]
        for stage in ("attention", "router", "dispatch", "experts", "aggregation", "lm_head"):   # C stages only
            assert len(p["busy"][stage]) == len(p["wait"][stage]) == 2
            for busy, wait in zip(p["busy"][stage], p["wait"][stage]):
                assert busy >= 0 and wait >= 0
                assert busy + wait == pytest.approx(p["seconds"][stage], rel=1e-6, abs=1e-9)
        assert len(p["experts"]) == c.num_layers
        tokens_per_step = 1 if key == "profile" else 16
        for index, layer in enumerate(p["experts"]):
            assert len(layer["tokens"]) == c.num_experts
            routed = c.top_k * tokens_per_step if index in c.moe_layers else 0
            assert sum(layer["tokens"]) == pytest.approx(routed)
            assert all((t > 0) == (b > 0) for t, b in zip(layer["tokens"], layer["bytes"]))
            assert all(s >= 0 for s in layer["seconds"]) and (sum(layer["seconds"]) > 0) == (routed > 0)


def test_profile_read_refuses_a_context_not_profiled(tiny_path):
    import ctypes

    import colibri

    with colibri.load(tiny_path, threads=1, n_ctx=16) as model:
        seconds = (ctypes.c_double * len(_native.PROFILE_STAGES))()
        assert _native.lib().colibri_profile_read(model._context().handle, -1, seconds, len(seconds)) != 0
        assert "not being profiled" in _native.last_error()


@pytest.mark.parametrize("args, message", [
    (["--prompt", "250", "--gen", "10"], "exceed the model's context length 256"),
    (["--bandwidth", "0"], "--bandwidth must be a positive number"),
])
def test_bad_input_is_one_line(tiny_path, args, message):
    proc = _bench(tiny_path, "--repeat", "1", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_read_bandwidth_probe_and_its_errors():
    from colibri.bench import measure_read_bandwidth

    assert measure_read_bandwidth(2, 8 << 20, 2) > 0
    for threads, nbytes, passes, field in ((0, 8 << 20, 1, "n_threads"), (1, 1000, 1, "n_bytes"),
                                            (1, 8 << 20, 0, "passes")):
        with pytest.raises(RuntimeError, match=f"read_bandwidth: .*{field}"):
            measure_read_bandwidth(threads, nbytes, passes)
