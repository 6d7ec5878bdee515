"""transformers' KV-cache keyword across the versions the project admits (transformers>=4.48).

Recent releases take and return the cache as ``cache`` and warn that ``past_key_values`` will be removed
(6.0); older ones know only ``past_key_values``. The benches' transformers baselines pass and read it
through these two helpers, so they run without the deprecation warnings on either.
"""

from __future__ import annotations

import functools
import inspect


@functools.cache
def cache_keyword(model_class: type) -> str:
    """``"cache"`` where ``model_class.forward`` takes it, else ``"past_key_values"``."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def cache_kwargs(model, cache) -> dict:
    """``{keyword: cache}`` for ``model(...)`` or ``model.generate(...)``; empty when ``cache`` is None."""
    return {} if cache is None else {cache_keyword(type(model)): cache}


def returned_cache(model, output):
    """The KV cache a forward returned (``output.cache`` or ``output.past_key_values``)."""
    return getattr(output, cache_keyword(type(model)))
