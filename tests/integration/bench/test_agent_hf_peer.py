"""transformers as a peer of bench agent, on the real model: each row's answer is the model's own greedy
answer to the plain prompt, cut at the row's max_tokens, with its first token timed inside its request."""

import pytest
import torch

from bench.agent.hf_peer import run_hf_agent
from bench.agent.plain import plain_prompt_ids

pytestmark = pytest.mark.slow


def test_the_answers_are_the_models_greedy_answers(smollm):
    bodies = [{"messages": [{"role": "user", "content": "Name a primary colour."}], "context": ["Red is one."]},
              {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}]
    prompts = [plain_prompt_ids(body, smollm.tokenizer) for body in bodies]
    assert "Retrieved documents:\n\nRed is one." in smollm.tokenizer.decode(prompts[0])
    result = run_hf_agent(smollm, prompts, [5, 2], dtype=torch.float32)
    model = smollm.build_hf_model(torch.float32)
    for prompt, limit, answer in zip(prompts, [5, 2], result["answers"]):
        ids = torch.tensor([prompt])
        own = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=limit, do_sample=False)
        assert answer == smollm.tokenizer.decode(own[0, len(prompt):], skip_special_tokens=True)
    assert result["prefill_tokens"] == sum(len(p) for p in prompts)
    assert len(result["ttft_s"]) == 2 and all(0 < t < result["wall_s"] for t in result["ttft_s"])
