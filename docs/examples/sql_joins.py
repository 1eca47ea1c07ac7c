"""Joins of two streams in SQL: a LEFT OUTER interval join and an event-time temporal join."""

from weir import Job, WatermarkStrategy, sources, testing

job = Job("shop")
events = job.source(
    sources.jsonl("events.jsonl"),
    timestamp="ts",
    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000),
)
tables = {
    "orders": events.filter(lambda e: e["kind"] == "order"),
    "payments": events.filter(lambda e: e["kind"] == "payment"),
    "rates": events.filter(lambda e: e["kind"] == "rate"),
}
# every order with its payments within 10 s, or once with NULLs when 10 s passed without one
job.sql(
    "paid",
    """SELECT o.order_id, o.ts AS ordered_at, p.ts AS paid_at
       FROM orders AS o LEFT JOIN payments AS p
         ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND""",
    tables=tables,
)
# every order with the exchange rate of its currency valid when it was placed
job.sql(
    "priced",
    """SELECT o.order_id, o.cents, o.currency, r.per_eur
       FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r
         ON o.currency = r.currency""",
    tables=tables,
    primary_keys={"rates": ("currency",)},  # a versioned table: one row per currency
)
result = testing.run(
    job,
    [
        {"kind": "rate", "currency": "USD", "per_eur": 1.10, "ts": 0},
        {"kind": "order", "order_id": 1, "currency": "USD", "cents": 500, "ts": 1_000},
        {"kind": "payment", "order_id": 1, "ts": 4_000},
        {"kind": "rate", "currency": "USD", "per_eur": 1.08, "ts": 5_000},
        {"kind": "order", "order_id": 2, "currency": "USD", "cents": 900, "ts": 6_000},
        {"kind": "order", "order_id": 3, "currency": "USD", "cents": 200, "ts": 30_000},
    ],
)
for view in ("paid", "priced"):
    for row in result.by_operator[view]:
        print(row)
