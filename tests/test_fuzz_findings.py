"""Every input a fuzz harness of fuzz/ found a problem with, replayed: tests/data/fuzz/<harness>/.

Each finding was fixed; its input stays here so the fix stays. A .colibri input must be refused
by both readers with one ModelError line (and by colibri.load); inputs of the other harnesses
run through the harness's own test function, which raises on anything but a clean refusal.
docs/RELIABILITY.md lists the findings.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import colibri
from colibri.errors import ModelError
from colibri.formats import native

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "fuzz"
NATIVE = sorted((DATA / "fuzz_native_load").glob("*"))
PYTHON = sorted(p for d in DATA.glob("*") if d.name != "fuzz_native_load" and d.is_dir() for p in d.glob("*"))


@pytest.mark.parametrize("path", NATIVE, ids=[p.name for p in NATIVE])
def test_native_finding_is_refused(path, tmp_path):
    target = tmp_path / "finding.colibri"
    target.write_bytes(path.read_bytes())
    for open_file in (native.NativeFileModel, native.NativeFile.open, colibri.load):
        with pytest.raises(ModelError) as error:
            open_file(target)
        message = str(error.value)
        assert str(target) in message and "\n" not in message, message
        # refused for what the fuzzer found, not for an old format version: regenerate it then
        assert "version:" not in message, message


@pytest.mark.skipif(not PYTHON, reason="no finding of a Python harness is stored yet")
@pytest.mark.parametrize("path", PYTHON or [None], ids=[f"{p.parent.name}/{p.name}" for p in PYTHON] or ["none"])
def test_python_finding_runs_clean(path, monkeypatch):
    """The harness's test function on the input: it raises if anything but ModelError / ValueError
    escapes, or a call outlasts the harness's time limit."""
    pytest.importorskip("atheris", reason="the harnesses import atheris (pip install '.[fuzz]')")
    monkeypatch.syspath_prepend(str(ROOT / "fuzz" / "python"))
    harness = importlib.import_module(path.parent.name)
    try:
        harness.test_one_input(path.read_bytes())
    finally:
        sys.modules.pop(path.parent.name, None)
