"""How long the SQL front end takes to turn the README's SQL job into a ``Job`` (it runs once
per process that loads the job, never per record): ``python -m loadtest.sql_parse``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import sqlglot

from weir.engine.sql import load_script, parse

EXAMPLE = Path(__file__).resolve().parents[1] / "app" / "examples" / "ad_stats.sql"
LEGACY = (
    "SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND), COUNT(*) AS n FROM events "
    "WHERE event = 'impression' GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), id"
)


def best_ms(fn: Callable[[], object], n: int = 100, rounds: int = 5) -> float:
    """The fastest of ``rounds`` means over ``n`` calls, in ms (the least disturbed round)."""
    means = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - t) / n)
    return min(means) * 1e3


def main() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    query = text.split("CREATE VIEW impressions AS")[1].split(";")[0]
    print(f"parse one window TVF query: {best_ms(lambda: parse(query)):.2f} ms")
    print(f"parse {EXAMPLE.name} ({len(parse(text))} statements): "
          f"{best_ms(lambda: parse(text), 20):.2f} ms")  # fmt: skip
    print(f"load {EXAMPLE.name} into a Job (parse + compile): "
          f"{best_ms(lambda: load_script(EXAMPLE), 20):.2f} ms")  # fmt: skip
    print(f"legacy group window query: weir's dialect {best_ms(lambda: parse(LEGACY)):.2f} ms, "
          f"sqlglot's default {best_ms(lambda: sqlglot.parse_one(LEGACY)):.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
