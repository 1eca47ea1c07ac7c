"""Bad input goes to the dead letters with its reason; the job goes on."""

from weir import Job, agg, sources, testing, windows

job = Job("orders")
(
    job.source(sources.jsonl("orders.jsonl"), timestamp="ts")
    .map(lambda order: {**order, "cents": round(order["price"] * 100)})
    .key_by("shop")
    .window(windows.tumbling(ms=60_000))
    .aggregate("revenue", cents=agg.sum("cents"))
)

events = [
    {"shop": "north", "ts": 1_000, "price": 9.99},
    {"shop": "north", "ts": 2_000},  # no price: the map raises
    {"shop": "north", "ts": "soon", "price": 1.0},  # not an epoch-ms timestamp
    {"ts": 3_000, "price": 5.0},  # no key
    {"shop": "north", "ts": 4_000, "price": 0.01},
]
result = testing.run(job, events)
print(result.results)
for dead in result.dead:
    print(dead["stage"], "|", dead["reason"])
