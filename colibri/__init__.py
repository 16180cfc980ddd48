"""Colibri: fast, deterministic Mixture-of-Experts inference on CPUs.

    import colibri
    m = colibri.load("path/to/hf-model-dir")
    print(m.generate("Once upon a time", max_tokens=32).text)
"""
from .errors import ModelError

__version__ = "0.1.0"
__all__ = ["ModelError", "load", "__version__"]


def load(path, threads=None, **options):
    """Load a model (a Hugging Face safetensors directory). See colibri.loader.load."""
    from .loader import load as _load

    return _load(path, threads, **options)
