"""Choosing the kernel implementation (``weir.engine.kernels.load``, ``WEIR_KERNELS``)."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

import pytest

from weir.engine import kernels
from weir.engine.kernels import KernelsError, load


def _without_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> ModuleType:
        if name.rsplit(".", 1)[-1].startswith("_"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(kernels.importlib, "import_module", fake)


def test_the_choice_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_KERNELS", "python")
    assert load().name == "python"
    monkeypatch.setenv("WEIR_KERNELS", "compiled")
    assert load().name == "compiled"
    assert load("python").name == "python"  # an explicit choice wins


def test_an_unknown_choice_names_the_valid_ones() -> None:
    with pytest.raises(KernelsError, match=r"WEIR_KERNELS='fast'.*compiled, python or auto"):
        load("fast")


def test_compiled_fails_loudly_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_compiled(monkeypatch)
    with pytest.raises(KernelsError, match="compiled kernels are missing.*WEIR_KERNELS=python"):
        load("compiled")


def test_auto_falls_back_to_the_twins_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _without_compiled(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="weir.engine.kernels"):
        chosen = load("auto")
    assert chosen.name == "python"
    assert "kernels=python" in caplog.text and "not built" in caplog.text
    assert chosen.Interner.__module__ == "weir.engine.kernels.intern"
