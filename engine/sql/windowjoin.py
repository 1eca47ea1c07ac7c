"""Window joins in SQL (Flink's window join): both sides a window TVF, the same window, joined
on their windows' bounds and keys::

    SELECT L.id, L.window_start, L.window_end, L.v AS shown, R.v AS clicked
    FROM (SELECT * FROM TABLE(TUMBLE(TABLE imps, DESCRIPTOR(ts), INTERVAL '5' SECOND))) L
    LEFT JOIN (SELECT * FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND))) R
    ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.id = R.id

A side is ``(SELECT * FROM TABLE(<TVF>) [WHERE …]) alias`` or ``TABLE(<TVF>) alias``; TUMBLE,
HOP and CUMULATE as Flink's window join takes them, the same call on both sides (the time
attribute may be each table's own). ``ON`` holds ``window_start`` and ``window_end`` equalities
and the key equalities (none: one global key, ``*``). INNER, LEFT, RIGHT and FULL [OUTER]:
each pair of one key in one window, and for an outer join each row of a window whose other
side had no row of the key, padded with NULLs (its ``window_*`` columns too, Flink's rule:
``COALESCE(L.window_start, R.window_start)`` reads either). The SELECT list takes qualified
columns and scalar expressions over them, each named by its alias or column name. A side may
be a window aggregate (a subquery grouping a TVF), joined on its GROUP BY columns; its
aggregate runs inside the join's function. ``WindowJoin`` (``windowed.py``) runs the plan.
Refused by name: sides of different windows, a missing window equality, SESSION windows, a
WHERE over the join (put it in a side), other ON terms, SEMI/ANTI/CROSS joins.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from weir.engine.agg import AggregateFunction
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported
from weir.engine.sql.query import TableDef, at
from weir.engine.sql.rownumber import aggregate_outputs, group_columns
from weir.engine.sql.scalar import Compiler, Fn
from weir.engine.sql.select import plan_query
from weir.engine.sql.windowed import AggregateSide, WindowJoinPlan
from weir.engine.sql.windowing import WINDOW_COLUMNS, WindowSpec, tvf

EXAMPLE = "(SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))) L"
RESERVED = ("op", "key")


def _tvf_of(item: exp.Expr | None) -> tuple[str, WindowSpec, exp.Expr | None] | None:
    """A FROM item as ``(table, window, WHERE)`` when it is a window TVF, bare or in a
    ``SELECT *`` subquery; None for anything else."""
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Anonymous):
        found = tvf(item.this)
        return None if found is None else (*found, None)
    over = _over_tvf(item)
    if over is None:
        return None
    inner, call = over
    found = tvf(call)
    if found is None or inner.args.get("group"):
        return None  # a window aggregate: _aggregate_of
    for arg in ("joins", "having", "order", "limit", "distinct", "with_"):
        if inner.args.get(arg):
            raise SqlUnsupported(f"{arg.upper().rstrip('_')} inside a side of a window join")
    if not all(isinstance(i, exp.Star) for i in inner.expressions):
        raise SqlUnsupported(
            f"a side of a window join selects {inner.expressions[0].sql(WeirFlink)[:40]}: "
            f"write SELECT * (name the columns in the join's SELECT), {EXAMPLE}"
        )
    where = inner.args.get("where")
    return (*found, where.this if where is not None else None)


def _aggregate_of(item: exp.Expr | None) -> exp.Select | None:
    """A FROM item that is a window aggregate (a subquery grouping a window TVF), or None."""
    over = _over_tvf(item)
    if over is None:
        return None
    inner, call = over
    return inner if inner.args.get("group") and tvf(call) is not None else None


def _over_tvf(item: exp.Expr | None) -> tuple[exp.Select, exp.Anonymous] | None:
    """A subquery whose FROM is a table function call: ``(the subquery, the call)``."""
    if not (isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select)):
        return None
    source = item.this.args.get("from_")
    table = source.this if source is not None else None
    if not (isinstance(table, exp.Table) and isinstance(table.this, exp.Anonymous)):
        return None
    return item.this, table.this


def is_window_join(statement: exp.Expr) -> bool:
    """Does ``statement`` join two window TVFs (either side one)?"""
    if not (isinstance(statement, exp.Select) and statement.args.get("joins")):
        return False
    source = statement.args.get("from_")
    items = [source.this if source is not None else None]
    items += [j.this for j in statement.args["joins"]]
    return any(_tvf_of(i) is not None or _aggregate_of(i) is not None for i in items)


class _Side:
    """One side: its table, window, alias and filter; or a window aggregate's."""

    def __init__(
        self, item: exp.Expr, tables: Mapping[str, TableDef],
        functions: Mapping[str, AggregateFunction],
    ) -> None:  # fmt: skip
        self.aggregate: AggregateSide | None = None
        self.outputs: tuple[str, ...] | None = None
        aggregated = _aggregate_of(item)
        found = (
            _tvf_of(item)
            if aggregated is None
            else self._of_aggregate(aggregated, tables, functions)
        )
        if found is None:
            raise SqlUnsupported(
                f"JOIN of a window TVF with {item.sql(WeirFlink)[:60]}: a window join's sides "
                f"are both window TVFs of the same window, {EXAMPLE}"
            )
        name, self.window, where = found
        if name not in tables:
            raise SqlError(f"unknown table {name!r}; tables: {', '.join(sorted(tables))}")
        self.table = tables[name]
        self.alias = item.alias or name
        if self.window.kind == "SESSION":
            raise SqlUnsupported(
                f"{self.window.sql}: a window join takes TUMBLE, HOP or CUMULATE windows "
                "(Flink's window join has no SESSION)"
            )
        time_col = self.table.time_column
        if time_col is not None and self.window.time_column != time_col:
            raise SqlError(
                f"{self.window.sql}: DESCRIPTOR({self.window.time_column}) is not table "
                f"{name!r}'s time attribute ({time_col})"
            )
        self.where: Fn | None = None
        if where is not None:
            self.where = Compiler(self.column).predicate(where)

    def _of_aggregate(
        self, select: exp.Select, tables: Mapping[str, TableDef],
        functions: Mapping[str, AggregateFunction],
    ) -> tuple[str, WindowSpec, None]:  # fmt: skip
        query = plan_query(select, "a window join's side", tables, functions)
        if query.window is None or "window_time" in query.aggregates:
            raise SqlUnsupported(
                f"{select.sql(WeirFlink)[:60]}…: a window aggregate joined on its windows "
                "selects window_start and window_end (window_time is not joined)"
            )
        groups = group_columns(select)
        self.outputs = aggregate_outputs(select, groups, tuple(query.aggregates))
        self.aggregate = AggregateSide(groups, query.aggregates, query.where, query.derived)
        return query.table, query.window, None

    def key_field(self, col: exp.Column) -> str:
        """The record field of the key column ``col`` (a group column of an aggregate)."""
        name = self.column(col)
        if self.aggregate is None:
            return name
        fields = dict(self.aggregate.groups)
        if name not in fields:
            raise SqlUnsupported(
                f"ON {col.sql(WeirFlink)}: a window aggregate joins on its GROUP BY columns "
                f"({', '.join(fields) or 'none'})"
            )
        return fields[name]

    def has(self, name: str) -> bool:
        """Does the side surely have column ``name`` (known columns only)?"""
        if self.outputs is not None:
            return name in self.outputs
        columns = self.table.columns
        return columns is not None and name in (*columns, *WINDOW_COLUMNS)

    def column(self, col: exp.Column) -> str:
        """``col`` of this table (a window column included), checked against its columns."""
        if self.outputs is not None:
            if col.name not in self.outputs:
                raise SqlError(
                    f"unknown column {col.sql(WeirFlink)}{at(col)}; {self.alias} has "
                    f"{', '.join(self.outputs)}"
                )
            return col.name
        columns = self.table.columns
        if columns is not None and col.name not in (*columns, *WINDOW_COLUMNS):
            raise SqlError(
                f"unknown column {col.sql(WeirFlink)}{at(col)}; {self.alias} has "
                f"{', '.join((*columns, *WINDOW_COLUMNS))}"
            )
        return col.name


def plan_window_join(
    statement: exp.Expr,
    name: str,
    tables: Mapping[str, TableDef],
    functions: Mapping[str, AggregateFunction] | None = None,
) -> WindowJoinPlan:
    """The plan of the window join view ``name``."""
    if not isinstance(statement, exp.Select) or len(statement.args.get("joins") or []) != 1:
        raise SqlUnsupported(f"view {name!r}: a window join joins two window TVFs")
    join: exp.Join = statement.args["joins"][0]
    kind = _kind(join)
    source = statement.args["from_"]  # a join has its FROM
    sides = (_Side(source.this, tables, functions or {}), _Side(join.this, tables, functions or {}))
    _same_window(*sides)
    if sides[0].alias == sides[1].alias:
        raise SqlError(f"both sides of the window join are named {sides[0].alias!r}: alias them")
    for arg in ("where", "group", "having", "order", "limit", "distinct", "with_"):
        if statement.args.get(arg):
            raise SqlUnsupported(
                f"{arg.upper().rstrip('_')} over a window join: filter each side in its "
                "subquery (SELECT * FROM TABLE(…) WHERE …); the join emits each row"
            )
    keys = _keys(join.args.get("on"), sides)
    fields: dict[str, tuple[str, int, str]] = {}
    return WindowJoinPlan(
        name=name,
        tables=(sides[0].table.name, sides[1].table.name),
        keys=keys,
        filters=(sides[0].where, sides[1].where),
        assigner=sides[0].window.assigner(),  # type: ignore[arg-type]  # not SESSION: checked
        window_sql=sides[0].window.sql,
        kind=kind,
        columns=_columns(statement, sides, fields),
        fields=tuple(fields.values()),
        sql=statement.sql(WeirFlink),
        sides=(sides[0].aggregate, sides[1].aggregate),
    )


def _kind(join: exp.Join) -> str:
    side = str(join.args.get("side") or "").upper()
    kind = str(join.args.get("kind") or "").upper()
    if kind not in ("", "INNER", "OUTER") or (kind == "OUTER" and not side):
        raise SqlUnsupported(
            f"{kind} JOIN of window TVFs: a window join is INNER, LEFT, RIGHT or FULL [OUTER]"
        )
    return side or "INNER"


def _same_window(left: _Side, right: _Side) -> None:
    a, b = left.window, right.window
    if (a.kind, a.intervals, a.offset_ms) != (b.kind, b.intervals, b.offset_ms):
        raise SqlUnsupported(
            f"a window join of different windows, {a.sql} and {b.sql}: both sides take the "
            "same window TVF (kind, size, slide or step, offset)"
        )


def _sides_of(term: exp.EQ, sides: tuple[_Side, _Side]) -> tuple[exp.Column, exp.Column]:
    """The equality's (left column, right column); refused unless it joins the two sides."""
    cols = (term.this, term.expression)
    if not all(isinstance(c, exp.Column) for c in cols):
        raise SqlUnsupported(
            f"ON {term.sql(WeirFlink)}: a window join's ON holds column equalities of its "
            "two sides (window_start, window_end, keys)"
        )
    found = [_side_index(c, sides) for c in cols]
    if sorted(found) != [0, 1]:
        raise SqlUnsupported(f"ON {term.sql(WeirFlink)}: an equality joins the two sides")
    a, b = cols if found[0] == 0 else cols[::-1]
    assert isinstance(a, exp.Column) and isinstance(b, exp.Column)
    return a, b


def _side_index(col: exp.Expr, sides: tuple[_Side, _Side]) -> int:
    if isinstance(col, exp.Column) and not col.table:
        having = [i for i, side in enumerate(sides) if side.has(col.name)]
        if len(having) == 1:  # unambiguous, as Flink resolves it
            return having[0]
    if not isinstance(col, exp.Column) or not col.table:
        raise SqlError(
            f"column {col.sql(WeirFlink)}{at(col)} in a window join: qualify it with its "
            f"side ({sides[0].alias}.{col.name if isinstance(col, exp.Column) else '…'})"
        )
    for i, side in enumerate(sides):
        if col.table == side.alias:
            return i
    raise SqlError(f"column {col.sql(WeirFlink)} names neither side of the window join")


def _keys(
    on: exp.Expr | None, sides: tuple[_Side, _Side]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    terms = _conjuncts(on) if on is not None else []
    keys: tuple[list[str], list[str]] = ([], [])
    bounds = set()
    for term in terms:
        if not isinstance(term, exp.EQ):
            raise SqlUnsupported(
                f"ON {term.sql(WeirFlink)}: a window join's ON holds the windows' bounds and "
                "key equalities (L.window_start = R.window_start AND L.window_end = "
                "R.window_end AND L.k = R.k)"
            )
        a, b = _sides_of(term, sides)
        if a.name in WINDOW_COLUMNS or b.name in WINDOW_COLUMNS:
            if a.name != b.name or a.name == "window_time":
                raise SqlUnsupported(
                    f"ON {term.sql(WeirFlink)}: join window_start to window_start and "
                    "window_end to window_end"
                )
            bounds.add(a.name)
            continue
        keys[0].append(sides[0].key_field(a))
        keys[1].append(sides[1].key_field(b))
    missing = [c for c in ("window_start", "window_end") if c not in bounds]
    if missing:
        raise SqlUnsupported(
            f"a window join without {' and '.join(f'L.{c} = R.{c}' for c in missing)} in ON: "
            "a window join pairs rows of the same window (an interval join bounds time "
            "otherwise: r.ts BETWEEN l.ts - INTERVAL … AND l.ts + INTERVAL …)"
        )
    return tuple(keys[0]), tuple(keys[1])


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _columns(
    statement: exp.Select, sides: tuple[_Side, _Side], fields: dict[str, tuple[str, int, str]]
) -> tuple[tuple[str, Fn], ...]:
    """The SELECT list as (name, function of the pair row); ``fields`` collects the pair-row
    fields (``alias.column``) the functions read."""

    def resolve(col: exp.Column) -> str:
        i = _side_index(col, sides)
        column = sides[i].column(col)
        field = f"{sides[i].alias}.{column}"
        fields[field] = (field, i, column)
        return field

    compiler = Compiler(resolve)
    out: list[tuple[str, Fn]] = []
    for item in statement.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star):
            raise SqlUnsupported("SELECT * over a window join: name the columns (L.c AS name)")
        if isinstance(item, exp.Alias):
            name = item.alias
        elif isinstance(node, exp.Column):
            name = node.name
        else:
            raise SqlError(f"SELECT {node.sql(WeirFlink)[:60]}: name it, … AS name")
        if name in RESERVED or name in (n for n, _ in out):
            why = "reserved" if name in RESERVED else "named twice"
            raise SqlError(f"the window join's column {name!r} is {why}; rename it (AS …)")
        out.append((name, compiler.compile(node)))
    return tuple(out)
