"""What a caller asks of the engine (GenerationParams), what it gets back (Output, Usage),
and one sequence's state while the engine runs it (Sequence)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from ..generation import TextStream, stop_list
from ..sampling import Sampler

MAX_TOP_LOGPROBS = 20
FINISH_REASONS = ("stop", "length", "cancelled", "timeout", "error")


@dataclass
class GenerationParams:
    """One request's settings. Sampling fields left None take the model's generation_config.json,
    then greedy (colibri.generation.sampling_params)."""

    max_tokens: int = 64
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float = 0.0     # OpenAI's: minus this once a token has been generated
    frequency_penalty: float = 0.0    # OpenAI's: minus this times the token's count so far
    seed: int | None = None           # sequence i of a request samples with seed + i
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False          # keep generating past end-of-sequence tokens
    logprobs: int | None = None       # None: off; k: the chosen token's logprob and the k most likely
    routes: bool = False              # each output carries its step's experts and gates
    timeout: float | None = None      # seconds from submission; then finish_reason "timeout"

    def validate(self) -> None:
        """ValueError naming the first field out of range."""
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -2 <= value <= 2:
                raise ValueError(f"{name} must be a number in [-2, 2], got {value!r}")
        self.stop = stop_list(self.stop)
        if self.logprobs is not None and (isinstance(self.logprobs, bool) or not isinstance(self.logprobs, int)
                                          or not 0 <= self.logprobs <= MAX_TOP_LOGPROBS):
            raise ValueError(f"logprobs must be None or an integer in [0, {MAX_TOP_LOGPROBS}], got {self.logprobs!r}")
        if self.timeout is not None and not (isinstance(self.timeout, (int, float)) and self.timeout > 0
                                             and math.isfinite(self.timeout)):
            raise ValueError(f"timeout must be None or a number of seconds > 0, got {self.timeout!r}")


@dataclass
class Usage:
    """Counts and times of one finished sequence (times in seconds)."""

    prompt_tokens: int
    completion_tokens: int        # every sampled token, an end-of-sequence token included
    cached_tokens: int            # prompt tokens whose KV came from the prefix cache
    queue_time: float             # submission to first scheduled step
    ttft: float | None            # submission to first token (None: no token)
    e2e: float                    # submission to finish


@dataclass
class Output:
    """One event of a sequence: a generated token, or (token None) its end."""

    index: int                    # which of the request's n sequences
    token: int | None
    text: str                     # text that became final with this event ("" while held back)
    logprob: float | None = None  # log-probability of `token` under the model's raw distribution
    top_logprobs: list[tuple[int, float]] | None = None   # the k most likely (id, logprob)
    experts: np.ndarray | None = None   # [n_moe_layers, top_k] int32: routing of the step that produced `token`
    gates: np.ndarray | None = None     # [n_moe_layers, top_k] float32
    finish_reason: str | None = None    # set on the end event: one of FINISH_REASONS
    usage: Usage | None = None          # set on the end event
    error: str | None = None            # set when finish_reason is "error"


class State(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    """One prompt's generation: the engine's unit of scheduling.

    tokens is the prompt followed by the generated tokens (an end-of-sequence token is never
    appended); the first `computed` of them have their K/V in the slot's cache. While it
    runs, tokens[computed:] are still to be fed: the prompt's rest, then one token per step.
    """

    def __init__(self, request_id: str, index: int, prompt: list[int], params: GenerationParams,
                 sampling, tokenizer, eos_ids: frozenset[int], sink):
        self.request_id, self.index = request_id, index
        self.prompt_len = len(prompt)
        self.tokens = list(prompt)
        self.params = params
        self.sampler = Sampler(sampling)
        self.text = TextStream(tokenizer, params.stop)
        self.eos_ids = frozenset() if params.ignore_eos else eos_ids
        self.sink = sink
        self.state = State.WAITING
        self.slot: int | None = None
        self.computed = 0
        self.cached_tokens = 0
        self.sampled = 0                   # tokens sampled so far (EOS included)
        self.counts: dict[int, int] = {}   # generated token -> occurrences (presence/frequency penalties)
        self.cancelled = False             # set by any thread; the engine acts on it at its next step
        self.submitted = time.monotonic()
        self.deadline = None if params.timeout is None else self.submitted + params.timeout
        self.scheduled: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None

    @property
    def decoding(self) -> bool:
        """The prompt is in the cache: each step feeds the last generated token."""
        return self.sampled > 0

    def usage(self, now: float) -> Usage:
        start = self.submitted
        return Usage(self.prompt_len, self.sampled, self.cached_tokens,
                     (self.scheduled or now) - start,
                     None if self.first_token is None else self.first_token - start, now - start)
