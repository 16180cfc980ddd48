"""Helpers for the server tests: run `colibri serve` as a child process, talk plain HTTP."""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m colibri serve ARGS` on a free port; stderr (the log) collected in a file."""

    def __init__(self, args: list[str], log_path: Path, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "w")
        environ = {**os.environ, **(env or {})}
        # run outside the source tree: the installed package (with its built library) is what serves
        self.proc = subprocess.Popen([sys.executable, "-m", "colibri", "serve", "--port", str(self.port), *args],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=environ,
                                     cwd=log_path.parent)

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}): {self.log()}")
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server was not ready in {timeout} s: {self.log()}")

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def request(port: int, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
            timeout: float = 120):
    """(status, headers, parsed JSON or text) of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read().decode("utf-8")
        try:
            parsed = json.loads(payload)
        except ValueError:
            parsed = payload
        return resp.status, dict(resp.getheaders()), parsed
    finally:
        conn.close()


def sse_events(port: int, path: str, body: dict, headers: dict | None = None, timeout: float = 120) -> list:
    """The parsed data: payloads of a streamed request, "[DONE]" included as a string."""
    status, _, text = request(port, "POST", path, body, headers, timeout=timeout)
    assert status == 200, text
    events = []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events
