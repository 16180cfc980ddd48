"""The `colibri` command: run, serve, route, inspect, check, convert, bench.

Flag names follow llama-cli where they overlap. Bad input prints one line on
stderr and exits 2 (a failed check or an --expected-experts mismatch exits 1);
--debug shows the traceback instead.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import ModelError
from .loader import KV_TYPES, NUMA_MODES
from .quant_recipes import TARGETS as QUANT_TARGETS

DEMO_MODEL = Path(__file__).resolve().parent / "demo_model"


class UsageError(Exception):
    """Bad command-line input that argparse itself cannot catch."""


def _demo_model_path() -> Path:
    if not (DEMO_MODEL / "config.json").is_file():
        raise ModelError(f"{DEMO_MODEL}: no bundled demo model in this installation; pass a MODEL path")
    return DEMO_MODEL


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _paging_kwargs(args) -> dict:
    """colibri.load's paging arguments from the flags of _paging_flags (docs/PAGING.md)."""
    return dict(mem_budget=args.mem_budget, expert_profile=args.expert_profile, expert_slots=args.expert_slots,
                prefetch=args.prefetch)


def _paging_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mem-budget", default="auto", metavar="SIZE",
                   help="memory the whole process may use, e.g. 6GiB or 1500M: a MoE model that would not fit "
                        "pages its experts from the file (default auto: the memory available here; off: never)")
    p.add_argument("--expert-profile", default=None, metavar="FILE",
                   help="pin the hottest experts of an activation profile (colibri route --profile-out)")
    p.add_argument("--expert-slots", type=_positive_int, default=None, metavar="N",
                   help="page the experts with exactly N slots, whatever the budget")
    p.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                   help="paged: do not read ahead the experts the next layers' routers predict")
    p.add_argument("--prefetch-depth", dest="prefetch", type=int, choices=(0, 1, 2), default=True, metavar="N",
                   help="paged: read ahead for the next N MoE layers (0, 1 or 2; default 1)")


def _sampling_kwargs(args) -> dict:
    return dict(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                repetition_penalty=args.repeat_penalty, seed=args.seed)


# ---- run --------------------------------------------------------------------
def cmd_run(args) -> int:
    import colibri

    path = Path(args.model) if args.model else _demo_model_path()
    with colibri.load(path, threads=args.threads, n_ctx=args.ctx_size, kv_type=args.kv_type,
                      numa=args.numa, precision="exact" if args.exact else "default",
                      **_paging_kwargs(args)) as model:
        if args.prompt is not None:
            for piece in model.generate(args.prompt, max_tokens=args.n_predict, stream=True,
                                        **_sampling_kwargs(args)):
                sys.stdout.write(piece.text)
                sys.stdout.flush()
            sys.stdout.write("\n")
            return 0
        return _interactive_chat(model, args)


def _interactive_chat(model, args) -> int:
    """A read-reply loop on stdin; uses the chat template when the model has one."""
    has_template = model.tokenizer is not None and bool(model.tokenizer.chat_template)
    messages: list[dict] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            sys.stdout.write("> ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return 0
        text = line.rstrip("\n")
        if not text.strip():
            continue
        if has_template:
            messages.append({"role": "user", "content": text})
            stream = model.chat(messages, max_tokens=args.n_predict, stream=True, **_sampling_kwargs(args))
        else:
            stream = model.generate(text, max_tokens=args.n_predict, stream=True, **_sampling_kwargs(args))
        reply = []
        for piece in stream:
            reply.append(piece.text)
            sys.stdout.write(piece.text)
            sys.stdout.flush()
        sys.stdout.write("\n")
        if has_template:
            messages.append({"role": "assistant", "content": "".join(reply)})


# ---- route ------------------------------------------------------------------
def _parse_experts(text: str) -> list[int]:
    try:
        experts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--expected-experts: expected comma-separated expert ids, got {text!r}") from None
    if not experts:
        raise UsageError("--expected-experts: no expert ids given")
    return experts


def cmd_route(args) -> int:
    import numpy as np

    import colibri

    expected = _parse_experts(args.expected_experts) if args.expected_experts is not None else None
    with colibri.load(args.model, threads=args.threads, **_paging_kwargs(args)) as model:
        c = model.config
        if not c.moe_layers:
            raise UsageError(f"{args.model}: the model has no MoE layers")
        if args.layer is not None and args.layer not in c.moe_layers:
            raise UsageError(f"--layer {args.layer}: not a MoE layer (MoE layers: "
                             f"{', '.join(map(str, c.moe_layers))})")
        tok = model._require_tokenizer()
        ids = tok.encode(args.input)
        if not ids:
            raise UsageError("--input encodes to no tokens")
        all_routes = model.route(ids)
        if args.profile_out:
            from . import expert_profile
            expert_profile.write(args.profile_out, c, expert_profile.counts_from_routes(c, all_routes), len(ids))
        routes = [r for r in all_routes if args.layer is None or r.layer == args.layer]
        np.set_printoptions(precision=4, suppress=True, linewidth=160)
        for r in routes:
            print(f"layer {r.layer}")
            for t, token in enumerate(ids):
                piece = tok.decode([token])
                experts = " ".join(str(e) for e in r.experts[t])
                gates = " ".join(f"{g:.4f}" for g in r.gates[t])
                print(f"  [{t:3d}] {token:6d} {piece!r:>14}  experts {experts}  gates {gates}")
                print(f"        logits {np.array2string(r.router_logits[t])}")
        if expected is not None:
            check = routes[0]
            position = args.position if args.position >= 0 else len(ids) + args.position
            if not 0 <= position < len(ids):
                raise UsageError(f"--position {args.position}: out of range for {len(ids)} tokens")
            got = sorted(int(e) for e in check.experts[position])
            if got != sorted(expected):
                print(f"MISMATCH layer {check.layer} token {position}: selected {got}, expected "
                      f"{sorted(expected)}", file=sys.stderr)
                return 1
            print(f"OK layer {check.layer} token {position}: selected {got}")
    return 0


# ---- inspect ----------------------------------------------------------------
def cmd_inspect(args) -> int:
    import colibri

    from .summary import dtype_histogram, human_bytes, human_count, routing_text, summarize

    with colibri.load(args.model, threads=1, n_ctx=16) as model:
        c, s = model.config, summarize(model)
        rows = [
            ("path", str(model.path)),
            ("architecture", c.architecture),
            ("layers", f"{c.num_layers} ({len(c.moe_layers)} MoE)"),
            ("hidden size", str(c.hidden_size)),
            ("attention", f"{c.num_heads} query heads, latent KV attention: kv_lora_rank {c.kv_lora_rank}, "
                          f"q_lora_rank {c.q_lora_rank or 'none'}, head dims {c.qk_nope_head_dim} + {c.head_dim} "
                          f"RoPE, value {c.v_head_dim}" if c.is_latent else
             f"{c.num_heads} query heads, {c.num_kv_heads} KV heads, head dim {c.head_dim}"),
            ("vocabulary", str(c.vocab_size)),
            ("context length", str(c.context_length)),
        ]
        if c.moe_layers:
            shared = f", shared expert {c.shared_expert_intermediate_size}" if c.shared_expert_intermediate_size else ""
            rows += [("experts per MoE layer", f"{c.num_experts}, top-{c.top_k}, width {c.expert_intermediate_size}"
                      f"{shared}"),
                     ("routing", routing_text(c)),
                     ("MoE layers", ", ".join(map(str, c.moe_layers)))]
        rows += [
            ("parameters", f"{human_count(s.params_total)} total, {human_count(s.params_active)} active per token"),
            ("dtypes", ", ".join(f"{d} x{n}" for d, n in sorted(s.dtypes.items()))),
            *(("" if i else "dtype histogram", line) for i, line in enumerate(dtype_histogram(s))),
            ("weights", human_bytes(s.weight_bytes) + (
                f" ({human_bytes(s.weight_bytes - s.rearranged_bytes)} memory-mapped and used in place, "
                f"{human_bytes(s.rearranged_bytes)} rearranged once at load)" if s.rearranged_bytes
                else " (memory-mapped, used in place)")),
            ("read per decode token", human_bytes(s.bytes_per_token)),
            ("KV cache", f"{human_bytes(s.kv_bytes_per_token)} per position (f32)" +
             (f": the latent, {s.kv_bytes_uncompressed / s.kv_bytes_per_token:.1f}x less than per-head keys and "
              f"values ({human_bytes(s.kv_bytes_uncompressed)})" if c.is_latent else "")),
            ("KV + scratch arena", "one mapping, transparent huge pages" if model.huge_pages
             else "one mapping, normal pages (no transparent huge pages here)"),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        if args.tensors:
            print()
            for slot, ref in model.weights:
                shape = "x".join(map(str, ref.shape))
                print(f"{slot.name:<56} {ref.dtype:<5} {shape:>14} {human_bytes(ref.nbytes):>12}")
    return 0


# ---- check ------------------------------------------------------------------
def cmd_check(args) -> int:
    import colibri

    from .dtypes import BY_NAME, nonfinite_scales
    from .formats.safetensors import scan_nonfinite

    with colibri.load(args.model, threads=1, n_ctx=16) as model:
        print(f"{model.path}: {len(model.weights)} tensors, headers, offsets, shapes and dtypes valid")
        bad = 0
        if args.scan:
            for slot, ref in model.weights:
                if BY_NAME[ref.dtype].is_block:
                    n, what = nonfinite_scales(ref.dtype, ref.array), f"NaN/Inf {ref.dtype} block scales"
                else:
                    n, what = scan_nonfinite(ref), "NaN/Inf values"
                if n:
                    bad += 1
                    print(f"tensor '{slot.name}': {n} {what}", file=sys.stderr)
            print(f"NaN/Inf scan: {'clean' if not bad else f'{bad} tensors with non-finite values'}")
        if model.tokenizer is None:
            print("note: no tokenizer.json (token ids only)")
    return 1 if bad else 0


# ---- convert ----------------------------------------------------------------
def cmd_convert(args) -> int:
    from .convert import convert

    dtype = args.dtype or ("keep" if str(args.src).endswith(".gguf") else "bf16")
    out = convert(args.src, args.dst, dtype)
    print(f"{out}: written")
    return 0


# ---- bench ------------------------------------------------------------------
def cmd_bench(args) -> int:
    import json

    from .bench import report_lines, run

    result = run(args.model, threads=args.threads, prompt_tokens=args.prompt, gen_tokens=args.gen,
                 repeat=args.repeat, bandwidth_gb_s=args.bandwidth, profile=args.profile or args.profile_layers,
                 profile_layers=args.profile_layers, kv_type=args.kv_type, numa=args.numa,
                 **_paging_kwargs(args), decode_input=args.decode_input,
                 precision="exact" if args.exact else "default")
    print("\n".join(report_lines(result)))
    if args.json:
        print(json.dumps(result.as_json()))
    return 0


# ---- serve ------------------------------------------------------------------
def cmd_serve(args) -> int:
    import os

    try:
        from .server import ServerConfig, serve
    except ImportError as exc:
        raise UsageError(f"colibri serve needs {exc.name}: pip install --force-reinstall colibri-moe") from None
    path = Path(args.model) if args.model else _demo_model_path()
    name = args.model_name or ("colibri-demo" if not args.model else (path.stem if path.is_file() else path.name))
    config = ServerConfig(model=path, model_name=name, parallel=args.parallel, n_ctx=args.ctx_size,
                          threads=args.threads, kv_type=args.kv_type, numa=args.numa,
                          api_key=args.api_key or os.environ.get("COLIBRI_API_KEY") or None,
                          max_queue=args.max_queue, timeout=args.timeout, max_tokens=args.max_tokens,
                          max_body=args.max_body, batch=args.batch, prefill_chunk=args.prefill_chunk,
                          prefill_slack=None if args.prefill_slack == 0 else args.prefill_slack,
                          prefill_layers=args.prefill_layers, **_paging_kwargs(args))
    serve(config, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _positive_float(text: str) -> float:
    return _float_at_least(text, 0.0, strict=True)


def _non_negative_float(text: str) -> float:
    return _float_at_least(text, 0.0, strict=False)


def _float_at_least(text: str, low: float, *, strict: bool) -> float:
    """A finite number above `low` (or at it, when not strict), for argparse."""
    kind = "positive" if strict else "non-negative"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {kind} number, got {text!r}") from None
    if not (value > low if strict else value >= low) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a {kind} number, got {text!r}")
    return value


def _serve_parser(sub) -> None:
    serve = sub.add_parser("serve", help="OpenAI-compatible HTTP server with a chat page (docs/SERVER.md)")
    serve.add_argument("model", nargs="?", help="model directory or file (default: the bundled demo model)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("-np", "--parallel", type=_positive_int, default=4, help="slots: sequences generated at once")
    serve.add_argument("-c", "--ctx-size", type=_positive_int, default=None,
                       help="positions per slot (default: the model's, at most 4096)")
    serve.add_argument("-t", "--threads", type=_positive_int, default=None)
    serve.add_argument("--kv-type", choices=KV_TYPES, default="f32", help="KV cache element type")
    _numa_flag(serve)
    serve.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY (or set COLIBRI_API_KEY)")
    serve.add_argument("--max-queue", type=_positive_int, default=64, help="sequences waiting for a slot (then 429)")
    serve.add_argument("--timeout", type=_positive_float, default=600.0, help="seconds per request, queueing included")
    serve.add_argument("--max-tokens", type=_positive_int, default=None,
                       help="cap on a request's max_tokens (default: the context length)")
    serve.add_argument("--max-body", type=_positive_int, default=1 << 20, help="request body limit in bytes (then 413)")
    serve.add_argument("--batch", type=_positive_int, default=256, help="most tokens in one forward step")
    serve.add_argument("--prefill-chunk", type=_positive_int, default=64,
                       help="most prompt tokens per step while other sequences decode")
    serve.add_argument("--prefill-slack", type=_non_negative_float, default=0.7,
                       help="while sequences decode, a prompt chunk runs as many of its layers a step as add at "
                            "most this times a decode step of all the slots' sequences (0: the whole chunk in one "
                            "step)")
    serve.add_argument("--prefill-layers", type=_positive_int, default=None,
                       help="layers a prompt chunk runs per step beside decoding sequences (fixed, instead of "
                            "--prefill-slack's measured pacing)")
    serve.add_argument("--model-name", default=None, help="the model id clients use (default: from the path)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    _paging_flags(serve)
    serve.set_defaults(func=cmd_serve)


# ---- entry point ------------------------------------------------------------
def _sampling_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temp", type=float, default=None, help="temperature (0 = greedy)")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--min-p", type=float, default=None)
    p.add_argument("--repeat-penalty", type=float, default=None)
    p.add_argument("-s", "--seed", type=int, default=None)


EXACT_HELP = ("f32 activations for block-type weights: the dequantized model's logits (slower; default: "
              "activations quantized per block of 32)")


def _numa_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--numa", choices=NUMA_MODES, default=None,
                   help="thread placement on multi-socket hosts: distribute (cores of every NUMA node in turn) "
                        "or isolate (the current node only); none: leave threads unpinned "
                        "(default: one thread per physical core, at most the cgroup CPU quota, pinned)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="colibri", description="Mixture-of-Experts inference on CPUs")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="complete a prompt (-p) or chat interactively")
    run.add_argument("model", nargs="?", help="model directory (default: the bundled demo model)")
    run.add_argument("-p", "--prompt")
    run.add_argument("-n", "--n-predict", type=_positive_int, default=128, help="tokens to generate")
    run.add_argument("-t", "--threads", type=_positive_int, default=None)
    run.add_argument("-c", "--ctx-size", type=_positive_int, default=None)
    run.add_argument("--kv-type", choices=KV_TYPES, default="f32",
                     help="KV cache element type (f16: half the memory, keys and values rounded)")
    _numa_flag(run)
    run.add_argument("--exact", action="store_true", help=EXACT_HELP)
    run.add_argument("--system", help="system message for interactive chat")
    _paging_flags(run)
    _sampling_flags(run)
    run.set_defaults(func=cmd_run)

    _serve_parser(sub)

    route = sub.add_parser("route", help="show router logits, experts and gates per token")
    route.add_argument("model")
    route.add_argument("--input", required=True)
    route.add_argument("--layer", type=int, default=None, help="only this MoE layer")
    route.add_argument("--expected-experts", help="comma-separated experts the token at --position must "
                       "select in the first shown layer; exit 1 on a mismatch")
    route.add_argument("--position", type=int, default=-1, help="token checked by --expected-experts "
                       "(default -1: the last)")
    route.add_argument("-t", "--threads", type=_positive_int, default=None)
    route.add_argument("--profile-out", default=None, metavar="FILE",
                       help="write the input's expert activation profile (tokens per expert and layer), "
                            "for --expert-profile")
    _paging_flags(route)
    route.set_defaults(func=cmd_route)

    inspect = sub.add_parser("inspect", help="architecture, parameters, dtypes, memory")
    inspect.add_argument("model")
    inspect.add_argument("--tensors", action="store_true", help="also list every tensor: type, shape, bytes")
    inspect.set_defaults(func=cmd_inspect)

    check = sub.add_parser("check", help="full integrity check of a model")
    check.add_argument("model")
    check.add_argument("--no-scan", dest="scan", action="store_false", help="skip the NaN/Inf scan")
    check.set_defaults(func=cmd_check)

    conv = sub.add_parser("convert", help="convert a Hugging Face directory or a GGUF file to one .colibri file")
    conv.add_argument("src")
    conv.add_argument("dst")
    conv.add_argument("--dtype", choices=["f32", "f16", "bf16", *QUANT_TARGETS, "keep"], default=None,
                      help="weight type, or a K-quant mix (q4_k_m, q5_k_m: llama.cpp's recipes) (default: bf16 "
                           "for a Hugging Face directory, keep for a GGUF file)")
    conv.set_defaults(func=cmd_convert)

    bench = sub.add_parser("bench", help="load time, prefill/decode speed, latency, memory, roofline")
    bench.add_argument("model", help="HF directory, .gguf or .colibri file")
    bench.add_argument("-t", "--threads", type=_positive_int, default=None)
    bench.add_argument("--prompt", type=_positive_int, default=512, help="prompt tokens (random ids)")
    bench.add_argument("--gen", type=_positive_int, default=128, help="tokens to decode (greedy)")
    bench.add_argument("--repeat", type=_positive_int, default=3, help="rounds; speeds are medians")
    bench.add_argument("--bandwidth", type=float, default=None, metavar="GB_S",
                       help="read bandwidth for the roofline (default: measured here)")
    bench.add_argument("--kv-type", choices=KV_TYPES, default="f32", help="KV cache element type")
    _numa_flag(bench)
    bench.add_argument("--exact", action="store_true", help=EXACT_HELP)
    bench.add_argument("--profile", action="store_true",
                       help="where the time goes: per stage (and per thread: busy, waiting), per expert")
    bench.add_argument("--profile-layers", action="store_true", help="--profile, also per layer")
    bench.add_argument("--json", action="store_true", help="also print one JSON object as the last line")
    _paging_flags(bench)
    bench.add_argument("--decode-input", choices=["greedy", "random"], default="greedy",
                       help="what each decode step is fed: its predecessor's argmax, or seeded random ids "
                            "(greedy decoding of a random-weight model loops over a few tokens)")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (ModelError, UsageError, ValueError, OSError) as exc:
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"colibri: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
