"""Supported architectures, one module per Hugging Face ``model_type``."""
from __future__ import annotations

import importlib

from ..errors import ModelError
from .spec import Architecture, ConfigReader, ModelConfig, TensorSlot, shape_text, tensor_slots, tensor_supply

SUPPORTED = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "llama", "gpt_oss", "deepseek_v2", "deepseek_v3", "glm4_moe",
             "granitemoe", "granitemoeshared", "ernie4_5_moe", "dots1", "minimax_m2")

__all__ = ["SUPPORTED", "Architecture", "ConfigReader", "ModelConfig", "TensorSlot", "architecture",
           "shape_text", "tensor_slots", "tensor_supply"]


def architecture(model_type: object, source: str = "config.json") -> Architecture:
    """The Architecture for a config's model_type; ModelError listing the supported ones otherwise."""
    if model_type not in SUPPORTED:
        raise ModelError(f"{source}: model_type {model_type!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED)})")
    return importlib.import_module(f"{__name__}.{model_type}").ARCHITECTURE
