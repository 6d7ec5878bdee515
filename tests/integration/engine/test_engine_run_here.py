"""Engine.run_here: the step loop on the caller's thread (what `radixgate serve` and the benches use)."""

import threading

import pytest

from engine import Engine, EngineConfig, SamplingParams
from bench.workloads.chat_template import render_chat

pytestmark = pytest.mark.slow


def make(runners) -> Engine:
    config = EngineConfig(dtype="float32", device="cpu", page_size=16, num_pages=512)
    return Engine(config, runner=runners(512, 16))


def test_run_here_serves_until_an_emit_shuts_it_down_with_the_same_answers(runners):
    engine = make(runners)
    prompts = [render_chat(engine.tokenizer, [{"role": "user", "content": q}])
               for q in ("What is the capital of France?", "Name a color.", "Count to three.")]
    params = SamplingParams(max_tokens=12)
    finals = {}

    def emit_for(index):
        def emit(output):
            assert threading.current_thread() is threading.main_thread()
            if output.is_finished:
                finals[index] = output
                if len(finals) == len(prompts):
                    engine.shutdown()
        return emit

    for index, prompt in enumerate(prompts):
        engine.submit(prompt, params, emit_for(index))
    engine.run_here()
    assert not engine.is_running and len(finals) == 3
    with engine.start():  # the background thread gives the same greedy answers
        for index, prompt in enumerate(prompts):
            assert engine.generate_sync(prompt, params).output_token_ids == finals[index].output_token_ids
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages


def test_run_here_returns_when_until_is_set_and_aborts_what_was_left(runners):
    engine = make(runners)
    prompt = render_chat(engine.tokenizer, [{"role": "user", "content": "Tell me a long story."}])
    finals = []
    engine.submit(prompt, SamplingParams(max_tokens=4000, ignore_eos=True),
                  lambda output: finals.append(output) if output.is_finished else None)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    engine.run_here(until=stop)
    assert not engine.is_running
    assert len(finals) == 1 and finals[0].finish_reason == "abort"
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages


def test_run_here_refuses_a_second_loop(runners):
    engine = make(runners)
    with engine.start():
        with pytest.raises(RuntimeError, match="already running"):
            engine.run_here()
