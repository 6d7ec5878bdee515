"""PromptModel: what request preparation needs of the model (tokenizer, chat format, context length).

With the embedded engine these come from the engine. An edge gateway (`serve --no-engine`) loads
them from the remotes' model files instead, so canonicalization, token counts, affinity,
/v1/canonicalize and the request log work the same: `settings.remote_tokenizer` names a local
Hugging Face directory or a model spec as `engine.model` takes (default: `engine.model`, whose
HF directory radixgate caches under `engine.cache_dir`/models/, ~/.cache/radixgate/models/ by
default). Only the tokenizer and the
config are read; no weights are loaded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FALLBACK_MAX_CONTEXT = 4096


@dataclass(frozen=True)
class PromptModel:
    tokenizer: Any
    max_context: int
    model_id: str
    page_size: int


def from_engine(engine) -> PromptModel:
    return PromptModel(engine.tokenizer, engine.max_context, engine.model_id, engine.config.page_size)


def load_prompt_model(settings) -> PromptModel:
    """The remotes' tokenizer and context length, from `settings.remote_tokenizer` (see the module docstring)."""
    from transformers import AutoConfig, AutoTokenizer

    from engine import model_cache_root, resolve_model_dir

    spec = settings.remote_tokenizer or settings.engine.model
    model_dir, model_id = resolve_model_dir(spec, model_cache_root(settings.engine.cache_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    max_context = settings.remote_max_context
    if max_context is None:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        max_context = int(getattr(config, "max_position_embeddings", 0) or FALLBACK_MAX_CONTEXT)
    log.info("remote-only: tokenizer and chat format of %s from %s (context %d)", model_id, Path(model_dir), max_context)
    return PromptModel(tokenizer, max_context, model_id, settings.engine.page_size)
