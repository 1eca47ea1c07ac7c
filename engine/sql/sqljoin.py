"""Interval joins in SQL, compiled onto the job API's interval join (``engine/joins``):

    SELECT i.id, i.ts AS shown_at, c.ts AS clicked_at
    FROM impressions AS i JOIN clicks AS c
      ON i.id = c.id
     AND c.ts BETWEEN i.ts - INTERVAL '1' SECOND AND i.ts + INTERVAL '5' SECOND

The equality terms of ``ON`` are the key of both sides (several: their composite key, as a
``GROUP BY``); the time term bounds ``right.ts - left.ts`` (``BETWEEN``, or a pair of ``>=``/``<=``
or ``>``/``<`` comparisons, a strict one excluding its bound), on the tables' time attributes.
A ``WHERE`` term that names one side filters that side before the join (what Flink's planner
pushes down; an inner join's result is the same). Each pair emits ``{"op", "key", <SELECT
columns>}`` (``op`` the view's name, as on every result record), the columns qualified by their
table (``i.id``), named by their alias or column name; late
records go to the join's ``late`` output, as the job API's interval join sends them.

Other ``ON`` terms are the join's residual condition on each pair (``residual.py``).
``LEFT``/``RIGHT``/``FULL`` interval joins pad the rows that joined nothing (``outerjoin.py``);
temporal joins (``FOR SYSTEM_TIME AS OF``) are planned by ``temporal.py`` over the same sides.

Without a time term the join is a regular inner join (``RegularJoin``, a keyed co-process
function), run only with a state TTL. Refused by name: other join kinds, a regular join without
a TTL or an outer one. A join of window TVFs is a window join (``windowjoin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.query import TableDef
from weir.engine.sql.residual import PairPredicate, pair_condition
from weir.engine.sql.scalar import Compiler, Fn
from weir.engine.sql.windowing import interval_ms
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.keygroups import key_value

LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class JoinPlan:
    """An interval join view: both tables, their keys and filters, the bounds and the output."""

    name: str
    tables: tuple[str, str]
    keys: tuple[tuple[str, ...], tuple[str, ...]]
    filters: tuple[Fn | None, Fn | None]
    lower: int
    upper: int
    lower_inclusive: bool
    upper_inclusive: bool
    columns: tuple[tuple[str, int, str], ...]  # (output name, side, field)
    bounded: bool = True  # False: a regular join, kept by its state TTL
    kind: str = "INNER"  # or LEFT, RIGHT, FULL (outer interval joins, ``outerjoin.py``)
    residual: PairPredicate | None = None  # the other ON terms, a condition of each pair

    @property
    def outer(self) -> tuple[bool, bool]:
        """Which sides an unjoined row is emitted from, padded with NULLs."""
        return (self.kind in ("LEFT", "FULL"), self.kind in ("RIGHT", "FULL"))


def is_join(statement: exp.Expr) -> bool:
    """Does ``statement`` join two tables?"""
    return isinstance(statement, exp.Select) and bool(statement.args.get("joins"))


class _Sides:
    """The two tables of a join by their names and aliases."""

    def __init__(
        self, select: exp.Select, tables: Mapping[str, TableDef], temporal: bool = False
    ) -> None:
        joins = select.args["joins"]
        if len(joins) != 1:
            raise SqlUnsupported("a SQL join joins two tables; join a third in another view")
        self.join: exp.Join = joins[0]
        self.kind = self._kind(self.join, temporal)
        source = select.args.get("from_")
        items = [source.this if source is not None else None, self.join.this]
        self.defs: list[TableDef] = []
        self.names: list[set[str]] = []
        for item in items:
            if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
                raise SqlUnsupported(
                    f"JOIN over {item.sql(WeirFlink)[:60] if item else 'nothing'}: an interval "
                    "join reads two tables by name (a window join, two window TVFs)"
                )
            if item.name not in tables:
                raise SqlError(f"unknown table {item.name!r}; tables: {', '.join(sorted(tables))}")
            self.defs.append(tables[item.name])
            self.names.append({item.name, item.alias} if item.alias else {item.name})

    @staticmethod
    def _kind(join: exp.Join, temporal: bool) -> str:
        side, kind = join.args.get("side"), join.args.get("kind")
        kind = str(kind).upper() if kind else None
        if kind not in (None, "INNER", "OUTER") or (kind == "INNER" and side):
            raise SqlUnsupported(
                f"{' '.join(str(x) for x in (side, kind) if x).upper()} JOIN: weir's SQL runs "
                "INNER, LEFT, RIGHT and FULL [OUTER] joins"
            )
        if not temporal and (
            join.this.args.get("version") is not None
            or "FOR SYSTEM_TIME" in join.sql(WeirFlink).upper()
        ):
            raise SqlUnsupported(
                "FOR SYSTEM_TIME AS OF: temporal and lookup joins are not supported; join "
                "two streams by key and an interval, or use broadcast state in the job API"
            )
        return str(side).upper() if side else "INNER"

    def side(self, col: exp.Column) -> int:
        if not col.table:
            raise SqlError(
                f"column {col.name!r} in a join: qualify it with its table (t.{col.name})"
            )
        for i, names in enumerate(self.names):
            if col.table in names:
                return i
        raise SqlError(f"column {col.sql(WeirFlink)} names a table the join does not read")

    def field(self, col: exp.Column) -> str:
        columns = self.defs[self.side(col)].columns
        if columns is not None and col.name not in columns:
            raise SqlError(
                f"unknown column {col.sql(WeirFlink)}; its table has {', '.join(columns)}"
            )
        return col.name


def plan_join(statement: exp.Expr, name: str, tables: Mapping[str, TableDef]) -> JoinPlan:
    """The plan of an interval join view ``name``."""
    if not isinstance(statement, exp.Select):
        raise SqlError(f"view {name!r}: a join is a SELECT")
    sides = _Sides(statement, tables)  # first: a join of window TVFs is named as such
    for arg in ("group", "having", "order", "limit", "distinct", "with_"):
        if statement.args.get(arg):
            raise SqlUnsupported(f"{arg.upper().rstrip('_')} in a join view: it emits each pair")
    on = sides.join.args.get("on")
    if on is None:
        raise SqlUnsupported("a JOIN without ON: join two streams on keys and a time interval")
    keys: tuple[list[str], list[str]] = ([], [])
    bounds: list[exp.Expr] = []
    one_side: list[exp.Expr] = []  # ON terms of one table: filters of that table
    residual: list[exp.Expr] = []  # ON terms of a pair: its condition
    for term in _conjuncts(on):
        touched = {sides.side(c) for c in term.find_all(exp.Column)}
        if len(touched) == 1:  # a kept side's row failing it is padded, not dropped
            kept = sides.kind in (("LEFT", "FULL"), ("RIGHT", "FULL"))[touched.pop()]
            (residual if kept else one_side).append(term)
        elif not (isinstance(term, exp.EQ) and _two_columns(term)) and not _is_bound(term, sides):
            residual.append(term)
        elif isinstance(term, exp.EQ) and _two_columns(term):
            a, b = term.this, term.expression
            if sides.side(a) == sides.side(b):
                raise SqlUnsupported(f"ON {term.sql(WeirFlink)}: an equality joins the two tables")
            pair = (a, b) if sides.side(a) == LEFT else (b, a)
            keys[LEFT].append(sides.field(pair[0]))
            keys[RIGHT].append(sides.field(pair[1]))
        else:
            bounds.append(term)
    if not keys[LEFT]:
        raise SqlUnsupported("a join needs ON equality of a key of each table (l.k = r.k)")
    found = _bounds(bounds, sides)
    lower, upper = found if found is not None else ((0, True), (0, True))
    where = statement.args.get("where")
    filters = _filters(_conjuncts(where.this) if where is not None else [], one_side, sides)
    return JoinPlan(
        name=name,
        tables=(sides.defs[LEFT].name, sides.defs[RIGHT].name),
        keys=(tuple(keys[LEFT]), tuple(keys[RIGHT])),
        filters=filters,
        lower=lower[0],
        upper=upper[0],
        lower_inclusive=lower[1],
        upper_inclusive=upper[1],
        columns=_columns(statement, sides),
        bounded=found is not None,
        kind=sides.kind,
        residual=pair_condition(residual, sides.side, sides.field),
    )


def _is_bound(term: exp.Expr, sides: _Sides) -> bool:
    """A term of the time interval: a comparison with an INTERVAL, or of time attributes."""
    if not isinstance(term, exp.Between | exp.GTE | exp.GT | exp.LTE | exp.LT):
        return False
    if term.find(exp.Interval) is not None:
        return True
    times = [sides.defs[sides.side(c)].time_column for c in term.find_all(exp.Column)]
    return all(c.name == t for c, t in zip(term.find_all(exp.Column), times, strict=True))


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _two_columns(term: exp.EQ) -> bool:
    return isinstance(term.this, exp.Column) and isinstance(term.expression, exp.Column)


def _bounds(
    terms: list[exp.Expr], sides: _Sides
) -> tuple[tuple[int, bool], tuple[int, bool]] | None:
    """``(lower, inclusive), (upper, inclusive)`` of ``right.ts - left.ts``; None: no bound."""
    lows: list[tuple[int, bool]] = []
    highs: list[tuple[int, bool]] = []
    for term in terms:
        if isinstance(term, exp.Between):
            lo = _offset(term.this, term.args["low"], sides)
            hi = _offset(term.this, term.args["high"], sides)
            _add(lows, highs, lo, ">=")
            _add(lows, highs, hi, "<=")
        elif isinstance(term, exp.GTE | exp.GT | exp.LTE | exp.LT):
            op = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<"}[type(term)]
            _add(lows, highs, _offset(term.this, term.expression, sides), op)
        else:
            raise SqlUnsupported(
                f"ON {term.sql(WeirFlink)}: an interval join's ON holds key equalities and a "
                "time interval (r.ts BETWEEN l.ts - INTERVAL … AND l.ts + INTERVAL …)"
            )
    if not lows and not highs:
        return None  # a regular join
    if len(lows) != 1 or len(highs) != 1:
        raise SqlUnsupported(
            "a join with one bound of a time interval: give both, r.ts BETWEEN l.ts - INTERVAL "
            "'1' SECOND AND l.ts + INTERVAL '5' SECOND (or none, a regular join with a state TTL)"
        )
    return lows[0], highs[0]


def _offset(this: exp.Expr, other: exp.Expr, sides: _Sides) -> tuple[int, int]:
    """``this OP other`` with ``this`` one side's time and ``other`` the other's plus an
    interval: ``(side of this, interval ms)``."""
    shift = 0
    base = other
    if isinstance(other, exp.Add | exp.Sub):
        base = other.this
        ms = interval_ms(other.expression, "the join's interval")
        shift = ms if isinstance(other, exp.Add) else -ms
    if not (isinstance(this, exp.Column) and isinstance(base, exp.Column)):
        raise SqlUnsupported(f"{this.sql(WeirFlink)}: compare the two tables' time attributes")
    for col in (this, base):
        time_col = sides.defs[sides.side(col)].time_column
        if col.name != time_col:
            raise SqlError(f"{col.sql(WeirFlink)} is not its table's time attribute ({time_col})")
    if sides.side(this) == sides.side(base):
        raise SqlUnsupported(f"{this.sql(WeirFlink)}: the interval compares the two tables")
    return sides.side(this), shift


def _add(
    lows: list[tuple[int, bool]], highs: list[tuple[int, bool]], found: tuple[int, int], op: str
) -> None:
    """``x OP y + shift`` as a bound of ``right.ts - left.ts``."""
    side, shift = found
    inclusive = op in (">=", "<=")
    lower = op in (">=", ">")
    if side == LEFT:  # l.ts OP r.ts + shift  <=>  r.ts - l.ts (flipped OP) -shift
        lower, shift = not lower, -shift
    (lows if lower else highs).append((shift, inclusive))


def _filters(
    where: list[exp.Expr], on: list[exp.Expr], sides: _Sides
) -> tuple[Fn | None, Fn | None]:
    """Each table's filter before the join, from the WHERE and ON terms that name it alone
    (an outer join's ON terms on a kept side are part of its residual condition instead); a
    WHERE term on a side an outer join pads with NULLs is refused: it would drop every padded
    row, another join than the one written."""
    found: tuple[list[exp.Expr], list[exp.Expr]] = ([], [])
    kept = (sides.kind in ("LEFT", "FULL"), sides.kind in ("RIGHT", "FULL"))
    for clause, terms in (("WHERE", where), ("ON", on)):
        for term in terms:
            touched = {sides.side(c) for c in term.find_all(exp.Column)}
            if len(touched) != 1:
                raise SqlUnsupported(
                    f"WHERE {term.sql(WeirFlink)}: a join's WHERE terms each name one table"
                )
            side = touched.pop()
            if clause == "WHERE" and kept[1 - side]:
                raise SqlUnsupported(
                    f"WHERE {term.sql(WeirFlink)} in a {sides.kind} OUTER join filters the side "
                    "padded with NULLs, which would drop every padded row: move it into ON "
                    "(a condition of joining), or write an INNER JOIN"
                )
            found[side].append(term)
    out: list[Fn | None] = []
    for side_terms in found:
        if not side_terms:
            out.append(None)
            continue
        compiler = Compiler(lambda c: sides.field(c))
        out.append(_all([compiler.predicate(t) for t in side_terms]))
    return out[0], out[1]


def _all(preds: list[Fn]) -> Fn:
    if len(preds) == 1:
        return preds[0]
    return lambda r: all(p(r) for p in preds)


def _columns(statement: exp.Select, sides: _Sides) -> tuple[tuple[str, int, str], ...]:
    out: list[tuple[str, int, str]] = []
    for item in statement.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column):
            raise SqlUnsupported(
                f"SELECT {node.sql(WeirFlink)[:60]} in a join: select the tables' columns "
                "(t.c AS name)"
            )
        name = item.alias if isinstance(item, exp.Alias) else node.name
        if name in ("op", "key"):  # the result record's own: the view and the join key
            raise SqlError(f"a join's column may not be named {name!r} (reserved); AS another")
        if name in (n for n, _, _ in out):
            raise SqlError(f"two columns of the join are named {name!r}; rename one (AS …)")
        out.append((name, sides.side(node), sides.field(node)))
    return tuple(out)


def pair_function(plan: JoinPlan) -> Callable[[Any, Any, Any], None]:
    """The ``fn(left, right, ctx)`` that emits a pair as the SELECT shapes it."""
    columns = plan.columns

    residual, key, op = plan.residual, plan.keys[LEFT], plan.name

    def emit(left: Any, right: Any, ctx: Any) -> None:
        if any(left.get(k) is None for k in key):
            return  # SQL's NULL = NULL is not TRUE: NULL keys join nothing (one key group)
        if residual is not None and not residual(left, right):
            return
        sides = (left, right)
        ctx.emit(
            {"op": op, "key": key_value(ctx.key), **{n: sides[s].get(f) for n, s, f in columns}}
        )

    emit.__qualname__ = f"SELECT {', '.join(n for n, _, _ in columns)}"
    return emit


class RegularJoin:
    """An inner regular join (no time bound) kept by Flink's idle-state TTL: each side's rows of
    a key, in list state ``left``/``right``, are forgotten once that side of the key was not
    written for ``ttl_ms`` of processing time (Flink's ``OnCreateAndWrite``); a record joins
    every row the other side holds. One processing-time timer per key; after the input's end
    nothing expires."""

    def __init__(self, plan: JoinPlan, ttl_ms: int) -> None:
        self._emit = pair_function(plan)
        self.ttl_ms = ttl_ms
        self.__qualname__ = "RegularJoin"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the join."""
        return {"state_ttl_ms": self.ttl_ms}

    def process1(self, event: Any, ctx: Any) -> None:
        """A left record: kept, and joined with the right rows."""
        self._arrive(LEFT, event, ctx)

    def process2(self, event: Any, ctx: Any) -> None:
        """A right record: kept, and joined with the left rows."""
        self._arrive(RIGHT, event, ctx)

    def _arrive(self, side: int, event: Any, ctx: Any) -> None:
        now, touched = ctx.processing_time, ctx.value("touched")
        times = touched.get() or [None, None, None]  # left write, right write, timer
        self._expire(times, now, ctx)
        mine, theirs = ctx.list(_SIDES[side]), ctx.list(_SIDES[1 - side])
        mine.append(event)
        times[side] = now
        if times[2] is None:
            times[2] = now + self.ttl_ms
            ctx.register_processing_time_timer(times[2])
        touched.set(times)
        for other in theirs.get():
            pair = (event, other) if side == LEFT else (other, event)
            self._emit(pair[0], pair[1], ctx)

    def _expire(self, times: list[Any], now: int, ctx: Any) -> None:
        if ctx.watermark == MAX_WATERMARK:
            return  # the input has ended: the rows stay
        for side in (LEFT, RIGHT):
            if times[side] is not None and now - times[side] >= self.ttl_ms:
                ctx.list(_SIDES[side]).clear()
                times[side] = None

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        """Forget the sides not written for ``ttl_ms``; check again for what is left."""
        touched = ctx.value("touched")
        times = touched.get()
        if times is None or times[2] != timestamp:
            return
        self._expire(times, ctx.processing_time, ctx)
        alive = [t for t in times[:2] if t is not None]
        if not alive:
            touched.clear()
            return
        times[2] = None if ctx.watermark == MAX_WATERMARK else min(alive) + self.ttl_ms
        if times[2] is not None:
            ctx.register_processing_time_timer(times[2])
        touched.set(times)


_SIDES = ("left", "right")


# the temporal join (``temporal.py``) reads its two tables, ON, WHERE and SELECT as a join does
JoinSides = _Sides
conjuncts = _conjuncts
join_columns = _columns
