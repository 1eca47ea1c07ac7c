"""Listing the keys of an operator whose windows are cells (``state/cells.py``), a page at a time.

A cell holds the keys of one bucket of a key group, so listings go in the cells' order: key
group, then bucket, then key bytes within a bucket (a stable order; a key's bucket follows from
its hash). A page reads one bucket at a time, every window of it (``list_keys``) or one window's
(``list_window``), and counts each entry it reads against the request's scan budget; the cursor
names the key group, the bucket and the last key taken in it.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.api.keylist import SCAN_BUDGET, BadCursor
from weir.engine import kernels
from weir.engine.nodes import ProcessNode, WindowNode
from weir.engine.runtime.stored import compose_stored, stores_cells, uses_panes
from weir.engine.windows import SessionWindows, SlidingWindows, TumblingWindows
from weir.state import cells, layout

Between = Callable[[int, bytes, bytes], list[tuple[bytes, bytes]]]  # (kg, lo, hi) -> entries
# (kg, [(lo, hi), ...]) -> each range's entries, read from one reader resolved once
Ranges = Callable[[int, list[tuple[bytes, bytes]]], list[list[tuple[bytes, bytes]]]]
_FIELD = struct.Struct(">H")  # a cell key's bucket field (bytes 4-6)
_CURSOR = struct.Struct(">BBHH")  # version, whether a key follows, key group, bucket
_VERSION = 2  # 1: keylist.Position, the row layout's cursor


@dataclass(frozen=True, slots=True)
class CellPosition:
    """Where a listing is: in ``bucket`` of ``key_group``, after ``key`` (``None``: at the
    bucket's start)."""

    key_group: int
    bucket: int
    key: bytes | None

    def encode(self) -> str:
        head = _CURSOR.pack(_VERSION, self.key is not None, self.key_group, self.bucket)
        return base64.urlsafe_b64encode(head + (self.key or b"")).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str, max_parallelism: int) -> CellPosition:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            version, has_key, kg, bucket = _CURSOR.unpack_from(raw)
        except (ValueError, struct.error):
            raise BadCursor("it is not base64 of a listing position") from None
        key = raw[_CURSOR.size :]
        if (
            version != _VERSION
            or has_key not in (0, 1)
            or not 0 <= kg < max_parallelism
            or not 0 <= bucket < cells.BUCKETS
            or (not has_key and key)
            or len(key) > layout.MAX_KEY_BYTES
        ):
            raise BadCursor("it names no position of this job's listing")
        return cls(kg, bucket, key if has_key else None)


@dataclass(frozen=True, slots=True)
class CellPage:
    """Keys as ``(key_group, key, slots or None)``; ``next`` resumes after the last position
    examined (``None``: the listing is over)."""

    found: list[tuple[int, bytes, Any]]
    next: CellPosition | None
    examined: int


class _CoarseCells:
    """A listing's reads (a ``Between``), the last coarse cell's kept: a coarse cell holds the
    keys of ``1 << COARSE_SHIFT`` consecutive buckets, which a listing visits in turn, so each
    is read once, not once a bucket. ``fresh`` counts the entries read from the reader (the
    listing's scan budget), not those answered from the one kept."""

    def __init__(self, between: Between) -> None:
        self._between = between
        self._at: tuple[int, bytes, bytes] | None = None
        self._entries: list[tuple[bytes, bytes]] = []
        self.fresh = 0

    def __call__(self, kg: int, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        if (kg, lo, hi) == self._at:
            return self._entries
        entries = self._between(kg, lo, hi)
        self.fresh += len(entries)
        if cells.is_coarse(_FIELD.unpack_from(lo, 4)[0]):
            self._at, self._entries = (kg, lo, hi), entries
        return entries


def _bucket_entries(
    read: _CoarseCells, kg: int, sid: int, bucket: int
) -> list[tuple[bytes, bytes]]:
    """Every entry that may hold a key of ``bucket``: its fine cells and its coarse cell's, in
    window order (a coarse cell's rows of other buckets are the caller's to skip)."""
    (lo, hi), (coarse_lo, coarse_hi) = cells.bucket_ranges(kg, sid, bucket)
    return cells.in_window_order(read(kg, lo, hi), read(kg, coarse_lo, coarse_hi))


def _walk(
    start: CellPosition,
    max_parallelism: int,
    limit: int,
    budget: int,
    bucket_rows: Callable[[int, int], tuple[list[tuple[bytes, Any]], int]],
) -> CellPage:
    """Buckets from ``start`` on; ``bucket_rows(kg, bucket)`` gives a bucket's ``(key, what)``
    in key order and the entries it read."""
    found: list[tuple[int, bytes, Any]] = []
    examined = 0
    kg, bucket, after = start.key_group, start.bucket, start.key
    while kg < max_parallelism:
        rows, read = bucket_rows(kg, bucket)
        examined += read + 1
        for key, what in rows:
            if after is not None and key <= after:
                continue
            found.append((kg, key, what))
            if len(found) == limit:
                return CellPage(found, CellPosition(kg, bucket, key), examined)
        after = None
        bucket += 1
        if bucket == cells.BUCKETS:
            kg, bucket = kg + 1, 0
        if examined >= budget and kg < max_parallelism:
            return CellPage(found, CellPosition(kg, bucket, None), examined)
    return CellPage(found, None, examined)


def list_keys(
    between: Between,
    state_ids: list[int],
    max_parallelism: int,
    prefix: bytes,
    start: CellPosition,
    limit: int,
    budget: int = SCAN_BUDGET,
) -> CellPage:
    """Up to ``limit`` keys starting with ``prefix`` held in any window under ``state_ids``."""

    read = _CoarseCells(between)

    def bucket_rows(kg: int, bucket: int) -> tuple[list[tuple[bytes, Any]], int]:
        keys: set[bytes] = set()
        before = read.fresh
        for sid in state_ids:
            for _, raw in _bucket_entries(read, kg, sid, bucket):
                keys.update(cells.Cell(raw).keys())
        mine = [k for k in sorted(keys) if k.startswith(prefix)]
        return [(k, None) for k in mine if cells.bucket_of(k) == bucket], read.fresh - before

    return _walk(start, max_parallelism, limit, budget, bucket_rows)


def list_window(
    between: Between,
    max_parallelism: int,
    start: CellPosition,
    limit: int,
    window: Callable[[int, int, Between], dict[bytes, list[Any]]],
    budget: int = SCAN_BUDGET,
) -> CellPage:
    """Up to ``limit`` keys of one window with its slots; ``window(kg, bucket, between)`` gives
    a bucket's ``{key: slots}``, read through ``between`` (which counts the entries it read: a
    coarse cell read for the bucket before is not read again)."""
    read = _CoarseCells(between)

    def bucket_rows(kg: int, bucket: int) -> tuple[list[tuple[bytes, Any]], int]:
        before = read.fresh
        rows = window(kg, bucket, read)
        return sorted(rows.items()), read.fresh - before

    return _walk(start, max_parallelism, limit, budget, bucket_rows)


def window_cells(
    between: Between, kg: int, sid: int, bucket: int, ends: list[int]
) -> dict[int, dict[bytes, list[Any]]]:
    """The rows of windows ``ends`` (contiguous in a bucket: ascending) of one bucket, by end
    (from its fine cells and its coarse cell's, the coarse rows of other buckets skipped)."""
    entries: list[tuple[bytes, bytes]] = []
    for at, _ in cells.bucket_ranges(kg, sid, bucket):
        hi = layout.namespace_upper_bound(at, ends[-1])
        entries.extend(between(kg, cells.from_window(at, ends[0]), hi))
    wanted = set(ends)
    out: dict[int, dict[bytes, list[Any]]] = {}
    for end, rows in cells.windows_of(entries):
        if end in wanted:
            out[end] = {k: v for k, v in rows if cells.bucket_of(k) == bucket}
    return out


Stored = tuple[dict[int, list[Any]], dict[int, list[Any]]]  # windows and panes, by end


def key_cells(
    ranges: Ranges, kg: int, op: WindowNode, key: bytes, newest: Newest | None = None
) -> Stored:
    """A key's stored windows and (sliding windows) panes, by end, from their cells: the
    ranges of its fine and coarse cells (``cells.key_ranges``), read in one call. With
    ``newest``, a tumbling window's key may be answered from its newest windows alone
    (``newest_windows``)."""
    find = kernels.KERNELS.find_windows  # loaded on first use
    wanted = list(cells.key_ranges(kg, op.state_id, key))
    assigner = op.assigner
    panes_too = uses_panes(assigner)
    if newest is not None and isinstance(assigner, TumblingWindows) and assigner.time == "event":
        found = newest_windows(ranges, newest, kg, wanted, assigner.size_ms, key)
        if found is not None:
            return found, {}
    if panes_too:
        wanted += cells.key_ranges(kg, op.pane_state_id, key)
    read = ranges(kg, wanted)
    windows = cells.key_windows(cells.in_window_order(read[0], read[1]), key, find)
    panes: dict[int, list[Any]] = {}
    if panes_too:
        panes = cells.key_windows(cells.in_window_order(read[2], read[3]), key, find)
    return windows, panes


@dataclass(frozen=True, slots=True)
class Newest:
    """A lookup that wants only a key's newest ``count`` windows (``limit`` without ``to``),
    and the watermark its state is as of."""

    count: int
    watermark: int


def newest_windows(
    ranges: Ranges,
    newest: Newest,
    kg: int,
    wanted: list[tuple[bytes, bytes]],
    size_ms: int,
    key: bytes,
) -> dict[int, list[Any]] | None:
    """``key``'s event-time tumbling windows ending at most ``count`` window sizes before the
    watermark, or later, when they are at least ``count``; ``None`` when they are fewer (the
    caller reads every window). A bucket keeps every window until retention drops it (an hour
    of 10 s windows is 360) and the route answers the newest ``limit``: reading them all made
    a lookup's cost grow with the job's age. Every window from that floor up is read whole
    (each generation, fine and coarse cells), so the windows returned are exact, and the
    newest ``count`` of the key are among them."""
    floor = newest.watermark - newest.count * size_ms
    if floor <= -(2**63):  # no watermark yet (or a limit past the time range): read them all
        return None
    read = ranges(kg, [(cells.from_window(lo, floor), hi) for lo, hi in wanted])
    found = cells.key_windows(cells.in_window_order(*read), key, kernels.KERNELS.find_windows)
    return found if len(found) >= newest.count else None


def read_key(
    ranges: Ranges,
    scan: Callable[[int, bytes], list[tuple[bytes, bytes]]],
    kg: int,
    op: WindowNode | ProcessNode,
    key: bytes,
    newest: Newest | None = None,
) -> tuple[list[tuple[bytes, bytes]], Stored | None]:
    """A key's stored state: its windows and panes from cells (``key_cells``), or its rows
    (sessions, triggered windows, process functions: ``scan`` of its prefix)."""
    if isinstance(op, WindowNode) and stores_cells(op):
        return [], key_cells(ranges, kg, op, key, newest)
    return scan(kg, layout.key_prefix(kg, op.state_id, key)), None


def composed(
    op: WindowNode,
    merge: Callable[[list[Any], list[Any]], list[Any]],
    stored: dict[int, list[Any]],
    panes: dict[int, list[Any]],
) -> list[tuple[int, int, list[Any]]]:
    """A key's windows as ``(start, end, slots)``, by end: sliding windows that are still open
    are composed from their panes."""
    assigner = op.assigner
    assert not isinstance(assigner, SessionWindows)  # sessions are rows (``stores_cells``)
    if panes and isinstance(assigner, SlidingWindows):
        stored = compose_stored(assigner, merge, stored, panes)
    return [(assigner.start_of(end), end, slots) for end, slots in sorted(stored.items())]


__all__ = [
    "Stored",
    "composed",
    "Newest",
    "key_cells",
    "newest_windows",
    "CellPage",
    "CellPosition",
    "Ranges",
    "read_key",
    "list_keys",
    "list_window",
    "window_cells",
]
