"""What a worker calls on each of its keyed operators (``task/keyed.py``), whatever it runs:
tumbling, sliding or session windows (``window.py``, ``sliding.py``, ``session.py``) or a
process function (``process.py``).

An operator is fed batches with the watermark each record arrived under, moved by watermarks
(firing what falls due), drained of the results it emitted, flushed to RocksDB and purged of
what retention allows; after a restore it rebuilds what memory holds from RocksDB.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from weir.engine.nodes import OperatorNode
from weir.engine.runtime.messages import TopStatus
from weir.engine.runtime.operators.delta import StateDelta

# what takes a keyed sub-batch for one input of an operator (keys, records, timestamps, the
# watermarks they arrived under, the trace): ``process``, or a co-process function's
# ``process2``
Feed = Callable[[list[str], list[Any], list[int], list[int], list[int] | None], None]


class OperatorRuntime(Protocol):
    @property
    def op(self) -> OperatorNode: ...

    @property
    def processing_time(self) -> bool:
        """Does it run on the wall clock (the worker ticks it, input or not)?"""
        ...

    @property
    def watermark(self) -> int: ...

    @property
    def data_watermark(self) -> int:
        """The watermark real records produced (retention counts from it)."""
        ...

    @property
    def records_in(self) -> int: ...

    @property
    def results_out(self) -> int: ...

    @property
    def open_windows(self) -> int: ...

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        """One batch; ``wms[i]`` is the watermark record ``i`` arrived under, ``trace`` the
        watermark after each record."""
        ...

    def advance(
        self, watermark: int, data_watermark: int, trace: list[int] | None = None
    ) -> None: ...

    def drain(self) -> list[Any]:
        """The results emitted since the last drain."""
        ...

    def drain_side(self) -> dict[str, list[Any]]:
        """Side outputs' records since the last drain, by tag (process functions only)."""
        ...

    def flush(self) -> None:
        """Write what RocksDB lacks, now."""
        ...

    def snapshot(self, barrier: bool = True) -> StateDelta:
        """What RocksDB lacks, frozen (no RocksDB work), for the worker's state writer to write
        while the operator goes on in memory; ``barrier``: the least work now."""
        ...

    def purge(self, force: bool = False) -> int:
        """Delete state whose query retention has passed; returns how many windows went. It
        reads and writes RocksDB: only while no frozen generation waits to be written."""
        ...

    def restore(self, watermark: int, data_watermark: int) -> None: ...

    def top_status(self) -> TopStatus | None:
        """Its top-N keys, for operators whose windows are shared by keys (else None)."""
        ...
