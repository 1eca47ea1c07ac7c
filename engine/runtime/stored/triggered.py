"""The stored form of a triggered window operator's windows (``triggered.py``), read by the
operator and by the query API alike.

A key's open windows are one process-style value state (``codec.encode_state``) named
``windows``: ``{window end: entry}``, an entry a dict of

- ``s``, ``e``: the window's start and end (a global window: ``MIN_TIME``, ``MAX_TIME``);
- ``acc``: the accumulator slots of its contents (windows without an evictor), or ``el``: its
  records as ``[timestamp, record]`` in arrival order (windows with an evictor);
- ``lo``, ``hi``: the least and greatest timestamp of the contents (accumulator windows);
- ``tr``: the trigger's state for this window (a count, the next continuous firing);
- ``last``: ``[start, end, slots, final]`` of what the window last fired with when a purging
  trigger cleared its contents, so a purged window still answers a query;
- ``pending``: the slots of its last emission, when that was not final (a time window owes a
  final emission at its cleanup time).

A time window past its cleanup time leaves ``windows`` for the state named ``closed``,
``{window end: [start, end, slots, true]}``, kept for the query retention, so the per-record
work never reads a key's history.

A global window reports the span of its contents, ``[least t, greatest t + 1)``, as its
``start``/``end``, so each count window of a key is its own result row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored.codec import decode_state
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.windows import MAX_TIME, MIN_TIME, CountWindows, GlobalWindows, is_late

if TYPE_CHECKING:  # a type only: the evictors load with the first job that evicts
    from weir.engine.evictors import Evictor

STATE_NAME = "windows"
CLOSED_NAME = "closed"
Entry = dict[str, Any]


def is_global(op: WindowNode) -> bool:
    return isinstance(op.assigner, GlobalWindows | CountWindows)


def new_entry(start: int, end: int, evicting: bool) -> Entry:
    entry: Entry = {"s": start, "e": end, "tr": {}}
    if evicting:
        entry["el"] = []
    return entry


def merge_entries(plan: FoldPlan, old: list[Entry], start: int, end: int) -> Entry:
    """The session ``[start, end)`` that ``old`` (by time, each its own session) merge into:
    the union of their contents (an evictor's records in that order), and the latest
    ``pending`` and ``last`` among them: a session emitted ``final: false`` and merged away is
    superseded by the merged one, which then owes the final emission. The trigger's state is
    the trigger's to merge (``on_merge``)."""
    entry = new_entry(start, end, "el" in old[0])
    if "el" in entry:
        entry["el"] = [element for o in old for element in o["el"]]
    held = [o for o in old if o.get("acc") is not None]
    if held:
        acc = held[0]["acc"]
        for o in held[1:]:
            acc = plan.merge(acc, o["acc"])
        entry["acc"] = acc
        entry["lo"] = min(int(o["lo"]) for o in held)
        entry["hi"] = max(int(o["hi"]) for o in held)
    for name in ("pending", "last"):
        kept = [o[name] for o in old if o.get(name) is not None]
        if kept:
            entry[name] = kept[-1]
    return entry


def fold_records(plan: FoldPlan, slots: list[Any] | None, recs: list[Any]) -> list[Any] | None:
    """``slots`` with ``recs`` folded in, by the operator's own generated fold."""
    if not recs:
        return slots
    cols = plan.columns(recs)
    assert cols is not None  # records are checked (``bad_field``) before they are stored
    buckets: dict[int, dict[str, list[Any]]] = {0: {} if slots is None else {"": slots}}
    plan.fold(buckets, {}, [""] * len(recs), [0] * len(recs), *cols, recs)
    return buckets[0][""]


def contents(
    plan: FoldPlan, evictor: Evictor | None, entry: Entry
) -> tuple[list[Any] | None, int, int]:
    """What the window function sees now: ``(slots, least t, greatest t)``, after the evictor
    when it evicts before the function."""
    if "el" not in entry:
        return entry.get("acc"), int(entry.get("lo", MAX_TIME)), int(entry.get("hi", MIN_TIME))
    elements = entry["el"]
    if evictor is not None and not evictor.do_evict_after:
        elements = evictor.evict(elements)
    slots = fold_records(plan, None, [r for _, r in elements])
    times = [int(t) for t, _ in elements]
    return slots, min(times, default=MAX_TIME), max(times, default=MIN_TIME)


def span(op: WindowNode, entry: Entry, lo: int, hi: int) -> tuple[int, int]:
    """The ``(start, end)`` a window reports: its own, or a global window's contents' span."""
    if not is_global(op):
        return int(entry["s"]), int(entry["e"])
    return lo, (hi + 1 if hi < MAX_TIME else MAX_TIME)


def query_windows(
    op: WindowNode, plan: FoldPlan, rows: list[tuple[bytes, bytes]], watermark: int
) -> list[tuple[int, int, list[Any], bool]]:
    """A key's windows for a query, ``(start, end, slots, final)`` by end: closed windows as
    they ended; open ones with what they hold now (``final`` false: a trigger may fire them
    again), a global window also with what it last fired with before a purge, and a purged
    time window that holds nothing yet with its last firing."""
    out: list[tuple[int, int, list[Any], bool]] = []
    states = dict(decode_state(raw)[0::2] for _, raw in rows)
    for last in (states.get(CLOSED_NAME) or {}).values():
        out.append((int(last[0]), int(last[1]), list(last[2]), bool(last[3])))
    for _, entry in sorted((states.get(STATE_NAME) or {}).items()):
        slots, lo, hi = contents(plan, op.evictor, entry)
        last = entry.get("last")
        if last is not None and (is_global(op) or slots is None):
            out.append((int(last[0]), int(last[1]), list(last[2]), bool(last[3])))
        if slots is not None:
            start, end = span(op, entry, lo, hi)
            final = not is_global(op) and is_late(end, op.allowed_lateness_ms, watermark)
            out.append((start, end, slots, final))
    return sorted(out, key=lambda w: (w[1], w[0]))
