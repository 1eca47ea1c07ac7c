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

from collections.abc import Callable
from typing import Any

import msgpack

from weir.engine.agg import Aggregate, UserDefined
from weir.state.backend import StateBackend


def slot_freezer(aggregates: dict[str, Aggregate]) -> Callable[[list[Any]], list[Any]] | None:
    """How slots are copied at a barrier: a list copy for built-in aggregates (numbers); None
    when a user-defined accumulator may change in place, so the slots are encoded at once."""
    if any(isinstance(a, UserDefined) for a in aggregates.values()):
        return None
    return list.copy


class StateDelta:
    __slots__ = ("puts", "slots", "deletes", "written")

    def __init__(
        self,
        puts: dict[bytes, bytes] | None = None,
        slots: list[tuple[bytes, list[Any]]] | None = None,
        deletes: list[bytes] | None = None,
    ) -> None:
        self.puts = puts if puts is not None else {}
        self.slots = slots if slots is not None else []  # (state key, slots), encoded on write
        self.deletes = deletes if deletes is not None else []
        self.written = False

    def __len__(self) -> int:
        return len(self.puts) + len(self.slots) + len(self.deletes)

    def write(self, state: StateBackend) -> None:
        """Into RocksDB, in one batch (``StateBackend.write``: the deletes, then the puts). Its
        own packer: the operators' (``codec``) may be packing on the worker's loop meanwhile,
        and a packer is not safe to share between threads."""
        if len(self):
            pack = msgpack.Packer().pack
            puts = {k: pack(slots) for k, slots in self.slots}
            puts.update(self.puts)  # after the slots, as one batch applies them in order
            state.write(puts, self.deletes)
        self.written = True
