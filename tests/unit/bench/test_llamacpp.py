"""llama.cpp peers run in a child process (bench/llamacpp.py): a crash there is retried without llama.cpp's
weight-repacking buffers, and an error comes back as the peer's error; the bench itself never dies of it."""

import ctypes

from bench import llamacpp
from bench.llamacpp import run_child, run_with_fallback
from bench.rag.llamacpp_baseline import run_llamacpp


def crash(sender, *args):
    sender.send(("progress", 1))
    ctypes.string_at(0)  # a segfault, as llama.cpp's weight repacking does on some CPUs


def fail(sender, *args):
    raise ValueError(f"no model at {args[0]}")


def answer(sender, gguf_path, value, extra_buffers, extra):
    sender.send(("result", {"name": "llama.cpp", "got": [gguf_path, value, extra_buffers, extra]}))


def test_a_child_that_segfaults_is_reported_by_its_signal():
    seen = []
    result = run_child(crash, ("model.gguf", True), progress=lambda name, n: seen.append(n))
    assert result == {"signal": 11}
    assert seen == [1]


def test_a_child_that_fails_reports_its_error():
    result = run_child(fail, ("/nonexistent/model.gguf", True))
    assert result == {"name": "llama.cpp", "error": "ValueError: no model at /nonexistent/model.gguf"}


def test_the_work_gets_the_path_its_arguments_the_buffer_flag_then_the_extras(monkeypatch):
    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(llamacpp, "_CRASHES_WITH_EXTRA_BUFFERS", {})
    assert run_with_fallback("m.gguf", answer, (7,), ("x",))["got"] == ["m.gguf", 7, True, "x"]


def test_a_failing_rag_baseline_reports_its_error():
    result = run_llamacpp("/nonexistent/model.gguf", [[1, 2]], 4, num_threads=1)
    assert result["name"] == "llama.cpp"
    assert "error" in result  # llama_cpp missing (not installed) or the file missing (ValueError)


def test_a_crash_with_repacking_buffers_is_retried_without_them(monkeypatch):
    calls = []

    def fake_child(work, args, *, progress=None):
        extra_buffers = args[-1]
        calls.append(extra_buffers)
        return {"signal": 11} if extra_buffers else {"name": "llama.cpp", "wall_s": 1.5, "outputs": [[7]]}

    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(llamacpp, "run_child", fake_child)
    monkeypatch.setattr(llamacpp, "_CRASHES_WITH_EXTRA_BUFFERS", {})
    result = run_llamacpp("model.gguf", [[1]], 1, num_threads=2)
    assert calls == [True, False]
    assert result["wall_s"] == 1.5 and "use_extra_bufts=False" in result["note"]
    again = run_llamacpp("model.gguf", [[1]], 1, num_threads=2)  # a repeat does not crash a child again
    assert calls == [True, False, False]
    assert again["wall_s"] == 1.5 and "signal 11" in again["note"]


def test_a_crash_either_way_is_an_error(monkeypatch):
    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(llamacpp, "_CRASHES_WITH_EXTRA_BUFFERS", {})
    monkeypatch.setattr(llamacpp, "run_child", lambda *a, **k: {"signal": 11})
    assert "crashed (signal 11)" in run_llamacpp("model.gguf", [[1]], 1, num_threads=2)["error"]


def test_without_llama_cpp_installed_the_peer_says_so(monkeypatch):
    monkeypatch.setattr(llamacpp.importlib.util, "find_spec", lambda name: None)
    assert "not installed" in run_llamacpp("model.gguf", [[1]], 1, num_threads=2)["error"]
