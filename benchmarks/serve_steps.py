"""Where a serving step's time goes, without HTTP: the forward step under each context shape,
the engine's step, and steps mixing decode tokens with a prompt chunk.

    python benchmarks/serve_steps.py MODEL [--threads 2] [--kv-type f16] [--json FILE]

Prints, per decode step in ms (p50/p90/p99 over 3 x 100 steps after a 320-token prompt):
  (a) model.forward of one token, greedy, in `colibri bench`'s context (n_seq 1, n_batch 320)
      and in `colibri serve`'s (n_batch 256, n_ctx 640; n_seq 1 and 16);
  (b) Engine.step with one running sequence (scheduler, runner, sampling, detokenizing);
then the median of 6 steps of d decode tokens (each at its own slot, ~320 cached positions)
plus a c-token prompt chunk, for d in 1, 4, 16 and c in 0, 8, 16, 32, 64: the cost table the
choice of --prefill-chunk rests on; and replays serve_bench's closed loop (prompts of 128-512
tokens, 128 out, 2 requests a client) on the scheduler's rule with that table, per client count
and chunk: aggregate tok/s, TTFT p50, ITL p50/p99 (--replay FILE: only that, from a saved JSON;
--layers N for a file without the model's layer count, which slices the replayed chunks).
Run it alone (a quiet machine) and note the load printed.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import colibri
from colibri.serving import Engine
from colibri.serving.request import GenerationParams

PROMPT, STEPS, ROUNDS = 320, 100, 3


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def percentiles(seconds: list[float]) -> dict:
    ms = 1e3 * np.asarray(seconds)
    return {"n": len(ms), "p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
            "p99": float(np.percentile(ms, 99))}


def prefill(model, slot: int, prompt: list[int], n_batch: int) -> np.ndarray:
    for s in range(0, len(prompt), n_batch):
        chunk = prompt[s:s + n_batch]
        want = np.zeros(len(chunk), np.int8)                                      # [n]
        want[-1] = 1
        logits = model.forward(chunk, np.arange(s, s + len(chunk)), np.full(len(chunk), slot), want)
    return logits[-1]                                                             # [V]


def forward_steps(model, prompt: list[int], n_batch: int) -> list[float]:
    times = []
    for _ in range(ROUNDS):
        token = int(np.argmax(prefill(model, 0, prompt, n_batch)))
        for i in range(STEPS):
            start = time.perf_counter()
            token = int(np.argmax(model.forward([token], [PROMPT + i], [0])[0]))
            times.append(time.perf_counter() - start)
    return times


def engine_steps(model, prompt: list[int]) -> list[float]:
    engine, times = Engine(model), []
    for _ in range(ROUNDS):
        engine.submit(prompt, GenerationParams(max_tokens=STEPS, temperature=0.0, ignore_eos=True))
        step = 0
        while True:
            start = time.perf_counter()
            if not engine.step():
                break
            step += 1
            if step > 3:                        # past the prompt's steps and the first token
                times.append(time.perf_counter() - start)
    return times


def mixed_steps(path, threads: int, kv_type: str, prompt: list[int], chunk_tokens: list[int]) -> dict:
    """Median ms of a step of d decode tokens (slots 0..d-1) plus a c-token chunk (slot 16)."""
    model = colibri.load(path, threads=threads, kv_type=kv_type, n_ctx=640, n_batch=256, n_seq=17)
    for slot in range(17):
        prefill(model, slot, prompt, 256)
    cached, table = [PROMPT] * 17, {}
    for d in (1, 4, 16):
        for c in (0, 8, 16, 32, 64):
            times = []
            for _ in range(6):
                tokens = [300 + i for i in range(d)] + chunk_tokens[:c]                   # [d + c]
                positions = cached[:d] + list(range(c))                                    # [d + c]
                seqs = list(range(d)) + [16] * c                                           # [d + c]
                want = np.zeros(d + c, np.int8)                                            # [d + c]
                want[:d] = 1
                if c:
                    want[-1] = 1
                start = time.perf_counter()
                model.forward(tokens, positions, seqs, want)
                times.append(time.perf_counter() - start)
                for i in range(d):
                    cached[i] += 1
            table[f"{d},{c}"] = 1e3 * float(np.median(times))
            print(f"decode {d:2d} + chunk {c:2d}: median {table[f'{d},{c}']:.1f} ms", flush=True)
    model.close()
    return table


def step_ms(table: dict, d: int, c: int) -> float:
    """A step's ms from the measured table: linear in c (extrapolated past 64), linear in d."""
    ds, cs = (1, 4, 16), (0, 8, 16, 32, 64)

    def at(dd: int) -> float:
        ys = [table[f"{dd},{x}"] for x in cs]
        return float(np.interp(c, cs, ys)) if c <= cs[-1] else ys[-1] + (c - cs[-1]) * (ys[-1] - ys[-2]) / (cs[-1] - cs[-2])
    d = min(max(d, 1), ds[-1])
    lo, hi = max(x for x in ds if x <= d), min(x for x in ds if x >= d)
    return at(lo) if lo == hi else at(lo) + (d - lo) / (hi - lo) * (at(hi) - at(lo))


class ClosedLoop:
    """serve_bench's clients in a replay: each sends a prompt of 128-512 tokens (seeded), reads
    `gen` tokens, then sends the next; the replay's scheduler says what each step does."""

    def __init__(self, clients: int, gen: int, requests: int):
        rng = np.random.default_rng(clients)
        self.queue = rng.integers(128, 513, size=max(4, clients * requests)).tolist()
        self.gen, self.now, self.itl, self.ttft, self.tokens = gen, 0.0, [], [], 0
        self.active = [self._client() for _ in range(clients) if self.queue]

    def _client(self) -> dict:
        return {"prompt": self.queue.pop(0), "done": 0, "out": 0, "sent": self.now, "last": 0.0}

    def decoding(self) -> list[dict]:
        return [a for a in self.active if a["out"]]

    def step(self, ms: float, decoding: list[dict], prefilled: list[tuple[dict, int]]) -> None:
        """A step of `ms`: every decoding client gets a token, each (client, n) in `prefilled` has
        n more prompt tokens cached (its first token when that ends the prompt)."""
        self.now += ms / 1e3
        for a in decoding:
            self.itl.append(self.now - a["last"])
            a["last"], a["out"], self.tokens = self.now, a["out"] + 1, self.tokens + 1
        for a, take in prefilled:
            a["done"] += take
            if a["done"] == a["prompt"]:
                a["out"], a["last"], self.tokens = 1, self.now, self.tokens + 1
                self.ttft.append(self.now - a["sent"])
        for a in [a for a in self.active if a["out"] >= self.gen]:
            self.active.remove(a)
            if self.queue:
                self.active.append(self._client())

    def result(self, **labels) -> dict:
        p50, p99 = (1e3 * float(np.percentile(self.itl, q)) for q in (50, 99))
        return {**labels, "aggregate_tok_s": self.tokens / self.now,
                "ttft_p50_ms": 1e3 * float(np.percentile(self.ttft, 50)), "itl_p50_ms": p50, "itl_p99_ms": p99}


def replay(table: dict, clients: int, chunk: int, n_batch: int = 256, gen: int = 128, requests: int = 2) -> dict:
    """serve_bench's closed loop under the scheduler's rule (decode first, then prompt chunks
    oldest first within min(n_batch - decoding, chunk), the whole n_batch when none decodes)."""
    loop = ClosedLoop(clients, gen, requests)
    while loop.active:
        decoding = loop.decoding()
        budget = min(n_batch - len(decoding), chunk) if decoding else n_batch
        work = []
        for a in loop.active:
            if not a["out"] and budget > 0:
                take = min(a["prompt"] - a["done"], budget)
                work.append((a, take))
                budget -= take
        loop.step(step_ms(table, len(decoding), sum(t for _, t in work)), decoding, work)
    return loop.result(clients=clients, chunk=chunk)


def replay_paced(table: dict, clients: int, slack: float, n_layer: int, chunk: int = 64, n_batch: int = 256,
                 gen: int = 128, requests: int = 3, noise: float = 0.05) -> dict:
    """The same closed loop under layer-sliced prefill (docs/SERVER.md): one chunk in flight,
    advanced by the engine's own PrefillPacer fed the table's step times (times 1 + noise * a
    normal draw); a chunk layer costs 1/n_layer of what the whole chunk adds to a step."""
    from colibri.serving.pacing import PrefillPacer
    loop, jitter = ClosedLoop(clients, gen, requests), np.random.default_rng(0)
    pacer, flight = PrefillPacer(n_layer, slack=slack), None     # flight: [client, tokens, next layer]
    while loop.active:
        decoding = loop.decoding()
        finished = []
        if not decoding:                 # nothing decodes: whole prompts, every layer, as the engine does
            work, budget = [], n_batch
            for a in loop.active:
                take = min(a["prompt"] - a["done"], budget - (flight[1] if flight and flight[0] is a else 0))
                if budget > 0 and take > 0:
                    work.append((a, take))
                    budget -= take
            flight, ms, finished = None, step_ms(table, 1, sum(t for _, t in work)), work
        else:
            d, ms, layers, take = len(decoding), step_ms(table, len(decoding), 0), 0, 0
            if flight is None:
                a = next((a for a in loop.active if not a["out"]), None)
                flight = [a, min(a["prompt"] - a["done"], chunk), 0] if a else None
            if flight:
                layers = pacer.layers(len(loop.active), d, flight[1], may_pause=flight[2] == 0)
                if layers == 0:
                    flight = None
                else:
                    layers = min(layers, n_layer - flight[2])
                    take = flight[1]
                    ms += (step_ms(table, d, take) - step_ms(table, d, 0)) * layers / n_layer
                    flight[2] += layers
                    if flight[2] == n_layer:
                        finished, flight = [(flight[0], take)], None
            ms *= 1 + noise * jitter.standard_normal()
            pacer.observe(d, take, layers, ms / 1e3)
        loop.step(ms, decoding, finished)
    return loop.result(clients=clients, slack=slack)


def print_replays(table: dict, n_layer: int) -> None:
    """The replays of both rules on a measured table, for a model of n_layer layers."""
    print("| clients | chunk | aggregate tok/s | TTFT p50 ms | ITL p50 / p99 ms | p99/p50 |\n|---|---|---|---|---|---|")
    for clients in (4, 16):
        for chunk in (8, 16, 32, 64):
            r = replay(table, clients, chunk)
            print(f"| {clients} | {chunk} | {r['aggregate_tok_s']:.1f} | {r['ttft_p50_ms']:.0f} | "
                  f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | {r['itl_p99_ms'] / r['itl_p50_ms']:.2f} |")
    print("\nLayer-sliced (chunk 64):\n| clients | slack | aggregate tok/s | TTFT p50 ms | ITL p50 / p99 ms | p99/p50 |\n"
          "|---|---|---|---|---|---|")
    for clients in (2, 4, 8, 16):
        for slack in (0.5, 0.7, 1.0):
            r = replay_paced(table, clients, slack, n_layer)
            print(f"| {clients} | {slack} | {r['aggregate_tok_s']:.1f} | {r['ttft_p50_ms']:.0f} | "
                  f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | {r['itl_p99_ms'] / r['itl_p50_ms']:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path, nargs="?")
    p.add_argument("--replay", type=Path, default=None, help="a saved --json result: replay its table only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kv-type", default="f16")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--layers", type=int, default=None, help="with --replay: the model's layer count (older saved results lack it)")
    args = p.parse_args()
    if args.replay:
        saved = json.loads(args.replay.read_text())
        n_layer = args.layers or saved.get("n_layer")
        if not n_layer:
            p.error(f"{args.replay} does not say the model's layer count: give --layers")
        print_replays(saved["mixed_ms"], n_layer)
        return
    if args.model is None:
        p.error("MODEL is needed (or --replay FILE)")
    rng = np.random.default_rng(0)
    result = {"load_before": loadavg()}
    for label, shape in (("bench_ctx", dict(n_ctx=448, n_batch=320)), ("serve_ctx", dict(n_ctx=640, n_batch=256, n_seq=1)),
                         ("serve_ctx_np16", dict(n_ctx=640, n_batch=256, n_seq=16))):
        model = colibri.load(args.model, threads=args.threads, kv_type=args.kv_type, **shape)
        prompt = rng.integers(259, model.config.vocab_size, size=PROMPT).tolist()
        result[f"forward_{label}"] = percentiles(forward_steps(model, prompt, shape["n_batch"]))
        print(label, result[f"forward_{label}"], flush=True)
        if label == "serve_ctx":
            result["engine_step"] = percentiles(engine_steps(model, prompt))
            print("engine.step", result["engine_step"], flush=True)
        vocab, result["n_layer"] = model.config.vocab_size, model.config.num_layers
        model.close()
    prompt = rng.integers(259, vocab, size=PROMPT).tolist()
    result["mixed_ms"] = mixed_steps(args.model, args.threads, args.kv_type, prompt,
                                     rng.integers(259, vocab, size=64).tolist())
    result["load_after"] = loadavg()
    print(json.dumps(result))
    print_replays(result["mixed_ms"], result["n_layer"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
