"""The second engine process of bench tier: attach to a named host tier, replay requests, print usage as JSON.

    python -m bench.tier.worker SPEC.json   (SPEC: {"config": EngineConfig fields, "requests": [...]})
"""

from __future__ import annotations

import json
import os
import sys


def main(spec_path: str) -> None:
    from engine import Engine, EngineConfig
    from bench.policy.prompts import AgentRequest
    from bench.tier.replay import replay_in_order
    from bench.threads import set_torch_threads

    with open(spec_path) as file:
        spec = json.load(file)
    set_torch_threads(spec["threads"])
    requests = [AgentRequest(**r) for r in spec["requests"]]
    engine = Engine(EngineConfig(**spec["config"]))
    finals = replay_in_order(engine, requests, "", None)
    engine.close()
    prompt = sum(f.usage.prompt_tokens for f in finals)
    print(json.dumps({"pid": os.getpid(), "cached_tokens": [f.usage.cached_tokens for f in finals],
                      "host_cached_tokens": [f.usage.host_cached_tokens for f in finals],
                      "hit_rate": sum(f.usage.cached_tokens for f in finals) / max(1, prompt)}))


if __name__ == "__main__":
    main(sys.argv[1])
