"""The step thread's inbox commands are typed: each is dispatched by its type, and anything else fails loudly."""

import threading

import pytest
from tests.support.fake_runner import FakeRunner

from engine.commands import AbortRequest, AddRequest, CallOnStepThread, Wake
from engine.config import EngineConfig
from engine.engine_core import EngineCore
from engine.sampling_params import SamplingParams


def make_core() -> EngineCore:
    return EngineCore(EngineConfig(model="fake", page_size=4, num_pages=16), FakeRunner(16, 4), threading.RLock(),
                      frozenset())


@pytest.mark.parametrize("command", [("add", None), "wake", None, object()], ids=["tuple", "str", "none", "object"])
def test_an_unknown_command_raises_type_error_naming_it(command):
    with pytest.raises(TypeError, match="unknown engine command") as raised:
        make_core().handle(command)
    assert repr(command) in str(raised.value)


def test_each_command_reaches_the_scheduler_or_the_step_thread():
    core = make_core()
    outputs, calls = [], []
    request = core.make_request("r1", [1, 2, 3], SamplingParams(max_tokens=2), "default", outputs.append)
    core.handle(AddRequest(request))
    assert list(core.scheduler.waiting) == [request]
    core.handle(Wake())
    core.handle(CallOnStepThread(lambda: calls.append("called")))
    core.handle(AbortRequest("r1"))
    core.handle(AbortRequest("unknown"))  # ignored
    assert calls == ["called"] and not core.has_work
    assert outputs[-1].finish_reason == "abort"
