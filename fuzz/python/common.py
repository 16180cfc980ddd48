"""What the atheris harnesses share: input parts, a scratch directory, the exceptions allowed.

A public call may raise colibri.ModelError (bad files) or ValueError (bad requests); any other
exception escaping it is a finding, and so is a call that outlasts SLOW_SECONDS (libFuzzer's
-timeout catches true hangs). Harnesses import colibri inside `instrumented()` so atheris
sees the coverage of every module of the package, including ones added later.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SEPARATOR = b"\n\x00--colibri-part--\x00\n"
SLOW_SECONDS = 8.0
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Bye"}]


def join_parts(parts: list[bytes]) -> bytes:
    return SEPARATOR.join(parts)


def split_parts(data: bytes, n: int) -> list[bytes]:
    """The input's first n parts (missing ones empty)."""
    parts = data.split(SEPARATOR, n - 1)
    return parts + [b""] * (n - len(parts))


def scratch() -> Path:
    """This process's scratch directory (removed at exit by the OS's temp cleaning, small anyway)."""
    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = Path(tempfile.mkdtemp(prefix="colibri-fuzz-"))
    return _SCRATCH


_SCRATCH = None


@contextlib.contextmanager
def allowed(*refusals: type[BaseException]):
    """The call inside may refuse its input with one of `refusals` (default ValueError, which
    colibri.ModelError is); nothing else, and not slowly. File parsing passes ModelError alone:
    a bare ValueError (say a UnicodeDecodeError) from a file is a finding too. Slowness is
    measured in CPU time, so a loaded machine does not make findings (libFuzzer's -timeout
    still catches a true hang by the clock)."""
    start = time.process_time()
    try:
        yield
    except refusals or (ValueError,):
        pass
    elapsed = time.process_time() - start
    if elapsed > SLOW_SECONDS:
        raise RuntimeError(f"a public call took {elapsed:.1f} CPU seconds (limit {SLOW_SECONDS} s)")


@contextlib.contextmanager
def instrumented():
    """Imports inside it are instrumented for coverage; so is every module of the colibri
    package, imported here up front (modules colibri imports lazily, and modules added later,
    are covered too)."""
    import importlib
    import pkgutil

    import atheris

    with atheris.instrument_imports(include=["colibri"]):
        import colibri

        for module in pkgutil.walk_packages(colibri.__path__, "colibri."):
            if module.name != "colibri.__main__" and not module.name.startswith("colibri.demo_model"):
                importlib.import_module(module.name)
        yield


def run(test_one_input, custom_mutator=None) -> None:
    import atheris

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if custom_mutator is None:
        atheris.Setup(sys.argv, test_one_input)
    else:
        atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()
