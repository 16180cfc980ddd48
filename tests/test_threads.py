"""Thread counts and placements through the Python API: the logits of a prompt are bitwise the
same for 1, 3 and 4 threads and every `numa` placement (the C tests cover more counts and
shapes); a placement of "none" leaves the workers unpinned; bad values are one-line errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

import colibri

from conftest import token_ids


@pytest.fixture(scope="module")
def tiny(tiny_model_factory):
    return tiny_model_factory("mixtral-a")


def test_logits_bitwise_equal_across_threads_and_placements(tiny):
    ids = token_ids(tiny.reference.config.vocab_size, 40, seed=11)
    results = {}
    for threads, numa in ((1, None), (3, None), (4, "distribute"), (3, "isolate"), (2, "none")):
        with colibri.load(tiny.path, threads=threads, numa=numa) as m:
            assert m.threads == threads
            if numa == "none" or threads == 1:
                assert not m._context().pinned
            results[(threads, numa)] = m.logits(ids)
    first = results[(1, None)]
    for key, logits in results.items():
        assert np.array_equal(logits, first), key


@pytest.mark.parametrize("name", ["qwen2_moe-a", "olmoe-a", "gpt_oss-a", "deepseek_v2-a", "deepseek_v3-a"])
def test_logits_bitwise_equal_across_threads_every_family(tiny_model_factory, name):
    """Each family's mechanisms (shared experts, q/k norm and clip, biases and sinks, latent
    attention's per-head jobs, grouped routing) split over 2, 3 and 5 threads give the 1-thread
    logits bitwise: a 70-token prompt in one step (past the 64-token chunks) and 12 one-token
    decode steps."""
    model = tiny_model_factory(name)
    ids = token_ids(model.reference.config.vocab_size, 70, seed=5)
    results = []
    for threads in (1, 2, 3, 5):
        with colibri.load(model.path, threads=threads) as prompt, \
                colibri.load(model.path, threads=threads, n_batch=1) as steps:
            results.append((prompt.logits(ids), steps.logits(ids[:12])))
    for threads, (prompt, steps) in zip((2, 3, 5), results[1:]):
        assert np.array_equal(prompt, results[0][0]), threads
        assert np.array_equal(steps, results[0][1]), threads


def test_default_threads_one_per_physical_core(tiny):
    with colibri.load(tiny.path) as m:
        assert 1 <= m.threads <= __import__("os").cpu_count()


def test_bad_numa_is_a_value_error(tiny):
    with pytest.raises(ValueError, match="numa must be one of distribute, isolate, none"):
        colibri.load(tiny.path, numa="interleave")


STACK_CHILD = r"""
import resource, sys, threading
import numpy as np
import colibri

path, out = sys.argv[1], sys.argv[2]
ids = [int(i) for i in sys.argv[3].split(",")]
print("stack", resource.getrlimit(resource.RLIMIT_STACK)[0] >> 10, "KiB", flush=True)
with colibri.load(path, threads=2) as m:
    try:
        m.logits(ids)
        print("main thread: ran")
    except ValueError as e:
        print("main thread refused:", e)
    threading.stack_size(4 << 20)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("logits", m.logits(ids)))
    t.start()
    t.join()
    np.save(out, got["logits"])
"""


def test_small_default_thread_stacks_neither_crash_nor_refuse_a_large_caller(tiny_model_factory, tmp_path):
    """A forward step's kernels keep ~255 KiB on the stack (the AVX2 gemm of the 256-element
    types: two panels and the tokens' side of a chunk). Under `ulimit -s 256` (glibc then gives
    every new thread 256 KiB; musl always gives 128 KiB) the workers are still made with
    enough, a calling thread with too little is refused in one line, and a caller with a large
    stack gets the logits of an unlimited process bitwise. The file is all Q4_K, so a 40-token
    prompt takes those gemms."""
    import resource
    import subprocess
    import sys

    from test_gguf_blocks import MODEL, _uniform, _write

    wide = tiny_model_factory(MODEL)
    path = tmp_path / "wide-q4_k.gguf"
    _write(wide, path, _uniform("Q4_K"))
    ids = token_ids(128, 40, seed=3)
    with colibri.load(path, threads=2) as m:
        want = m.logits(ids)

    def small_stack():
        resource.setrlimit(resource.RLIMIT_STACK, (256 << 10, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    out = tmp_path / "logits.npy"
    # outside the source tree: the installed package (with its built library) is what runs
    child = subprocess.run([sys.executable, "-c", STACK_CHILD, str(path), str(out), ",".join(map(str, ids))],
                           capture_output=True, text=True, preexec_fn=small_stack, timeout=300, cwd=tmp_path)
    assert child.returncode == 0, child.stdout + child.stderr
    assert "stack 256 KiB" in child.stdout
    refused = [line for line in child.stdout.splitlines() if line.startswith("main thread")]
    assert len(refused) == 1 and re.fullmatch(
        r"main thread refused: forward: the calling thread's stack is 2[0-9]{2} KiB, the kernels need 512 KiB "
        r"\(raise `ulimit -s`, or call from a thread with a larger stack\)", refused[0]), child.stdout
    assert np.load(out).tobytes() == want.tobytes()


def test_default_threads_follow_the_cgroup_cpu_quota(tiny, tmp_path):
    """A container's CPU limit (docker --cpus, a Kubernetes limit: a CFS quota, every host CPU
    still in the affinity mask) caps the default thread count: a process in a real cgroup of
    one CPU's quota gets one thread by default, and the same logits; an explicit count is
    kept."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    with colibri.load(tiny.path) as m:
        if m.threads < 2:
            pytest.skip("one core here: a quota of one CPU would not change the default")
        ids = token_ids(tiny.reference.config.vocab_size, 20, seed=2)
        want = m.logits(ids)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from cgroup import CgroupUnavailable, CpuCgroup

    try:
        group = CpuCgroup.create(f"colibri-test-cpu-{os.getpid()}", 1)
    except CgroupUnavailable as reason:
        pytest.skip(str(reason))
    try:
        script = ("import sys, numpy as np, colibri\n"
                  f"m = colibri.load({str(tiny.path)!r})\n"
                  f"np.save(sys.argv[1], m.logits({ids}))\n"
                  f"print(m.threads, colibri.load({str(tiny.path)!r}, threads=2).threads)\n")
        out = tmp_path / "logits.npy"
        ran = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=300,
                             preexec_fn=group.join, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split() == ["1", "2"]
        assert np.load(out).tobytes() == want.tobytes()
    finally:
        group.remove()


FORK_CHILD = r"""
import os, sys
import numpy as np
import colibri

path = sys.argv[1]
ids = [int(i) for i in sys.argv[2].split(",")]
pooled = colibri.load(path, threads=2)
paged = colibri.load(path, threads=2, expert_slots=1)
want = pooled.logits(ids)
paged.logits(ids)
pid = os.fork()
if pid == 0:   # the workers and the readers stayed in the parent
    same = pooled.logits(ids).tobytes() == want.tobytes()
    try:
        paged.logits(ids)
        refused = "ran"
    except ValueError as e:
        refused = str(e)
    pooled.close()
    paged.close()
    print("child", same, refused, flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("parent", os.waitstatus_to_exitcode(status), pooled.logits(ids).tobytes() == want.tobytes(), flush=True)
"""


def test_a_forked_child_computes_the_same_logits_and_never_hangs(tiny, tmp_path):
    """Threads do not survive fork() (multiprocessing's default start on Linux, gunicorn
    --preload): a context made before a fork computes in the child on one thread, the same
    logits bitwise; a paging context, whose readers stayed behind, refuses in one line; both
    close in the child, and the parent goes on. Before, the child's first step waited for its
    absent workers forever."""
    import subprocess
    import sys

    ids = token_ids(tiny.reference.config.vocab_size, 24, seed=4)
    ran = subprocess.run([sys.executable, "-c", FORK_CHILD, str(tiny.path), ",".join(map(str, ids))],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == ("child True forward: this context pages its experts with reader threads that stayed in "
                        "the process it was made in; after fork(), load the model again"), ran.stdout
    assert lines[1] == "parent 0 True", ran.stdout
