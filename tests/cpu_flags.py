"""The CPU feature flags Linux lists in /proc/cpuinfo (empty where it cannot be read), for the
tests that build or choose kernels by what this CPU runs."""
from __future__ import annotations

from pathlib import Path


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
