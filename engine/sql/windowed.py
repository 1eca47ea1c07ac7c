"""The process functions of SQL's window joins, window Top-N / deduplication views and window
Top-N of window aggregates (``windowjoin.py`` and ``rownumber.py`` compile the queries): kept
apart from the parser, so a job's description (``weir explain``, the backfill's refusals)
knows these views without loading sqlglot.

Both buffer a key's rows per window of the view's window TVF (TUMBLE, HOP or CUMULATE) in the
value state ``windows`` (``[[start, end, rows…], …]`` sorted by end) and emit a window's result
once, final, when the watermark reaches its ``end - 1`` (a timer), as Flink's window join and
window rank operators do. Neither has an allowed lateness (Flink's have none): a record late for
every window holding it goes to the view's ``late`` output. After a window fires its result is
kept as the value state ``last`` (``{"window_start", "window_end", "rows"}``), so
``/{job}/{view}/state/{key}`` answers each key's result of its latest window, and its open
windows as they fill; the next window of the key replaces it, and the query retention
(``--state-retention-ms`` after the window's end, event time) forgets it, except once the input
has ended.
"""

from __future__ import annotations

from bisect import insort_right
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from weir.engine.joins.buffers import LATE, report_late
from weir.engine.sql.continuous import ContinuousAggregate
from weir.engine.sql.keys import composite_key
from weir.engine.sql.ranked import SORT, RankFunction, RankPlan
from weir.engine.watermarks import MAX_WATERMARK
from weir.engine.windows import MAX_TIME, CumulateWindows, SlidingWindows, TumblingWindows, is_late
from weir.state.keygroups import key_value

Fn = Callable[[Any], Any]
Assigner = TumblingWindows | SlidingWindows | CumulateWindows
WINDOWS, LAST = "windows", "last"
_end = itemgetter(1)

__all__ = [
    "LATE",
    "WindowAggregateRank",
    "WindowAggregateRankPlan",
    "WindowJoin",
    "WindowJoinPlan",
    "WindowRank",
    "WindowRankPlan",
    "window_views",
]


def _with_window(record: Any, start: int, end: int) -> dict[str, Any]:
    """A row of the window TVF: the record and its window's columns (Flink's TVF output)."""
    return {**record, "window_start": start, "window_end": end, "window_time": end - 1}


class _WindowBuffers:
    """The key's open windows in value state ``windows``: ``[start, end, *slots]`` entries,
    each slot a list (``grouped``: one dict of groups)."""

    def __init__(self, assigner: Assigner, grouped: tuple[bool, ...]) -> None:
        self.assigner = assigner
        self.grouped = grouped  # per slot: a dict of groups, else a list of rows

    def add(self, ctx: Any, put: Callable[[list[Any]], None]) -> bool:
        """``put`` the record into each of its windows that has not fired (created if new,
        its timer set); False when the record is late for every window holding it (a record
        in a HOP's gap, in no window, is not late: it is in nothing to join or rank)."""
        t = ctx.timestamp
        if t is None:  # a keyed function always has the record's event time
            raise ValueError("a windowed SQL view needs an event-time timestamp")
        found = self.assigner.assign(t)
        if not found:
            return True
        wm, state, entries = ctx.watermark, None, None
        for w in found if isinstance(found, list) else (found,):
            if is_late(w.end, 0, wm):
                continue
            if entries is None:
                state = ctx.value(WINDOWS)
                entries = state.get() or []
            put(self._entry(ctx, entries, w.start, w.end))
        if state is None:
            return False
        state.set(entries)
        return True

    def _entry(self, ctx: Any, entries: list[list[Any]], start: int, end: int) -> list[Any]:
        """The window ``[start, end)`` of ``entries`` (sorted by end), created (with its
        timer) if new."""
        for e in entries:
            if e[1] == end:
                return e
        entry = [start, end, *({} if g else [] for g in self.grouped)]
        insort_right(entries, entry, key=_end)
        ctx.register_event_time_timer(end - 1 if end < MAX_TIME else MAX_TIME)
        return entry

    @staticmethod
    def pop(ctx: Any, timestamp: int) -> list[Any] | None:
        """Remove the window that fires at ``timestamp``; it (``None``: no such window)."""
        end = timestamp + 1 if timestamp < MAX_TIME else MAX_TIME
        state = ctx.value(WINDOWS)
        entries: list[list[Any]] = state.get() or []
        found = next((e for e in entries if e[1] == end), None)
        if found is None:
            return None
        kept = [e for e in entries if e is not found]
        if kept:
            state.set(kept)
        else:
            state.clear()
        return found


def _keep_last(ctx: Any, start: int, end: int, rows: list[dict[str, Any]]) -> None:
    """Keep a fired window's rows as the key's ``last``, until a later window replaces them
    or the query retention after the window's end passes (a timer)."""
    ctx.value(LAST).set({"window_start": start, "window_end": end, "rows": rows})
    ctx.register_event_time_timer(_forget_at(ctx, end))


def _forget_at(ctx: Any, end: int) -> int:
    t = end - 1 + ctx.retention_ms
    return t if end < MAX_TIME and t < MAX_TIME else MAX_TIME


def _expire_last(ctx: Any, timestamp: int) -> None:
    """Forget the key's ``last`` when its retention ends at ``timestamp``; never once the
    input has ended (a finished job serves its last results, as its windows)."""
    state = ctx.value(LAST)
    last = state.get()
    if last is None or ctx.watermark == MAX_WATERMARK:
        return
    if _forget_at(ctx, last["window_end"]) == timestamp:
        state.clear()


@dataclass(frozen=True)
class WindowJoinPlan:
    """A window join view: both tables, their keys and filters, the window, the join's kind and
    the output columns, each a function of the pair's row (``side.column`` fields)."""

    name: str
    tables: tuple[str, str]
    keys: tuple[tuple[str, ...], tuple[str, ...]]
    filters: tuple[Fn | None, Fn | None]
    assigner: Assigner
    window_sql: str
    kind: str  # INNER, LEFT, RIGHT or FULL
    fields: tuple[tuple[str, int, str], ...]  # (pair-row field, side, column) the SELECT reads
    columns: tuple[tuple[str, Fn], ...]  # (output name, function of the pair row)
    sql: str
    sides: tuple[AggregateSide | None, AggregateSide | None] = (None, None)


@dataclass(frozen=True)
class AggregateSide:
    """A window join's side that is a window aggregate: its groups (``(column, field)``), its
    aggregates, and the steps before it (``WHERE``, derived fields)."""

    groups: tuple[tuple[str, str], ...]
    aggregates: dict[str, Any]
    where: Fn | None
    derived: dict[str, tuple[Fn, str]]

    def folder(self, name: str) -> ContinuousAggregate:
        """The fold of the side's aggregates."""
        return ContinuousAggregate(self.aggregates, {}, 0, "", name)


def _fold_into(
    groups: dict[str, list[Any]], fields: tuple[tuple[str, str], ...],
    folder: ContinuousAggregate, record: Any,
) -> None:  # fmt: skip
    """Fold ``record`` into its group (``[values, slots]``) of a window's ``groups``."""
    values = [record.get(f) for _, f in fields]
    group = composite_key(*values)
    held = groups.get(group)
    groups[group] = [values, folder.fold(held[1] if held else None, record)]


def _group_rows(
    groups: dict[str, list[Any]], fields: tuple[tuple[str, str], ...],
    folder: ContinuousAggregate, start: int, end: int,
) -> list[dict[str, Any]]:  # fmt: skip
    """A window's groups as the aggregate's rows: columns, window bounds, aggregates."""
    rows = []
    for values, slots in groups.values():
        row = dict(zip((c for c, _ in fields), values, strict=True))
        row.update(window_start=start, window_end=end, window_time=end - 1)
        row.update(folder.result(slots))
        rows.append(row)
    return rows


class WindowJoin:
    """A SQL window join: ``process1`` takes left rows, ``process2`` right ones (each kept in
    every open window holding it), ``on_timer`` fires a window: every left and right pair of
    the key, then (LEFT, RIGHT, FULL) each row of a side the other side left empty, padded with
    NULLs. Rows are ``{"op", "key", <SELECT columns>}``."""

    def __init__(self, plan: WindowJoinPlan) -> None:
        self.plan = plan
        grouped = tuple(a is not None for a in plan.sides)
        # left, right, then the NULL-keyed left and right rows (or groups)
        self._buffers = _WindowBuffers(plan.assigner, grouped * 2)
        self._folders = [None if a is None else a.folder(plan.name) for a in plan.sides]
        self._nulls = [{f: None for f, s, _ in plan.fields if s == side} for side in (0, 1)]
        self.__qualname__ = "WindowJoin"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the join."""
        return {
            "sql_view": f"{self.plan.kind} window join on {self.plan.window_sql}, emitted "
            "once per window when it fires (final, append-only); late rows to its late output"
        }

    def process1(self, event: Any, ctx: Any) -> None:
        """A left row: kept in each of its windows until they fire."""
        self._add(0, event, ctx)

    def process2(self, event: Any, ctx: Any) -> None:
        """A right row: kept in each of its windows until they fire."""
        self._add(1, event, ctx)

    def _add(self, side: int, event: Any, ctx: Any) -> None:
        # SQL's equality: a row with a NULL key column equals no row (an outer join keeps it)
        slot = 2 + side + (2 if any(event.get(k) is None for k in self.plan.keys[side]) else 0)
        folder, agg = self._folders[side], self.plan.sides[side]

        def put(entry: list[Any]) -> None:
            if folder is None or agg is None:
                entry[slot].append(event)
            else:
                _fold_into(entry[slot], agg.groups, folder, event)

        if not self._buffers.add(ctx, put):
            report_late(ctx, ("left", "right")[side], event)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        """The window firing at ``timestamp``: its pairs, padded rows, and the key's ``last``."""
        _expire_last(ctx, timestamp)
        entry = _WindowBuffers.pop(ctx, timestamp)
        if entry is None:
            return
        start, end, *sides = entry
        for i, slot in enumerate(sides):
            folder, agg = self._folders[i % 2], self.plan.sides[i % 2]
            if folder is not None and agg is not None:
                sides[i] = _group_rows(slot, agg.groups, folder, start, end)
        parts = [self._parts(i % 2, rows, start, end) for i, rows in enumerate(sides)]
        kind = self.plan.kind
        pairs = _pairs(kind, parts[0], parts[1])
        pairs += _pairs(kind, parts[2], []) + _pairs(kind, [], parts[3])
        head = {"op": self.plan.name, "key": key_value(ctx.key)}
        columns = self.plan.columns
        out = []
        for left, right in pairs:
            pair = {**(left or self._nulls[0]), **(right or self._nulls[1])}
            row = dict(head)
            row.update((name, fn(pair)) for name, fn in columns)
            out.append(row)
        if not out:
            return
        _keep_last(ctx, start, end, out)
        for row in out:
            ctx.emit(row)

    def _parts(self, side: int, rows: list[Any], start: int, end: int) -> list[dict[str, Any]]:
        """Each row's part of a pair row (its side's ``alias.column`` fields), once per row
        rather than once per pair."""
        fields = [(f, c) for f, s, c in self.plan.fields if s == side]
        window = {"window_start": start, "window_end": end, "window_time": end - 1}
        out = []
        for r in rows:
            out.append({f: window[c] if c in window else r.get(c) for f, c in fields})
        return out


def _pairs(kind: str, lefts: list[Any], rights: list[Any]) -> list[tuple[Any, Any]]:
    """The window's pairs: every left with every right; with an empty side, the other side's
    rows alone when the join keeps them (LEFT keeps lefts, RIGHT rights, FULL both)."""
    if lefts and rights:
        return [(left, right) for left in lefts for right in rights]
    if lefts and kind in ("LEFT", "FULL"):
        return [(left, None) for left in lefts]
    if rights and kind in ("RIGHT", "FULL"):
        return [(None, right) for right in rights]
    return []


@dataclass(frozen=True)
class WindowRankPlan:
    """A window Top-N or deduplication view: a ranking (``RankPlan``: partition, order, N,
    shown columns) per window of ``assigner``."""

    rank: RankPlan
    assigner: Assigner
    window_sql: str


class WindowRank:
    """A SQL window Top-N or deduplication: each key's (``PARTITION BY`` columns but the
    window's) best ``N`` rows of each window, kept as ``RankFunction`` ranks them (ties in
    arrival order; a keep-last deduplication lets an equally late row replace the kept one),
    emitted when the window fires: ``{"op", "key", <columns>, rn}`` from rank 1, final."""

    def __init__(self, plan: WindowRankPlan) -> None:
        self.plan = plan
        self._ranker = RankFunction(plan.rank)
        self._buffers = _WindowBuffers(plan.assigner, (False,))
        self.__qualname__ = "WindowRank"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the view."""
        shown = self._ranker.describe_function()["sql_view"].split(";")[0]
        return {
            "sql_view": f"window {shown.removeprefix('ROW_NUMBER() ')} on "
            f"{self.plan.window_sql}; emitted once per window when it fires (final)"
        }

    def process(self, record: Any, ctx: Any) -> None:
        """Rank ``record`` in each of its open windows."""
        if not self._buffers.add(ctx, lambda entry: self._rank(entry, record)):
            report_late(ctx, "input", record)

    def _rank(self, entry: list[Any], record: Any) -> None:
        rows: list[dict[str, Any]] = entry[2]
        row = self._ranker.row(_with_window(record, entry[0], entry[1]))
        at = self._ranker.position(rows, row)
        if at < self.plan.rank.n:
            rows.insert(at, row)
            del rows[self.plan.rank.n :]

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        """The window firing at ``timestamp``: its ranking, from rank 1."""
        _expire_last(ctx, timestamp)
        entry = _WindowBuffers.pop(ctx, timestamp)
        if entry is None:
            return
        _emit_ranking(self.plan.rank, ctx, entry[0], entry[1], entry[2])


def _emit_ranking(
    plan: RankPlan, ctx: Any, start: int, end: int, rows: list[dict[str, Any]]
) -> None:
    """Emit a window's ranked rows from rank 1 and keep them as the key's ``last``."""
    out = []
    for i, row in enumerate(rows, start=1):
        shown: dict[str, Any] = {"op": plan.name, "key": key_value(ctx.key)}
        shown.update((k, v) for k, v in row.items() if k != SORT)
        if plan.rn is not None:
            shown[plan.rn] = i
        out.append(shown)
    _keep_last(ctx, start, end, out)
    for row in out:
        ctx.emit(row)


@dataclass(frozen=True)
class WindowAggregateRankPlan:
    """A window Top-N of a window aggregate: the aggregate's groups (``(column, field)``) and
    aggregates per window of ``assigner``, ranked per partition (``rank.partition`` are
    record fields) when the window fires."""

    rank: RankPlan
    assigner: Assigner
    window_sql: str
    groups: tuple[tuple[str, str], ...]
    aggregates: dict[str, Any]
    where: Fn | None
    where_sql: str | None
    derived: dict[str, tuple[Fn, str]]


class WindowAggregateRank:
    """Flink's window Top-N over a window aggregate, fused in one keyed function (a result
    stream feeds no other operator): each key (partition) folds its rows into its groups'
    accumulators per window (state ``windows``: ``[start, end, {group: [values, slots]}]``);
    when the window fires the groups' rows are ranked (ties: the group seen first) and the
    best N emitted as ``WindowRank`` emits them."""

    def __init__(self, plan: WindowAggregateRankPlan) -> None:
        self.plan = plan
        self._ranker = RankFunction(plan.rank)
        self._folder = ContinuousAggregate(plan.aggregates, {}, 0, "", plan.rank.name)
        self._buffers = _WindowBuffers(plan.assigner, (True,))
        self.__qualname__ = "WindowAggregateRank"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the view."""
        shown = self._ranker.describe_function()["sql_view"].split(";")[0]
        groups = ", ".join(c for c, _ in self.plan.groups) or "nothing"
        return {
            "sql_view": f"window {shown.removeprefix('ROW_NUMBER() ')} of the window aggregate "
            f"grouped by {groups} on {self.plan.window_sql}; emitted once per window (final)"
        }

    def process(self, record: Any, ctx: Any) -> None:
        """Fold ``record`` into its group of each of its open windows."""

        def put(entry: list[Any]) -> None:
            _fold_into(entry[2], self.plan.groups, self._folder, record)

        if not self._buffers.add(ctx, put):
            report_late(ctx, "input", record)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        """The window firing at ``timestamp``: its groups' rows, ranked, the best N."""
        _expire_last(ctx, timestamp)
        entry = _WindowBuffers.pop(ctx, timestamp)
        if entry is None:
            return
        start, end, groups = entry
        n, ranked = self.plan.rank.n, list[dict[str, Any]]()
        for row in _group_rows(groups, self.plan.groups, self._folder, start, end):
            kept = self._ranker.row(row)
            at = self._ranker.position(ranked, kept)
            if at < n:
                ranked.insert(at, kept)
                del ranked[n:]
        _emit_ranking(self.plan.rank, ctx, start, end, ranked)


def window_views(operators: Any) -> list[tuple[str, str]]:
    """The SQL window joins and window Top-N views among ``operators`` (a job's, by name),
    ``(name, kind)``."""
    from weir.engine.nodes import ProcessNode

    found = []
    for name, op in operators.items():
        fn = op.function if isinstance(op, ProcessNode) else None
        if isinstance(fn, WindowJoin):
            found.append((name, "window join (JOIN of two window TVFs)"))
        elif isinstance(fn, WindowRank | WindowAggregateRank):
            found.append((name, "window Top-N or deduplication (ROW_NUMBER() over a window TVF)"))
    return found
