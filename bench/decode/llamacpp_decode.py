"""llama.cpp's decode tokens/s at the bench's batch sizes: llama-cpp-python's low-level batch API, same GGUF.

Measured like radixgate's: for each batch size B, B sequences (llama.cpp sequence ids 0..B-1) are
prefilled in one ``llama_decode``, then ``num_tokens`` greedy steps run, each one ``llama_decode`` of
the B newest tokens; only the steps are timed, tokens/s is ``B * num_tokens / seconds``, the median
over ``repeat`` fresh contexts. Greedy is an argmax over each row's logits (numpy), as radixgate's
bench takes a torch argmax. It runs in a spawned child (bench.llamacpp): native code that crashes
(llama.cpp's weight repacking on some CPUs) ends the child, not the bench; a crashed run is retried once
with the repacking buffer types off.
"""

from __future__ import annotations

import statistics
import time

from bench.llamacpp import model_params, run_with_fallback


def run_llamacpp_decode(gguf_path: str | None, sizes: list[int], num_tokens: int, prompt_len: int, repeat: int,
                        num_threads: int) -> dict:
    """{"tok_s": {"B": median tok/s}, "tok_s_all", "num_threads"[, "note"]} or {"name", "error"}."""
    return run_with_fallback(gguf_path, _decode, (sizes, num_tokens, prompt_len, repeat, num_threads))


def _decode(sender, *args) -> None:
    sender.send(("result", _measure(*args)))


def _measure(gguf_path, sizes, num_tokens, prompt_len, repeat, num_threads, extra_buffers) -> dict:
    import logging

    import llama_cpp

    # llama-cpp-python prints every llama.cpp log line unless its logger is raised (Llama(verbose=False) does
    # this; the low-level API used here does not): thousands of graph lines per batch size otherwise
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    model = llama_cpp.llama_model_load_from_file(gguf_path.encode(), model_params(extra_buffers))
    if not model:
        return {"error": f"llama.cpp could not load {gguf_path}"}
    try:
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        rates = {str(b): [_pass(llama_cpp, model, n_vocab, b, num_tokens, prompt_len, num_threads)
                          for _ in range(repeat)] for b in sizes}
    finally:
        llama_cpp.llama_model_free(model)
    return {"tok_s": {b: statistics.median(r) for b, r in rates.items()}, "tok_s_all": rates,
            "num_threads": num_threads}


def _pass(llama_cpp, model, n_vocab: int, batch_size: int, num_tokens: int, prompt_len: int, num_threads: int):
    """One prefill + timed greedy steps on a fresh context; decode tokens/s."""
    import numpy as np

    cparams = llama_cpp.llama_context_default_params()
    per_seq = prompt_len + num_tokens + 16
    cparams.n_ctx = batch_size * per_seq
    cparams.n_batch = cparams.n_ubatch = max(batch_size * prompt_len, 64)
    cparams.n_seq_max = batch_size
    cparams.n_threads = cparams.n_threads_batch = num_threads
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    batch = llama_cpp.llama_batch_init(cparams.n_batch, 0, batch_size)
    try:
        def decode(rows: list[tuple[int, int, int, bool]]) -> list[int]:
            """rows of (token, position, sequence, wants logits) -> the argmax of each row that wants them."""
            batch.n_tokens = len(rows)
            for i, (token, pos, seq, wants) in enumerate(rows):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
                batch.seq_id[i][0], batch.logits[i] = seq, wants
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed")
            return [int(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).argmax())
                    for i, row in enumerate(rows) if row[3]]

        prompts = [[(7 + 31 * s + 17 * j) % n_vocab for j in range(prompt_len)] for s in range(batch_size)]
        tokens = decode([(t, j, s, j == prompt_len - 1) for s, p in enumerate(prompts) for j, t in enumerate(p)])
        started = time.perf_counter()
        for step in range(num_tokens):
            tokens = decode([(t, prompt_len + step, s, True) for s, t in enumerate(tokens)])
        return batch_size * num_tokens / (time.perf_counter() - started)
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
