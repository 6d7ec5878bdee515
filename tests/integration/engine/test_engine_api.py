"""Engine API on the real model: seeds, stop strings, EOS, streaming text, pins, aborts and page balance."""

import asyncio
import random
import threading

import pytest

from engine import SamplingParams
from bench.workloads.chat_template import render_chat

pytestmark = pytest.mark.slow


def chat(engine, text: str) -> list[int]:
    return render_chat(engine.tokenizer, [{"role": "user", "content": text}])


def test_same_seed_same_output_and_other_seeds_differ(make_engine):
    engine = make_engine()
    prompt = chat(engine, "Tell me a story.")
    params = lambda seed: SamplingParams(max_tokens=16, temperature=1.0, top_p=0.95, top_k=50, seed=seed)  # noqa: E731
    first = engine.generate_sync(prompt, params(11)).output_token_ids
    again = engine.generate_sync(prompt, params(11)).output_token_ids
    others = {tuple(engine.generate_sync(prompt, params(seed)).output_token_ids) for seed in (12, 13, 14)}
    assert first == again
    assert others != {tuple(first)}


def test_stop_string_is_trimmed_and_eos_ends_the_answer(make_engine):
    engine = make_engine()
    prompt = chat(engine, "What is the capital of France?")
    plain = engine.generate_sync(prompt, SamplingParams(max_tokens=64))
    assert plain.output_text == "The capital of France is Paris." and plain.finish_reason == "stop"
    assert plain.output_token_ids[-1] in engine.runner.loaded_model.eos_token_ids
    stopped = engine.generate_sync(prompt, SamplingParams(max_tokens=64, stop=[" Paris"]))
    assert stopped.output_text == "The capital of France is" and stopped.finish_reason == "stop"
    capped = engine.generate_sync(prompt, SamplingParams(max_tokens=3))
    assert capped.finish_reason == "length" and len(capped.output_token_ids) == 3


async def test_streamed_deltas_concatenate_to_clean_utf8_text(make_engine):
    engine = make_engine()
    prompt = chat(engine, "Écris une phrase en français avec des accents, puis ajoute des emojis 🎉🚀.")
    deltas, final = [], None
    async for out in engine.generate(prompt, SamplingParams(max_tokens=40)):
        deltas.append(out.text)
        final = out
    text = "".join(deltas)
    assert text == final.output_text == engine.tokenizer.decode(final.output_token_ids, skip_special_tokens=True)
    assert "\ufffd" not in text and any(ord(c) > 127 for c in text)
    assert final.usage.prompt_tokens == len(prompt) and final.usage.completion_tokens == len(final.output_token_ids)
    assert final.usage.ttft_s > 0 and final.usage.decode_s >= 0


async def test_leaving_the_stream_early_aborts_the_request(make_engine):
    engine = make_engine()
    async for _ in engine.generate(chat(engine, "Count to one hundred."), SamplingParams(max_tokens=200)):
        break
    for _ in range(100):
        if engine.stats()["num_running"] == 0:
            break
        await asyncio.sleep(0.05)
    assert engine.stats()["num_running"] == 0


async def test_pin_prefills_then_a_request_reuses_it(make_engine):
    engine = make_engine()
    system = render_chat(engine.tokenizer, [{"role": "system", "content": "You are a pirate. " * 20}])
    pin_id = await engine.pin("tenant-a", system)
    info = engine.pin_info(pin_id)
    assert info["tokens"] == len(system) // 16 * 16
    question = render_chat(engine.tokenizer, [{"role": "system", "content": "You are a pirate. " * 20},
                                              {"role": "user", "content": "Hello!"}])
    final = engine.generate_sync(question, SamplingParams(max_tokens=4), namespace="tenant-a")
    assert final.usage.cached_tokens >= info["tokens"]
    engine.unpin(pin_id)


def test_200_random_requests_with_aborts_leak_no_pages(make_engine):
    engine = make_engine(num_pages=128, max_batch_tokens=256)
    rng = random.Random(0)
    shared = chat(engine, "You are a helpful assistant.")[:24]
    finals, done, lock = [], threading.Event(), threading.Lock()

    def emit(out):
        if out.is_finished:
            with lock:
                finals.append(out)
                if len(finals) == 200:
                    done.set()

    for _ in range(200):
        prompt = shared[: rng.randint(1, len(shared))] + [rng.randint(100, 20000) for _ in range(rng.randint(1, 12))]
        request_id = engine.submit(prompt, SamplingParams(max_tokens=rng.randint(1, 4)), emit,
                                   namespace=rng.choice(["a", "b"]))
        if rng.random() < 0.25:
            engine.abort(request_id)
    assert done.wait(600)
    reasons = {f.finish_reason for f in finals}
    assert "abort" in reasons and reasons & {"length", "stop"}
    assert all(f.error is None for f in finals)
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages
