"""Thread scaling, Colibri beside llama.cpp's llama-bench, on a host that reaches no registry.

Two steps. Here, where pip and the llama-cpp-python sdist can be had:

    python benchmarks/scaling.py prepare DIR [--llama-sdist FILE]

writes into DIR (a folder the device run carries, git-ignored) the gguf wheel and llama.cpp's
sources stripped to what llama-bench and the CPU backend need (under 10 MB). Then, on the host
(python3 with numpy, transformers and a C/C++ compiler, CMake; nothing fetched), from the
repository's root:

    python3 benchmarks/scaling.py run DIR --out OUT [--threads 1,2,4,8,16] [--budget 450]

1. installs Colibri from this tree and the gguf wheel into a private site folder, builds
   llama-bench (AVX-512 as .ci/run builds llama.cpp, no AMX; and an AVX2-only build for
   COLIBRI_ISA=avx2's peer) and Colibri's C tests in the background while it
2. writes the random-weight GGUF files (benchmarks/models.py: small-Mixtral and OLMoE-1B-7B,
   Q4_0), then
3. runs test_isa (every kernel table the CPU runs, bitwise against the reference) and the
   kernels' gemm table (in cache, one thread), then
4. for each model and thread count: `colibri bench --prompt 512 --gen 64 --kv-type f16` (the
   read bandwidth probed after each round, so % roofline is against that moment's bandwidth)
   and llama-bench's pp512 and tg64 at depth 512 (the same 512 positions in the KV cache);
   a `--profile` run at the largest thread count (per-stage, per-thread and per-expert time);
   and, if time is left, COLIBRI_ISA=avx2 beside the AVX2 llama-bench.

Results go to OUT as they come (scaling.json, scaling.md, logs), so a run cut short still
returns what it measured; every step is skipped once --budget seconds have passed.
`--shapes` and `--threads` make a quick local check: `run DIR --out /tmp/o --shapes tiny
--threads 1,2`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = Path("/tmp/colibri-scaling")   # builds, site packages and models on the host

# llama.cpp: what llama-bench and the CPU backend need (paths under vendor/llama.cpp)
LLAMA_KEEP = ["CMakeLists.txt", "LICENSE", "cmake", "include", "src", "common", "vendor", "licenses",
              "ggml/CMakeLists.txt", "ggml/cmake", "ggml/include", "ggml/src", "tools/llama-bench"]
LLAMA_DROP_BACKENDS = ("ggml-cuda", "ggml-metal", "ggml-vulkan", "ggml-sycl", "ggml-opencl", "ggml-cann",
                       "ggml-hip", "ggml-musa", "ggml-webgpu", "ggml-hexagon", "ggml-openvino", "ggml-zdnn",
                       "ggml-zendnn", "ggml-virtgpu", "ggml-et", "ggml-rpc", "ggml-blas")
LLAMA_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
               "-DGGML_F16C=ON", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
               "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
               "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
               "-DLLAMA_HTTPLIB=OFF", "-DBUILD_SHARED_LIBS=OFF"]
LLAMA_BUILDS = {   # name: flags beyond LLAMA_FLAGS
    "avx512": ["-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON", "-DGGML_AVX512_VBMI=ON"],
    "avx2": ["-DGGML_AVX512=OFF", "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX512_BF16=OFF", "-DGGML_AVX512_VBMI=OFF",
             "-DGGML_AVX_VNNI=OFF"],
}
TINY = ("mixtral", dict(vocab_size=2000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2))


# ---- prepare (here) ------------------------------------------------------------------------
def prepare(out: Path, sdist: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    import gguf
    version = gguf.__version__ if hasattr(gguf, "__version__") else _dist_version("gguf")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(out),
                    f"gguf=={version}"], check=True)
    source = _llama_source(sdist)
    tar_path = out / "llama.cpp.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for rel in LLAMA_KEEP:
            path = source / rel
            tar.add(path, arcname=f"llama.cpp/{rel}",
                    filter=lambda info: None if any(f"/{b}" in info.name for b in LLAMA_DROP_BACKENDS)
                    or "/.git" in info.name else info)
        data = b"add_subdirectory(llama-bench)\n"   # tools/: llama-bench only
        info = tarfile.TarInfo("llama.cpp/tools/CMakeLists.txt")
        info.size = len(data)
        import io
        tar.addfile(info, io.BytesIO(data))
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{out}: {size / (1 << 20):.1f} MiB ({', '.join(sorted(f.name for f in out.iterdir()))})")


def _dist_version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


def _llama_source(sdist: Path | None) -> Path:
    """vendor/llama.cpp of the llama-cpp-python sdist (downloaded with pip when not given)."""
    unpack = WORK / "sdist"
    if sdist is None:
        unpack.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "--no-build-isolation",
                        "-d", str(unpack), "llama-cpp-python==0.3.36"], check=True)
        sdist = next(unpack.glob("llama_cpp_python-*.tar.gz"))
    target = unpack / sdist.name.removesuffix(".tar.gz")
    if not target.exists():
        unpack.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(unpack, filter="data")
    return target / "vendor" / "llama.cpp"


# ---- run (on the host) ------------------------------------------------------------------------
class Run:
    """One scaling run: a clock against the budget, the results and their files under out."""

    def __init__(self, carry: Path, out: Path, budget: float):
        self.carry, self.out, self.budget = carry, out, budget
        self.start = time.monotonic()
        self.results: dict = {"machine": machine(), "colibri": [], "llama": [], "checks": {}, "skipped": []}
        out.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLIBRI_LIB", "COLIBRI_ISA")}
        self.env.update(PYTHONPATH=f"{WORK / 'site'}{os.pathsep}{ROOT / 'benchmarks'}", PYTHONUNBUFFERED="1")

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self, step: str, need: float = 0.0) -> bool:
        """Whether `step` may start (about `need` seconds of budget left); records a skip if not."""
        if self.elapsed() + need <= self.budget:
            return True
        self.results["skipped"].append(f"{step} (at {self.elapsed():.0f} s of {self.budget:.0f})")
        self.save()
        return False

    def log(self, message: str) -> None:
        line = f"[{self.elapsed():6.1f} s] {message}"
        print(line, flush=True)
        with open(self.out / "scaling.log", "a") as f:
            f.write(line + "\n")

    def sh(self, command: list[str], name: str, timeout: float, env: dict | None = None,
           cwd: Path | None = None) -> subprocess.CompletedProcess:
        """Runs command, its output kept in OUT/logs.txt under `name`; never raises on failure."""
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env or self.env,
                                  cwd=cwd or WORK)   # not the tree: the installed colibri
        except subprocess.TimeoutExpired as exc:
            done = subprocess.CompletedProcess(command, 124, exc.stdout or "", (exc.stderr or "") + "\n(timed out)")
        with open(self.out / "logs.txt", "a") as f:
            f.write(f"==== {name}: exit {done.returncode}, {time.monotonic() - started:.1f} s\n$ {' '.join(command)}\n"
                    f"{_text(done.stdout)[-4000:]}\n{_text(done.stderr)[-4000:]}\n")
        self.log(f"{name}: exit {done.returncode} ({time.monotonic() - started:.1f} s)")
        return done

    def save(self) -> None:
        self.results["elapsed_s"] = round(self.elapsed(), 1)
        (self.out / "scaling.json").write_text(json.dumps(self.results, indent=1))
        (self.out / "scaling.md").write_text("\n".join(table(self.results)) + "\n")


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if shutil.which("lscpu") else ""
    keep = ("Thread(s) per core", "Core(s) per socket", "Socket(s)", "NUMA node(s)", "L2 cache", "L3 cache")
    return dict(cpu=cpu, cpus=os.cpu_count(), kernel=platform.release(), python=platform.python_version(),
                load_average=" ".join(f"{x:.2f}" for x in os.getloadavg()),
                isa_flags=[f for f in flags if f.startswith(("avx", "amx"))],
                lscpu={l.split(":", 1)[0].strip(): l.split(":", 1)[1].strip() for l in lscpu.splitlines()
                       if l.split(":", 1)[0].strip() in keep})


def build_colibri(run: Run, keep: bool) -> bool:
    """Colibri from this tree and the carried wheels into WORK/site (kept as it is with keep)."""
    site = WORK / "site"
    if keep and (site / "colibri").exists():
        return True
    if site.exists():
        shutil.rmtree(site)
    wheels = sorted(str(p) for p in run.carry.glob("*.whl"))
    if wheels:
        run.sh([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                "--target", str(site), *wheels], "pip install wheels", 120)
    done = run.sh([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-compile",
                   "--target", str(site), str(ROOT)], "pip install colibri", 300)
    return done.returncode == 0


def start_builds(run: Run, jobs: int, llama_builds: list[str]) -> list[tuple[str, subprocess.Popen, Path]]:
    """Starts (in the background) llama-bench's builds and Colibri's C test build; [(name, process, binary)]."""
    procs = []
    tar = run.carry / "llama.cpp.tar.gz"
    if tar.exists():
        src = WORK / "llama.cpp"
        if not src.exists():
            with tarfile.open(tar) as t:
                t.extractall(WORK, filter="data")
        for name in llama_builds:
            flags = LLAMA_BUILDS[name]
            build = WORK / f"llama-{name}"
            script = (f"cmake -S {src} -B {build} {' '.join(LLAMA_FLAGS + flags)} -G Ninja > {build}.log 2>&1 && "
                      f"cmake --build {build} --target llama-bench -j {jobs} >> {build}.log 2>&1")
            if not shutil.which("ninja"):
                script = script.replace(" -G Ninja", "")
            procs.append((f"llama.cpp {name} build", subprocess.Popen(["bash", "-c", script]), build / "bin" / "llama-bench"))
    else:
        run.results["skipped"].append(f"llama.cpp: {tar} not carried")
    cbuild = WORK / "colibri-c"
    script = (f"cmake -S {ROOT} -B {cbuild} -DCMAKE_BUILD_TYPE=Release > {cbuild}.log 2>&1 && "
              f"cmake --build {cbuild} -j {jobs} --target test_isa kernels_bench >> {cbuild}.log 2>&1")
    procs.append(("colibri C build", subprocess.Popen(["bash", "-c", script]), cbuild / "test_isa"))
    return procs


def write_models(run: Run, shapes: list[str]) -> dict[str, Path]:
    """The Q4_0 GGUF file of each shape, written where missing."""
    import models   # benchmarks/models.py, with the carried gguf on the path
    models.SHAPES.setdefault("tiny", TINY)
    root = WORK / "models"
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in shapes:
        path = root / f"{name}-q4_0.gguf"
        if not path.exists():
            started = time.monotonic()
            partial = path.with_name(path.name + ".partial")
            models.write_gguf(models.shape(name), models.Weights(), "q4_0", partial)
            partial.rename(path)
            run.log(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {time.monotonic() - started:.0f} s)")
        paths[name] = path
    return paths


def colibri_bench(run: Run, path: Path, threads: int, prompt: int, gen: int, extra: list[str], env=None) -> dict:
    done = run.sh([sys.executable, "-m", "colibri", "bench", str(path), "-t", str(threads), "--prompt", str(prompt),
                   "--gen", str(gen), "--repeat", "1", "--kv-type", "f16", "--json", *extra],
                  f"colibri {path.stem} t={threads} {' '.join(extra)}", 300, env=env)
    if done.returncode != 0:
        return {"error": (_text(done.stderr).strip().splitlines() or ["?"])[-1]}
    report = json.loads(_text(done.stdout).strip().splitlines()[-1])
    report["report"] = _text(done.stdout).strip().splitlines()[:-1]
    return report


def llama_bench(run: Run, binary: Path, path: Path, threads: list[int], prompt: int, gen: int) -> list[dict]:
    """llama-bench's pp`prompt` and tg`gen` at depth `prompt`, one repetition each, no warm-up."""
    rows = []
    for args in (["-p", str(prompt), "-n", "0"], ["-p", "0", "-n", str(gen), "-d", str(prompt)]):
        done = run.sh([str(binary), "-m", str(path), *args, "-t", ",".join(map(str, threads)), "-r", "1",
                       "--no-warmup", "-ctk", "f16", "-ctv", "f16", "-o", "json"],
                      f"llama-bench {binary.parent.parent.name} {path.stem} {' '.join(args)}", 400)
        try:
            rows += json.loads(_text(done.stdout))
        except json.JSONDecodeError:
            rows.append({"error": (_text(done.stderr).strip().splitlines() or ["?"])[-1], "args": args})
    return rows


def run_all(args) -> int:
    run = Run(Path(args.carry), Path(args.out), args.budget)
    threads = [int(t) for t in args.threads.split(",")]
    shapes = args.shapes.split(",")
    run.log(f"machine: {run.results['machine']['cpu']}, {run.results['machine']['cpus']} CPUs")
    jobs = max(1, (os.cpu_count() or 2) - 1)
    builds = start_builds(run, jobs, [b for b in args.llama_builds.split(",") if b and not (b == "avx2" and args.no_avx2)])
    if not build_colibri(run, args.keep_site):
        run.save()
        return 1
    sys.path[:0] = [str(WORK / "site"), str(HERE)]   # this process writes the models: colibri and gguf
    paths = write_models(run, shapes)
    binaries = {}
    for name, proc, binary in builds:
        code = proc.wait()
        run.log(f"{name}: exit {code}")
        binaries[name] = binary if code == 0 and binary.exists() else None
    run.save()

    cbuild = WORK / "colibri-c"
    if binaries.get("colibri C build") and run.left("test_isa", 30):
        done = run.sh([str(cbuild / "test_isa")], "test_isa", 300)
        run.results["checks"]["test_isa"] = _text(done.stdout).strip().splitlines()[-3:]
        done = run.sh([str(cbuild / "kernels_bench"), "4096", "4096", "64", "64"], "kernels_bench", 300)
        run.results["checks"]["kernels_bench"] = [json.loads(l) for l in _text(done.stdout).splitlines()
                                                  if l.startswith("{") and '"gemm"' in l]
        run.save()

    for name, path in paths.items():
        for t in threads:
            if not run.left(f"colibri {name} t={t}"):
                break
            result = colibri_bench(run, path, t, args.prompt, args.gen, [])
            run.results["colibri"].append({"shape": name, "threads": t, **result})
            run.save()
        llama = binaries.get("llama.cpp avx512 build")
        if llama and run.left(f"llama.cpp {name}"):
            for row in llama_bench(run, llama, path, threads, args.prompt, args.gen):
                run.results["llama"].append({"shape": name, "build": "avx512", **row})
            run.save()
    top = max(threads)
    for name, path in paths.items():
        if run.left(f"profile {name} t={top}", 30):
            result = colibri_bench(run, path, top, args.prompt, args.gen, ["--profile"])
            run.results["colibri"].append({"shape": name, "threads": top, "profiled": True, **result})
            run.save()
    if not args.no_avx2:
        avx2_env = dict(run.env, COLIBRI_ISA="avx2")
        for name, path in paths.items():
            for t in sorted({1, top}):
                if run.left(f"colibri avx2 {name} t={t}", 20):
                    result = colibri_bench(run, path, t, args.prompt, args.gen, [], env=avx2_env)
                    run.results["colibri"].append({"shape": name, "threads": t, "forced_isa": "avx2", **result})
                    run.save()
            llama = binaries.get("llama.cpp avx2 build")
            if llama and run.left(f"llama.cpp avx2 {name}", 30):
                for row in llama_bench(run, llama, path, sorted({1, top}), args.prompt, args.gen):
                    run.results["llama"].append({"shape": name, "build": "avx2", **row})
                run.save()
    run.log(f"done; results in {run.out}")
    run.save()
    return 0


# ---- the table ------------------------------------------------------------------------------------
def _llama_rate(rows: list[dict], shape: str, build: str, threads: int, kind: str) -> float | None:
    for r in rows:
        if r.get("shape") == shape and r.get("build") == build and r.get("n_threads") == threads and "avg_ts" in r:
            if (kind == "prefill" and r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0) or \
               (kind == "decode" and r.get("n_gen", 0) > 0):
                return float(r["avg_ts"])
    return None


def table(results: dict) -> list[str]:
    """Markdown: per shape and thread count, Colibri's decode (% of the probed bandwidth, weights and
    weights + KV) and prefill beside llama-bench's, their ratios and the scaling from 1 thread."""
    m = results["machine"]
    lines = [f"Machine: {m['cpu']}, {m['cpus']} CPUs, {m.get('lscpu', {})}; load {m['load_average']} at the start; "
             f"run took {results.get('elapsed_s', 0):.0f} s.", ""]
    head = ("| shape | isa | threads | decode tok/s | % roofline (w/ KV) | probed GB/s | prefill-512 tok/s | "
            "prefill vs 1 thread | llama.cpp decode | llama.cpp prefill | decode ratio | prefill ratio |")
    lines += [head, "|" + "---|" * 12]
    for r in results["colibri"]:
        if r.get("profiled"):
            continue
        build = "avx2" if r.get("forced_isa") == "avx2" else "avx512"
        if "error" in r:
            lines.append(f"| {r['shape']} | {r.get('forced_isa', '')} | {r['threads']} | error: {r['error']} |" + " |" * 8)
            continue
        one = next((o for o in results["colibri"] if o["shape"] == r["shape"] and o["threads"] == 1
                    and o.get("forced_isa") == r.get("forced_isa") and "error" not in o and not o.get("profiled")), None)
        peer_d = _llama_rate(results["llama"], r["shape"], build, r["threads"], "decode")
        peer_p = _llama_rate(results["llama"], r["shape"], build, r["threads"], "prefill")
        cells = [r["shape"], r["isa"], str(r["threads"]), f"{r['decode_tok_s']:.1f}",
                 f"{100 * r['roofline_fraction']:.0f}% ({100 * r['roofline_kv_fraction']:.0f}%)",
                 f"{r['read_bandwidth_gb_s']:.1f}", f"{r['prefill_tok_s']:.1f}",
                 f"{r['prefill_tok_s'] / one['prefill_tok_s']:.2f}x" if one else "",
                 f"{peer_d:.1f}" if peer_d else "", f"{peer_p:.1f}" if peer_p else "",
                 f"{r['decode_tok_s'] / peer_d:.2f}" if peer_d else "",
                 f"{r['prefill_tok_s'] / peer_p:.2f}" if peer_p else ""]
        lines.append("| " + " | ".join(cells) + " |")
    for r in results["colibri"]:
        if r.get("profiled") and "report" in r:
            lines += ["", f"Profile, {r['shape']}, {r['threads']} threads:", "```", *r["report"], "```"]
    checks = results.get("checks", {})
    if checks.get("test_isa"):
        lines += ["", "test_isa: " + " / ".join(checks["test_isa"])]
    if checks.get("kernels_bench"):
        lines += ["", "gemm in cache, one thread (kernels_bench 4096 4096 64 64), GMAC/s: " + ", ".join(
            f"{k['isa']} {k['dtype']} {k.get('gmac_per_s', 0):.0f}" for k in checks["kernels_bench"])]
    if results.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(results["skipped"])]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write the carried folder (here)")
    p.add_argument("carry")
    p.add_argument("--llama-sdist", type=Path, default=None, help="llama_cpp_python-0.3.36.tar.gz (else pip download)")
    r = sub.add_parser("run", help="build, write the models, measure (on the host)")
    r.add_argument("carry")
    r.add_argument("--out", required=True)
    r.add_argument("--threads", default="1,2,4,8,16")
    r.add_argument("--shapes", default="mixtral-small,olmoe-1b-7b")
    r.add_argument("--prompt", type=int, default=512)
    r.add_argument("--gen", type=int, default=64)
    r.add_argument("--budget", type=float, default=450.0, help="seconds after which no new step starts")
    r.add_argument("--no-avx2", action="store_true", help="skip COLIBRI_ISA=avx2 and the AVX2 llama.cpp build")
    r.add_argument("--llama-builds", default="avx512,avx2", help="llama-bench builds: avx512 (the peer), avx2")
    r.add_argument("--keep-site", action="store_true", help="reuse an earlier run's installed Colibri (local checks)")
    t = sub.add_parser("table", help="print the table of a scaling.json")
    t.add_argument("json")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(Path(args.carry), args.llama_sdist)
        return 0
    if args.command == "table":
        print("\n".join(table(json.loads(Path(args.json).read_text()))))
        return 0
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
