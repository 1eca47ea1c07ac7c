"""The job API's windowed stream (``KeyedStream.window``): a trigger, an evictor, then
``aggregate`` records the window operator's node (``weir.engine.job``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.base.errors import JobDefinitionError
from weir.engine import agg as _agg
from weir.engine import triggers as _triggers
from weir.engine.nodes import RESERVED_FIELDS, KeyByNode, WindowCall, WindowNode, _check_name
from weir.engine.results import ResultStream
from weir.engine.windows import (
    CountWindows,
    CumulateWindows,
    GlobalWindows,
    SessionWindows,
)

if TYPE_CHECKING:
    from weir.engine import evictors as _evictors
    from weir.engine.job import Job


class WindowedStream:
    """A keyed stream with a window assigner (``KeyedStream.window``): give it a trigger or
    an evictor if the defaults do not fit, then ``aggregate`` it into a named operator."""

    def __init__(
        self, job: Job, node: KeyByNode, call: WindowCall, allowed_lateness_ms: int
    ) -> None:
        self._job = job
        self._node = node
        self._call = call
        assigner = self._assigner = call.assigner
        self._lateness = allowed_lateness_ms
        self._trigger: _triggers.Trigger | None = None
        self._evictor: _evictors.Evictor | None = None
        if isinstance(assigner, CountWindows):  # Flink's countWindow(n[, m])
            if assigner.slide is None:
                self._trigger = _triggers.purging(_triggers.count(assigner.size))
            else:
                from weir.engine.evictors import count  # loaded by the jobs that evict

                self._trigger = _triggers.count(assigner.slide)
                self._evictor = count(assigner.size)
        elif isinstance(assigner, GlobalWindows):
            self._trigger = _triggers.never()

    def aggregate(self, name: str, **aggregates: object) -> ResultStream:
        """A named, queryable window aggregation; each keyword is one result field."""
        _check_name("operator", name)
        if not aggregates:
            raise JobDefinitionError(
                f"aggregate({name!r}) has no aggregates; add e.g. count=agg.count()"
            )
        clash = sorted(RESERVED_FIELDS & aggregates.keys())
        if clash:
            raise JobDefinitionError(
                f"aggregate({name!r}): field name(s) {', '.join(clash)} are reserved for the "
                "result record; rename them"
            )
        try:
            built = {n: _agg.as_aggregate(a, n) for n, a in aggregates.items()}
        except (TypeError, ValueError) as exc:
            raise JobDefinitionError(f"aggregate({name!r}): {exc}") from None
        op = WindowNode(
            name, self._node.key, self._assigner, self._lateness, built,
            trigger=self._trigger, evictor=self._evictor,
        )  # fmt: skip
        self._job._register(op)
        self._node.children.append(op)
        self._call.aggregated = True
        return ResultStream(op)

    def trigger(self, trigger: _triggers.Trigger) -> WindowedStream:
        """When the window fires (emits its aggregate) and purges, instead of the assigner's
        default (Flink's ``WindowedStream.trigger``); see ``weir.triggers``. On session windows
        the trigger must merge (every one of ``weir.triggers`` does)."""
        if not isinstance(trigger, _triggers.Trigger):
            raise JobDefinitionError(
                f"trigger({trigger!r}): pass a trigger from weir.triggers, e.g. "
                "triggers.count(100) or triggers.purging(triggers.count(100))"
            )
        self._check_triggerable("trigger")
        self._check_mergeable(trigger)
        self._trigger = trigger
        return self

    def evictor(self, evictor: _evictors.Evictor) -> WindowedStream:
        """Which records the aggregate sees, removed before (or after) it runs (Flink's
        ``WindowedStream.evictor``); see ``weir.evictors``. The window then keeps its records
        (a merged session: its parts' records, by time)."""
        from weir.engine.evictors import Evictor  # loaded by the jobs that evict

        if not isinstance(evictor, Evictor):
            raise JobDefinitionError(
                f"evictor({evictor!r}): pass an evictor from weir.evictors, e.g. "
                "evictors.count(100) or evictors.time(10_000)"
            )
        self._check_triggerable("evictor")
        self._evictor = evictor
        return self

    def _check_triggerable(self, what: str) -> None:
        """Cumulating windows keep their own firing rule here."""
        if isinstance(self._assigner, CumulateWindows):
            raise JobDefinitionError(
                f"{what}(...) on cumulate windows is not supported; use it on tumbling, "
                "sliding, session, count or global windows (windows.global_windows() with a "
                "trigger covers most custom firing rules)"
            )

    def _check_mergeable(self, trigger: _triggers.Trigger) -> None:
        """Session windows merge, and so must their trigger's state (Flink fails a job whose
        trigger's ``canMerge()`` is false on a merging assigner)."""
        if isinstance(self._assigner, SessionWindows) and not _triggers.can_merge(trigger):
            raise JobDefinitionError(
                f"trigger({trigger.describe()}) cannot merge, and session windows merge; use a "
                "trigger that merges (event_time, processing_time, count, continuous_*, "
                "purging of one of those, never) or a tumbling/global window"
            )
