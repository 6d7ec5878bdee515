"""The GGUF cache's build lock: callers that find no cache at the same time build it once; the others wait and
read that one (a fake build stands in for the minute-long dequantization)."""

import json
import threading
import time

from engine.models import gguf_cache


def test_concurrent_first_loads_build_the_cache_once_and_all_get_it(tmp_path, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    builds = []

    def fake_build(gguf_path, cache_dir):
        builds.append(cache_dir)
        time.sleep(0.3)  # long enough for the other callers to arrive while it runs
        cache_dir.mkdir(parents=True)
        (cache_dir / "model.safetensors").write_bytes(b"weights")
        (cache_dir / "source.json").write_text(json.dumps(gguf_cache.source_stamp(gguf_path)))
        return cache_dir

    monkeypatch.setattr(gguf_cache, "build_gguf_cache", fake_build)
    results, errors = [], []

    def load():
        try:
            results.append(gguf_cache.ensure_gguf_cache(gguf, tmp_path / "cache"))
        except Exception as exc:  # noqa: BLE001 - a failure in any thread fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(builds) == 1
    assert len(results) == 4 and len(set(results)) == 1 and gguf_cache.is_cache_valid(results[0], gguf)
