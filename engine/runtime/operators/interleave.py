"""A co-process function's two inputs, put back in watermark order within one delivery.

A worker delivers one channel's batch per key_by node: when both inputs of a co-process
function branch off the same source, one delivery holds the batch's first-input records, then
its second-input records, each in arrival order but no longer interleaved. Run as delivered, a
second-input record would arrive after timers that fired under a later record's watermark, i.e.
under a watermark that went back (a window join would see a window fire before a record that
belongs in it). So the runtime holds a delivery's records (``Pending``) and runs them merged by
the watermark each arrived under, which is non-decreasing within each input: the order of the
split, up to records that share a watermark (input 1 first), whose relative order no lateness
or timer decision depends on.
"""

from __future__ import annotations

from typing import Any

Batch = tuple[int, list[str], list[Any], list[int], list[int]]  # input, keys, recs, ts, wms


class Pending:
    """The records of one delivery, by input, until ``take`` orders them."""

    def __init__(self) -> None:
        self._batches: list[Batch] = []

    def add(
        self, side: int, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]
    ) -> None:
        if keys:
            self._batches.append((side, keys, recs, ts, wms))

    def take(self) -> list[Batch]:
        """The held records as runs of one input each, merged by arrival watermark."""
        batches, self._batches = self._batches, []
        if len(batches) <= 1:
            return batches
        order = sorted(
            (wm, b, i) for b, batch in enumerate(batches) for i, wm in enumerate(batch[4])
        )
        runs: list[Batch] = []
        lo = order[0][2]  # where the current run starts in its batch
        for n, (_, b, i) in enumerate(order):
            following = order[n + 1] if n + 1 < len(order) else None
            if following is None or following[1] != b:
                side, keys, recs, ts, wms = batches[b]
                runs.append((side, keys[lo : i + 1], recs[lo : i + 1], ts[lo : i + 1],
                             wms[lo : i + 1]))  # fmt: skip
                if following is not None:
                    lo = following[2]
        return runs
