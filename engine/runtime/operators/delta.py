"""A generation of an operator's state writes: what memory holds and RocksDB does not yet.

An operator hands one over at every flush and at a checkpoint barrier (``snapshot()``), then
starts a fresh generation, as Flink's heap backend does with its copy-on-write state maps. At a
barrier nothing is serialised: the accumulator slots the fold changes in place are copied
(lists of numbers), everything else in a generation is already encoded bytes, which never
change. The encoding and the RocksDB write happen when the generation is written, in the
checkpoint's own thread, while the worker's loop goes on.

A generation is written whole, in one atomic batch: deletes first (a session whose end moved
may take the same key again), then the slots, then the other puts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

import numpy as np

from weir.engine.agg import Aggregate, UserDefined
from weir.state import slotpack
from weir.state.backend import StateBackend
from weir.state.cellcodec import CellRows, PackedRows


def slots_are_numbers(aggregates: dict[str, Aggregate]) -> bool:
    """Can slots be frozen by copying their values? Not when a user-defined accumulator may
    change in place: those are encoded at the barrier instead."""
    return not any(isinstance(a, UserDefined) for a in aggregates.values())


Prefix = Callable[[str], tuple[int, bytes]]  # key -> (key group, state-key prefix)
# the keys of one namespace and their slots' values end to end, ``width`` per key, in the
# keys' iteration order (the collection is the frozen generation's own, never changed again)
Segment = tuple[bytes, Collection[str], list[Any]]


@dataclass(frozen=True, slots=True)
class ColumnSegment:
    """The changed rows of one window of one operator as columns (``cellcodec.PackedRows``):
    row i is key i (canonical form, its UTF-8 bytes packed with the others, gathered with its
    CRC-32 on the operator's thread: ``Interner.gather_keys``) in key group
    ``rows.key_groups[i]``, its accumulator slot j is ``rows.slots[j][i]``. A slot column is an
    int64 or float64 numpy array, or a list of Python objects where a value does not fit (an
    int past int64, a user-defined accumulator)."""

    end: int  # the window end, the namespace of every row
    rows: PackedRows

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def keys(self) -> list[str]:
        """The keys, decoded (a rare path: ``cellwrites._column_frozen``)."""
        r = self.rows
        return [r.key(i).decode() for i in range(len(r))]

    @property
    def slots(self) -> list[np.ndarray | list[Any]]:
        return self.rows.slots

    @classmethod
    def of(
        cls, end: int, keys: list[str], key_groups: np.ndarray, slots: list[np.ndarray | list[Any]]
    ) -> ColumnSegment:
        """A segment of keys given as strs (tests, tools)."""
        raw = [k.encode() for k in keys]
        return cls(end, PackedRows.of(CellRows(raw, key_groups, slots)))


class CellWrites(Protocol):
    """What writes a generation's window accumulators as cells (``cellwrites.CellPart``)."""

    def __len__(self) -> int: ...

    def deletes(self, state: StateBackend) -> list[bytes]:
        """Cell entries to delete first (windows that left the state)."""
        ...

    def entries(self, columns: list[ColumnSegment]) -> Iterator[tuple[bytes, bytes]]:
        """The cells to put after the deletes: ``columns`` and the part's own rows."""
        ...

    def written(self, state: StateBackend) -> None:
        """After the generation is written: merge cells with too many generations."""
        ...


def _no_prefix(key: str) -> tuple[int, bytes]:
    raise AssertionError(f"a generation without rows has no state-key prefix (key {key!r})")


class StateDelta:
    """``segments`` (see ``Segment``) and ``rows`` (``(key, namespace bytes, slots)``) get their
    state keys (``prefix``) and values when the generation is written; ``puts`` are encoded
    already; ``deletes`` go first, then ``columns`` (window accumulators as columns) and
    ``cells``' rows, written as cells (``state/cells.py``: ``columns`` need ``cells``), then
    the rest."""

    __slots__ = (
        "puts",
        "segments",
        "width",
        "rows",
        "deletes",
        "prefix",
        "columns",
        "cells",
        "written",
    )

    def __init__(
        self,
        puts: dict[bytes, bytes] | None = None,
        rows: list[tuple[str, bytes, list[Any]]] | None = None,
        deletes: list[bytes] | None = None,
        prefix: Prefix = _no_prefix,
        segments: list[Segment] | None = None,
        width: int = 0,
        columns: list[ColumnSegment] | None = None,
        cells: CellWrites | None = None,
    ) -> None:
        self.puts = puts if puts is not None else {}
        self.columns = columns if columns is not None else []
        if self.columns and cells is None:
            raise ValueError("columns are window accumulators: give the operator's CellPart")
        self.cells = cells
        self.rows = rows if rows is not None else []
        self.deletes = deletes if deletes is not None else []
        self.prefix = prefix
        self.segments = segments if segments is not None else []
        self.width = width
        self.written = False

    def __len__(self) -> int:
        keys = sum(len(s[1]) for s in self.segments) + sum(map(len, self.columns))
        keys += len(self.cells) if self.cells is not None else 0
        return len(self.puts) + len(self.rows) + len(self.deletes) + keys

    def write(
        self, state: StateBackend, chunk: int | None = None, chunk_bytes: int = 1 << 62
    ) -> None:
        """Into RocksDB: the deletes, then the puts (``StateBackend.write``), in one batch, or
        in batches of ``chunk`` when a checkpoint's thread writes it: RocksDB's write holds
        the GIL, and the worker's loop gets it back between batches. Nothing else writes until
        the last one, so the result is the same. A batch of cells also ends once it holds
        ``chunk_bytes`` of keys and values (``statewriter.WRITE_BYTES``). Its own packer: the
        operators' (``codec``) may be packing on the worker's loop meanwhile, and a packer is
        not safe to share between threads."""
        deletes = self.deletes
        if self.cells is not None:
            deletes = deletes + self.cells.deletes(state)
        if chunk is None:
            state.write(self._encoded(), deletes)
        else:
            for i in range(0, len(deletes), chunk):
                state.write({}, deletes[i : i + chunk])
            if self.cells is not None:
                # one entry a cell key: straight into batches, no dict between
                batch, entries, size = state.batch(), 0, 0
                for key, value in self.cells.entries(self.columns):
                    batch.put(key, value)
                    entries, size = entries + 1, size + len(key) + len(value)
                    if entries >= chunk or size >= chunk_bytes:
                        state.commit(batch)
                        batch, entries, size = state.batch(), 0, 0
                if entries:
                    state.commit(batch)
            for puts in self._chunks(chunk, cells=False):
                state.write(puts)
        if self.cells is not None:
            self.cells.written(state)
        self.written = True

    def _encoded(self) -> dict[bytes, bytes]:
        """Every put, in the order one batch would apply them: segments, rows, then ``puts``."""
        out: dict[bytes, bytes] = {}
        for part in self._chunks(None):
            out.update(part)
        return out

    def _chunks(self, size: int | None, cells: bool = True) -> Iterator[dict[bytes, bytes]]:
        """The puts, encoded, in dicts of up to ``size`` (None: one), in the order one batch
        would apply them: ``cells`` (unless False), segments, rows, then ``puts`` (later ones
        win). Each part goes in state-key order (a stable sort, so a row given twice still ends
        with its later value):
        RocksDB's skiplist inserts a run of ascending keys for about 60% of the cost of the
        same keys in any order, as each insert starts from where the last one ended. No tuple
        per entry: on a worker with millions of live objects, the allocations would set off
        the collector's full passes, which hold the GIL."""
        pack = slotpack.packer().pack
        prefix, w = self.prefix, self.width
        limit = size or sys.maxsize
        out: dict[bytes, bytes] = {}
        if cells and self.cells is not None:
            entries = self.cells.entries(self.columns)
            while part := list(islice(entries, limit - len(out))):  # dict.update, not a put each
                out.update(part)
                if len(out) >= limit:
                    yield out
                    out = {}
        for ns, keys, flat in self.segments:
            pre = [prefix(k)[1] for k in keys]
            for i in sorted(range(len(pre)), key=pre.__getitem__):
                out[pre[i] + ns] = pack(flat[i * w : i * w + w])
                if len(out) >= limit:
                    yield out
                    out = {}
        rows = self.rows
        keyed = [prefix(k)[1] + ns for k, ns, _ in rows]
        for i in sorted(range(len(rows)), key=keyed.__getitem__):
            out[keyed[i]] = pack(rows[i][2])
            if len(out) >= limit:
                yield out
                out = {}
        puts = self.puts
        order = sorted(puts)
        if size is None:
            out.update({k: puts[k] for k in order})
            yield out
            return
        if out:
            yield out
        for i in range(0, len(order), size):
            yield {k: puts[k] for k in order[i : i + size]}
