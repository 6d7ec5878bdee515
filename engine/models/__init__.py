"""Model definitions (the Llama family) and the loader that resolves a ``--model`` spec."""

from engine.models.llama import LlamaModel, ModelShape
from engine.models.loader import LoadedModel, load_model

__all__ = ["LlamaModel", "LoadedModel", "ModelShape", "load_model"]
