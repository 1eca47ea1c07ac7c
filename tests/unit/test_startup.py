"""What ``weir``'s start-up sets for itself (``app.startup``): the collector paused for a
block and restored as it was, and one OpenBLAS thread unless the user chose otherwise."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

from weir.app.startup import BLAS_THREADS_ENV, collector_paused, one_blas_thread


@pytest.fixture
def collector() -> Iterator[None]:
    was_on = gc.isenabled()
    yield
    if was_on:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("on", [True, False])
def test_the_collector_is_off_in_the_block_and_as_it_was_after(on: bool) -> None:
    gc.enable() if on else gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled() is on


@pytest.mark.usefixtures("collector")
def test_the_collector_comes_back_when_the_block_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError, match="boom"), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_one_blas_thread_unless_the_environment_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(BLAS_THREADS_ENV, raising=False)
    one_blas_thread()
    assert os.environ[BLAS_THREADS_ENV] == "1"
    monkeypatch.setenv(BLAS_THREADS_ENV, "4")
    one_blas_thread()
    assert os.environ[BLAS_THREADS_ENV] == "4"
