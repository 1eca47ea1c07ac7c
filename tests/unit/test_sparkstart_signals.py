"""``engine.runtime.control.sparkstart``: which SIGINT handler a Spark start runs under. A
Python handler is chained behind the one that kills the start's JVMs first; SIGINT ignored (a
background job of a shell without job control) stays ignored while Spark starts."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from weir.engine.runtime.control.sparkstart import get_or_create

pytestmark = pytest.mark.fast


class _Builder:
    """Records the SIGINT handler in place while it "starts" (from the start's thread)."""

    def __init__(self) -> None:
        self.during: Any = None

    def getOrCreate(self) -> str:  # noqa: N802 - PySpark's name
        self.during = signal.getsignal(signal.SIGINT)
        return "session"


@contextmanager
def _sigint(handler: Any) -> Iterator[None]:
    before = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_ignored_sigint_stays_ignored_while_spark_starts() -> None:
    builder = _Builder()
    with _sigint(signal.SIG_IGN):
        assert get_or_create(builder) == "session"
        assert builder.during == signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_a_python_handler_is_chained_and_put_back() -> None:
    heard: list[int] = []
    handler: Callable[[int, Any], None] = lambda signum, frame: heard.append(signum)  # noqa: E731
    builder = _Builder()
    with _sigint(handler):
        assert get_or_create(builder) == "session"
        assert callable(builder.during) and builder.during is not handler
        builder.during(signal.SIGINT, None)  # the start's handler: no JVM launched, then ours
        assert heard == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is handler
