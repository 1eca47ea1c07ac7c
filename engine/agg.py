"""Aggregates for ``WindowedStream.aggregate(name, **aggregates)``.

Built-ins (``count``, ``sum``, ``min``, ``max``, ``mean``, ``avg``, ``window_time``) read at most
one input of the record, a field or an expression of it (``agg.sum(weir.col("value") * 2)``),
and keep a flat accumulator of numbers, so the window operator can fold a whole batch in one
generated loop. A user-defined aggregate is any object with ``create() -> acc``, ``add(acc,
record) -> acc``, ``merge(a, b) -> acc`` and ``result(acc) -> value`` (Flink's
AggregateFunction); its accumulator must be made of msgpack types (None, bool, int, float, str,
bytes, lists, dicts), because it is stored in RocksDB without pickle.

An input is a field name (``"value"``, the same as ``col("value")``) or an expression
(``docs/reference/expressions.md``); a field the record lacks is NULL, as it is in an
expression. An expression that fails on a record (``1 / 0``, an overflow) sends the record to
the dead letters whatever ``nulls`` says: an error is not a NULL.

NULLs. A built-in's ``nulls`` says what a NULL input (``None``, or a record without the field)
does, the same for a field and an expression (``docs/reference/expressions.md``, "NULL in
aggregates", is the user's statement of it):

- ``"reject"`` (the job API's default for ``sum``, ``min``, ``max``, ``mean``): the record is
  not a number where the aggregate needs one, so it goes to the dead letters, as a ``map`` that
  raises does (Flink's DataStream ``sum`` cannot add a null either);
- ``"skip"`` (SQL's rule; what ``weir sql`` compiles ``SUM``/``MIN``/``MAX``/``AVG`` to, and
  ``avg``'s default): the aggregate passes over the NULL and the record still counts everywhere
  else (``count()``, other aggregates, its window or session). An aggregate that saw only NULLs
  is NULL. ``count(x)`` always skips: it counts the non-NULL values of ``x`` (SQL's
  ``COUNT(x)``), whatever they are.

Accumulator slots (what RocksDB stores per key and window, in ``aggregate(...)``'s order; the
compiled folds keep the same layout, value for value and type for type; ``x`` is a field or an
expression):

==================  ==================  ================================================
aggregate           slots               result
==================  ==================  ================================================
count()             ``[n]``             n, the records
count(x)            ``[n]``             n, the non-NULL values of ``x``
sum reject          ``[s]``             s (ints stay ints)
sum skip            ``[s | None]``      s; None until the first non-NULL value
min, max reject     ``[v]``             v (the first of equals)
min, max skip       ``[v | None]``      v; None until the first non-NULL value
mean reject         ``[s, n]``          s / n, a float
mean skip           ``[s, n]``          s / n over the n non-NULL values (s starts at 0);
                                        None when n is 0
avg (either)        ``[s, n]``          as ``mean``, but integral when s is an int (every
                                        value was one): s / n truncated toward zero, SQL's
                                        AVG over an integer column (Flink: 15 / 4 = 3)
window_time()       ``[]``              the window's end - 1 (no state)
==================  ==================  ================================================

``cast`` (``"int"``, ``"float"``, ``"str"``, ``"bool"``) converts the result, NULL staying NULL:
SQL's ``CAST(AVG(x) AS DOUBLE)`` in a select list. It changes no slot.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

from weir.engine.expressions import Expr
from weir.engine.kernels import ir

BuiltinKind = Literal["count", "sum", "min", "max", "mean", "avg", "window_time"]
Nulls = Literal["reject", "skip"]
CastTo = Literal["int", "float", "str", "bool"]
FIELD_KINDS = ("sum", "min", "max", "mean", "avg")


@runtime_checkable
class AggregateFunction(Protocol):
    """A user-defined aggregate (create / add / merge / result)."""

    def create(self) -> Any:
        """A new, empty accumulator (msgpack types only: it is stored in RocksDB)."""
        ...

    def add(self, acc: Any, record: Any) -> Any:
        """The accumulator with ``record`` added; may change and return ``acc``."""
        ...

    def merge(self, a: Any, b: Any) -> Any:
        """One accumulator holding both (sliding panes, sessions that merge, rescaling)."""
        ...

    def result(self, acc: Any) -> Any:
        """The aggregate's value in a result record and a query answer."""
        ...


def avg_of(s: Any, n: int) -> Any:
    """SQL's AVG of ``n`` values summing to ``s``: NULL for none, integral (truncated toward
    zero, as Java's long division) when the sum is an int, else the float mean."""
    if not n:
        return None
    if type(s) is int:
        q = abs(s) // n
        return q if s >= 0 else -q
    return s / n


def _to_int(v: Any) -> int:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"cannot CAST {v!r} AS an integer")
    return int(v)  # a float truncates toward zero, as SQL's CAST does


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    return v if isinstance(v, str) else str(v)


CASTS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": float,
    "str": _to_str,
    "bool": bool,
}


def cast_value(to: str, v: Any) -> Any:
    """``v`` converted by ``CAST(… AS to)``; NULL stays NULL."""
    return None if v is None else CASTS[to](v)


@dataclass(frozen=True, slots=True)
class Builtin:
    """A built-in aggregate over one input (``count()`` and ``window_time()`` read none); see
    the module docstring for ``nulls``, ``cast`` and the slot layout.

    The input is ``field``, a plain field (``agg.sum("v")`` and ``agg.sum(col("v"))`` alike),
    or ``expr``, the IR of any other expression (``agg.sum(col("v") * 2)``); never both."""

    kind: BuiltinKind
    field: str | None = None
    nulls: Nulls = "reject"
    cast: CastTo | None = None
    _: KW_ONLY
    expr: ir.Expr | None = None

    def __post_init__(self) -> None:
        if self.field is not None and self.expr is not None:
            raise ValueError(f"agg.{self.kind}: give a field or an expression, not both")
        if self.kind in FIELD_KINDS and not self.field and self.expr is None:
            raise ValueError(
                f"agg.{self.kind}() needs a field name or an expression, e.g. "
                f"agg.{self.kind}('value') or agg.{self.kind}(col('value') * 2)"
            )
        if self.kind == "window_time" and (self.field or self.expr is not None):
            raise ValueError("agg.window_time() reads no field: it is the window's end - 1")
        if self.kind == "count" and self.input is not None and self.nulls != "skip":
            raise ValueError("agg.count(x) counts the non-NULL values: nulls='skip'")
        if self.nulls not in ("reject", "skip"):
            raise ValueError(f"nulls={self.nulls!r}; use 'reject' or 'skip'")
        if self.cast is not None and self.cast not in CASTS:
            raise ValueError(f"cast={self.cast!r}; use one of {', '.join(CASTS)}")

    @property
    def counts_values(self) -> bool:
        """``count(x)``: it adds 1 for each record whose input ``x`` is not NULL."""
        return self.kind == "count" and self.input is not None

    @property
    def input(self) -> str | None:
        """The column the fold reads: the field, a name for the expression's values, or None
        (``count()``, ``window_time()``). Equal expressions share a name, as equal fields do."""
        if self.expr is None:
            return self.field
        return f"__expr_{zlib.crc32(repr(self.expr).encode()):08x}"

    @property
    def slots(self) -> int:
        """How many accumulator slots the aggregate takes (``mean``: sum and count)."""
        return {"mean": 2, "avg": 2, "window_time": 0}.get(self.kind, 1)

    @property
    def skips(self) -> bool:
        """Does a NULL input leave the record in (``nulls="skip"``, ``count(x)``)?"""
        return self.nulls == "skip"

    # -- the generated fold's pieces (``runtime/stored/fold.py``) -------------------------------

    def init_exprs(self, v: str) -> list[str]:
        """Accumulator slots for a first record whose input value is ``v``."""
        kind, skip = self.kind, self.skips
        if kind == "window_time":
            return []
        if kind == "count":
            return [f"(0 if {v} is None else 1)"] if self.counts_values else ["1"]
        if kind in ("mean", "avg"):
            if skip:
                return [f"(0 if {v} is None else {v})", f"(0 if {v} is None else 1)"]
            return [v, "1"]
        return [v]

    def update_stmts(self, a: str, i: int, v: str) -> list[str]:
        """Statements (one line each) that fold input value ``v`` into slots ``a[i:]``."""
        kind, skip, slot = self.kind, self.skips, f"{a}[{i}]"
        if kind == "window_time":
            return []
        if kind == "count":
            return [f"if {v} is not None: {slot} += 1"] if self.counts_values else [f"{slot} += 1"]
        if kind in ("mean", "avg"):
            both = f"{slot} += {v}; {a}[{i + 1}] += 1"
            return [f"if {v} is not None: {both}"] if skip else [both]
        if kind == "sum":
            if skip:
                return [f"if {v} is not None: {slot} = {v} if {slot} is None else {slot} + {v}"]
            return [f"{slot} += {v}"]
        op = "<" if kind == "min" else ">"
        if skip:
            return [f"if {v} is not None and ({slot} is None or {v} {op} {slot}): {slot} = {v}"]
        return [f"if {v} {op} {slot}: {slot} = {v}"]

    def merge_stmts(self, lo: int) -> list[str]:
        """Statements (one line each) that merge slots ``b[lo:]`` into ``a[lo:]`` in place."""
        kind, a, b = self.kind, f"a[{lo}]", f"b[{lo}]"
        if kind == "window_time":
            return []
        if kind in ("count", "mean", "avg") or (kind == "sum" and not self.skips):
            return [f"a[{i}] += b[{i}]" for i in range(lo, lo + self.slots)]
        if kind == "sum":
            return [f"if {b} is not None: {a} = {b} if {a} is None else {a} + {b}"]
        op = "<" if kind == "min" else ">"
        if self.skips:
            return [f"if {b} is not None and ({a} is None or {b} {op} {a}): {a} = {b}"]
        return [f"if {b} {op} {a}: {a} = {b}"]

    def result_expr(self, lo: int, env: dict[str, Any]) -> str:
        """The result's expression over slots ``a`` and window end ``e`` (helpers into ``env``)."""
        kind = self.kind
        if kind == "window_time":
            expr = "e - 1"
        elif kind == "avg":
            env["avg_of"] = avg_of
            expr = f"avg_of(a[{lo}], a[{lo + 1}])"
        elif kind == "mean" and self.skips:
            expr = f"(a[{lo}] / a[{lo + 1}] if a[{lo + 1}] else None)"
        elif kind == "mean":
            expr = f"a[{lo}] / a[{lo + 1}]"
        else:
            expr = f"a[{lo}]"
        if self.cast is None:
            return expr
        env["cast_value"] = cast_value
        return f"cast_value({self.cast!r}, {expr})"

    # -- one accumulator at a time -------------------------------------------------------------

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        """Slots ``a`` and ``b`` merged (a new list); what ``merge_stmts`` does in place."""
        kind = self.kind
        if kind in ("count", "mean", "avg") or (kind == "sum" and not self.skips):
            return [x + y for x, y in zip(a, b, strict=True)]
        if kind == "window_time":
            return []
        x, y = a[0], b[0]
        if y is None:
            return [x]
        if x is None:
            return [y]
        if kind == "sum":
            return [x + y]
        return [y if (y < x if kind == "min" else y > x) else x]

    def result(self, slots: list[Any], end: int = 0) -> Any:
        """The result of ``slots`` (``end``: the window's end, for ``window_time``)."""
        kind = self.kind
        if kind == "window_time":
            value: Any = end - 1
        elif kind == "avg":
            value = avg_of(slots[0], slots[1])
        elif kind == "mean":
            value = slots[0] / slots[1] if slots[1] or not self.skips else None
        else:
            value = slots[0]
        return value if self.cast is None else cast_value(self.cast, value)


@dataclass(frozen=True, slots=True)
class UserDefined:
    """Wraps a user's AggregateFunction; its accumulator takes one slot."""

    function: AggregateFunction

    slots = 1

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        """The slots of ``a`` and ``b`` merged by the user's ``merge``."""
        return [self.function.merge(a[0], b[0])]

    def result(self, slots: list[Any], end: int = 0) -> Any:
        """The user's ``result`` of the accumulator (``end`` is unused)."""
        return self.function.result(slots[0])


Aggregate = Builtin | UserDefined


Input = str | Expr  # a field name, or an expression of the record


def count(x: Input | None = None) -> Builtin:
    """Number of records in the window; with ``x`` (a field name or an expression), the number
    of records whose ``x`` is not NULL (SQL's ``COUNT(x)``: a record without the field counts
    as NULL). ``count("v")``, ``count(col("v"))`` and SQL's ``COUNT(v)`` are one aggregate.

    Example:
        >>> from weir import agg, col
        >>> agg.count().counts_values, agg.count(col("user")).counts_values
        (False, True)
        >>> agg.count(col("user")) == agg.count("user")
        True
    """
    if x is None:
        return Builtin("count")
    return _builtin("count", x, "skip")


def sum(x: Input, *, nulls: Nulls = "reject") -> Builtin:  # noqa: A001 - mirrors SQL
    """Sum of a numeric field or expression (ints stay ints); ``nulls="skip"``: SQL's SUM,
    see the module.

    Example:
        >>> from weir import agg, col
        >>> agg.sum(col("price") * col("qty")).expr is not None
        True
        >>> agg.sum(col("v") * 2, nulls="skip").skips
        True
    """
    return _builtin("sum", x, nulls)


def min(x: Input, *, nulls: Nulls = "reject") -> Builtin:  # noqa: A001
    """Smallest value of a numeric field or expression; ``nulls="skip"``: SQL's MIN."""
    return _builtin("min", x, nulls)


def max(x: Input, *, nulls: Nulls = "reject") -> Builtin:  # noqa: A001
    """Largest value of a numeric field or expression; ``nulls="skip"``: SQL's MAX."""
    return _builtin("max", x, nulls)


def mean(x: Input, *, nulls: Nulls = "reject") -> Builtin:
    """Arithmetic mean of a numeric field or expression (a float); ``nulls="skip"``: over the
    non-NULL values, NULL when there is none."""
    return _builtin("mean", x, nulls)


def avg(x: Input, *, nulls: Nulls = "skip") -> Builtin:
    """SQL's AVG of a field or expression: the mean of the non-NULL values, integral (truncated
    toward zero) when every value is an int, NULL when there is none. ``agg.mean`` is the float
    mean."""
    return _builtin("avg", x, nulls)


def window_time() -> Builtin:
    """The window's time attribute, ``end - 1`` (Flink's ``window_time``, ``TUMBLE_ROWTIME``):
    a result field that holds no state."""
    return Builtin("window_time")


def cast(aggregate: Builtin, to: CastTo) -> Builtin:
    """``aggregate`` with its result converted (``CAST(AVG(v) AS DOUBLE)``: ``cast(avg("v"),
    "float")``); NULL stays NULL."""
    return replace(aggregate, cast=to)


def _builtin(kind: BuiltinKind, value: object, nulls: Nulls) -> Builtin:
    """The aggregate of ``value``: a field name or a plain ``col(name)`` is the field form, which
    every path reads directly; any other expression is carried as its IR."""
    if isinstance(value, Expr):
        node = value.ir
        if isinstance(node, ir.Col):
            return Builtin(kind, node.name, nulls)
        return Builtin(kind, None, nulls, expr=node)
    if isinstance(value, str) and value:
        return Builtin(kind, value, nulls)
    raise TypeError(
        f"agg.{kind}({value!r}): pass a field name or an expression, e.g. "
        f"agg.{kind}('value') or agg.{kind}(col('value') * 2)"
    )


def custom(function: AggregateFunction) -> UserDefined:
    """A user-defined aggregate with create / add / merge / result."""
    missing = [
        m for m in ("create", "add", "merge", "result") if not callable(getattr(function, m, None))
    ]
    if missing:
        raise TypeError(
            f"aggregate {function!r} lacks {', '.join(missing)}; a user-defined aggregate needs "
            "create(), add(acc, record), merge(a, b) and result(acc)"
        )
    return UserDefined(function)


def as_aggregate(value: object, name: str) -> Aggregate:
    """Accept a built-in, a wrapped or a bare user-defined aggregate."""
    if isinstance(value, Builtin | UserDefined):
        return value
    if isinstance(value, AggregateFunction):
        return custom(value)
    raise TypeError(
        f"aggregate {name}={value!r} is not an aggregate; use agg.count(), agg.sum('field'), "
        "... or an object with create/add/merge/result"
    )
