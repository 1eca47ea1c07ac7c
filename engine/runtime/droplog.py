"""Dropped connections as WARNING lines that a flood cannot turn into a flood of lines.

The listening sides (the control channel, the exchange's acceptor, a cluster task's state
server) drop connections that do not prove themselves. Each drop is worth knowing about, but one
line per drop let a local account write megabytes of log a second. ``DropLog`` logs the first
drop of a reason at once, with its peer, and then at most one line per reason per
``interval_s``: how many were dropped since, from how many peers, and the last one.

Example:
    >>> import logging
    >>> drops = DropLog(logging.getLogger("weir.demo"), "control:", interval_s=10.0)
    >>> drops.dropped("127.0.0.1:50000", "a connection without the job's key was refused")
    >>> drops.flush(force=True)  # a summary of what was counted, if anything
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

INTERVAL_S = 10.0
_MAX_PEERS = 1024  # distinct peers remembered per reason and interval
_MAX_REASONS = 32  # kinds of reason counted apart; past it, the rest count as one
_OTHER = "(other reasons)"
_NUMBERS = re.compile(r"\d+")


def reason_kind(reason: str) -> str:
    """What ``reason`` counts as: without its numbers and without a parenthesis that quotes the
    peer's bytes (``not a weir exchange handshake (starts b'…')``), so a peer cannot vary its
    bytes into a line per connection."""
    return _NUMBERS.sub("N", reason.split(" (", 1)[0])


@dataclass
class _Counted:
    """Drops of one reason since its last line."""

    since: float
    count: int = 0
    peers: set[str] = field(default_factory=set)
    last_peer: str = ""
    last_reason: str = ""


class DropLog:
    """One WARNING per reason per ``interval_s``, with counts (see the module's docstring).

    ``what`` and ``args`` begin every line (``"exchange: worker=%d"``, ``(3,)``). Reasons of one
    ``reason_kind`` (``a handshake frame of 7 bytes`` and ``… of 9 bytes``) count as one. Not
    thread-safe: each listener calls it from its own loop, which also calls ``flush``."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        args: tuple[object, ...] = (),
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._what = what
        self._args = args
        self._interval = interval_s
        self._clock = clock
        self._counted: dict[str, _Counted] = {}

    def dropped(self, peer: str, reason: str) -> None:
        """A connection from ``peer`` was dropped for ``reason``."""
        now = self._clock()
        key = reason_kind(reason)
        if key not in self._counted and len(self._counted) >= _MAX_REASONS:
            key = _OTHER
        counted = self._counted.get(key)
        if counted is None:
            self._counted[key] = _Counted(since=now)
            self._log.warning(f"{self._what} dropped peer=%s reason=%s", *self._args, peer, reason)
            return
        counted.count += 1
        if len(counted.peers) < _MAX_PEERS:
            counted.peers.add(peer.rpartition(":")[0] or peer)
        counted.last_peer, counted.last_reason = peer, reason
        self.flush(now)

    def flush(self, now: float | None = None, *, force: bool = False) -> None:
        """Sum up every reason whose interval has passed (every one, with ``force``); a
        listener's loop calls this, so a burst's last count is not held back for long."""
        now = self._clock() if now is None else now
        for key, counted in list(self._counted.items()):
            if not force and now - counted.since < self._interval:
                continue
            if counted.count == 0:
                del self._counted[key]  # quiet for an interval: the next drop is logged at once
                continue
            self._log.warning(
                f"{self._what} dropped count=%d hosts=%d last_peer=%s reason=%s seconds=%.0f",
                *self._args,
                counted.count,
                len(counted.peers),
                counted.last_peer,
                counted.last_reason,
                now - counted.since,
            )
            self._counted[key] = _Counted(since=now)
