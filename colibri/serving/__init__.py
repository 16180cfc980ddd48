"""The serving engine: continuous batching, prefix cache and seeded per-sequence sampling
over one model context. Knows nothing of HTTP (colibri.server is a thin layer over it)."""
from .engine import Engine, QueueFull, Stream
from .request import FINISH_REASONS, GenerationParams, Output, Usage
from .stats import EngineStats, Observer

__all__ = ["Engine", "QueueFull", "Stream", "GenerationParams", "Output", "Usage", "FINISH_REASONS",
           "EngineStats", "Observer"]
