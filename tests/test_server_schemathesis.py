"""schemathesis against `colibri serve`'s own OpenAPI schema: every response 2xx or 4xx, never 5xx,
with a status code the schema declares and a body that matches it.

A short run (SCHEMATHESIS_EXAMPLES per operation, through schemathesis' coverage and fuzzing
phases, deterministic); run `schemathesis run URL/openapi.json` by hand for longer.
docs/RELIABILITY.md records what it measured.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from server_process import Server

SCHEMATHESIS_EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "10"))
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"


def test_openapi_schema_holds_under_schemathesis(tmp_path):
    pytest.importorskip("schemathesis", reason="schemathesis is not installed (it is in the test extra)")
    cli = shutil.which("schemathesis") or shutil.which("st")
    command = [cli] if cli else [sys.executable, "-m", "schemathesis.cli"]
    server = Server(["-t", "1", "-np", "2", "--max-tokens", "16", "--max-queue", "64"], tmp_path / "server.log")
    try:
        server.wait_ready()
        done = subprocess.run([*command, "run", f"{server.url}/openapi.json", "-c", CHECKS,
                               "-n", str(SCHEMATHESIS_EXAMPLES), "--request-timeout", "60",
                               "--generation-deterministic", "--suppress-health-check", "all"],
                              capture_output=True, text=True, timeout=900, cwd=tmp_path)   # its .schemathesis/ there
    finally:
        server.stop()
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:] + "\n--- server log ---\n" + server.log()[-3000:]
    assert "No issues found" in output and " passed" in output, output[-3000:]
