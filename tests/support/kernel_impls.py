"""The ``--kernels`` option and the ``kernels`` fixture: tests that take ``kernels`` run once per
kernel implementation (``weir.engine.kernels``), so the same reference cases check both.

``--kernels both`` (the default) runs the compiled kernels and the pure-Python twins; ``python``
or ``compiled`` runs one. Without the option, ``WEIR_KERNELS=python`` (or ``compiled``) chooses
it, so ``WEIR_KERNELS=python pytest`` is the twins-only run CI makes (``make test-kernels``). A
missing compiled build fails the compiled cases: it is never skipped.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np
import pytest

from weir.engine.kernels import Kernels, load


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kernels",
        choices=("both", "compiled", "python"),
        default=None,
        help="kernel implementations the kernel tests run (default: WEIR_KERNELS, else both)",
    )


def chosen(config: pytest.Config) -> list[str]:
    """The implementations this run checks."""
    picked = config.getoption("--kernels") or os.environ.get("WEIR_KERNELS", "both")
    return ["compiled", "python"] if picked in ("both", "auto") else [picked]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernels" in metafunc.fixturenames:
        metafunc.parametrize("kernels", chosen(metafunc.config), indirect=True, scope="session")


@pytest.fixture(scope="session")
def kernels(request: pytest.FixtureRequest) -> Kernels:
    """One implementation's kernels (the test runs once per implementation)."""
    return load(str(request.param))


def exported_row(columns: list[Any], row: int) -> list[Any]:
    """Row ``row`` of a window's exported columns (``WindowAcc.export``): an int64 or float64
    array, or a list of values (``None`` for NULL) where neither array holds them all or a
    slot went to Python ints."""
    out = []
    for col in columns:
        if isinstance(col, np.ndarray):
            assert col.dtype in (np.int64, np.float64)
            out.append(col.tolist()[row])
        else:
            out.append(col[row])
    return out


def same_value(got: Any, want: Any) -> bool:
    """Equal and of the same type; floats bit for bit (``-0.0`` is not ``0.0``, NaN is NaN)."""
    if type(got) is not type(want):
        return False
    if isinstance(want, float):
        return struct.pack("<d", got) == struct.pack("<d", want)
    return bool(got == want)
