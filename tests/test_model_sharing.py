"""One Model used by several threads, or by a second call while a streamed generation is
unfinished. The model's context (its KV cache, what sequence 0 holds) serves one call or one
generation at a time: other threads wait for it and get what they would have alone; the
thread whose stream holds it is refused in one line, since the two would overwrite each
other's cache. Below the Python API the C core refuses a second step on a context while one
runs (tests/c/test_core.c)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import colibri

DEMO = Path(colibri.__file__).resolve().parent / "demo_model"
PROMPTS = ["And it came to pass", "It is a truth universally acknowledged, that", "In the beginning God created",
           "Elizabeth said"]


def test_threads_sharing_a_model_get_their_lone_results():
    with colibri.load(DEMO, threads=2) as m:
        alone = {p: m.generate(p, max_tokens=12, temperature=0).tokens for p in PROMPTS}
        ids = m.tokenizer.encode(PROMPTS[0])
        logits = m.logits(ids)
        got, errors = [], []

        def worker(k: int) -> None:
            try:
                for i in range(3):
                    prompt = PROMPTS[(k + i) % len(PROMPTS)]
                    if i == 1:
                        got.append(("logits", m.logits(ids).tobytes() == logits.tobytes()))
                    got.append((prompt, m.generate(prompt, max_tokens=12, temperature=0).tokens))
            except BaseException as exc:   # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(got) == 16
        for key, value in got:
            assert value is True if key == "logits" else value == alone[key], key


def test_a_second_use_under_an_unfinished_stream_is_refused():
    with colibri.load(DEMO, threads=1) as m:
        ids = m.tokenizer.encode(PROMPTS[1])
        want = m.logits(ids)
        stream = m.generate(PROMPTS[0], max_tokens=8, temperature=0, stream=True)
        first = next(stream)
        assert first.token is not None
        message = "this model is in use by an unfinished generation on this thread"
        with pytest.raises(RuntimeError, match=f"logits: {message}"):
            m.logits(ids)
        with pytest.raises(RuntimeError, match=f"generate: {message}"):
            m.generate(PROMPTS[2], max_tokens=4)
        with pytest.raises(RuntimeError, match=f"forward: {message}"):
            m.forward(ids, list(range(len(ids))), [0] * len(ids))
        rest = [p.token for p in stream if p.token is not None]   # the stream itself goes on
        assert [first.token] + rest == m.generate(PROMPTS[0], max_tokens=8, temperature=0).tokens
        stream = m.generate(PROMPTS[0], max_tokens=8, stream=True)
        next(stream)
        stream.close()   # a closed stream gives the model back
        assert np.array_equal(m.logits(ids), want)
