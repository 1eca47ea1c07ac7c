"""Joins of two streams, built as keyed co-process functions (``connect``), so their buffers are
keyed state: queryable at ``/{job}/{name}/state/{key}``, checkpointed, rescaled by key groups.

Window join (Flink's ``a.join(b).where(ka).equal_to(kb).window(w).apply(fn)``), an inner join
of the records of one key in one window, emitted when the watermark reaches the window's
``end - 1``::

    (impressions.join(clicks).where("id").equal_to("id")
        .window(windows.tumbling(ms=10_000))
        .apply(name="clicked"))          # {"key", "start", "end", "left", "right"} per pair

Interval join (Flink's ``a.key_by(ka).interval_join(b.key_by(kb)).between(lo, hi)``): every
pair of one key with ``lo <= right.ts - left.ts <= hi``, emitted when its second record
arrives::

    (impressions.key_by("id").interval_join(clicks.key_by("id"))
        .between(0, 60_000).upper_bound_exclusive()
        .process(name="click-within-a-minute"))   # {"key", "left", "right", "ts"} per pair

Late records (the window join: late for every window; the interval join: older than the
watermark) go to the join's side output ``LATE`` (``OutputTag("late")``), by default the file
``side-<name>-late.jsonl`` in the job's directory, or wherever ``result.side_output(LATE)``
sends them. The functions and their rules: ``window.py`` and ``interval.py``.

A library over the job API, as Flink's joins are over the DataStream API: it imports the core
(``weir.engine.streams``, ``weir.engine.nodes``), never the reverse, and binds
``DataStream.join`` and ``KeyedStream.interval_join`` when this package is imported, which
``weir.engine`` does (Pathway's ``stdlib.temporal`` binds ``Table.interval_join`` the same
way). The core declares the two methods for type checkers and for ``help()``; their bodies
here replace the declarations.
"""

from __future__ import annotations

from weir.engine.joins.buffers import LATE
from weir.engine.joins.interval import IntervalJoinFunction, PairContext
from weir.engine.joins.streams import (
    IntervalJoin,
    IntervalJoined,
    JoinedStreams,
    WindowedJoin,
    interval_join,
    join,
    joins_of,
)
from weir.engine.joins.window import WindowJoinFunction
from weir.engine.streams import DataStream, KeyedStream

DataStream.join = join  # type: ignore[method-assign]
KeyedStream.interval_join = interval_join  # type: ignore[method-assign]

__all__ = [
    "LATE",
    "IntervalJoin",
    "IntervalJoinFunction",
    "IntervalJoined",
    "JoinedStreams",
    "PairContext",
    "WindowJoinFunction",
    "WindowedJoin",
    "joins_of",
]
