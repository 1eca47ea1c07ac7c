"""Synthetic workloads. ``ads``: ``{"id", "event", "ts", "value"}`` with Zipf-skewed ids
``ad-<i>``; ``sensors``: ``{"id", "ts", "temperature", "humidity"}`` with ids ``sensor-<i>``.

Options: ``rate`` (events/s, 0 = as fast as possible), ``ids`` (number of distinct ids),
``skew`` (Zipf exponent; ``ad-0`` is the most frequent), ``disorder`` (max ms an event's time
lags the clock), ``seed``, ``count`` (stop after this many; unbounded when absent), ``clicks``
(fraction of click events), ``clock`` (``wall``: event time is now; ``synthetic``: event ``i`` is at
``start + int(i * step)`` ms, for reproducible files), ``splits`` (how many source splits;
default one per worker).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

from weir.base.errors import ConfigError
from weir.engine.sources.base import SourceBatch

WORKLOADS = ("ads", "sensors")
_ID_PREFIX = {"ads": "ad", "sensors": "sensor"}


@dataclass(frozen=True, slots=True)
class GeneratorSource:
    """Generated events (``sources.generator``): ad impressions and clicks, or sensor
    readings, at ``rate`` events a second over ``ids`` keys; endless unless ``count``."""

    workload: str = "ads"
    rate: float = 1000.0
    ids: int = 1000
    skew: float = 1.1
    disorder: int = 0
    seed: int = 7
    count: int | None = None
    clicks: float = 0.1
    clock: str = "wall"
    start: int = 1_700_000_000_000
    step: float = 1.0
    split_count: int | None = None  # the `splits` option; None: one per worker

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ConfigError(
                f"unknown generator workload {self.workload!r}; use one of {', '.join(WORKLOADS)}"
            )
        checks = [
            (self.rate >= 0, f"rate={self.rate} must be >= 0 (0 = unthrottled)"),
            (self.ids >= 1, f"ids={self.ids} must be >= 1"),
            (self.skew >= 0, f"skew={self.skew} must be >= 0"),
            (self.disorder >= 0, f"disorder={self.disorder} must be >= 0 ms"),
            (self.count is None or self.count >= 0, f"count={self.count} must be >= 0"),
            (0 <= self.clicks <= 1, f"clicks={self.clicks} must be within [0, 1]"),
            (self.clock in ("wall", "synthetic"), f"clock={self.clock!r}; use wall or synthetic"),
            (self.step >= 0, f"step={self.step} must be >= 0"),
            (
                self.split_count is None or self.split_count >= 1,
                f"splits={self.split_count} must be >= 1",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"generator://{self.workload}: {message}")

    @property
    def bounded(self) -> bool:
        """Whether it stops after ``count`` events."""
        return self.count is not None

    def describe(self) -> str:
        """The ``generator://`` URL of its settings."""
        return f"generator://{self.workload}?rate={self.rate:g}&ids={self.ids}&seed={self.seed}"

    def splits(self, parallelism: int = 1) -> list[str]:
        """``splits`` splits (default: one per worker); each produces ``rate/n`` events/s and
        ``count/n`` events."""
        n = self.split_count or max(1, parallelism)
        return [f"{i}/{n}" for i in range(n)]

    def open(self, split: str, offset: Any = None) -> AdsReader:
        """A reader of split ``i/n`` from position ``offset`` (None: the start)."""
        index, _, total = split.partition("/")
        i, n = int(index), int(total or 1)
        share = self
        if n > 1:
            count = None if self.count is None else self.count // n + (i < self.count % n)
            share = replace(
                self,
                rate=self.rate / n,
                count=count,
                seed=self.seed * 7919 + i,
                step=self.step * n,
                start=self.start + int(i * self.step),
            )
        return AdsReader(share, int(offset or 0), split)


BLOCK = 1024  # events are drawn in fixed blocks, so batch sizes and restarts never change them
Draw = tuple[str, str, int, int]  # id, event, value, lag behind the clock (disorder)


class AdsReader:
    def __init__(self, spec: GeneratorSource, emitted: int, split: str = "0/1") -> None:
        self._split = split
        self._spec = spec
        self._ids = [f"{_ID_PREFIX[spec.workload]}-{i}" for i in range(spec.ids)]
        self._cum = list(accumulate(1.0 / (i + 1) ** spec.skew for i in range(spec.ids)))
        self._block_index = -1
        self._block: list[Draw] = []
        self._emitted = emitted
        self._opened_at = emitted
        self._t0 = time.monotonic()

    def read_batch(self, max_records: int) -> SourceBatch:
        spec = self._spec
        n = max_records
        if spec.count is not None:
            n = min(n, spec.count - self._emitted)
            if n <= 0:
                return SourceBatch([], decoded=True, end=True, offsets={self._split: self._emitted})
        if spec.rate > 0:
            n = min(n, self._due())
            if n <= 0:
                time.sleep(0.005)
                return SourceBatch([], decoded=True, offsets={self._split: self._emitted})
        records = self._make(n)
        self._emitted += n
        return SourceBatch(records, decoded=True, offsets={self._split: self._emitted})

    def _due(self) -> int:
        elapsed = time.monotonic() - self._t0
        return int(elapsed * self._spec.rate) - (self._emitted - self._opened_at)

    def _draws(self, first: int, n: int) -> list[Draw]:
        out: list[Draw] = []
        i = first
        while len(out) < n:
            block, offset = divmod(i, BLOCK)
            if block != self._block_index:
                self._block = self._draw_block(block)
                self._block_index = block
            taken = self._block[offset : offset + n - len(out)]
            out.extend(taken)
            i += len(taken)
        return out

    def _draw_block(self, block: int) -> list[Draw]:
        spec = self._spec
        rng = random.Random(f"{spec.seed}:{block}")  # str seeds hash with SHA-512: stable
        rand = rng.random
        ids = rng.choices(self._ids, cum_weights=self._cum, k=BLOCK)
        d, c = spec.disorder, spec.clicks
        return [
            (
                i,
                "click" if rand() < c else "impression",
                int(rand() * 100) + 1,
                int(rand() * (d + 1)) if d else 0,
            )
            for i in ids
        ]

    def _make(self, n: int) -> list[dict[str, Any]]:
        spec = self._spec
        i0 = self._emitted
        if spec.clock == "wall":
            now = int(time.time() * 1000)
            base = [now] * n
        else:
            step, start = spec.step, spec.start
            base = [start + int((i0 + i) * step) for i in range(n)]
        draws = self._draws(i0, n)
        if spec.workload == "sensors":
            return [
                {"id": i, "ts": b - lag, "temperature": round(15 + v * 0.2, 1), "humidity": v}
                for (i, _, v, lag), b in zip(draws, base, strict=True)
            ]
        return [
            {"id": i, "event": e, "ts": b - lag, "value": v}
            for (i, e, v, lag), b in zip(draws, base, strict=True)
        ]

    def offset(self) -> int:
        return self._emitted

    def lag(self) -> int | None:
        return None

    def commit(self, offset: int) -> None:
        return None

    def close(self) -> None:
        return None
