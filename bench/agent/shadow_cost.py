"""`bench agent --shadow-cost`: the canonical shadow's work per raw request, timed in-process.

For each workload row sent raw (canonicalize: false), the request path prepares the raw order
(`prepare_request`: canonicalize, render the client's order, tokenize); the canonical shadow
then, on its own worker, renders and tokenizes the canonical prompt and walks its radix index
(`render_canonical` + `CanonicalShadow.observe`). Both are timed on the same rows with the
default model's tokenizer and the built-in templates (no engine, no server); medians over
`repeats` passes, each on fresh shadow indexes and a fresh encode cache that both share, as in the
gateway (gateway/main.py: the request path and the shadow encode through one EncodeCache). It prices the work, not its effect on a loaded
server: that is what `--shadow-overhead` measures.
"""

from __future__ import annotations

import statistics
import time

from gateway.canonicalize.encode_cache import EncodeCache
from gateway.chat.parse import generation_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.generation.canonical_render import render_canonical
from gateway.generation.prepare import prepare_request
from gateway.insight.counterfactual import CanonicalShadow
from gateway.insight.shadow import ShadowIndex

MAX_CONTEXT = 8192


def load_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.loader import locate_alias

    path = locate_alias("smollm2-135m")
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def time_pass(rows: list[dict], templates, tokenizer) -> tuple[float, float]:
    """Seconds of (raw preparation, canonical shadow work) over all rows, one pass."""
    shadow = CanonicalShadow(ShadowIndex(page_size=16), EncodeCache(tokenizer))
    prepare_s = shadow_s = 0.0
    try:
        for row in rows:
            body = ChatCompletionRequest(**{**row["body"], "canonicalize": False})
            start = time.perf_counter()
            prepared = prepare_request(generation_request(body), templates=templates, tokenizer=shadow.tokenizer,
                                       model_id="m", max_context=MAX_CONTEXT, default_max_tokens=8)
            middle = time.perf_counter()
            canonical = render_canonical(templates, prepared.sections, shadow.tokenizer, body.template, None)
            shadow.observe(row["tenant"], canonical)
            prepare_s, shadow_s = prepare_s + middle - start, shadow_s + time.perf_counter() - middle
    finally:
        shadow.close()
    return prepare_s, shadow_s


def run_shadow_cost(rows: list[dict], templates_dir, repeats: int) -> dict:
    from gateway.prompt_templates import TemplateRegistry

    templates, tokenizer = TemplateRegistry(templates_dir), load_tokenizer()
    time_pass(rows[:3], templates, tokenizer)  # warm-up: tokenizer and template caches
    passes = [time_pass(rows, templates, tokenizer) for _ in range(repeats)]
    prepare_s = statistics.median(p for p, _ in passes)
    shadow_s = statistics.median(s for _, s in passes)
    return {
        "requests": len(rows),
        "repeats": repeats,
        "raw_prepare_ms_per_request": round(1000 * prepare_s / len(rows), 3),
        "canonical_shadow_ms_per_request": round(1000 * shadow_s / len(rows), 3),
        "shadow_over_prepare": round(shadow_s / prepare_s, 3) if prepare_s else None,
    }
