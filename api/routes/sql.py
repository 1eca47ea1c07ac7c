"""``POST /{job}/sql``: a pull query, one read-only ``SELECT`` over the job's operators as tables
(``engine/sql/pull.py`` compiles it), run on the read paths every other route uses.

Keys named in WHERE (``key = …``, ``key IN (…)``) are point lookups (``key_answer``, as
``GET /{job}/{op}/state/{key}``); otherwise the keys are listed by seeking (``keylist``, as
``GET /{job}/{op}/state?prefix=…``), bounded by ``key LIKE 'prefix%'``, and each listed key is
read. Every key read counts against the request's ``budget`` (default ``DEFAULT_BUDGET``, at most
``MAX_BUDGET``): a query that needs every row before it can answer (``ORDER BY``, aggregates over
the result) and would read more keys is refused with ``scan_budget_exceeded``, naming the count;
any other query answers with the rows read so far and a ``next_cursor`` that resumes the listing.
A point query naming more keys than the budget is refused too. So no query holds the API longer
than a budget of key reads.

The answer carries the consistency, watermark and checkpoint it was read as of (the same
``live``/``committed`` choice as a point lookup, and the freshness bounds ``min_watermark`` and
``min_checkpoint``), an ``ETag`` (a poll with ``If-None-Match`` gets a 304), and is protected by
the API token as every state route is. With ``consistency=committed`` the keys are listed from
the checkpoint and each key's rows are the checkpoint's: a key the live state no longer holds
(its windows purged, its view row expired) is still there, as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from weir.api import cellkeys, keylist
from weir.api.deps import (
    Consistency,
    Freshness,
    freshness,
    job_handle,
    public_watermark,
    registry,
    wait_fresh,
)
from weir.api.errors import ApiError, ErrorBody
from weir.api.models import SqlAnswer
from weir.api.registry import JobHandle, Registry
from weir.api.routes.state import (
    MAX_LIMIT,
    NOT_FRESH,
    Bounds,
    json_response,
    key_answer,
    key_page,
    listing_position,
)
from weir.api.statesource import StateSource
from weir.base.errors import JobDefinitionError
from weir.base.extras import require
from weir.engine.nodes import ProcessNode, WindowNode

if TYPE_CHECKING:
    from weir.engine.sql.pull import PullPlan, TableShape
    from weir.engine.sql.windowed import WindowAggregateRank, WindowJoin, WindowRank

router = APIRouter(tags=["sql"])

DEFAULT_BUDGET = 1_000  # keys one query may read
MAX_BUDGET = 10_000
MAX_QUERY_CHARS = 16_384  # engine.sql.pull's, checked here before the parser loads
LIST_PAGE = 500  # keys listed per seek pass
MAX_POSITIONS = 4 * keylist.SCAN_BUDGET  # RocksDB positions one query may examine


class SqlRequest(BaseModel):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    consistency: Consistency = "live"
    budget: int = Field(default=DEFAULT_BUDGET, ge=1, le=MAX_BUDGET)
    cursor: str | None = Field(default=None, max_length=4_096)


@dataclass
class _Read:
    rows: list[dict[str, Any]]
    keys_read: int
    next_cursor: str | None


@router.post(
    "/{job}/sql",
    operation_id="sql",
    response_model=SqlAnswer,
    responses={400: {"model": ErrorBody}, 404: {"model": ErrorBody}, **NOT_FRESH},
)
async def pull_query(
    job: str,
    body: SqlRequest,
    request: Request,
    reg: Annotated[Registry, Depends(registry)],
    fresh: Annotated[Freshness, Depends(freshness)],
) -> Response:
    """Run a read-only ``SELECT`` over the job's operators; see the module docstring."""
    handle = job_handle(reg, job)
    plan = _plan(handle, body.query)
    op = handle.job.operators[plan.table]
    await wait_fresh(fresh, handle, op.name, body.consistency)
    try:
        read = await anyio.to_thread.run_sync(_read, handle, op, plan, body)
        answer = _shape(plan, read.rows)
    except (TypeError, ValueError, ArithmeticError) as exc:  # SQL over the rows' values
        raise ApiError(
            400, "query_failed", f"the query failed on the rows' values ({type(exc).__name__}: "
            f"{exc}); compare and sort values of one type (CAST them)",
        ) from None  # fmt: skip
    source = StateSource(handle, body.consistency)
    wm, checkpoint = source.as_of(op.name)
    return json_response(
        {
            "job": job,
            "table": plan.table,
            "consistency": body.consistency,
            "watermark": public_watermark(wm),
            "checkpoint": checkpoint,
            "columns": answer[0],
            "rows": answer[1],
            "keys_read": read.keys_read,
            "next_cursor": read.next_cursor,
        },
        request,
    )


def _plan(handle: JobHandle, query: str) -> PullPlan:
    try:
        require("sql", "a pull query (POST /{job}/sql)")
        from weir.engine.sql.pull import plan_pull  # sqlglot loads with the first query

        return plan_pull(query, tables_of(handle.job.operators))
    except JobDefinitionError as exc:  # SqlError and a missing extra: the query's fault
        raise ApiError(400, "invalid_query", str(exc)) from None


def tables_of(operators: Mapping[str, WindowNode | ProcessNode]) -> dict[str, TableShape]:
    """The tables a pull query may read: window operators and continuous aggregate views."""
    from weir.engine.sql.continuous import ContinuousAggregate
    from weir.engine.sql.pull import TableShape
    from weir.engine.sql.ranked import RankFunction
    from weir.engine.sql.windowed import WindowAggregateRank, WindowJoin, WindowRank

    out: dict[str, TableShape] = {}
    for name, op in operators.items():
        if isinstance(op, WindowNode):
            cols = ("key", "window_start", "window_end", *op.aggregates, "final")
            out[name] = TableShape(name, cols, windowed=True)
        elif isinstance(op.function, ContinuousAggregate):
            fn = op.function
            out[name] = TableShape(name, ("key", *fn.columns, *fn.aggregates), windowed=False)
        elif isinstance(op.function, RankFunction):
            plan = op.function.plan
            known = plan.columns or (*plan.partition, *(f for f, _ in plan.order))
            cols = ("key", plan.rn or "rn", *dict.fromkeys(known))
            out[name] = TableShape(name, cols, windowed=False)
        elif isinstance(op.function, WindowJoin | WindowRank | WindowAggregateRank):
            out[name] = TableShape(name, _window_view_columns(op.function), windowed=False)
    return out


def _window_view_columns(fn: WindowJoin | WindowRank | WindowAggregateRank) -> tuple[str, ...]:
    """A window join's or window Top-N's table: its last window's rows (``state.last``)."""
    from weir.engine.sql.windowed import WindowJoin  # the function's own module, no parser

    if isinstance(fn, WindowJoin):
        shown: tuple[str, ...] = tuple(n for n, _ in fn.plan.columns)
    else:
        rank = fn.plan.rank
        known = rank.columns or (*rank.partition, *(f for f, _ in rank.order))
        shown = (*known, *((rank.rn,) if rank.rn else ()))
    return tuple(dict.fromkeys(("key", "window_start", "window_end", *shown)))


def _read(
    handle: JobHandle, op: WindowNode | ProcessNode, plan: PullPlan, body: SqlRequest
) -> _Read:
    """The rows the plan's keys hold (before WHERE), within the budget."""
    bounds = Bounds(plan.start_from, plan.start_to, MAX_LIMIT)
    if plan.keys is not None:
        if len(plan.keys) > body.budget:
            raise _over_budget(len(plan.keys), body.budget, "names")
        rows = [r for k in plan.keys for r in _rows(handle, op, k, bounds, body.consistency)]
        return _Read(_kept(plan, rows), len(plan.keys), None)
    position = listing_position(op, body.cursor, handle.job.max_parallelism)
    return _listed(handle, op, plan, body, bounds, position)


def _listed(
    handle: JobHandle,
    op: WindowNode | ProcessNode,
    plan: PullPlan,
    body: SqlRequest,
    bounds: Bounds,
    position: keylist.Position | cellkeys.CellPosition | None,
) -> _Read:
    want, rows, read, examined = plan.prefix.encode(), [], 0, 0
    while True:
        limit = min(LIST_PAGE, body.budget - read)
        page = key_page(handle, op, want, position, limit, body.consistency)
        for key in page.keys:
            rows.extend(_kept(plan, _rows(handle, op, key, bounds, body.consistency)))
        read += len(page.keys)
        examined += page.examined  # a rare prefix lists few keys over many positions
        if page.next is None:
            return _Read(rows, read, None)
        cursor = page.next.encode()
        if plan.limit is not None and not plan.whole and len(rows) >= plan.limit:
            return _Read(rows, read, None)  # LIMIT n: the first n rows, and no more pages
        if read >= body.budget or examined >= MAX_POSITIONS:
            if plan.whole:
                raise _over_budget(read, body.budget, "lists")
            return _Read(rows, read, cursor)
        position = listing_position(op, cursor, handle.job.max_parallelism)


def _rows(
    handle: JobHandle, op: WindowNode | ProcessNode, key: str, bounds: Bounds, consistency: str
) -> list[dict[str, Any]]:
    """Key ``key``'s rows as the table has them: its windows, or its current row."""
    try:
        answer = key_answer(handle, op, key, bounds, consistency)
    except ApiError as exc:
        if exc.status == 404:
            return []  # not there (in this view of the state): no rows
        raise
    if isinstance(op, ProcessNode):
        return _view_rows(op, answer)
    key_value = answer["key"]
    return [
        {"key": key_value, "window_start": w.pop("start"), "window_end": w.pop("end"), **w}
        for w in answer["windows"]
    ]


def _view_rows(op: ProcessNode, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A SQL view's rows from its process state: a continuous aggregate's current row, or a
    Top-N or deduplication view's ranked rows (each with its row number)."""
    from weir.engine.sql.ranked import SORT, RankFunction
    from weir.engine.sql.windowed import WindowAggregateRank, WindowJoin, WindowRank

    state = answer["state"]
    if isinstance(op.function, WindowJoin | WindowRank | WindowAggregateRank):
        last = state.get("last") or {"rows": []}
        bounds = {"window_start": last.get("window_start"), "window_end": last.get("window_end")}
        return [{**bounds, **{k: v for k, v in r.items() if k != "op"}} for r in last["rows"]]
    if isinstance(op.function, RankFunction):
        rn = op.function.plan.rn or "rn"
        ranked = enumerate(state.get("rows") or [], start=1)
        return [
            {"key": answer["key"], rn: i, **{k: v for k, v in r.items() if k != SORT}}
            for i, r in ranked
        ]
    row = state.get("row")
    return [dict(row)] if row is not None else []


def _kept(plan: PullPlan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    where = plan.where
    return rows if where is None else [r for r in rows if where(r)]


def _shape(plan: PullPlan, rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Sorted, limited and projected rows, or the one row of aggregates."""
    from weir.engine.sql.pull import ordered, summarize

    if plan.summaries:
        row = summarize(plan.summaries, rows)
        return list(row), [row]
    if plan.order:
        rows = ordered(rows, plan.order)
    if plan.limit is not None:
        rows = rows[: plan.limit]
    columns = list(dict.fromkeys(plan.columns))
    return columns, [{c: r.get(c) for c in columns} for r in rows]


def _over_budget(count: int, budget: int, verb: str) -> ApiError:
    what = (
        f"names {count} keys, more than its scan budget of {budget}"
        if verb == "names"
        else f"reads more than its scan budget of {budget} keys before it can answer (ORDER BY "
        "or aggregates need every row)"
    )
    return ApiError(
        400,
        "scan_budget_exceeded",
        f"the query {what}: name fewer keys, narrow it with key LIKE 'prefix%', drop ORDER "
        f"BY/aggregates to be paged by next_cursor, or raise budget (at most {MAX_BUDGET})",
    )
