"""Aligned checkpoint barriers (Flink's ``CheckpointBarrierHandler``, aligned mode).

Barrier ``n`` begins at a worker on the job manager's trigger, or on the first barrier ``n``
from a peer that got the trigger first; the worker's own channel is aligned at once. A frame
from a channel whose barrier has arrived belongs to the next checkpoint: it is held until every
channel is aligned, the snapshot is taken, and then replayed in arrival order.
"""

from __future__ import annotations


class BarrierAligner:
    def __init__(self, index: int, parallelism: int) -> None:
        self._own = str(index)
        self._p = parallelism
        self.pending: int | None = None  # the checkpoint being aligned
        self.last = 0  # the newest checkpoint begun
        self._aligned: set[str] = set()
        self._held: list[tuple[int, bytes]] = []

    def begin(self, n: int) -> bool:
        """Checkpoint ``n`` begins here; False when it (or a newer one) already did."""
        if n <= self.last:
            return False
        self.last = self.pending = n
        self._aligned = {self._own}
        return True

    def arrived(self, peer: int, n: int) -> None:
        if n == self.pending:
            self._aligned.add(str(peer))

    @property
    def aligned(self) -> bool:
        return self.pending is not None and len(self._aligned) == self._p

    def holds(self, peer: int) -> bool:
        """Does a frame from ``peer`` wait (its barrier arrived, the snapshot is not taken)?"""
        return self.pending is not None and str(peer) in self._aligned

    def hold(self, peer: int, payload: bytes) -> None:
        self._held.append((peer, payload))

    def release(self) -> list[tuple[int, bytes]]:
        """The snapshot is taken: alignment ends, the held frames go back to the caller."""
        self.pending = None
        self._aligned = set()
        held, self._held = self._held, []
        return held
