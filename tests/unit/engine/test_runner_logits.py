"""The runner's logits equal transformers' reference forward (fp32, max abs diff <= 1e-4).

Tiny random Llama / Llama-3-rope / Qwen2 / Mistral models, tied and untied heads,
paged layouts with page_size 1 and 16 (pages handed out shuffled), ragged
batches mixing fresh prefills, prefixes computed in an earlier forward, and
decode tokens.
"""

import pytest
import torch
from tests.support.tiny_models import TINY_CONFIGS, SeqSlots, SlotPool

from engine.forward_batch import make_forward_batch
from engine.models.llama import ModelShape
from engine.runner import ModelRunner

from tests.support.runner_driver import TOLERANCE, Driver


def random_tokens(n, seed, vocab=320):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_ragged_mixed_batches_match_reference(make_tiny_model, name, page_size):
    reference, loaded = make_tiny_model(name)
    driver = Driver(reference, loaded, page_size)
    a, b, c, d = (random_tokens(n, seed) for seed, n in enumerate([61, 31, 14, 6]))
    driver.step([("b", b[:20]), ("c", c[:12]), ("d", d[:4])])
    # fresh long prefill + prefix continuation (batched path) + two decode tokens in one forward
    driver.step([("a", a[:40]), ("b", b[20:30]), ("c", c[12:13]), ("d", d[4:5])])
    # a prefix split across two forwards on the long-chunk path, next to decode tokens
    driver.step([("b", b[30:31]), ("a", a[40:60]), ("d", d[5:6]), ("c", c[13:14])])
    driver.step([("a", a[60:61])])
    assert driver.max_diff <= TOLERANCE


@pytest.mark.parametrize("name", ["llama-tied", "qwen2-untied", "mistral-window"])
def test_many_decode_sequences_in_one_forward_match_reference(make_tiny_model, name):
    reference, loaded = make_tiny_model(name)
    driver = Driver(reference, loaded, page_size=4)
    prompts = {f"s{i}": random_tokens(3 + 5 * i, 100 + i) for i in range(9)}
    driver.step([(n, p) for n, p in prompts.items()])
    for step in range(4):
        driver.step([(n, random_tokens(1, 1000 * step + i)) for i, n in enumerate(prompts)])


def test_logit_rows_select_and_order_sequences(make_tiny_model):
    reference, loaded = make_tiny_model("llama-tied")
    driver = Driver(reference, loaded, page_size=16)
    x, y = random_tokens(9, 1), random_tokens(5, 2)
    sx, sy = SeqSlots(driver.pool), SeqSlots(driver.pool)
    batch = make_forward_batch([x, y], [sx.extend(9), sy.extend(5)], logit_rows=[1, 0])
    logits = driver.runner.forward(batch)
    assert logits.shape == (2, loaded.config.vocab_size) and logits.dtype == torch.float32
    assert (logits[0] - driver.reference_logits(y)).abs().max() <= TOLERANCE
    assert (logits[1] - driver.reference_logits(x)).abs().max() <= TOLERANCE


@pytest.mark.parametrize("name", ["llama-tied", "qwen2-untied"])
def test_greedy_decode_matches_transformers_generate(make_tiny_model, name):
    reference, loaded = make_tiny_model(name)
    driver = Driver(reference, loaded, page_size=16)
    prompt = random_tokens(11, 7)
    slots = SeqSlots(driver.pool)
    batch = make_forward_batch([prompt], [slots.extend(len(prompt))])
    generated = []
    for _ in range(24):
        token = int(driver.runner.forward(batch)[0].argmax())
        generated.append(token)
        batch = make_forward_batch([[token]], [slots.extend(1)])
    with torch.inference_mode():  # no EOS: the random model must not stop early
        out = reference.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
    assert generated == out[0, len(prompt):].tolist()


def test_forward_with_no_logit_rows_still_writes_the_kv(make_tiny_model):
    reference, loaded = make_tiny_model("qwen2-tied")
    driver = Driver(reference, loaded, page_size=16)
    tokens = random_tokens(30, 3)
    slots = SeqSlots(driver.pool)
    logits = driver.runner.forward(make_forward_batch([tokens[:20]], [slots.extend(20)], logit_rows=[]))
    assert logits.shape == (0, loaded.config.vocab_size)
    logits = driver.runner.forward(make_forward_batch([tokens[20:]], [slots.extend(10)]))
    assert (logits[0] - driver.reference_logits(tokens)).abs().max() <= TOLERANCE


def test_validate_rejects_out_slots_that_are_not_the_last_kv_slots():
    batch = make_forward_batch([[1, 2]], [[5, 6, 7]])
    batch.validate()
    batch.out_slots = torch.tensor([5, 6])
    with pytest.raises(ValueError, match="out_slots"):
        batch.validate()
    with pytest.raises(ValueError, match="logit_rows"):
        make_forward_batch([[1]], [[3]], logit_rows=[2]).validate()
