"""bench accuracy's vLLM candidate, run as a script by the Python of a venv with vLLM's CPU build.

It imports nothing of radixgate (that venv does not have it): ``python vllm_child.py REQUEST.json OUT.npz``.
REQUEST holds the HF model directory, the dtype, the longest sequence (max_model_len), the prompts
(token ids) and the reference's greedy tokens; threads come from OMP_NUM_THREADS. For each prompt it runs
vLLM's offline engine twice:

  * teacher-forced: ``prompt + teacher[:-1]`` as the prompt with every prompt position's full
    distribution (``prompt_logprobs=-1``, raw log-probabilities, ``max_logprobs=-1``) and one sampled
    token with its full distribution: the rows that predict each of the teacher's tokens;
  * free-running: greedy, ``len(teacher)`` tokens, end of sequence not special (like the reference).

OUT gets ``forced`` (num_prompts, num_tokens, vocab) float32 log-probabilities and ``tokens``
(num_prompts, num_tokens) int64. Prefix caching is off so that no row is served from another's cache.
"""

from __future__ import annotations

import json
import sys


def dense(position, vocab: int):
    """One position of vLLM's logprobs (a {token: Logprob} mapping) as a dense float32 row."""
    import numpy as np

    row = np.full(vocab, -np.inf, dtype=np.float32)
    ids = np.fromiter(position.keys(), dtype=np.int64, count=len(position))
    row[ids] = np.fromiter((p.logprob for p in position.values()), dtype=np.float32, count=len(position))
    return row


def main(request_path: str, out_path: str) -> None:
    import numpy as np
    from vllm import LLM, SamplingParams, TokensPrompt

    request = json.loads(open(request_path).read())
    prompts, teacher = request["prompts"], request["teacher"]
    num_tokens = len(teacher[0])
    llm = LLM(model=request["model_dir"], dtype=request["dtype"], max_model_len=request.get("max_model_len", 2048),
              max_logprobs=-1, enable_prefix_caching=False, seed=0)
    vocab = llm.llm_engine.model_config.get_vocab_size()
    forced_params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=-1, prompt_logprobs=-1, detokenize=False)
    forced = np.empty((len(prompts), num_tokens, vocab), dtype=np.float32)
    for index, (prompt, tokens) in enumerate(zip(prompts, teacher)):
        out = llm.generate(TokensPrompt(prompt_token_ids=prompt + tokens[:-1]), forced_params, use_tqdm=False)[0]
        rows = list(out.prompt_logprobs)[len(prompt):] + [out.outputs[0].logprobs[0]]
        forced[index] = np.stack([dense(row, vocab) for row in rows])
        print(f"progress {index + 1}", flush=True)
    # ignore_eos keeps generating past an end-of-sequence token; min_tokens would instead forbid it (a logits
    # processor), and the reference's argmax may be one
    greedy_params = SamplingParams(max_tokens=num_tokens, temperature=0.0, ignore_eos=True, detokenize=False)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], greedy_params, use_tqdm=False)
    tokens = np.array([list(o.outputs[0].token_ids)[:num_tokens] for o in outs], dtype=np.int64)
    np.savez(out_path, forced=forced, tokens=tokens)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
