"""Event-time temporal joins in SQL (Flink's ``TemporalRowTimeJoinOperator``):

    SELECT o.id, o.amount, r.rate
    FROM orders AS o
    [LEFT] JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r
      ON o.currency = r.currency

``rates`` is a versioned table: a table with a PRIMARY KEY and an event-time attribute, each of
its rows a new version of its key's row, valid from its timestamp until the next version's.
Each probe row (``orders``) joins the version of its key valid at its own time: the one with
the largest timestamp ``<= o.ts`` (of equal timestamps, the last to arrive).

- A probe row at ``t`` is buffered and joined once the watermark reaches ``t`` (an event-time
  timer at ``t``): by then every version at or before ``t`` that is on time has arrived. With
  none valid at ``t``, an INNER join emits nothing and a LEFT join the probe row padded with
  NULLs.
- A probe row at or behind the watermark it arrives under (``t <= watermark``, its moment has
  been joined already) is late: it goes to the ``late`` output and joins nothing.
- A version is never late (Flink's rule): one behind the watermark still becomes its key's
  newest version for the probe rows after it, if it is newer than the one kept.
- Versions nobody can need go when the watermark passes them: of the versions at or before the
  watermark only the newest stays (the one valid for every later probe row), so a key keeps one
  version plus those ahead of the watermark.

Both buffers are keyed state (value states ``left``, the waiting probe rows, and ``right``, the
versions, each ``[timestamp, record]`` entries sorted by time), so they are checkpointed,
rescaled by key groups and served at ``/{job}/{view}/state/{key}``.

``ON`` equates the versioned table's whole primary key with probe columns; its other terms
are the join's condition, on the probe row and the version valid at its time (Flink's: a
version failing it is no partner, so a LEFT join pads the row). ``WHERE`` terms of the probe
table alone filter it before the join; the others filter the joined rows (a term on the
versioned table does not pick another version: ``WHERE r.rate < 115`` drops an order whose
valid rate is 118, Flink's ``testEventTimeTemporalJoinWithFilter``). A NULL key joins nothing.

Refused by name: a processing-time form (``AS OF`` anything but the probe table's time
attribute, e.g. ``PROCTIME()``: a lookup join), RIGHT and FULL temporal joins, an ON that does
not equate the versioned table's primary key, a versioned table without a PRIMARY KEY.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlglot import exp

from weir.engine.joins.buffers import (
    LEFT,
    RIGHT,
    JoinContext,
    entries_of,
    insert,
    report_late,
    timestamp_of,
)
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.query import TableDef
from weir.engine.sql.residual import PairPredicate, pair_condition
from weir.engine.sql.scalar import Compiler, Fn
from weir.engine.sql.sqljoin import JoinSides, conjuncts, join_columns
from weir.state.keygroups import key_value

_ts = itemgetter(0)
PROBE, VERSIONED = 0, 1


@dataclass(frozen=True)
class TemporalPlan:
    """A temporal join view: the probe and the versioned table, their keys (the versioned
    table's primary key and the probe's columns equated with it), filters and output."""

    name: str
    tables: tuple[str, str]  # probe, versioned
    keys: tuple[tuple[str, ...], tuple[str, ...]]
    probe_filter: Fn | None  # the WHERE terms of the probe table alone, before the join
    columns: tuple[tuple[str, int, str], ...]  # (output name, side, field)
    kind: str  # INNER or LEFT
    condition: PairPredicate | None = None  # the other ON terms: the version joins if TRUE
    after: PairPredicate | None = None  # the other WHERE terms, over each joined row
    lookup: bool = False  # AS OF processing time: the current row (``lookup.py``)


def is_temporal(statement: exp.Expr) -> bool:
    """Does ``statement`` join a table ``FOR SYSTEM_TIME AS OF`` a time?"""
    if not isinstance(statement, exp.Select):
        return False
    return any(
        isinstance(j.this, exp.Table) and j.this.args.get("version") is not None
        for j in statement.args.get("joins") or []
    )


def plan_temporal(
    statement: exp.Expr,
    name: str,
    tables: Mapping[str, TableDef],
) -> TemporalPlan:
    """The plan of the temporal join view ``name`` (the versioned table declares its primary
    key in its ``TableDef``).

    Raises:
        SqlUnsupported: a form weir does not run, named.
        SqlError: an unknown table or column, or no primary key.
    """
    if not isinstance(statement, exp.Select):
        raise SqlError(f"view {name!r}: a temporal join is a SELECT")
    sides = JoinSides(statement, tables, temporal=True)
    if sides.kind not in ("INNER", "LEFT"):
        raise SqlUnsupported(
            f"{sides.kind} JOIN … FOR SYSTEM_TIME AS OF: a temporal join is INNER or LEFT "
            "(Flink's too): the probe table is on the left"
        )
    for arg in ("group", "having", "order", "limit", "distinct", "with_"):
        if statement.args.get(arg):
            raise SqlUnsupported(f"{arg.upper().rstrip('_')} in a join view: it emits each row")
    lookup = _is_lookup(sides)
    versioned = sides.defs[VERSIONED].name
    pk = _primary_key(versioned, sides.defs[VERSIONED].primary_key)
    keys, others = _on(sides, sides.join.args.get("on"), pk)
    if sorted(keys[VERSIONED]) != sorted(pk):
        raise SqlUnsupported(
            f"temporal join ON {', '.join(keys[VERSIONED]) or 'nothing'} of {versioned!r}: ON "
            f"equates its whole primary key ({', '.join(pk)}) with the probe's columns"
        )
    where = statement.args.get("where")
    before: list[exp.Expr] = []
    after: list[exp.Expr] = []
    for term in conjuncts(where.this) if where is not None else []:
        probe_only = {sides.side(c) for c in term.find_all(exp.Column)} <= {PROBE}
        (before if probe_only else after).append(term)
    compiler = Compiler(sides.field)
    tests = [compiler.predicate(t) for t in before]
    return TemporalPlan(
        name=name,
        tables=(sides.defs[PROBE].name, versioned),
        keys=keys,
        probe_filter=(lambda r: all(t(r) for t in tests)) if tests else None,
        columns=join_columns(statement, sides),
        kind=sides.kind,
        condition=pair_condition(others, sides.side, sides.field),
        after=pair_condition(after, sides.side, sides.field),
        lookup=lookup,
    )


def _is_lookup(sides: JoinSides) -> bool:
    """``AS OF`` the probe's time attribute: an event-time temporal join (False); ``AS OF``
    ``PROCTIME()`` or the probe's processing-time attribute: a lookup join (True)."""
    at = sides.join.this.args["version"].expression
    probe = sides.defs[PROBE]
    if isinstance(at, exp.Anonymous) and at.name.upper() == "PROCTIME" and not at.expressions:
        return True
    if isinstance(at, exp.Column) and at.table and sides.side(at) == PROBE:
        if at.name == probe.time_column:
            return False
        if at.name == probe.proctime:
            return True
    raise SqlUnsupported(
        f"FOR SYSTEM_TIME AS OF {at.sql(WeirFlink)}: a temporal join is AS OF the probe "
        f"table's time attribute (o.{probe.time_column}: the version valid then), a lookup "
        "join AS OF its processing time (PROCTIME(), or a column declared AS PROCTIME(): the "
        "current row)"
    )


def _on(
    sides: JoinSides, on: exp.Expr | None, pk: tuple[str, ...]
) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], list[exp.Expr]]:
    """The key columns of both sides (the equalities of the primary key's columns with the
    probe's), and the other ON terms (the join's condition on the probe row and its version:
    an equality of another column too, Flink's ``…JoinkeyContainsPk``)."""
    if on is None:
        raise SqlUnsupported(
            "a temporal join without ON: equate the versioned table's primary key "
            "(ON o.currency = r.currency)"
        )
    keys: tuple[list[str], list[str]] = ([], [])
    others: list[exp.Expr] = []
    for term in conjuncts(on):
        a, b = term.this, term.expression
        if (
            isinstance(term, exp.EQ)
            and isinstance(a, exp.Column)
            and isinstance(b, exp.Column)
            and {sides.side(a), sides.side(b)} == {PROBE, VERSIONED}
            and (a if sides.side(a) == VERSIONED else b).name in pk
        ):
            pair = (a, b) if sides.side(a) == PROBE else (b, a)
            keys[PROBE].append(sides.field(pair[0]))
            keys[VERSIONED].append(sides.field(pair[1]))
        else:
            others.append(term)
    return (tuple(keys[PROBE]), tuple(keys[VERSIONED])), others


def _primary_key(table: str, declared: tuple[str, ...] | None) -> tuple[str, ...]:
    if declared is None:
        raise SqlError(
            f"FOR SYSTEM_TIME AS OF: table {table!r} has no PRIMARY KEY, and a versioned table "
            f"keeps one row per key: declare it (PRIMARY KEY (k) NOT ENFORCED in CREATE TABLE; "
            f"job.sql(…, primary_keys={{{table!r}: ('k',)}}) in Python)"
        )
    return declared


class VersionJoin:
    """What a temporal and a lookup join do with a probe row and the version it meets (None:
    none): a NULL key or a version failing the ON condition is no partner; an INNER join then
    emits nothing, a LEFT join the row padded with NULLs; ``WHERE``'s other terms filter last.

    Args:
        plan: the view's plan (its columns, kind, conditions and keys).
        label: what ``weir explain`` calls the join.
    """

    def __init__(self, plan: TemporalPlan, label: str) -> None:
        self.__qualname__ = self._label = label  # what ``weir explain`` calls the function
        self._columns = plan.columns
        self._op = plan.name  # every result record names its operator (decision 0012)
        self._left = plan.kind == "LEFT"
        self._kind = plan.kind
        self._condition = plan.condition
        self._after = plan.after
        self._probe_key = plan.keys[PROBE]
        self._versioned = (plan.tables[VERSIONED], plan.keys[VERSIONED])

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the join (JSON): its kind and versioned table."""
        table, key = self._versioned
        return {"join": self._label, "versioned": table, "primary_key": list(key)}

    def join(self, ctx: JoinContext, record: Any, version: Any) -> None:
        """Emit what ``record`` and ``version`` make, if anything."""
        if any(record.get(k) is None for k in self._probe_key):
            version = None  # SQL's NULL = NULL is not TRUE: a NULL key joins nothing
        if version is not None and self._condition and not self._condition(record, version):
            version = None  # the version fails the condition: no partner
        if version is None and not self._left:
            return
        if self._after is not None and not self._after(record, version):
            return
        sides = (record, version)
        ctx.emit(
            {
                "op": self._op,
                "key": key_value(ctx.key),
                **{n: None if sides[s] is None else sides[s].get(f) for n, s, f in self._columns},
            }
        )


class TemporalJoin(VersionJoin):
    """The temporal join as a keyed co-process function: ``process1`` takes probe rows,
    ``process2`` versions, ``on_timer`` joins the probe rows the watermark has reached.

    Args:
        plan: the view's plan (its columns and kind).
    """

    def __init__(self, plan: TemporalPlan) -> None:
        super().__init__(
            plan,
            f"{plan.kind} temporal join FOR SYSTEM_TIME AS OF the probe's time, versions of "
            f"{plan.tables[VERSIONED]} by {', '.join(plan.keys[VERSIONED])}",
        )

    def process1(self, event: Any, ctx: JoinContext) -> None:
        """A probe row: buffered until the watermark reaches its time."""
        t = timestamp_of(ctx)
        if t <= ctx.watermark:
            report_late(ctx, LEFT, event)
            return
        insert(ctx, LEFT, t, event)
        ctx.register_event_time_timer(t)

    def process2(self, event: Any, ctx: JoinContext) -> None:
        """A version: kept; a timer at its time drops the versions it supersedes."""
        t = timestamp_of(ctx)
        insert(ctx, RIGHT, t, event)
        ctx.register_event_time_timer(t)  # behind the watermark: fires at its next advance

    def on_timer(self, timestamp: int, ctx: JoinContext) -> None:
        """Join the probe rows at or before ``timestamp`` with the version valid at each
        one's time, then keep only the newest version at or before ``timestamp``."""
        probes, versions = entries_of(ctx, LEFT), entries_of(ctx, RIGHT)
        due = bisect_right(probes, timestamp, key=_ts)
        for t, record in probes[:due]:
            at = bisect_right(versions, t, key=_ts) - 1
            self.join(ctx, record, versions[at][1] if at >= 0 else None)
        if due:
            del probes[:due]
            _store(ctx, LEFT, probes)
        stale = bisect_right(versions, timestamp, key=_ts) - 1
        if stale > 0:
            del versions[:stale]
            _store(ctx, RIGHT, versions)


def _store(ctx: JoinContext, side: str, entries: list[list[Any]]) -> None:
    if entries:
        ctx.value(side).set(entries)
    else:
        ctx.value(side).clear()
