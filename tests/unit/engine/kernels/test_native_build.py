"""The native build's name covers every file the compiler reads, so an edit never reuses a stale build."""

import re

from engine.kernels.cpu import native


def test_every_local_include_of_every_source_is_hashed_into_the_build_name():
    hashed = {path.name for path in native.SOURCES + native.HEADERS}
    for path in native.SOURCES + native.HEADERS:
        for name in re.findall(r'#include\s+"([^"]+)"', path.read_text()):
            assert name in hashed, f"{path.name} includes {name}, which build_name() does not hash"


def test_every_kernel_source_in_the_folder_is_compiled():
    folder = native.SOURCES[0].parent
    assert {path.name for path in folder.glob("*.cpp")} == {path.name for path in native.SOURCES}
