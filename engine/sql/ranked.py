"""The process function of a SQL Top-N or deduplication view (``rownumber.py`` compiles the
query): kept apart from the parser, so a job's description (``weir explain``, the backfill's
refusals) knows these views without loading sqlglot."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.state.keygroups import key_value

INSERT, UPDATE = "+I", "+U"
SORT = "__sort"  # a kept row's ORDER BY values (the row shows only its SELECT's columns)
Fn = Callable[[Any], Any]


@dataclass(frozen=True)
class RankPlan:
    """A Top-N or deduplication view: its table, filter, partition key, order and N."""

    name: str
    table: str
    where: Fn | None
    where_sql: str | None
    partition: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]  # (field, descending)
    n: int
    keep_last: bool  # deduplication keeping the last row: an equal row replaces the kept one
    columns: tuple[str, ...] | None  # the row's fields (None: every field of the record)
    rn: str | None  # the row number's column, when the outer SELECT shows it
    sql: str


class RankFunction:
    """The process function of a Top-N or deduplication view (see the module docstring)."""

    def __init__(self, plan: RankPlan) -> None:
        self.plan = plan
        self.__qualname__ = "RankFunction"

    def describe_function(self) -> dict[str, Any]:
        """What ``weir explain`` shows of the view."""
        p = self.plan
        kind = "deduplication (keep last)" if p.keep_last else f"top-{p.n}"
        if p.n == 1 and not p.keep_last and len(p.order) == 1 and not p.order[0][1]:
            kind = "top-1 (deduplication keeping the first)"
        order = ", ".join(f"{f} {'DESC' if d else 'ASC'}" for f, d in p.order)
        partition = ", ".join(p.partition) or "nothing (one global ranking)"
        return {
            "sql_view": f"ROW_NUMBER() {kind}, partitioned by {partition}, ordered by {order}; "
            "upsert changelog (+I, +U) by key and rn"
        }

    def process(self, record: Any, ctx: Any) -> None:
        """Rank ``record`` in its partition; emit the ranks whose row changed."""
        state = ctx.value("rows")
        rows: list[dict[str, Any]] = state.get() or []
        row = self.row(record)
        at = self.position(rows, row)
        if at >= self.plan.n:
            return
        before = len(rows)
        rows = [*rows[:at], row, *rows[at:]][: self.plan.n]
        state.set(rows)
        for rank in range(at, len(rows)):
            shown = {k: v for k, v in rows[rank].items() if k != SORT}
            kind = UPDATE if rank < before else INSERT
            out: dict[str, Any] = {
                "op": self.plan.name,
                "key": key_value(ctx.key),
                "row_kind": kind,
            }
            out.update(shown)
            if self.plan.rn is not None:
                out[self.plan.rn] = rank + 1
            ctx.emit(out)

    def row(self, record: Any) -> dict[str, Any]:
        """The row kept: its shown fields and, under ``SORT``, its ORDER BY values."""
        columns = self.plan.columns
        shown = dict(record) if columns is None else {c: record.get(c) for c in columns}
        shown[SORT] = [record.get(f) for f, _ in self.plan.order]
        return shown

    def position(self, rows: list[dict[str, Any]], row: dict[str, Any]) -> int:
        """Where ``row`` ranks: after every row that sorts before it or equal (before equal
        ones in the keep-last deduplication)."""
        mine = self._key(row)
        for i, other in enumerate(rows):
            theirs = self._key(other)
            if mine < theirs or (self.plan.keep_last and mine == theirs):
                return i
        return len(rows)

    def _key(self, row: dict[str, Any]) -> tuple[_Asc, ...]:
        pairs = zip(row[SORT], self.plan.order, strict=True)
        return tuple(_Desc(v) if desc else _Asc(v) for v, (_, desc) in pairs)


class _Asc:
    """A value in ascending order, NULL first."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Asc) -> bool:
        if self.v is None or other.v is None:
            return self.v is None and other.v is not None
        return bool(self.v < other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Asc | _Desc) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


class _Desc(_Asc):
    """A value in descending order, NULL last."""

    def __lt__(self, other: _Asc) -> bool:
        if self.v is None or other.v is None:
            return other.v is None and self.v is not None
        return bool(self.v > other.v)
