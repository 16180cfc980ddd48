"""Thread counts and placements through the Python API: the logits of a prompt are bitwise the
same for 1, 3 and 4 threads and every `numa` placement (the C tests cover more counts and
shapes); a placement of "none" leaves the workers unpinned; bad values are one-line errors."""
from __future__ import annotations

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
