"""Window accumulators written as cells (``state/cells.py``), and their generations kept few.

Each written generation adds one entry per cell it touches (key group, bucket, window) holding
only the changed rows, so a flush costs a put per cell, not per row. ``CellLog`` counts, per
cell of a window that can still change, how many entries it has, and merges a cell once it has
more than ``MAX_GENERATIONS``: the newest entries, and each older one only while the rows
merged so far are at least half of its (size-tiered, as RocksDB's universal compaction), so an
entry is rewritten once the changes since it have grown to half its size. That keeps
incremental checkpoints small (updating 1% of the keys writes about 1% of the bytes) while a
lookup reads at most ``MAX_GENERATIONS + 1`` entries a window. The log lives on the worker's
state writer thread (and on its loop only while that thread is idle, as every RocksDB write of
the loop does).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from weir.engine import kernels
from weir.engine.runtime.operators.delta import ColumnSegment
from weir.state import cellcodec, cells, layout, slotpack
from weir.state.backend import StateBackend
from weir.state.cellcodec import PackedRows

MAX_GENERATIONS = 4
MERGE_CHUNK = 1024  # merged cells a write batch: the loop gets the GIL back between batches
_KEY = itemgetter(0)
_CELL = itemgetter(slice(0, 14))  # a cell key's cell and window, without its generation
# a window's frozen rows: (state id, window end, keys, their slots end to end, ``width`` a key)
Frozen = tuple[int, int, Collection[str], list[Any]]


def frozen_rows(keys: Collection[str], flat: list[Any], width: int, max_par: int) -> PackedRows:
    """A frozen window's rows to write as cells: keys encoded and hashed once, a numpy
    column per slot (loops in C, no Python call per row)."""
    raw = list(map(str.encode, keys))
    crc = np.fromiter(map(zlib.crc32, raw), np.uint32, len(raw))
    slots = [cells.slot_column(flat[j::width]) for j in range(width)]
    return PackedRows.of(cells.CellRows(raw, (crc % max_par).astype(np.uint16), slots, crc))


class CellLog:
    """The generations of one operator's cells (see the module docstring)."""

    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self._gen = 0
        # (state id, window end) -> {cell prefix + namespace: entries}
        self._cells: dict[tuple[int, int], Counter[bytes]] = {}

    def next_gen(self) -> int:
        """A generation number above every earlier one, across restarts too (nanoseconds)."""
        self._gen = max(time.time_ns(), self._gen + 1)
        return self._gen

    def encode(self, sid: int, end: int, rows: PackedRows, gen: int) -> list[tuple[bytes, bytes]]:
        """Window ``end``'s ``rows`` as cells (the kernels' ``encode_packed``: compiled, the
        rows are sorted and assembled in C), coarse cells when they are few for their key
        groups (``cellcodec.write_coarse``), counted."""
        coarse = cellcodec.write_coarse(len(rows), rows.key_groups)
        entries: list[tuple[bytes, bytes]] = kernels.KERNELS.encode_packed(
            rows, sid, end, gen, coarse
        )
        # Counter.update counts in C: no Python call per cell (a flush at 1M keys has ~8k)
        self._cells.setdefault((sid, end), Counter()).update(map(_CELL, map(_KEY, entries)))
        return entries

    def seed(self, raw_key: bytes) -> None:
        """Count a stored entry (a restore reads every one); later generations number above
        it even if the clock went back meanwhile."""
        _, sid, _, end, gen = cells.decode_cell_key(raw_key)
        self._gen = max(self._gen, gen)
        self._cells.setdefault((sid, end), Counter())[raw_key[:14]] += 1

    def merge_due(self, state: StateBackend, chunk: int = MERGE_CHUNK) -> int:
        """Merge every cell with more than ``MAX_GENERATIONS`` entries; returns how many. The
        merges are written together, ``chunk`` cells a batch (a flush at 10k keys makes
        thousands due at once: one write each cost more than the merge itself)."""
        done = 0
        puts: dict[bytes, bytes] = {}
        deletes: list[bytes] = []
        for known in self._cells.values():
            if max(known.values(), default=0) <= MAX_GENERATIONS:  # in C: most windows
                continue
            for cell, count in known.items():
                if count > MAX_GENERATIONS:
                    known[cell] = self._merge(state, cell, puts, deletes)
                    done += 1
                    if len(puts) >= chunk:
                        state.write(puts, deletes)
                        puts, deletes = {}, []
        if puts or deletes:
            state.write(puts, deletes)
        return done

    @staticmethod
    def _merge(
        state: StateBackend, cell: bytes, puts: dict[bytes, bytes], deletes: list[bytes]
    ) -> int:
        """Merge the newest entries of ``cell`` (into ``puts`` and ``deletes``): the newest
        two, and each older one while the rows merged so far are at least half its rows, so
        an entry is rewritten only once the changes since it have grown to half its size
        (every row a bounded number of times, and updating 1% of the keys rewrites about 1% of
        the bytes). Returns the entries left."""
        found = list(state.scan(cell, layout.prefix_upper_bound(cell)))
        if len(found) < 2:
            return len(found)
        sizes = [cells.rows_in(v) for _, v in found]
        i = len(found) - 2
        total = sizes[-1] + sizes[-2]
        while i > 0 and 2 * total >= sizes[i - 1]:
            i -= 1
            total += sizes[i]
        part = found[i:]
        puts[part[-1][0]] = kernels.KERNELS.merge_cells([v for _, v in part])
        deletes.extend(k for k, _ in part[:-1])
        return i + 1

    def forget(self, sid: int, until: int) -> None:
        """Stop counting the windows of ``sid`` ending at or before ``until`` (final: never
        written again)."""
        for key in [k for k in self._cells if k[0] == sid and k[1] <= until]:
            del self._cells[key]

    def drop(self, state: StateBackend, sid: int, end: int, keys: Collection[str]) -> list[bytes]:
        """The cell entries holding window ``end`` of ``keys`` (every generation), to delete."""
        self._cells.pop((sid, end), None)
        return cell_entries(state, sid, end, keys, self.max_parallelism)


def cell_entries(
    state: StateBackend, sid: int, end: int, keys: Collection[str], max_par: int
) -> list[bytes]:
    """Every stored entry (all generations) of the cells that hold window ``end`` of ``keys``."""
    crcs = map(zlib.crc32, map(str.encode, keys))
    held = sorted({(c % max_par, cells.bucket_of_hash(c)) for c in crcs})
    return bucket_entries(state, sid, end, held)


def bucket_entries(
    state: StateBackend, sid: int, end: int, held: Iterable[tuple[int, int]]
) -> list[bytes]:
    """Every stored entry (all generations) of window ``end``'s cells in the ``(key group,
    bucket)``s ``held``, fine and coarse (a coarse cell is deleted whole, with every bucket it
    holds: the window's keys are all deleted at once)."""
    ns = layout.encode_namespace(end)
    found: list[bytes] = []
    fields = sorted({(kg, f) for kg, bucket in held for f in cells.bucket_fields(bucket)})
    for kg, field in fields:
        lo = cells.cell_prefix(kg, sid, field) + ns
        found.extend(k for k, _ in state.scan(lo, layout.prefix_upper_bound(lo)))
    return found


def stored_window_in(
    state: StateBackend, key_groups: Iterable[int], sid: int, min_end: int, max_end: int
) -> tuple[str, int] | None:
    """A ``(key, end)`` of a stored window of state ``sid`` ending in ``[min_end, max_end]``,
    or None. A cell key leads with its key group, bucket and end, so each bucket's windows in
    the range are one seek and the state is never read whole (a live backfill asks this of a
    job whose retention may hold millions of rows)."""
    lo_ns, hi_ns = layout.encode_namespace(min_end), layout.encode_namespace(max_end)
    for kg in key_groups:
        for field in cells.every_bucket_field():
            at = cells.cell_prefix(kg, sid, field)
            for ckey, raw in state.scan(at + lo_ns, layout.prefix_upper_bound(at + hi_ns)):
                cell = cells.Cell(raw)
                if cell.n:
                    return cell.key(0).decode(), cells.cell_end(ckey)
    return None


class CellPart:
    """One generation's window accumulators for ``StateDelta.cells``: the ``frozen`` windows'
    rows (numbered copies, or copies that share no user-defined accumulator with the
    operator), the ``columns`` the delta hands over (state ``sid``), the windows to ``drop``
    (their every cell deleted first) and, once written, the windows to stop counting."""

    def __init__(
        self,
        log: CellLog,
        sid: int,
        width: int,
        frozen: list[Frozen],
        drops: Sequence[tuple[int, int, Collection[str]]] | None = None,
        final: tuple[int, int] | None = None,
    ) -> None:
        self.log = log
        self.sid = sid
        self.width = width
        self.frozen = frozen
        self.drops = list(drops or [])
        self.final = final  # (state id, end): windows ending at or before it are final

    def __len__(self) -> int:
        return sum(len(f[2]) for f in self.frozen)

    def deletes(self, state: StateBackend) -> list[bytes]:
        out: list[bytes] = []
        for sid, end, keys in self.drops:
            out.extend(self.log.drop(state, sid, end, keys))
        return out

    def entries(self, columns: list[ColumnSegment]) -> Iterator[tuple[bytes, bytes]]:
        # a window's cells at a time (encoded as they are reached), no generator step a cell
        return chain.from_iterable(self._windows(columns))

    def _windows(self, columns: list[ColumnSegment]) -> Iterator[list[tuple[bytes, bytes]]]:
        """Each window's cells, encoded in turn."""
        gen = self.log.next_gen()
        max_par = self.log.max_parallelism
        # a window both in ``columns`` and frozen (fired, then updated by a late record) is
        # written once: a generation has one entry per cell, the frozen rows are the later
        both = {f[1] for f in self.frozen if f[0] == self.sid}
        frozen = [_column_frozen(self.sid, s) for s in columns if s.end in both]
        for seg in columns:
            if seg.end not in both:
                yield self.log.encode(self.sid, seg.end, seg.rows, gen)
        for sid, end, keys, flat in _one_per_window(frozen + self.frozen, self.width):
            yield self.log.encode(sid, end, frozen_rows(keys, flat, self.width, max_par), gen)

    def written(self, state: StateBackend) -> None:
        self.log.merge_due(state)
        if self.final is not None:
            self.log.forget(*self.final)


def _column_frozen(sid: int, segment: ColumnSegment) -> Frozen:
    """``segment``'s rows as frozen rows (slots end to end; rare: a window a late record
    updated in the generation it fired)."""
    columns = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in segment.slots]
    return sid, segment.end, segment.keys, list(chain.from_iterable(zip(*columns, strict=True)))


def _one_per_window(frozen: list[Frozen], width: int) -> list[Frozen]:
    """One part per (state id, window): a window frozen twice in one generation (fired, then
    updated by a late record) keeps each key's later slots (a generation has one cell key)."""
    seen: dict[tuple[int, int], list[Frozen]] = {}
    for f in frozen:
        seen.setdefault((f[0], f[1]), []).append(f)
    out: list[Frozen] = []
    for (sid, end), parts in seen.items():
        if len(parts) == 1:
            out.append(parts[0])
            continue
        rows: dict[str, list[Any]] = {}
        for _, _, keys, flat in parts:
            for i, k in enumerate(keys):
                rows[k] = flat[i * width : i * width + width]
        out.append((sid, end, list(rows), list(chain.from_iterable(rows.values()))))
    return out


def flat_copy(keys: Collection[str], bucket: dict[str, list[Any]]) -> list[Any]:
    """``keys``' slots in ``bucket`` copied end to end (a loop in C, no container per key)."""
    return list(chain.from_iterable(map(bucket.__getitem__, keys)))


def migrate_rows(state: StateBackend, key_groups: Iterable[int], sid: int) -> int:
    """State format 1 to 2 for state ``sid``: every window row (``layout.state_key`` and its
    msgpack slots) of ``key_groups`` becomes part of a cell of generation 0, the rows go, one
    key group per batch. Returns the rows moved."""
    moved = 0
    for kg in key_groups:
        prefix = layout.state_prefix(kg, sid)
        by_end: dict[int, list[tuple[bytes, list[Any]]]] = {}
        old: list[bytes] = []
        for skey, raw in state.scan(prefix, layout.prefix_upper_bound(prefix)):
            _, _, key, end = layout.decode_state_key(skey)
            by_end.setdefault(end, []).append((key, slotpack.unpackb(raw)))
            old.append(skey)
        puts: dict[bytes, bytes] = {}
        for end, rows in by_end.items():
            keys = [k for k, _ in rows]
            width = len(rows[0][1])
            cols = [cells.slot_column([r[1][j] for r in rows]) for j in range(width)]
            groups = np.full(len(keys), kg, np.uint16)
            puts.update(cells.encode_cells(cells.CellRows(keys, groups, cols), sid, end, 0))
        if old:
            state.write(puts, old)
        moved += len(old)
    return moved
