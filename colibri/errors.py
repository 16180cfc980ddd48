"""Errors Colibri raises on bad input."""


class ModelError(ValueError):
    """A model file, directory or configuration is unusable.

    The message is one line naming the file, tensor or field at fault and what
    was expected, e.g. ``model.safetensors: tensor 'lm_head.weight': shape
    [64, 32] expected [128, 32]``.
    """
