"""A generation of an operator's state writes: what memory holds and RocksDB does not yet.

An operator hands one over at every flush and at a checkpoint barrier (``snapshot()``), then
starts a fresh generation, as Flink's heap backend does with its copy-on-write state maps. At a
barrier nothing is serialised: the accumulator slots the fold changes in place are copied
(lists of numbers), everything else in a generation is already encoded bytes, which never
change. The encoding and the RocksDB write happen when the generation is written, in the
checkpoint's own thread, while the worker's loop goes on.

A generation is written whole, in one atomic batch: deletes first (a session whose end moved
may take the same key again), then the slots (``segments``, then ``columns``: a columnar
operator's changed rows, ``ColumnSegment``), then ``rows`` and the other puts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import msgpack
import numpy as np

from weir.engine.agg import Aggregate, UserDefined
from weir.state.backend import StateBackend
from weir.state.layout import encode_namespace, key_prefixes


def slots_are_numbers(aggregates: dict[str, Aggregate]) -> bool:
    """Can slots be frozen by copying their values? Not when a user-defined accumulator may
    change in place: those are encoded at the barrier instead."""
    return not any(isinstance(a, UserDefined) for a in aggregates.values())


Prefix = Callable[[str], tuple[int, bytes]]  # key -> (key group, state-key prefix)
# the keys of one namespace and their slots' values end to end, ``width`` per key, in the
# keys' iteration order (the collection is the frozen generation's own, never changed again)
Segment = tuple[bytes, Collection[str], list[Any]]


def freeze_segment(ns: bytes, keys: Collection[str], bucket: dict[str, list[Any]]) -> Segment:
    """``keys``' slots in ``bucket``, copied as one flat list: a loop in C and no container per
    key, so a barrier costs tens of nanoseconds a key and never sets off the garbage collector."""
    return ns, keys, list(chain.from_iterable(map(bucket.__getitem__, keys)))


@dataclass(frozen=True, slots=True)
class ColumnSegment:
    """The changed rows of one window of one operator as columns: row i is key ``keys[i]``
    (canonical form) in key group ``key_groups[i]``, its accumulator slot j is
    ``slots[j][i]``. A slot column is an int64 or float64 numpy array, or a list of Python
    objects where a value does not fit (an int past int64, a user-defined accumulator)."""

    end: int  # the window end, the namespace of every row
    keys: list[str]
    key_groups: np.ndarray  # uint16
    slots: list[np.ndarray | list[Any]]


def column_rows(segment: ColumnSegment) -> Iterator[list[Any]]:
    """Each row's slots of ``segment`` as the Python list the row layout stores (until the
    columnar state layout writes segments whole): ``tolist`` gives Python ints and floats, so
    the values encode exactly as a dict-based operator's."""
    columns = [c.tolist() if isinstance(c, np.ndarray) else c for c in segment.slots]
    return map(list, zip(*columns, strict=True))


def _no_prefix(key: str) -> tuple[int, bytes]:
    raise AssertionError(f"a generation without rows has no state-key prefix (key {key!r})")


class StateDelta:
    """``segments`` (see ``Segment``), ``columns`` (see ``ColumnSegment``) and ``rows``
    (``(key, namespace bytes, slots)``) get their state keys (``prefix``) and values when the
    generation is written; ``puts`` are encoded already; ``deletes`` go first."""

    __slots__ = (
        "puts",
        "segments",
        "width",
        "rows",
        "deletes",
        "prefix",
        "written",
        "columns",
        "state_id",
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
        state_id: int | None = None,
    ) -> None:
        self.puts = puts if puts is not None else {}
        self.rows = rows if rows is not None else []
        self.deletes = deletes if deletes is not None else []
        self.prefix = prefix
        self.segments = segments if segments is not None else []
        self.width = width
        self.columns = columns if columns is not None else []
        # the state id of ``columns``' rows: their state keys are made from the key groups
        # they carry, without a CRC or a cache lookup per key (None: ``prefix`` makes them)
        self.state_id = state_id
        self.written = False

    def __len__(self) -> int:
        keys = sum(len(s[1]) for s in self.segments) + sum(len(c.keys) for c in self.columns)
        return len(self.puts) + len(self.rows) + len(self.deletes) + keys

    def write(self, state: StateBackend, chunk: int | None = None) -> None:
        """Into RocksDB: the deletes, then the puts (``StateBackend.write``), in one batch, or
        in batches of ``chunk`` when a checkpoint's thread writes it: RocksDB's write holds
        the GIL, and the worker's loop gets it back between batches. Nothing else writes until
        the last one, so the result is the same. Its own packer: the operators' (``codec``)
        may be packing on the worker's loop meanwhile, and a packer is not safe to share
        between threads."""
        if chunk is None:
            state.write(self._encoded(), self.deletes)
        else:
            for i in range(0, len(self.deletes), chunk):
                state.write({}, self.deletes[i : i + chunk])
            for puts in self._chunks(chunk):
                state.write(puts)
        self.written = True

    def _encoded(self) -> dict[bytes, bytes]:
        """Every put, in the order one batch would apply them: segments, columns, rows, then
        ``puts``."""
        out: dict[bytes, bytes] = {}
        for part in self._chunks(None):
            out.update(part)
        return out

    def _chunks(self, size: int | None) -> Iterator[dict[bytes, bytes]]:
        """The puts, encoded, in dicts of up to ``size`` (None: one), in the order one batch
        would apply them: segments, columns, rows, then ``puts`` (later ones win). Each part goes in
        state-key order (a stable sort, so a row given twice still ends with its later value):
        RocksDB's skiplist inserts a run of ascending keys for about 60% of the cost of the
        same keys in any order, as each insert starts from where the last one ended. No tuple
        per entry: on a worker with millions of live objects, the allocations would set off
        the collector's full passes, which hold the GIL."""
        pack = msgpack.Packer().pack
        prefix, w = self.prefix, self.width
        limit = size or sys.maxsize
        out: dict[bytes, bytes] = {}
        for ns, keys, flat in self.segments:
            pre = [prefix(k)[1] for k in keys]
            for i in sorted(range(len(pre)), key=pre.__getitem__):
                out[pre[i] + ns] = pack(flat[i * w : i * w + w])
                if len(out) >= limit:
                    yield out
                    out = {}
        for column in self.columns:
            ns = encode_namespace(column.end)
            if self.state_id is None:
                pre = [prefix(k)[1] for k in column.keys]
            else:
                encoded = [k.encode() for k in column.keys]
                pre = key_prefixes(column.key_groups.tolist(), self.state_id, encoded)
            values = list(map(pack, column_rows(column)))
            for i in sorted(range(len(pre)), key=pre.__getitem__):
                out[pre[i] + ns] = values[i]
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
