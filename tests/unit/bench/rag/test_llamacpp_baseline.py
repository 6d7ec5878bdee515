"""The llama.cpp baseline runs in a child process: a crash there is retried without llama.cpp's weight-repacking
buffers, and an error comes back as the baseline's error; the bench itself never dies of it."""

import ctypes

from bench.rag import llamacpp_baseline
from bench.rag.llamacpp_baseline import _run_child, run_llamacpp


def crash(sender, *args):
    sender.send(("progress", 1))
    ctypes.string_at(0)  # a segfault, as llama.cpp's weight repacking does on some CPUs


def test_a_child_that_segfaults_is_reported_by_its_signal():
    seen = []
    result = _run_child("model.gguf", [[1, 2]], 4, 1, extra_buffers=True, progress=lambda name, n: seen.append(n),
                        target=crash)
    assert result == {"signal": 11}
    assert seen == [1]


def test_a_child_that_fails_reports_its_error():
    result = _run_child("/nonexistent/model.gguf", [[1, 2]], 4, 1, extra_buffers=True, progress=None)
    assert result["name"] == "llama.cpp"
    assert "Error" in result["error"]  # llama_cpp missing (ModuleNotFoundError) or the file missing (ValueError)


def test_a_crash_with_repacking_buffers_is_retried_without_them(monkeypatch):
    calls = []

    def fake_child(*args, extra_buffers, progress, **kwargs):
        calls.append(extra_buffers)
        return {"signal": 11} if extra_buffers else {"name": "llama.cpp", "wall_s": 1.5, "outputs": [[7]]}

    monkeypatch.setattr(llamacpp_baseline.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(llamacpp_baseline, "_run_child", fake_child)
    monkeypatch.setattr(llamacpp_baseline, "_CRASHES_WITH_EXTRA_BUFFERS", {})
    result = run_llamacpp("model.gguf", [[1]], 1, num_threads=2)
    assert calls == [True, False]
    assert result["wall_s"] == 1.5 and "use_extra_bufts=False" in result["note"]
    again = run_llamacpp("model.gguf", [[1]], 1, num_threads=2)  # a repeat does not crash a child again
    assert calls == [True, False, False]
    assert again["wall_s"] == 1.5 and "signal 11" in again["note"]


def test_a_crash_either_way_is_an_error(monkeypatch):
    monkeypatch.setattr(llamacpp_baseline.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(llamacpp_baseline, "_CRASHES_WITH_EXTRA_BUFFERS", {})
    monkeypatch.setattr(llamacpp_baseline, "_run_child", lambda *a, **k: {"signal": 11})
    assert "crashed (signal 11)" in run_llamacpp("model.gguf", [[1]], 1, num_threads=2)["error"]


def test_without_llama_cpp_installed_the_baseline_says_so(monkeypatch):
    monkeypatch.setattr(llamacpp_baseline.importlib.util, "find_spec", lambda name: None)
    assert "not installed" in run_llamacpp("model.gguf", [[1]], 1, num_threads=2)["error"]
