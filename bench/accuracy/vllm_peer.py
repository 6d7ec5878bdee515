"""vLLM's CPU build as a candidate of bench accuracy: its offline engine on the same weights, in its own venv.

The HF directory radixgate caches for the model is what vLLM loads, in the dtype of the row. vLLM runs
from the Python of a separate virtual environment (``--vllm-python``), so the work happens in
bench/accuracy/vllm_child.py, a script that imports nothing of radixgate; this side writes its
request, follows its progress lines and reads back full next-token distributions (``prompt_logprobs=-1``)
and greedy tokens, which the bench scores like every other candidate.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import deque
from pathlib import Path

import torch

from bench.progress import Progress

CHILD = Path(__file__).with_name("vllm_child.py")


def vllm_candidate(python: str, model_dir: Path, dtype: torch.dtype, reference, num_threads: int,
                   progress: Progress | None = None) -> dict:
    """{"forced_logits": (num_prompts, num_tokens, vocab) float32 log-probabilities, "tokens"} or {"error"}."""
    import numpy as np

    name = str(dtype).removeprefix("torch.")
    label = f"vLLM {name}"
    longest = max(len(p) for p in reference.prompts) + len(reference.tokens[0])
    with tempfile.TemporaryDirectory(prefix="radixgate-vllm-accuracy-") as folder:
        request, out = Path(folder, "request.json"), Path(folder, "out.npz")
        request.write_text(json.dumps({"model_dir": str(model_dir), "dtype": name, "prompts": reference.prompts,
                                       "teacher": reference.tokens, "max_model_len": longest + 16}))
        env = {**os.environ, "OMP_NUM_THREADS": str(num_threads), "VLLM_CPU_KVCACHE_SPACE": "1",
               "VLLM_CPU_OMP_THREADS_BIND": "auto"}
        tail: deque[str] = deque(maxlen=40)
        try:
            with subprocess.Popen([python, str(CHILD), str(request), str(out)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) as child:
                for line in child.stdout:
                    if line.startswith("progress ") and progress:
                        progress(label, int(line.split()[1]))
                    else:
                        tail.append(line.rstrip())
                returncode = child.wait()
        except OSError as error:
            return {"error": f"{type(error).__name__}: {error}"}
        if returncode != 0 or not out.exists():
            return {"error": f"the vLLM child exited with {returncode}: " + " | ".join(list(tail)[-6:])}
        found = np.load(out)
        return {"forced_logits": torch.from_numpy(found["forced"]), "tokens": found["tokens"].tolist()}
