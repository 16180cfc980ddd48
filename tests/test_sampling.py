"""colibri.sampling: HF generate's logits processors, reproducible draws, parameter checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from colibri.sampling import Sampler, SamplingParams, load_generation_defaults

VOCAB = 300


def _logits(seed: int, vocab: int = VOCAB) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(vocab) * 3).astype(np.float32)  # logits: [vocab]


def _hf_distribution(logits, previous, params: SamplingParams) -> np.ndarray:
    """softmax of transformers' processors, built in the order generate builds them."""
    import torch
    from transformers.generation import logits_process as lp

    processors = []
    if params.repetition_penalty != 1.0:
        processors.append(lp.RepetitionPenaltyLogitsProcessor(params.repetition_penalty))
    if params.temperature != 1.0:
        processors.append(lp.TemperatureLogitsWarper(params.temperature))
    if params.top_k:
        processors.append(lp.TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        processors.append(lp.TopPLogitsWarper(params.top_p))
    if params.min_p:
        processors.append(lp.MinPLogitsWarper(params.min_p))
    input_ids = torch.tensor([list(previous)], dtype=torch.long)
    scores = torch.tensor(logits)[None]
    for processor in processors:
        scores = processor(input_ids, scores)
    return torch.softmax(scores[0].double(), dim=-1).numpy()


@pytest.mark.parametrize("params", [
    SamplingParams(),
    SamplingParams(repetition_penalty=1.3),
    SamplingParams(repetition_penalty=0.8, temperature=0.7),
    SamplingParams(temperature=1.5, top_k=40),
    SamplingParams(temperature=0.8, top_p=0.9),
    SamplingParams(min_p=0.1),
    SamplingParams(temperature=0.6, top_k=50, top_p=0.8, min_p=0.05, repetition_penalty=1.2),
], ids=repr)
@pytest.mark.parametrize("seed", range(4))
def test_distribution_matches_transformers_processors(params, seed):
    logits = _logits(seed)
    previous = np.random.default_rng(100 + seed).integers(0, VOCAB, size=60).tolist()
    ours = Sampler(params).distribution(logits, previous)
    reference = _hf_distribution(logits, previous, params)
    np.testing.assert_array_equal(ours > 0, reference > 0)   # the same tokens survive the filters
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-9)


def test_repetition_penalty_is_bitwise_transformers():
    import torch
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    logits = _logits(7, 5000)
    previous = np.random.default_rng(8).integers(0, 5000, size=3000).tolist()
    for penalty in (1.3, 0.7, 2.9):
        expected = RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([previous]), torch.tensor(logits)[None])
        # the penalised scores themselves, before any softmax blurs a last-bit difference
        ours = Sampler(SamplingParams(repetition_penalty=penalty))._penalized(logits, previous)
        np.testing.assert_array_equal(ours, expected[0].numpy())


def test_greedy_is_argmax_with_ties_to_the_lowest_id():
    logits = _logits(1)
    sampler = Sampler(SamplingParams(temperature=0.0))
    assert sampler.sample(logits, []) == int(np.argmax(logits))
    tied = np.zeros(10, dtype=np.float32)
    tied[[3, 7]] = 2.0
    assert sampler.sample(tied, []) == 3
    # the repetition penalty still applies when greedy, as in generate
    penalized = Sampler(SamplingParams(temperature=0.0, repetition_penalty=10.0))
    assert penalized.sample(tied, [3]) == 7


def test_greedy_ignores_the_random_stream():
    logits = _logits(2)
    a, b = Sampler(SamplingParams(temperature=0, seed=1)), Sampler(SamplingParams(temperature=0, seed=2))
    assert [a.sample(logits, []) for _ in range(5)] == [b.sample(logits, []) for _ in range(5)]


def test_same_seed_same_tokens_and_different_seed_different_tokens():
    logits = [_logits(s) for s in range(40)]

    def run(seed):
        sampler = Sampler(SamplingParams(temperature=1.2, top_p=0.95, seed=seed))
        return [sampler.sample(l, []) for l in logits]

    assert run(1234) == run(1234)
    assert run(1234) != run(4321)


def test_top_k_1_and_tiny_top_p_are_greedy():
    for seed in range(20):
        logits = _logits(seed)
        greedy = int(np.argmax(logits))
        assert Sampler(SamplingParams(top_k=1, seed=seed)).sample(logits, []) == greedy
        assert Sampler(SamplingParams(top_p=1e-9, temperature=2.0, seed=seed)).sample(logits, []) == greedy


def test_min_p_keeps_exactly_the_tokens_above_the_scaled_threshold():
    logits = np.log(np.array([0.4, 0.3, 0.15, 0.1, 0.05], dtype=np.float32))
    sampler = Sampler(SamplingParams(min_p=0.3, seed=3))   # threshold 0.3 × 0.4 = 0.12
    drawn = {sampler.sample(logits, []) for _ in range(2000)}
    assert drawn == {0, 1, 2}


def test_draws_follow_the_softmax():
    # Deterministic (fixed seed); the chi-square bound is the 0.1% critical value for 7 dof.
    logits = np.array([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, 1.5, 0.2], dtype=np.float32)
    expected = np.exp(logits.astype(np.float64)) / np.exp(logits.astype(np.float64)).sum()
    sampler = Sampler(SamplingParams(seed=2024))
    n = 20000
    counts = np.bincount([sampler.sample(logits, []) for _ in range(n)], minlength=len(logits))
    chi_square = float(((counts - n * expected) ** 2 / (n * expected)).sum())
    assert chi_square < 24.32


def test_temperature_sharpens_the_distribution():
    logits = _logits(5)
    cold = Sampler(SamplingParams(temperature=0.3)).distribution(logits, [])
    hot = Sampler(SamplingParams(temperature=3.0)).distribution(logits, [])
    assert cold.max() > hot.max() and math.isclose(cold.sum(), 1.0) and math.isclose(hot.sum(), 1.0)


def test_filtered_tokens_are_never_drawn():
    logits = _logits(9)
    sampler = Sampler(SamplingParams(top_k=5, temperature=5.0, seed=0))
    allowed = set(np.argsort(logits)[-5:].tolist())
    assert {sampler.sample(logits, []) for _ in range(500)} <= allowed


def test_previous_tokens_beyond_the_vocabulary_are_ignored_and_negative_ones_rejected():
    logits = _logits(4, 10)
    sampler = Sampler(SamplingParams(temperature=0, repetition_penalty=2.0))
    assert sampler.sample(logits, [10, 11, 500]) == int(np.argmax(logits))
    with pytest.raises(ValueError, match="previous token id -1 is negative"):
        sampler.sample(logits, [-1])


@pytest.mark.parametrize("temperature", [1.0, 0.0])     # 0: the greedy path that skips the copy
@pytest.mark.parametrize("logits, message", [
    (np.array([1.0, np.nan], dtype=np.float32), "logits contain NaN"),
    (np.array([np.nan, 1.0, 2.0], dtype=np.float32), "logits contain NaN"),
    (np.array([1.0, np.inf, np.nan, 3.0], dtype=np.float32), "logits contain NaN"),
    (np.zeros((2, 3), dtype=np.float32), r"logits must be a non-empty \[vocab\] vector"),
    (np.zeros(0, dtype=np.float32), r"logits must be a non-empty \[vocab\] vector"),
])
def test_bad_logits(logits, message, temperature):
    with pytest.raises(ValueError, match=message):
        Sampler(SamplingParams(temperature=temperature)).sample(logits, [])


def test_greedy_takes_the_first_of_tied_maxima_in_float32_and_float64():
    logits = np.array([0.5, 2.0, -1.0, 2.0], dtype=np.float32)
    for dtype in (np.float32, np.float64):
        assert Sampler(SamplingParams(temperature=0)).sample(logits.astype(dtype), []) == 1


@pytest.mark.parametrize("field, value", [
    ("temperature", -0.1), ("temperature", float("nan")), ("temperature", float("inf")),
    ("top_p", 0.0), ("top_p", 1.01), ("top_p", float("nan")),
    ("min_p", -0.01), ("min_p", 1.5),
    ("top_k", -1), ("top_k", 2.5),
    ("repetition_penalty", 0.0), ("repetition_penalty", -1.0), ("repetition_penalty", float("nan")),
    ("seed", -3), ("seed", "7"),
])
def test_validate_names_the_bad_field(field, value):
    params = SamplingParams(**{field: value})
    with pytest.raises(ValueError, match=f"^sampling: {field} must be"):
        params.validate()
    with pytest.raises(ValueError, match=field):
        Sampler(params)


def test_validate_accepts_edges():
    SamplingParams(temperature=0, top_p=1.0, min_p=1.0, top_k=0, repetition_penalty=1e-3, seed=0).validate()
    SamplingParams(temperature=np.float32(0.5), top_k=np.int64(3)).validate()


def test_load_generation_defaults():
    assert load_generation_defaults(None) == {} == load_generation_defaults({})
    config = {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": None,
              "repetition_penalty": 1.05, "eos_token_id": [1, 2], "max_new_tokens": 64}
    assert load_generation_defaults(config) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                                "repetition_penalty": 1.05}
    assert load_generation_defaults({"do_sample": False, "temperature": 0.6}) == {"temperature": 0.0}
    assert load_generation_defaults({"min_p": 0.05}) == {"min_p": 0.05}
    overrides = load_generation_defaults(config)
    assert SamplingParams(**overrides).top_k == 20
    with pytest.raises(ValueError, match="^generation_config.json: sampling: top_p must be"):
        load_generation_defaults({"top_p": 0})
