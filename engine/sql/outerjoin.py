"""LEFT, RIGHT and FULL OUTER interval joins in SQL (Flink's ``TimeIntervalJoin`` for outer
joins, with the pairing rules of the job API's interval join, ``engine/joins/interval.py``):

    SELECT i.id, i.ts AS shown_at, c.ts AS clicked_at
    FROM impressions AS i LEFT JOIN clicks AS c
      ON i.id = c.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' SECOND

- every pair of one key with ``right.ts - left.ts`` within the bounds is emitted when its
  second record arrives, as in the inner join;
- a record of an outer side that joined nothing is emitted once, padded with NULLs for the
  other side's columns, when the watermark reaches its cleanup time (left: ``ts + max(upper,
  0)``, right: ``ts - min(lower, 0)``): from then on no on-time record of the other side can
  join it (Flink emits the padding when the row leaves its state, the same moment);
- a record behind the watermark it arrives under (``ts < watermark``) is late: it goes to the
  ``late`` side output and joins nothing, as in weir's inner join (Flink's SQL operator would
  join it with what it still holds; weir never guesses with a partial buffer).

Each buffer entry is ``[ts, record, joined]``, kept in the value state named after its side
(``left``, ``right``), so the "joined" flags are checkpointed with the records: a restore
neither pads a row twice nor forgets one. One event-time timer per distinct cleanup time and
key, so the padding is emitted exactly when the watermark reaches it.
"""

from __future__ import annotations

from bisect import bisect_right, insort_right
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from weir.engine.joins.buffers import (
    LATE,
    LEFT,
    RIGHT,
    JoinContext,
    between,
    entries_of,
    report_late,
    timestamp_of,
)
from weir.engine.nodes import ProcessNode
from weir.engine.sql.sqljoin import JoinPlan
from weir.engine.windows import MAX_TIME
from weir.state.keygroups import key_value

if TYPE_CHECKING:
    from weir.engine.results import ResultStream

_ts = itemgetter(0)
_SIDE_NAMES = (LEFT, RIGHT)


class OuterIntervalJoin:
    """A keyed co-process function: ``process1`` takes left records, ``process2`` right ones,
    ``on_timer`` drops what can no longer join and pads the outer side's unjoined rows.

    Args:
        plan: the join view's plan; ``plan.outer`` says which sides are padded.
    """

    def __init__(self, plan: JoinPlan) -> None:
        self.lower = plan.lower if plan.lower_inclusive else plan.lower + 1
        self.upper = plan.upper if plan.upper_inclusive else plan.upper - 1
        self._keep = (max(self.upper, 0), max(-self.lower, 0))  # cleanup offsets per side
        self._outer = plan.outer
        self._kind = plan.kind
        self._columns = plan.columns
        self._op = plan.name  # every result record names its operator (decision 0012)
        self._residual = plan.residual
        self._keys = plan.keys
        self.__qualname__ = (
            f"{plan.kind} OUTER interval join, right.ts - left.ts in [{self.lower}, "
            f"{self.upper}] ms"
        )

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the join (JSON): its kind and inclusive bounds."""
        return {"join": f"{self._kind} OUTER interval", "bounds_ms": [self.lower, self.upper]}

    def process1(self, event: Any, ctx: JoinContext) -> None:
        """A left record: joined with the right records in its interval, then buffered."""
        t = timestamp_of(ctx)
        lo = max(t + self.lower, _oldest_kept(ctx.watermark, self._keep[1]))
        self._arrive(0, event, ctx, lo, t + self.upper)

    def process2(self, event: Any, ctx: JoinContext) -> None:
        """A right record: joined with the left records in its interval, then buffered."""
        t = timestamp_of(ctx)
        lo = max(t - self.upper, _oldest_kept(ctx.watermark, self._keep[0]))
        self._arrive(1, event, ctx, lo, t - self.lower)

    def _arrive(self, side: int, event: Any, ctx: JoinContext, lo: int, hi: int) -> None:
        t = timestamp_of(ctx)
        if t < ctx.watermark:
            report_late(ctx, _SIDE_NAMES[side], event)
            return
        other = _SIDE_NAMES[1 - side]
        partners = between(entries_of(ctx, other), lo, hi)
        if any(event.get(k) is None for k in self._keys[side]):
            partners = []  # SQL's NULL = NULL is not TRUE: a NULL key joins nothing
        if self._residual is not None:
            test = self._residual
            partners = [
                e for e in partners if (test(event, e[1]) if side == 0 else test(e[1], event))
            ]
        if partners and self._outer[1 - side]:
            for entry in partners:
                entry[2] = True
            ctx.value(other).set(entries_of(ctx, other))  # the flags change the stored buffer
        state = ctx.value(_SIDE_NAMES[side])
        entries: list[list[Any]] = state.get() or []
        insort_right(entries, [t, event, bool(partners)], key=_ts)
        state.set(entries)
        ctx.register_event_time_timer(min(t + self._keep[side], MAX_TIME))
        for entry in partners:
            pair = (event, entry[1]) if side == 0 else (entry[1], event)
            self._emit(ctx, pair[0], pair[1])

    def on_timer(self, timestamp: int, ctx: JoinContext) -> None:
        """Drop every entry whose cleanup time has come, on both sides; an outer side's
        entries that never joined are emitted padded with NULLs first."""
        for side in (0, 1):
            state = ctx.value(_SIDE_NAMES[side])
            entries: list[list[Any]] | None = state.get()
            if not entries:
                continue
            cut = bisect_right(entries, _oldest_kept(timestamp, self._keep[side]) - 1, key=_ts)
            if not cut:
                continue
            gone = entries[:cut]
            del entries[:cut]
            if entries:
                state.set(entries)
            else:
                state.clear()
            if self._outer[side]:
                for _, record, joined in gone:
                    if not joined:
                        pair = (record, None) if side == 0 else (None, record)
                        self._emit(ctx, pair[0], pair[1])

    def _emit(self, ctx: JoinContext, left: Any, right: Any) -> None:
        sides = (left, right)
        ctx.emit(
            {
                "op": self._op,
                "key": key_value(ctx.key),
                **{n: None if sides[s] is None else sides[s].get(f) for n, s, f in self._columns},
            }
        )


def _oldest_kept(watermark: int, offset: int) -> int:
    """The oldest timestamp whose cleanup time ``min(ts + offset, MAX_TIME)`` the watermark
    has not reached; once the watermark is ``MAX_TIME``, none (every entry is due)."""
    return watermark - offset + 1 if watermark < MAX_TIME else MAX_TIME + 1


def with_late_output(result: ResultStream) -> ResultStream:
    """Declare a SQL join's ``late`` output, so its late records reach a sink (by default the
    job's ``side-<name>-late.jsonl``) as the job API's joins declare theirs."""
    op = result.operator
    if isinstance(op, ProcessNode):  # always: connect makes a co-process operator
        op.side_outputs.setdefault(LATE.name, [])
    return result
