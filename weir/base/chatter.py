"""A chatty logger's lines, rate-limited: the first line of each kind at once, then at most one
line per kind per ``interval_s``, carrying how many like it were held back.

librdkafka logs a line per connection attempt of each of its threads: an unreachable broker
wrote hundreds of identical ``FAIL … Connection refused`` ERROR lines a second, burying weir's
own retry warnings, which tell the story. ``Chatter`` is a ``logging.Filter`` on the logger
librdkafka writes to, so every client of the process shares it; like the control channel's
``DropLog``, lines that differ only in numbers (a port, a thread, a client's sequence number, a
duration in parentheses) are one kind.

Example:
    >>> import logging
    >>> chatty = logging.getLogger("weir.demo.chatty")
    >>> chatter = Chatter(interval_s=10.0)
    >>> chatty.addFilter(chatter)
    >>> chatter.flush()  # sum up what was held back, if anything (a client's close calls it)
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

INTERVAL_S = 10.0
_MAX_KINDS = 32  # kinds of line counted apart; past it, the rest count as one
_OTHER = "(other lines)"
_NUMBERS = re.compile(r"\d+")
_SUMMARY = "weir_chatter_summary"  # a record attribute: a summary passes its own filter


def line_kind(message: str) -> str:
    """What ``message`` counts as: without its numbers and without a parenthesis at its end
    (``(after 0ms in state CONNECT)``)."""
    return _NUMBERS.sub("N", message.split(" (", 1)[0])


@dataclass
class _Held:
    """Lines of one kind since its last line was let through."""

    since: float
    count: int = 0
    last: logging.LogRecord | None = None


class Chatter(logging.Filter):
    """Lets through the first line of each kind (level and ``line_kind``) and then at most one
    a kind per ``interval_s``, which says how many it stands for; thread-safe (librdkafka's
    lines come from its clients' threads)."""

    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._interval = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[tuple[int, str], _Held] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _SUMMARY, False):
            return True
        kind = (record.levelno, line_kind(record.getMessage()))
        now = self._clock()
        with self._lock:
            if kind not in self._held and len(self._held) >= _MAX_KINDS:
                kind = (record.levelno, _OTHER)
            held = self._held.get(kind)
            if held is None:
                self._held[kind] = _Held(since=now)
                return True
            if now - held.since < self._interval:
                held.count += 1
                held.last = record
                return False
            self._held[kind] = _Held(since=now)
        if held.count:
            _carry(record, held.count, now - held.since)
        return True

    def flush(self) -> None:
        """Log, for each kind, how many lines were held back since its last line (a client
        that closes calls this: its last lines come all at once when it does)."""
        now = self._clock()
        with self._lock:
            due = [(h.last, h.count, now - h.since) for h in self._held.values() if h.count]
            for h in self._held.values():
                h.count, h.last, h.since = 0, None, now
        for last, count, seconds in due:
            assert last is not None
            summary = copy.copy(last)
            _carry(summary, count, seconds)
            setattr(summary, _SUMMARY, True)
            logging.getLogger(summary.name).handle(summary)


def _carry(record: logging.LogRecord, held: int, seconds: float) -> None:
    """Make ``record`` say it stands for ``held`` more lines like it over ``seconds``."""
    record.msg = f"{record.getMessage()} (and {held} more like it in the last {seconds:.0f} s)"
    record.args = ()
