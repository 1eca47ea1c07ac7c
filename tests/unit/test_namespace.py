"""weir is one import namespace: every module imports as ``weir.…`` and nothing reaches weir's
folders by their old top-level names (a second copy of a module, or an ImportError once
installed, where the source tree is not on ``sys.path``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import weir

LEGACY = ("engine", "state", "api", "app")


def test_every_module_imports_under_weir_and_nothing_under_the_old_names() -> None:
    names = [
        m.name
        for m in pkgutil.walk_packages(weir.__path__, "weir.")
        if not m.name.startswith("weir.engine.spark")  # the Spark extra: tests of its own
    ]
    assert {"weir.engine.runtime.task.worker", "weir.api.app", "weir.app.cli"} <= set(names)
    for name in names:
        importlib.import_module(name)
    # weir's own folders only: a user's module may be named ``state`` (test_loader imports one)
    tree = Path(weir.__file__).resolve().parent.parent
    stray = sorted(
        n
        for n, m in list(sys.modules.items())
        if n.split(".")[0] in LEGACY
        and Path(getattr(m, "__file__", None) or "/").resolve().is_relative_to(tree)
    )
    assert not stray, f"imported by their old names: {stray}"


def test_the_package_data_is_found_by_the_package_name() -> None:
    from importlib.resources import files

    assert "<html" in files("weir.api").joinpath("dashboard.html").read_text(encoding="utf-8")
