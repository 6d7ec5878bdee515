"""The runner on the real default model: logits and greedy decode equal transformers' (fp32)."""

import pytest
import torch
from tests.support.runner_driver import Driver
from tests.support.tiny_models import SeqSlots, SlotPool

from engine.forward_batch import make_forward_batch
from engine.runner import ModelRunner

pytestmark = pytest.mark.slow

# float32 against float32: the two sum in different orders (oneDNN's packed linears vs transformers'
# matmuls) over 30 layers; SmolLM2's logits (|x| up to ~30) then differ by up to ~1e-4 — 1.01e-4 seen
# with transformers 5.24 — so the bound is 2e-4, still float32 rounding (a bf16 step would be ~1e-1).
LOGITS_TOLERANCE = 2e-4

QUESTIONS = ["What is the capital of France?", "Write a short poem about the sea.", "Explain how rainbows form."]


def chat_ids(tokenizer, question):
    return tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                         tokenize=True, return_dict=False)


def test_smollm2_ragged_logits_match_reference(smollm, smollm_reference):
    driver = Driver(smollm_reference, smollm, page_size=16, num_pages=64, tolerance=LOGITS_TOLERANCE)
    p, q, r = (chat_ids(smollm.tokenizer, text) for text in QUESTIONS)
    driver.step([("p", p[:20]), ("q", q)])
    driver.step([("p", p[20:]), ("q", [28]), ("r", r)])  # prefix split + decode token + fresh prefill
    driver.step([("p", [330]), ("q", [284]), ("r", [42])])
    assert driver.max_diff <= LOGITS_TOLERANCE


@pytest.mark.parametrize("question", QUESTIONS)
def test_smollm2_greedy_decode_matches_transformers_generate(smollm, smollm_reference, question):
    shape = smollm.config
    pool = SlotPool(16, 16, shape.num_hidden_layers, shape.num_key_value_heads, shape.head_dim)
    runner = ModelRunner(smollm, pool, dtype=torch.float32, device="cpu")
    prompt = chat_ids(smollm.tokenizer, question)
    slots = SeqSlots(pool)
    batch = make_forward_batch([prompt], [slots.extend(len(prompt))])
    generated = []
    while len(generated) < 32 and (not generated or generated[-1] not in smollm.eos_token_ids):
        generated.append(int(runner.forward(batch)[0].argmax()))
        batch = make_forward_batch([[generated[-1]]], [slots.extend(1)])
    with torch.inference_mode():
        out = smollm_reference.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False,
                                         eos_token_id=smollm.eos_token_ids, pad_token_id=smollm.eos_token_ids[0])
    assert generated == out[0, len(prompt):].tolist()
    assert len(generated) == 32 or generated[-1] in smollm.eos_token_ids
    if "France" in question:
        assert "Paris" in smollm.tokenizer.decode(generated)
