"""Stage 2 of a backfill on the Python path, for tumbling and sliding windows (user-defined
aggregates, alone or beside built-in ones): one window's kept pairs, in streaming's order,
through the streaming fold (``FoldPlan``), so the accumulator slots are the ones ``weir run``
stores, byte for byte once packed.

Streaming's order: a window's records arrive in their split's order, each under its split's
watermark (non-decreasing along the split). The records that came while the window was open
(``end - 1 > watermark``) are folded first, then the ones behind the watermark but within
lateness, one by one (``WindowRuntime._apply_allowed``); sorted by ``(watermark, split,
position)`` that is one fold. Sliding windows run on panes (``operators/sliding.py``): a window is
composed, when it fires, from its panes' accumulators in pane order (the first copied, the
others merged into it), and the records within lateness are folded into it after that.
"""

from __future__ import annotations

from typing import Any

from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored.codec import uses_panes
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.windows import SlidingWindows


class WindowFolder:
    """The accumulator slots of one ``(key, window end)`` from its records."""

    def __init__(self, op: WindowNode) -> None:
        self.plan = FoldPlan(op.aggregates)
        assigner = op.assigner
        self.panes = (
            assigner if isinstance(assigner, SlidingWindows) and uses_panes(assigner) else None
        )

    def slots(
        self, key: str, end: int, ts: list[int], wms: list[int], recs: list[Any]
    ) -> list[Any]:
        """``recs`` in streaming's order, with their event times and watermarks."""
        bucket: dict[str, list[Any]] = {}
        if self.panes is None:
            self._fold(bucket, key, end, recs)
            return bucket[key]
        pane_end = self.panes.pane_end
        open_ = [i for i, w in enumerate(wms) if end - 1 > w]
        panes: dict[int, dict[str, list[Any]]] = {}
        for i in open_:  # each pane in arrival order
            p = pane_end(ts[i])
            self._fold(panes.setdefault(p, {}), key, p, [recs[i]])
        for p in sorted(panes):  # SlidingRuntime._compose
            have = bucket.get(key)
            if have is None:
                bucket[key] = self.plan.copy(panes[p][key])
            else:
                self.plan.merge_into(have, panes[p][key])
        allowed = [recs[i] for i, w in enumerate(wms) if end - 1 <= w]
        if allowed:  # WindowRuntime._apply_allowed
            self._fold(bucket, key, end, allowed)
        return bucket[key]

    def _fold(self, bucket: dict[str, list[Any]], key: str, end: int, recs: list[Any]) -> None:
        n = len(recs)
        # fields and expressions' values; stage 1 admitted the records (``Selector._admit``)
        cols = self.plan.columns(recs)
        if cols is None:
            raise AssertionError(f"a record of window {end} of key {key!r} cannot be folded")
        self.plan.fold({end: bucket}, {}, [key] * n, [end] * n, *cols, recs)
