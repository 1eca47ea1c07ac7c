"""Helpers shared by the test packages: event files, job files, the ``weir`` command, waiting.

Fixtures in ``tests/conftest.py`` wrap these as factories; property tests (which cannot take
function-scoped fixtures under Hypothesis) import them directly.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tests.reference import AGGREGATES_SRC, IMPRESSIONS_ONLY, Step

T = TypeVar("T")

_CONSOLE_SCRIPT = Path(sys.executable).with_name("weir")
WEIR: list[str] = (
    [str(_CONSOLE_SCRIPT)] if _CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "app.cli"]
)

# Keys the generated inputs use: plain ones, one with a slash, a unicode one, and an int
# (stored and queried as its decimal string).
KEYS: tuple[str | int, ...] = ("ad-0", "ad-1", "ad-2", "ad-3", "ad-4", "a/b", "ü-ключ", 17)
KEY_WEIGHTS = (30, 20, 12, 8, 5, 5, 5, 5)


def wait_until(
    fn: Callable[[], T | None], timeout: float = 15.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.1f}s waiting for {what or fn!r}; last value {last!r}"
            )
        time.sleep(interval)


def write_lines(path: Path, lines: Iterable[str | bytes]) -> Path:
    """Write raw lines (a newline is added to each) exactly as given."""
    with open(path, "wb") as fh:
        for line in lines:
            fh.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


def event_lines(events: Iterable[dict[str, Any]]) -> list[str]:
    return [json.dumps(e, ensure_ascii=False) for e in events]


def write_events(path: Path, events: Sequence[dict[str, Any]]) -> Path:
    """Write events as JSONL (one object per line)."""
    return write_lines(path, event_lines(events))


def read_jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def make_events(
    n: int,
    seed: int,
    *,
    start: int = -3_000,
    step: int = 5,
    jitter: int = 150,
    far_fraction: float = 0.05,
    far_lag: tuple[int, int] = (1_000, 6_000),
    keys: Sequence[str | int] = KEYS,
    weights: Sequence[int] = KEY_WEIGHTS,
) -> list[dict[str, Any]]:
    """Out-of-order ad events: most lag the running clock by up to ``jitter`` ms, a
    ``far_fraction`` lag by ``far_lag`` ms (late, or within lateness); 10% are clicks."""
    rng = random.Random(seed)
    clock = start
    out = []
    for _ in range(n):
        clock += rng.randint(0, 2 * step)
        lag = rng.randint(*far_lag) if rng.random() < far_fraction else rng.randint(0, jitter)
        out.append(
            {
                "id": rng.choices(keys, weights=weights)[0],
                "event": "click" if rng.random() < 0.1 else "impression",
                "ts": clock - lag,
                "value": rng.randint(-50, 100),
            }
        )
    return out


def job_text(
    source_path: Path,
    *,
    bound: int,
    size: int,
    lateness: int,
    name: str = "t1",
    op: str = "imps",
    steps: Sequence[Step] = IMPRESSIONS_ONLY,
    max_parallelism: int = 128,
) -> str:
    chain = "".join(f"\n    .{kind}({src})" for kind, src in steps)
    return f"""from engine import Job, WatermarkStrategy, agg, sources, windows

job = Job({name!r}, max_parallelism={max_parallelism})
(
    job.source(
        sources.jsonl({str(source_path)!r}),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms={bound}),
    ){chain}
    .key_by("id")
    .window(windows.tumbling(ms={size}), allowed_lateness_ms={lateness})
    .aggregate({op!r}, {AGGREGATES_SRC})
)
"""
