"""``weir.base.lazy.exports``: a package's names loaded from their modules on first use."""

from __future__ import annotations

import doctest
import sys
import types

import pytest

from weir.base import lazy


def test_the_examples_run() -> None:
    failed, tried = doctest.testmod(lazy)
    assert tried and not failed


def test_a_name_loads_its_module_on_first_use_and_dir_lists_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pkg = types.ModuleType("weir_lazy_probe")
    pkg.__getattr__, pkg.__dir__ = lazy.exports(  # type: ignore[method-assign]
        pkg.__name__, {"dumps": "json", "parse": "json:loads"}
    )
    monkeypatch.setitem(sys.modules, pkg.__name__, pkg)
    monkeypatch.delitem(sys.modules, "json", raising=False)
    assert "parse" in dir(pkg) and "dumps" in dir(pkg)
    assert "json" not in sys.modules
    assert pkg.parse("[1, 2]") == [1, 2]  # "module:attr": named otherwise in its home
    assert "json" in sys.modules and pkg.dumps([3]) == "[3]"
    with pytest.raises(AttributeError, match="'weir_lazy_probe' has no attribute 'nope'"):
        pkg.nope  # noqa: B018
