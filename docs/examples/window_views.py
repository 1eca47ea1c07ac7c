"""A window join and a window Top-N: each emits a window's rows once, when the window fires."""

from weir import Job, WatermarkStrategy, sources, testing

job = Job("shop")
orders = job.source(
    sources.jsonl("orders.jsonl"),
    timestamp="ts",
    watermarks=WatermarkStrategy.sql_delay(ms=1_000),
)
MINUTE = "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
job.sql(
    "paid",  # each order with its payments of the same minute; an order unpaid gets NULLs
    f"""SELECT O.shop, O.window_start, O.cents AS ordered, P.cents AS paid
    FROM (SELECT * FROM {MINUTE} WHERE kind = 'order') O
    LEFT JOIN (SELECT * FROM {MINUTE} WHERE kind = 'payment') P
    ON O.window_start = P.window_start AND O.window_end = P.window_end AND O.shop = P.shop""",
    tables={"orders": orders},
)
job.sql(
    "biggest",  # the two biggest orders of each minute, over every shop
    f"""SELECT shop, cents, window_start, rn FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                                   ORDER BY cents DESC) AS rn
      FROM {MINUTE} WHERE kind = 'order')
    WHERE rn <= 2""",
    tables={"orders": orders},
)
events = [
    {"shop": "north", "kind": "order", "ts": 1_000, "cents": 450},
    {"shop": "south", "kind": "order", "ts": 2_000, "cents": 300},
    {"shop": "north", "kind": "payment", "ts": 30_000, "cents": 450},
    {"shop": "east", "kind": "order", "ts": 40_000, "cents": 900},
    {"shop": "north", "kind": "order", "ts": 61_000, "cents": 120},
]
result = testing.run(job, events)
for row in result.results:
    print(row)
