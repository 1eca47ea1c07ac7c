"""A continuous aggregate's upsert changelog: every order emits its shop's new row."""

from pathlib import Path

from weir import testing
from weir.engine.sql import load_script

job = load_script(Path(__file__).parent / "views.sql")
orders = [
    {"shop": "north", "item": "tea", "ts": 1_000, "cents": 450},
    {"shop": "south", "item": "cake", "ts": 2_000, "cents": 300},
    {"shop": "north", "item": "cake", "ts": 61_000, "cents": 300},
    {"shop": "north", "item": "tea", "ts": 30_000, "cents": 450},  # behind the watermark: counted
]
result = testing.run(job, orders)
for row in result.by_operator["revenue"]:
    print(row)
