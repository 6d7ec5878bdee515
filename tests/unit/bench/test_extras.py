"""bench/extras.py: the [bench] extra is checked by name, without importing it."""

import sys

import pytest

from bench.extras import BENCH_EXTRA, require_extras


def test_an_absent_module_is_named_in_the_error():
    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_radixgate") as error:
        require_extras(("json", "no_such_module_for_radixgate"))
    assert error.value.name == "no_such_module_for_radixgate"


def test_the_check_imports_none_of_the_extra(monkeypatch):
    for name in BENCH_EXTRA:
        monkeypatch.delitem(sys.modules, name, raising=False)
    require_extras()
    assert not set(BENCH_EXTRA) & set(sys.modules)
