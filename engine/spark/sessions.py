"""Stage 2 of a backfill on the Python path, for session windows: each key's records, in
streaming's order and with the watermark each arrived under, go through the streaming session
operator itself (``engine/runtime/operators/session.py``), so sessions merge, and records are late,
exactly as in ``weir run``; its writes are kept in memory and become the key group's SST file.

Why not ``F.session_window``: a record is late when the session it would join (merged with
every live session it overlaps) is past its allowed lateness at the watermark the record arrived
under, and a session whose lateness has passed is forgotten, so a later record starts a new
one. Both depend on the records before it in its split, which a ``groupBy`` over event time
cannot see; it would agree only where no record is late.

Streaming's order: a key's records in their split's order (one file, one Kafka partition),
each under its split's watermark before it. With several splits the records are taken in the
order of those watermarks, then split, then position: one order a streaming run could see.

The runtime sees one key at a time, with no watermark moving in between: what it does with a
record depends only on that key's sessions and the record's own watermark (sessions that fell
due are settled before a key's next record is merged, ``SessionRuntime._settle``). Then the
final watermark of a bounded input fires and finalizes every session, which is what RocksDB
holds after ``weir run`` reads the same input to its end.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, cast

from weir.engine.nodes import WindowNode
from weir.engine.runtime.operators.session import SessionRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.keygroups import KeyGroupRange
from weir.state.rocksdb import RocksState


class _Writes:
    """A state that keeps what the runtime writes, as ``RocksState.write`` applies it (the
    deletes, then the puts)."""

    def __init__(self) -> None:
        self.entries: dict[bytes, bytes] = {}

    def write(self, puts: Mapping[bytes, bytes], deletes: list[bytes] | None = None) -> None:
        for k in deletes or ():
            self.entries.pop(k, None)
        self.entries.update(puts)


class SessionReplay:
    """The streaming session operator over a key group's keys, one key after another; a task's
    key groups take turns (``finish`` leaves no session behind)."""

    def __init__(
        self, op: WindowNode, max_parallelism: int, dead: DeadLetters | None = None
    ) -> None:
        """``dead``: where the records the operator cannot fold go (a record without an
        aggregated field, or one its aggregate refuses), counted as stage 1 counts its own, so
        every operator's summary counts them alike; None: counted only."""
        self._sid = op.state_id
        self._op = op.name
        self._writes = _Writes()
        self._late = LateRecords(None)
        self._dead = dead if dead is not None else DeadLetters(None, quiet=True)
        self._rt = SessionRuntime(
            op,
            cast(RocksState, self._writes),  # only ``write`` is used: no restore, no purge
            KeyGroupRange(0, max_parallelism - 1),
            max_parallelism,
            self._late,
            self._dead,
            0,
        )

    def add_key(self, key: str, ts: list[int], wms: list[int], recs: list[Any]) -> None:
        """Every record of ``key``, in streaming's order, with the watermark each arrived under."""
        self._rt.process([key] * len(recs), recs, ts, wms)
        self._rt.drain()
        self._late.flush()  # counted; the records themselves are not kept
        self._dead.flush()

    def finish(self) -> dict[bytes, bytes]:
        """The final watermark, then the sessions as stored (state key -> ``[start, *slots]``),
        without the runtime's cleanup timers (the SST writer lists its own per window end)."""
        self._rt.advance(MAX_WATERMARK, MAX_WATERMARK, [MAX_WATERMARK])
        self._rt.drain()
        self._rt.flush()
        entries, self._writes.entries = self._writes.entries, {}
        return {k: v for k, v in entries.items() if struct.unpack_from(">H", k, 2)[0] == self._sid}

    @property
    def late(self) -> int:
        return self._late.count[self._op]

    @property
    def dead(self) -> int:
        """The records the operator sent to the dead letters so far."""
        return self._dead.count
