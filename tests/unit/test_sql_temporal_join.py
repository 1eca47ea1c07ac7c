"""Event-time temporal joins in SQL (issue 43, ``FOR SYSTEM_TIME AS OF``): Flink's
``TemporalJoinITCase`` cases ported by name (on its insert-only ``currency_history`` data: weir's
streams are append-only, so the changelog cases' ``-U``/``-D`` rows have no counterpart), each
form against a brute-force model at parallelism 1, 2 and 4, late probe rows, the state kept per
key, and the refusals. Flink refuses its processing-time cases (a table that is no lookup
source); in weir they are lookup joins, ``test_sql_lookup_join.py``."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from tests.support.join_reference import Arrival
from tests.support.join_support import JoinDriver
from weir import Job, WatermarkStrategy, sources, testing
from weir.base.errors import JobDefinitionError
from weir.engine.explain import describe
from weir.engine.nodes import ProcessNode
from weir.engine.spark.plan import backfill_operators
from weir.engine.sql import SqlError, SqlUnsupported

DAY, MINUTE, SECOND = 86_400_000, 60_000, 1_000
T15 = 1_597_449_600_000  # 2020-08-15T00:00:00Z
T16 = T15 + DAY


def _job(query: str, *, bound_ms: int = 2 * DAY, keys: tuple[str, ...] = ("currency",)) -> Job:
    job = Job("temporal")
    events = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=bound_ms),
    )
    orders = events.filter(lambda e: e["t"] == "order")
    rates = events.filter(lambda e: e["t"] == "rate")
    job.sql("j", query, tables={"orders": orders, "rates": rates}, primary_keys={"rates": keys})
    return job


def _order(order_id: int, currency: str, amount: int, ts: int) -> dict[str, Any]:
    return {"t": "order", "order_id": order_id, "currency": currency, "currency_no": "no1",
            "amount": amount, "ts": ts}  # fmt: skip


def _rate(currency: str, rate: int, ts: int) -> dict[str, Any]:
    return {"t": "rate", "currency": currency, "currency_no": "no1", "rate": rate, "ts": ts}


# Flink's orders_rowtime after its updates (order 2's +U, order 6 deleted) and currency_history
ORDERS = [
    _order(1, "Euro", 12, T15 + MINUTE), _order(3, "RMB", 40, T15 + 3 * MINUTE),
    _order(4, "Euro", 14, T16 + 4 * MINUTE), _order(2, "US Dollar", 18, T16 + 3 * MINUTE),
    _order(5, "RMB", 40, T16 + 3 * MINUTE),
]  # fmt: skip
HISTORY = [
    _rate("Euro", 114, T15 + SECOND), _rate("US Dollar", 102, T15 + 2 * SECOND),
    _rate("Yen", 1, T15 + 3 * SECOND), _rate("RMB", 702, T15 + 4 * SECOND),
    _rate("Euro", 118, T16 + MINUTE), _rate("US Dollar", 102, T16 + 2 * MINUTE),
    _rate("US Dollar", 106, T16 + 2 * MINUTE),
]  # fmt: skip
SELECT = (
    "SELECT o.order_id AS order_id, o.currency AS currency, o.amount AS amount, "
    "o.ts AS order_time, r.rate AS rate, r.ts AS currency_time FROM orders AS o "
)


def _flink_run(query: str, events: list[dict[str, Any]] | None = None, **kw: Any) -> list[str]:
    events = events or sorted(HISTORY + ORDERS, key=lambda e: e["ts"])
    got = testing.run(_job(query, **kw), events)
    assert not got.side.get("j", {}).get("late") and not got.dead
    return sorted(
        f"{r['order_id']},{r['currency']},{r['amount']},{r['rate']}" for r in got.by_operator["j"]
    )


def test_event_time_temporal_join_with_deduplicate_last_view() -> None:
    """``testEventTimeTemporalJoinWithDeduplicateLastView``: the version valid at each order's
    time; of two versions at one time (US Dollar at 00:02) the later arrival."""
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    assert _flink_run(query) == sorted(
        ["1,Euro,12,114", "2,US Dollar,18,106", "3,RMB,40,702", "4,Euro,14,118", "5,RMB,40,702"]
    )


def test_event_time_temporal_join_with_multi_keys() -> None:
    """``testEventTimeTemporalJoinWithMultiKeys``: a primary key of two columns."""
    query = (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r "
        "ON o.currency_no = r.currency_no AND o.currency = r.currency"
    )
    got = _flink_run(query, keys=("currency", "currency_no"))
    assert got == sorted(
        ["1,Euro,12,114", "2,US Dollar,18,106", "3,RMB,40,702", "4,Euro,14,118", "5,RMB,40,702"]
    )


def test_event_time_temporal_join_with_filter() -> None:
    """``testEventTimeTemporalJoinWithFilter``: a WHERE term on the versioned table filters
    the joined rows; it does not pick an older version that passes it."""
    query = (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency "
        "WHERE r.rate < 115"
    )
    assert _flink_run(query) == ["1,Euro,12,114", "2,US Dollar,18,106"]


def test_event_time_temporal_join_with_non_equal_condition() -> None:
    """``testEventTimeTemporalJoinWithNonEqualCondition``: ON terms beyond the key are the
    join's condition (order 3 joins RMB's 702 here: this data deletes no version)."""
    query = (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency "
        "AND o.order_id < 5 AND r.rate > 102"
    )
    assert _flink_run(query) == ["1,Euro,12,114", "2,US Dollar,18,106", "3,RMB,40,702",
                                 "4,Euro,14,118"]  # fmt: skip


def test_event_time_temporal_join_equal_condition_on_key() -> None:
    """``testEventTimeTemporalJoinEqualConditionOnKey``."""
    query = (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency "
        "AND o.currency = 'Euro' AND r.rate > 102"
    )
    assert _flink_run(query) == ["1,Euro,12,114", "4,Euro,14,118"]


def test_event_time_left_temporal_join() -> None:
    """``testEventTimeLeftTemporalJoin``: an order without a valid version (Pound, and a Yen
    order before Yen's first rate) is kept, padded with NULLs; so is one whose version fails
    the ON condition."""
    query = (
        SELECT + "LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency "
        "AND r.rate <> 702"
    )
    extra = [_order(6, "Pound", 7, T16), _order(7, "Yen", 9, T15)]
    events = sorted(HISTORY + ORDERS + extra, key=lambda e: e["ts"])
    assert _flink_run(query, events) == sorted(
        ["1,Euro,12,114", "2,US Dollar,18,106", "3,RMB,40,None", "4,Euro,14,118",
         "5,RMB,40,None", "6,Pound,7,None", "7,Yen,9,None"]
    )  # fmt: skip


def _events(n: int, seed: int) -> list[dict[str, Any]]:
    """Orders and rates of four currencies, out of order within 300 ms (the bound is 1 s)."""
    rng = random.Random(seed)
    out, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 50)
        ts = clock - rng.randint(0, 300)
        cur = rng.choice(["EUR", "USD", "GBP", "JPY"])
        if rng.random() < 0.3:
            out.append({**_rate(cur, i, ts), "i": i})
        else:
            out.append({**_order(i, cur, i, ts), "i": i})
    return out


def _model(events: list[dict[str, Any]], left: bool, bound: int = 1_000) -> Counter[Any]:
    """From the rules: an order at ``t`` (on time: ``t`` above the watermark it arrives under)
    joins, when the first later record's watermark reaches ``t`` (or at the end), the latest
    version of its currency at or before ``t`` among those that arrived before then."""
    wms, top = [], None
    for e in events:
        wms.append(-(1 << 63) if top is None else top - bound - 1)
        top = e["ts"] if top is None else max(top, e["ts"])
    out: Counter[Any] = Counter()
    for i, e in enumerate(events):
        if e["t"] != "order" or e["ts"] <= wms[i]:
            continue
        fire = next((j for j in range(i + 1, len(events)) if wms[j] >= e["ts"]), len(events))
        valid = [
            (v["ts"], j, v["rate"]) for j, v in enumerate(events[:fire])
            if v["t"] == "rate" and v["currency"] == e["currency"] and v["ts"] <= e["ts"]
        ]  # fmt: skip
        if valid:
            out[(e["order_id"], max(valid)[2])] += 1
        elif left:
            out[(e["order_id"], None)] += 1
    return out


@pytest.mark.parametrize("kind", ["INNER", "LEFT"])
def test_each_form_equals_the_model_at_every_parallelism(kind: str) -> None:
    query = (
        f"SELECT o.order_id AS order_id, r.rate AS rate FROM orders AS o {kind} JOIN rates "
        "FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    )
    events = _events(800, seed=len(kind))
    want = _model(events, kind == "LEFT")
    assert sum(want.values()) > 300
    if kind == "LEFT":
        assert want[next(k for k in want if k[1] is None)]  # some orders have no version
    for p in (1, 2, 4):
        got = testing.run(_job(query, bound_ms=1_000), events, parallelism=p)
        assert Counter((r["order_id"], r["rate"]) for r in got.by_operator["j"]) == want, p
        assert not got.side.get("j", {}).get("late") and not got.dead


class PythonTemporalJoin:
    """The LEFT temporal join as a user writes it with the job API (``connect`` and a keyed
    co-process function): orders wait in list state for the watermark, every rate is kept."""

    def process1(self, order: dict[str, Any], ctx: Any) -> None:
        if ctx.timestamp > ctx.watermark:  # else late: SQL's goes to the late output
            ctx.list("orders").append(order)
            ctx.register_event_time_timer(ctx.timestamp)

    def process2(self, rate: dict[str, Any], ctx: Any) -> None:
        ctx.list("rates").append(rate)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        rates = list(enumerate(ctx.list("rates").get()))
        waiting = ctx.list("orders").get()
        ctx.list("orders").clear()
        for order in waiting:
            if order["ts"] > timestamp:
                ctx.list("orders").append(order)
                continue
            valid = [(r["ts"], i, r["rate"]) for i, r in rates if r["ts"] <= order["ts"]]
            ctx.emit({"order_id": order["order_id"], "rate": max(valid)[2] if valid else None})


def test_the_left_join_equals_its_python_twin_at_parallelism_1_and_2() -> None:
    events = _events(600, seed=4)
    query = (
        "SELECT o.order_id AS order_id, r.rate AS rate FROM orders AS o LEFT JOIN rates "
        "FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    )
    for p in (1, 2):
        python = Job("temporal")
        src = python.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
        )
        orders = src.filter(lambda e: e["t"] == "order")
        rates = src.filter(lambda e: e["t"] == "rate")
        orders.connect(rates).key_by("currency", "currency").process(PythonTemporalJoin(), name="j")
        twin = testing.run(python, events, parallelism=p).by_operator["j"]
        sql = testing.run(_job(query, bound_ms=1_000), events, parallelism=p).by_operator["j"]
        assert Counter((r["order_id"], r["rate"]) for r in sql) == Counter(
            (r["order_id"], r["rate"]) for r in twin
        ), p
        assert len(twin) > 300


def test_a_late_order_goes_to_the_late_output() -> None:
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    events = [_rate("EUR", 1, 0), _order(1, "EUR", 5, 10), _order(2, "EUR", 5, 5_000),
              _order(3, "EUR", 6, 10)]  # fmt: skip
    got = testing.run(_job(query, bound_ms=100), events)
    assert sorted(r["order_id"] for r in got.by_operator["j"]) == [1, 2]
    assert [x["record"]["order_id"] for x in got.side["j"]["late"]] == [3]


def test_a_late_version_still_becomes_the_newest_for_later_orders() -> None:
    """A version behind the watermark is not late (Flink keeps it): orders after it join it
    when it is the newest at their time."""
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    events = [_rate("EUR", 1, 0), _order(9, "X", 0, 5_000), _rate("EUR", 2, 100),
              _order(1, "EUR", 5, 6_000)]  # fmt: skip
    got = testing.run(_job(query, bound_ms=100), events)
    assert [(r["order_id"], r["rate"]) for r in got.by_operator["j"]] == [(1, 2)]


def test_versions_the_watermark_passed_are_dropped_but_the_valid_one() -> None:
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    op = _job(query).operators["j"]
    assert isinstance(op, ProcessNode)
    d = JoinDriver(op.function)
    d.feed([Arrival("right", "EUR", ts, 0, _rate("EUR", r, ts)) for r, ts in
            ((1, 10), (2, 20), (3, 30), (4, 40))])  # fmt: skip
    d.feed([Arrival("left", "EUR", 35, 0, _order(1, "EUR", 5, 35))])
    d.advance(999)
    assert [e[0] for e in d.buffer("EUR", "right")] == [40]  # 30 and older are superseded
    assert d.buffer("EUR", "left") == []  # the order joined and left the buffer
    assert [(r["order_id"], r["rate"]) for r in d.out.results] == [(1, 3)]


def test_a_null_key_joins_nothing() -> None:
    query = SELECT + "LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    events = [{**_rate("x", 1, 0), "currency": None}, {**_order(1, "x", 5, 10), "currency": None}]
    rows = testing.run(_job(query), events).by_operator["j"]
    assert [(r["order_id"], r["rate"]) for r in rows] == [(1, None)]


def test_explain_names_the_temporal_join() -> None:
    query = SELECT + "LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    assert "LEFT temporal join FOR SYSTEM_TIME AS OF" in str(describe(_job(query)))


REFUSED = {
    "neither time": (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.amount AS r ON o.currency = r.currency",
        SqlUnsupported,
        r"AS OF o.amount: a temporal join is AS OF the probe table's time attribute \(o.ts",
    ),
    "another table's time": (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF r.ts AS r ON o.currency = r.currency",
        SqlUnsupported,
        "AS OF r.ts: a temporal join is AS OF",
    ),
    "right join": (
        SELECT + "RIGHT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency",
        SqlUnsupported,
        "a temporal join is INNER or LEFT",
    ),
    "not the primary key": (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency_no = r.currency_no",
        SqlUnsupported,
        r"ON equates its whole primary key \(currency\)",
    ),
    "no key at all": (
        SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.amount > r.rate",
        SqlUnsupported,
        "ON equates its whole primary key",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_name_the_construct(case: str) -> None:
    query, kind, message = REFUSED[case]
    with pytest.raises(kind, match=message):
        _job(query)


def test_a_versioned_table_needs_a_primary_key() -> None:
    job = Job("temporal")
    events = job.source(sources.jsonl("/unused.jsonl"), timestamp="ts")
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    with pytest.raises(SqlError, match="table 'rates' has no PRIMARY KEY"):
        job.sql("j", query, tables={"orders": events, "rates": events})


def test_the_backfill_refuses_a_temporal_join_by_name() -> None:
    query = SELECT + "JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency"
    with pytest.raises(JobDefinitionError, match="'j' of job 'temporal' is a SQL temporal join"):
        backfill_operators(_job(query), None)
