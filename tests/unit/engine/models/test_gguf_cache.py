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


def test_weights_over_the_shard_size_are_split_and_read_back_whole(tmp_path, monkeypatch):
    import torch

    from engine.models.loader import read_state_dict

    state = {f"layer.{i}.weight": torch.randn(64, 64) for i in range(5)}  # 16 KiB each
    monkeypatch.setattr(gguf_cache, "SHARD_BYTES", 40_000)  # two tensors per shard
    gguf_cache.save_weights(state, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == [
        f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    assert not (tmp_path / "model.safetensors").exists()
    back = read_state_dict(tmp_path)
    assert back.keys() == state.keys() and all(torch.equal(back[n], t) for n, t in state.items())

    small = tmp_path / "small"
    small.mkdir()
    gguf_cache.save_weights({"w": torch.ones(3)}, small)
    assert [p.name for p in small.iterdir()] == ["model.safetensors"]
