"""`colibri serve` against llama.cpp's `llama-server` under concurrent streaming clients.

    python benchmarks/serve_bench.py --llama-server PATH [--shapes mixtral-small,olmoe-1b-7b]
        [--clients 1,4,16] [--threads 2] [--out serve_results.json]

For each shape (benchmarks/models.py; the Q4_0 GGUF file, written if missing), each engine
and each client count C: start the server with C slots (-np C), C slots of CTX positions
(llama-server: -c C*CTX), the same threads, f16 KV cache (llama.cpp's default); send one
warm-up request; then C clients each stream --requests completions one after another
(closed loop): a random prompt of 128-512 token ids (seeded, the same for both engines), 128
output tokens (greedy, ignore_eos). Reports per run:
  - aggregate output tok/s: all output tokens over the wall time of the measured requests;
  - TTFT p50/p99 (request sent -> first token), ITL p50/p99 (gaps between a stream's token
    chunks; "chunks" counts them: an engine that holds back a token's empty text sends fewer);
  - per-request tok/s: a request's output tokens after the first over the time they took
    (median over requests);
and, for Colibri at one client, the HTTP path's cost: ITL p50 against the decode step of
`colibri bench` on the same file, threads and KV type, measured beside the served requests
(bench, request, bench, request, ..., bench: the server idles while bench runs), so both see
the same machine; the baseline is the median of those bench runs' p50s.

llama-server: build it from the llama.cpp sources vendored in the llama-cpp-python sdist
(docs in BENCHMARKS.md, "Serving"). The client runs on the same machine: note the load.
"""
from __future__ import annotations

import argparse
import bisect
import http.client
import itertools
import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PROMPT_RANGE = (128, 512)
GEN = 128
FIRST_WORD_ID = 259       # models.py's vocabulary: <unk> <s> </s> and 256 byte tokens come first


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gguf_q4_0(root: Path, shape_name: str) -> Path:
    """The shape's Q4_0 GGUF file under root (the name benchmarks/run.py uses), written if missing."""
    import models

    path = root / f"{shape_name}-q4_0.gguf"
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        print(f"writing {path}", file=sys.stderr)
        partial = path.with_name(path.name + ".partial")
        models.write_gguf(models.shape(shape_name), models.Weights(), "q4_0", partial)
        partial.rename(path)
    return path


# ---- servers ----------------------------------------------------------------------------------
class ServerProcess:
    def __init__(self, command: list[str], port: int, log: Path):
        self.port = port
        self._log = open(log, "w")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self._log.name}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"server not ready after {timeout} s; see {self._log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def colibri_server(model: Path, slots: int, ctx: int, threads: int, port: int, log: Path,
                   extra: list[str]) -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "colibri", "serve", str(model), "--port", str(port), "-np",
                          str(slots), "-c", str(ctx), "-t", str(threads), "--kv-type", "f16",
                          "--max-queue", "256", "--log-level", "warning", *extra], port, log)


def llama_server(binary: Path, model: Path, slots: int, ctx: int, threads: int, port: int, log: Path) -> ServerProcess:
    return ServerProcess([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-np",
                          str(slots), "-c", str(slots * ctx), "-t", str(threads), "-tb", str(threads),
                          "--no-webui"], port, log)


# ---- clients ----------------------------------------------------------------------------------
def stream_completion(port: int, prompt: list[int], gen: int) -> dict:
    """One streamed /v1/completions request: send time, each token chunk's arrival, the usage count.

    The client shares the server's CPUs, so while the stream runs it only receives and
    timestamps raw bytes (one recv and one clock read per arrival; http.client's chunked
    reader and a json.loads per event cost 0.1-0.2 ms of CPU a token, taken from the server's
    step); the HTTP response is parsed after the server has closed it (Connection: close)."""
    body = json.dumps({"prompt": prompt, "max_tokens": gen, "temperature": 0.0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    pieces: list[tuple[float, bytes]] = []                    # (arrival time, raw bytes) per recv
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sent = time.perf_counter()
        sock.sendall(head + body)
        while data := sock.recv(1 << 16):
            pieces.append((time.perf_counter(), data))
    arrivals, usage = [], None
    for at, event in sse_events(pieces):
        if not event.startswith(b"data: "):
            continue
        data = event[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]["completion_tokens"]
        choice = chunk["choices"][0] if chunk.get("choices") else None
        if choice and (choice.get("finish_reason") is None or choice.get("text")):
            arrivals.append(at)                       # a token's chunk (its text may be "")
    return {"sent": sent, "arrivals": arrivals, "tokens": usage if usage is not None else len(arrivals),
            "prompt": len(prompt)}


def sse_events(pieces: list[tuple[float, bytes]]):
    """(arrival time, event) for each server-sent event of a raw HTTP/1.1 response received as
    timed pieces: an event arrives with the piece that completes it. Raises on a status other
    than 200. The body is chunked (Transfer-Encoding) or runs to the connection's end."""
    raw = b"".join(p for _, p in pieces)
    ends = list(itertools.accumulate(len(p) for _, p in pieces))      # raw offset where each piece ends
    header_end = raw.find(b"\r\n\r\n")
    if header_end < 0:
        raise RuntimeError(f"no HTTP response header: {raw[:200]!r}")
    status_line, *header_lines = raw[:header_end].decode("latin-1").split("\r\n")
    if status_line.split()[1:2] != ["200"]:
        raise RuntimeError(f"{status_line}: {raw[header_end + 4:][:200]!r}")
    chunked = any(h.lower().replace(" ", "") == "transfer-encoding:chunked" for h in header_lines)
    spans = []                                          # (raw start, raw end) of the body's bytes, in order
    pos = header_end + 4
    while chunked:
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol].split(b";")[0], 16)
        if size == 0:
            break
        spans.append((eol + 2, eol + 2 + size))
        pos = eol + 2 + size + 2
    if not chunked:
        spans.append((pos, len(raw)))
    body = b"".join(raw[a:b] for a, b in spans)
    raw_at = [b for _, b in spans]                      # body offset -> raw offset, span by span
    body_ends = list(itertools.accumulate(b - a for a, b in spans))
    start = 0
    for blank in re.finditer(rb"\r?\n\r?\n", body):          # the blank line that ends an event
        last = blank.end() - 1                            # the event's last byte, in the body
        span = bisect.bisect_right(body_ends, last)
        raw_last = raw_at[span] - (body_ends[span] - last)
        yield pieces[bisect.bisect_right(ends, raw_last)][0], body[start:blank.start()]
        start = blank.end()


def load(port: int, prompts: list[list[int]], clients: int, gen: int) -> tuple[list[dict], float]:
    """`clients` closed-loop clients share the prompts in order; (results, wall seconds)."""
    results: list[dict] = []
    lock = threading.Lock()
    queue = list(enumerate(prompts))
    errors: list[str] = []

    def client():
        while True:
            with lock:
                if not queue:
                    return
                _, prompt = queue.pop(0)
            try:
                r = stream_completion(port, prompt, gen)
            except Exception as exc:   # report, keep the others going
                errors.append(str(exc))
                continue
            with lock:
                results.append(r)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    return results, wall


def percentile(values, q) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else float("nan")


def summarize(results: list[dict], wall: float) -> dict:
    ttft = [r["arrivals"][0] - r["sent"] for r in results if r["arrivals"]]
    itl = [b - a for r in results for a, b in zip(r["arrivals"], r["arrivals"][1:])]
    per_request = [(r["tokens"] - 1) / (r["arrivals"][-1] - r["arrivals"][0]) for r in results
                   if len(r["arrivals"]) > 1 and r["arrivals"][-1] > r["arrivals"][0]]
    tokens = sum(r["tokens"] for r in results)
    chunks = sum(len(r["arrivals"]) for r in results)
    return {"requests": len(results), "output_tokens": tokens, "chunks": chunks, "wall_s": wall,
            "aggregate_tok_s": tokens / wall,
            "ttft_p50_ms": 1e3 * percentile(ttft, 50), "ttft_p99_ms": 1e3 * percentile(ttft, 99),
            "itl_p50_ms": 1e3 * percentile(itl, 50), "itl_p99_ms": 1e3 * percentile(itl, 99),
            "per_request_tok_s": statistics.median(per_request) if per_request else float("nan")}


def prompts_for(vocab: int, count: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(PROMPT_RANGE[0], PROMPT_RANGE[1] + 1, size=count)
    return [rng.integers(FIRST_WORD_ID, vocab, size=int(n)).tolist() for n in lengths]


def colibri_decode_ms(model: Path, threads: int) -> dict:
    """One `colibri bench` run on the same file: its decode step's p50 in ms (the HTTP overhead's baseline)."""
    proc = subprocess.run([sys.executable, "-m", "colibri", "bench", str(model), "-t", str(threads), "--prompt",
                           "320", "--gen", str(GEN), "--repeat", "1", "--kv-type", "f16", "--json"],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"colibri bench failed: {proc.stderr.strip().splitlines()[-1:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"decode_tok_s": result["decode_tok_s"], "decode_p50_ms": result["p50_ms"], "decode_p99_ms": result["p99_ms"]}


def load_beside_bench(port: int, prompts: list[list[int]], model: Path, threads: int) -> tuple[list[dict], float, list[float]]:
    """One client's requests alternating with `colibri bench` runs (bench first and last):
    (results, wall seconds of the requests alone, each bench run's decode p50 ms)."""
    results, wall, bench = [], 0.0, [colibri_decode_ms(model, threads)["decode_p50_ms"]]
    for prompt in prompts:
        r, w = load(port, [prompt], 1, GEN)
        results += r
        wall += w
        bench.append(colibri_decode_ms(model, threads)["decode_p50_ms"])
    return results, wall, bench


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("/work/bench_models"))
    p.add_argument("--shapes", default="mixtral-small,olmoe-1b-7b")
    p.add_argument("--engines", default="colibri,llama.cpp")
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--requests", type=int, default=2, help="requests per client (at least 4 in all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=PROMPT_RANGE[1] + GEN, help="positions per slot")
    p.add_argument("--llama-server", type=Path, default=None, help="llama-server binary (llama.cpp)")
    p.add_argument("--no-overhead", action="store_true", help="skip the colibri bench baseline")
    p.add_argument("--colibri-args", default="", help="extra `colibri serve` options, e.g. \"--prefill-slack 0\"")
    p.add_argument("--out", type=Path, default=Path("serve_results.json"))
    args = p.parse_args()
    engines = args.engines.split(",")
    if "llama.cpp" in engines and (args.llama_server is None or not args.llama_server.is_file()):
        raise SystemExit("--llama-server: path to a llama-server binary needed for the llama.cpp rows "
                         "(or --engines colibri)")
    import models

    rows, logs = [], args.out.with_suffix("")
    logs.mkdir(parents=True, exist_ok=True)
    for shape_name in args.shapes.split(","):
        path = gguf_q4_0(args.models, shape_name)
        vocab = models.shape(shape_name).config.vocab_size
        for clients in map(int, args.clients.split(",")):
            prompts = prompts_for(vocab, max(4, clients * args.requests), seed=clients)
            for engine in engines:
                port = free_port()
                log = logs / f"{shape_name}-{engine}-{clients}.log"
                server = (colibri_server(path, clients, args.ctx, args.threads, port, log, args.colibri_args.split())
                          if engine == "colibri"
                          else llama_server(args.llama_server, path, clients, args.ctx, args.threads, port, log))
                try:
                    server.wait_ready()
                    stream_completion(port, prompts[0][:64], 8)            # warm-up
                    before, bench = loadavg(), None
                    if engine == "colibri" and clients == 1 and not args.no_overhead:
                        results, wall, bench = load_beside_bench(port, prompts, path, args.threads)
                    else:
                        results, wall = load(port, prompts, clients, GEN)
                finally:
                    server.stop()
                row = {"shape": shape_name, "engine": engine, "clients": clients, "threads": args.threads,
                       "ctx_per_slot": args.ctx, "loadavg_before": before, "loadavg_after": loadavg(),
                       **summarize(results, wall)}
                if engine == "colibri" and args.colibri_args:
                    row["colibri_args"] = args.colibri_args
                if bench:
                    row["bench_decode_p50_ms_runs"] = bench
                    row["bench_decode_p50_ms"] = statistics.median(bench)
                    row["http_overhead_pct"] = 100 * (row["itl_p50_ms"] / row["bench_decode_p50_ms"] - 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=1))
    print(table(rows))


def table(rows: list[dict]) -> str:
    head = ("| shape | engine | clients | aggregate tok/s | vs llama-server | TTFT p50 / p99 ms | "
            "ITL p50 / p99 ms | ITL p99/p50 | per-request tok/s | load before/after |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        peer = next((x for x in rows if x["shape"] == r["shape"] and x["clients"] == r["clients"]
                     and x["engine"] == "llama.cpp"), None)
        ratio = f"{r['aggregate_tok_s'] / peer['aggregate_tok_s']:.2f}x" if peer and r["engine"] != "llama.cpp" else ""
        lines.append(f"| {r['shape']} | {r['engine']} | {r['clients']} | {r['aggregate_tok_s']:.1f} | {ratio} | "
                     f"{r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | {r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | "
                     f"{r['itl_p99_ms'] / r['itl_p50_ms']:.2f} | {r['per_request_tok_s']:.1f} | "
                     f"{r['loadavg_before']} / {r['loadavg_after']} |")
    overhead = [r for r in rows if "http_overhead_pct" in r]
    for r in overhead:
        lines.append(f"\n{r['shape']}: one stream's ITL p50 {r['itl_p50_ms']:.2f} ms vs `colibri bench` decode p50 "
                     f"{r['bench_decode_p50_ms']:.2f} ms (median of {len(r['bench_decode_p50_ms_runs'])} runs between "
                     f"the requests: {', '.join(f'{x:.2f}' for x in r['bench_decode_p50_ms_runs'])}): "
                     f"HTTP path {r['http_overhead_pct']:+.1f}%")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
