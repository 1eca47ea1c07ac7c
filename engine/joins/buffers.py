"""What both joins keep per key and side: a buffer of ``[timestamp, record]`` entries sorted by
timestamp (arrival order among equal timestamps), held in one value state named after the side
(``left``, ``right``), so a key's buffers are what ``/{job}/{op}/state/{key}`` answers with.

A buffer is read once per record, changed in place and set again: value state hands out the
object it caches and encodes it at the next snapshot, so an insert costs a bisect and a list
insert instead of a copy of the buffer. Timestamps are searched with ``bisect`` on the entries'
first item; both joins drop entries from the front only (their cleanup times grow with the
timestamp), which keeps a buffer sorted without a rebuild.

Late records go to the ``late`` side output (``LATE``), which every join declares: the record,
its side, key, timestamp and the watermark it arrived under, never silently dropped.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort_right
from operator import itemgetter
from typing import Any, Protocol

from weir.engine.nodes import OutputTag

LEFT, RIGHT = "left", "right"
LATE = OutputTag("late")

Entry = list[Any]  # [timestamp, record]
_ts = itemgetter(0)


class ValueStateLike(Protocol):
    def get(self, default: Any = None) -> Any: ...

    def set(self, value: Any) -> None: ...

    def clear(self) -> None: ...


class JoinContext(Protocol):
    """The part of a keyed (co-)process function's context the joins use."""

    key: str
    timestamp: int | None
    watermark: int

    def value(self, name: str) -> ValueStateLike: ...

    def register_event_time_timer(self, timestamp: int) -> None: ...

    def delete_event_time_timer(self, timestamp: int) -> None: ...

    def emit(self, record: Any) -> None: ...

    def output(self, tag: OutputTag, record: Any) -> None: ...


def insert(ctx: JoinContext, side: str, ts: int, record: Any) -> list[Entry]:
    """Add ``record`` to the key's ``side`` buffer; returns the buffer."""
    state = ctx.value(side)
    entries: list[Entry] | None = state.get()
    if entries is None:
        entries = []
    insort_right(entries, [ts, record], key=_ts)
    state.set(entries)
    return entries


def between(entries: list[Entry], lo: int, hi: int) -> list[Entry]:
    """The entries with ``lo <= timestamp <= hi``, in buffer order."""
    if lo > hi:
        return []
    return entries[bisect_left(entries, lo, key=_ts) : bisect_right(entries, hi, key=_ts)]


def entries_of(ctx: JoinContext, side: str) -> list[Entry]:
    found: list[Entry] | None = ctx.value(side).get()
    return [] if found is None else found


def drop_through(ctx: JoinContext, side: str, upto: int) -> None:
    """Remove the entries with a timestamp ``<= upto`` from the key's ``side`` buffer (an
    empty buffer is cleared: the key leaves no state behind)."""
    state = ctx.value(side)
    entries: list[Entry] | None = state.get()
    if not entries:
        return
    cut = bisect_right(entries, upto, key=_ts)
    if not cut:
        return
    del entries[:cut]
    if entries:
        state.set(entries)
    else:
        state.clear()


def report_late(ctx: JoinContext, side: str, record: Any) -> None:
    ctx.output(
        LATE,
        {
            "side": side,
            "key": ctx.key,
            "ts": ctx.timestamp,
            "watermark": ctx.watermark,
            "record": record,
        },
    )


def timestamp_of(ctx: JoinContext) -> int:
    ts = ctx.timestamp
    if ts is None:  # a co-process function always has the record's event time
        raise ValueError("a joined record needs an event-time timestamp")
    return ts
