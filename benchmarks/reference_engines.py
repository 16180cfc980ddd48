"""Measure llama.cpp (llama-cpp-python) or transformers exactly as `colibri bench` measures
Colibri, in this (fresh) process, and print one JSON object as the last line.

    python benchmarks/reference_engines.py llama.cpp MODEL.gguf -t 2 --prompt 512 --gen 64 --repeat 3
    python benchmarks/reference_engines.py transformers HF_DIR --dtype bf16 -t 2 ...

Same protocol as colibri.bench: seeded random prompt ids, `repeat` rounds of prefill from an
empty cache then greedy decoding (argmax in numpy, timed with the step), medians over rounds,
p50/p99 over every decode step, peak RSS of the process after the first round, and the machine's
read bandwidth probed in this process right after every round (colibri's probe, as `colibri
bench` does), each round's decode rate beside its own probe and the CPU time the hypervisor
took during it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from colibri.bench import (cpu_steal_seconds, decode_inputs, measure_read_bandwidth, peak_rss_bytes,
                           process_read_bytes, steal_since)


def _without_amx(capi) -> None:
    """Make llama-cpp-python load models with use_extra_bufts = false (llama.cpp's --no-repack).

    On a CPU that reports AMX, ggml puts q8_0/q4_0 weights in its AMX buffer type, and its
    AMX matmul crashes on this VM (SIGSEGV in ggml_backend_amx_mul_mat). Turning extra buffer
    types off avoids it; it also turns off the CPU_REPACK layouts, so llama.cpp runs its
    plain AVX-512 (VNNI) kernels on the weights in their mmap (the paging benchmark asks for it
    with --no-repack: repacking copies every weight into memory). llama-cpp-python's Llama has
    no argument for it."""
    default_params = capi.llama_model_default_params

    def params():
        p = default_params()
        p.use_extra_bufts = False
        return p

    capi.llama_model_default_params = params


class LlamaCpp:
    """llama.cpp through llama-cpp-python's Llama (mmap, batch = prompt up to 512)."""

    def __init__(self, path: str, threads: int, n_ctx: int, n_batch: int, dtype: str, no_repack: bool = False):
        import llama_cpp
        from llama_cpp import llama_cpp as capi

        self.system_info = llama_cpp.llama_print_system_info().decode().strip()
        if "AMX_INT8 = 1" in self.system_info or no_repack:
            _without_amx(capi)
            self.system_info += " use_extra_bufts = 0"
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                                   n_threads=threads, n_threads_batch=threads, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _last_logits(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llm._ctx.get_logits_ith(-1), shape=(self.n_vocab,))   # [V]

    def prefill(self, ids: list[int]) -> np.ndarray:
        self.llm.reset()
        self.llm.eval(ids)
        return self._last_logits()

    def step(self, token: int) -> np.ndarray:
        self.llm.eval([token])
        return self._last_logits()


class Transformers:
    """transformers' AutoModelForCausalLM on CPU, KV cache, inference mode."""

    def __init__(self, path: str, threads: int, n_ctx: int, n_batch: int, dtype: str, no_repack: bool = False):
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        self.system_info = f"torch {torch.__version__}, transformers {transformers.__version__}, {dtype}"
        dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtypes[dtype]).eval()
        self.past = None

    def _run(self, ids: list[int]) -> np.ndarray:
        with self.torch.inference_mode():
            out = self.model(self.torch.tensor([ids]), past_key_values=self.past, use_cache=True)
        self.past = out.past_key_values
        return out.logits[0, -1].float().numpy()                       # [V]

    def prefill(self, ids: list[int]) -> np.ndarray:
        self.past = None
        return self._run(ids)

    def step(self, token: int) -> np.ndarray:
        return self._run([token])


ENGINES = {"llama.cpp": LlamaCpp, "transformers": Transformers}


def measure(engine_name: str, path: str, *, vocab: int, threads: int, prompt_tokens: int, gen_tokens: int,
            repeat: int, dtype: str, seed: int = 0, no_repack: bool = False, probe: bool = True,
            decode_input: str = "greedy") -> dict:
    start = time.perf_counter()
    engine = ENGINES[engine_name](path, threads, prompt_tokens + gen_tokens + 8, min(prompt_tokens, 512), dtype,
                                  no_repack)
    load_s = time.perf_counter() - start
    prompt = np.random.default_rng(seed).integers(0, vocab, size=prompt_tokens).tolist()   # [P]
    inputs = decode_inputs(vocab, gen_tokens, seed) if decode_input == "random" else None   # as colibri bench
    prefill_rates, decode_rates, latencies, bandwidths, steals, peak = [], [], [], [], [], 0
    io_rounds = []   # bytes read from storage per decode token, per round (/proc/self/io)
    for round_index in range(repeat):
        start = time.perf_counter()
        logits = engine.prefill(prompt)
        prefill_rates.append(prompt_tokens / (time.perf_counter() - start))
        steps = []
        steal_before, io_before = cpu_steal_seconds(), process_read_bytes()
        token = int(np.argmax(logits))
        for i in range(gen_tokens):
            if inputs is not None:
                token = inputs[i]
            start = time.perf_counter()
            token = int(np.argmax(engine.step(token)))
            steps.append(time.perf_counter() - start)
        decode_rates.append(gen_tokens / sum(steps))
        steals.append(steal_since(steal_before))
        io_after = process_read_bytes()
        io_rounds.append(None if io_before is None or io_after is None else (io_after - io_before) / gen_tokens)
        latencies += steps
        if round_index == 0:
            peak = peak_rss_bytes()   # before any probe maps its buffer
        if probe:
            bandwidths.append(measure_read_bandwidth(threads))
    lat_ms = np.array(latencies) * 1e3                                          # [repeat * gen]
    return dict(engine=engine_name, model=path, dtype=dtype, threads=threads, prompt_tokens=prompt_tokens,
                decode_input=decode_input,
                gen_tokens=gen_tokens, repeat=repeat, load_s=load_s,
                prefill_tok_s=statistics.median(prefill_rates), decode_tok_s=statistics.median(decode_rates),
                p50_ms=float(np.percentile(lat_ms, 50)), p99_ms=float(np.percentile(lat_ms, 99)),
                peak_rss_bytes=peak, read_bandwidth_gb_s=statistics.median(bandwidths) if bandwidths else None,
                decode_rounds_tok_s=decode_rates, bandwidth_rounds_gb_s=bandwidths or None,
                io_read_rounds_bytes_per_token=io_rounds,
                steal_rounds_s=None if None in steals else steals,
                system_info=engine.system_info)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("engine", choices=sorted(ENGINES))
    p.add_argument("model")
    p.add_argument("--vocab", type=int, required=True, help="vocabulary size (prompt ids are drawn below it)")
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16", help="transformers only")
    p.add_argument("--no-repack", action="store_true",
                   help="llama.cpp: use the weights in their mmap (use_extra_bufts = false)")
    p.add_argument("--no-probe", dest="probe", action="store_false",
                   help="do not probe the memory bandwidth (its 1 GiB buffer would break a memory cgroup)")
    p.add_argument("--decode-input", choices=["greedy", "random"], default="greedy",
                   help="as colibri bench: each decode step fed its predecessor's argmax, or seeded random ids")
    args = p.parse_args()
    result = measure(args.engine, args.model, vocab=args.vocab, threads=args.threads, prompt_tokens=args.prompt,
                     gen_tokens=args.gen, repeat=args.repeat, dtype=args.dtype, no_repack=args.no_repack,
                     probe=args.probe, decode_input=args.decode_input)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
