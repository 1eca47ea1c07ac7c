"""A brute-force model of count and global windows, triggers and evictors, written from Flink's
``WindowNode``/``EvictingWindowOperator`` rules and weir's contract, not from the engine:
every window keeps the plain list of its ``(timestamp, value)`` records, aggregates are
recomputed from that list at every firing, and the watermark moves after every record.

    out = simulate(records, TSpec(window="count", size=3))
    out.by_key["a"]  # that key's result records, in the order they were emitted

Records are ``{"id", "ts", "value"}``; the aggregates are ``tests.support.reference``'s five.
Triggers and evictors are given as short strings (``"count:3"``, ``"purging:continuous:50"``,
``"time-after:40"``), so Hypothesis can draw them and ``build_job`` can build the same job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.reference import MAX_TIME, MIN_TIME, aggregates, cleanup_time, watermark_after
from weir import Job, WatermarkStrategy, agg, evictors, sources, triggers, windows

Element = tuple[int, int | float]


@dataclass(frozen=True)
class TSpec:
    window: str  # "count", "global", "tumbling", "sliding", "session"
    size: int  # records (count windows) or ms (time windows; a session's gap)
    slide: int | None = None  # records (count) or ms (sliding)
    lateness: int = 0
    bound: int = 0
    trigger: str | None = None  # None: the window's own; else "count:N", "event",
    # "continuous:MS", "never", each optionally behind "purging:"
    evictor: str | None = None  # "count:N" / "count-after:N" / "time:MS" / "time-after:MS"
    op: str = "w"  # the operator's name, which every result record carries


def _trigger_of(text: str) -> triggers.Trigger:
    if text.startswith("purging:"):
        inner = _trigger_of(text.removeprefix("purging:"))
        assert not isinstance(inner, triggers.PurgingTrigger)
        return triggers.purging(inner)
    kind, _, arg = text.partition(":")
    made: dict[str, Any] = {
        "count": lambda: triggers.count(int(arg)),
        "event": triggers.event_time,
        "continuous": lambda: triggers.continuous_event_time(int(arg)),
        "never": triggers.never,
    }
    trigger: triggers.Trigger = made[kind]()
    return trigger


def _evictor_of(text: str) -> evictors.Evictor:
    kind, _, arg = text.partition(":")
    after = kind.endswith("-after")
    if kind.startswith("count"):
        return evictors.count(int(arg), do_evict_after=after)
    return evictors.time(int(arg), do_evict_after=after)


def build_job(spec: TSpec) -> Job:
    job = Job("trig")
    makers: dict[str, Callable[[], windows.WindowAssigner]] = {
        "count": lambda: windows.count(spec.size, slide=spec.slide),
        "global": windows.global_windows,
        "tumbling": lambda: windows.tumbling(ms=spec.size),
        "sliding": lambda: windows.sliding(size_ms=spec.size, slide_ms=spec.slide or spec.size),
        "session": lambda: windows.session(gap_ms=spec.size),
    }
    assigner = makers[spec.window]()
    stream = (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=spec.bound),
        )
        .key_by("id")
        .window(assigner, allowed_lateness_ms=spec.lateness)
    )
    if spec.trigger is not None:
        stream = stream.trigger(_trigger_of(spec.trigger))
    if spec.evictor is not None:
        stream = stream.evictor(_evictor_of(spec.evictor))
    stream.aggregate(
        spec.op,
        count=agg.count(),
        total=agg.sum("value"),
        lo=agg.min("value"),
        hi=agg.max("value"),
        avg=agg.mean("value"),
    )
    return job


@dataclass
class _Win:
    start: int
    end: int
    elements: list[Element] = field(default_factory=list)
    count: int = 0  # the count trigger's records since its last firing
    next_fire: int | None = None  # the continuous trigger's next firing
    owed: list[int | float] | None = None  # fired not final: the values it last fired with


@dataclass
class Outcome:
    by_key: dict[str, list[dict[str, Any]]]
    late: list[dict[str, Any]]


class _Model:
    def __init__(self, spec: TSpec) -> None:
        self.spec = spec
        self.global_ = spec.window in ("count", "global")
        trig, evict = spec.trigger, spec.evictor
        if spec.window == "count" and trig is None:
            trig = f"purging:count:{spec.size}" if spec.slide is None else f"count:{spec.slide}"
        if spec.window == "count" and evict is None and spec.slide is not None:
            evict = f"count:{spec.size}"
        self.purging = (trig or "").startswith("purging:")
        self.trig = (trig or ("never" if self.global_ else "event")).removeprefix("purging:")
        self.evict = evict
        self.windows: dict[str, dict[int, _Win]] = defaultdict(dict)
        self.timers: set[tuple[int, str]] = set()
        self.wm = MIN_TIME
        self.max_ts = MIN_TIME
        self.out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.late: list[dict[str, Any]] = []

    # -- assignment ------------------------------------------------------------------------------

    def windows_of(self, t: int) -> list[tuple[int, int]]:
        if self.global_:
            return [(MIN_TIME, MAX_TIME)]
        size, slide = self.spec.size, self.spec.slide or self.spec.size
        first = t - t % slide
        found = []
        start = first
        while start > t - size:
            found.append((start, start + size))
            start -= slide
        return sorted(found, key=lambda w: w[1])

    def session_of(self, key: str, t: int) -> list[tuple[int, int]]:
        """Flink's merging: ``[t, t + gap)`` and every window of the key it overlaps or touches
        become one, unless that one is already past its cleanup time (then nothing merges)."""
        start, end = t, t + self.spec.size
        hit = sorted(
            (w for w in self.windows[key].values() if w.start <= end and start <= w.end),
            key=lambda w: w.start,
        )
        start = min([start, *(w.start for w in hit)])
        end = max([end, *(w.end for w in hit)])
        if cleanup_time(end, self.spec.lateness) <= self.wm:
            return [(start, end)]  # ``feed`` finds it late
        if hit and (len(hit) > 1 or (hit[0].start, hit[0].end) != (start, end)):
            for w in hit:
                del self.windows[key][w.end]
            nexts = [w.next_fire for w in hit if w.next_fire is not None]
            owed = [w.owed for w in hit if w.owed is not None]
            merged = _Win(
                start,
                end,
                [e for w in hit for e in w.elements],
                sum(w.count for w in hit),
                min(nexts, default=None), owed[-1] if owed else None,
            )  # fmt: skip
            self.windows[key][end] = merged
            if merged.next_fire is not None:
                self.timers.add((merged.next_fire, key))
            if self.trig.partition(":")[0] in ("event", "continuous") and end - 1 > self.wm:
                self.timers.add((end - 1, key))
        return [(start, end)]

    def wmax(self, w: _Win) -> int:
        return MAX_TIME if self.global_ else w.end - 1

    # -- records and time ------------------------------------------------------------------------

    def feed(self, rec: dict[str, Any]) -> None:
        key, t, v = rec["id"], rec["ts"], rec["value"]
        taken = False
        found = self.session_of(key, t) if self.spec.window == "session" else self.windows_of(t)
        for start, end in found:
            if not self.global_ and cleanup_time(end, self.spec.lateness) <= self.wm:
                continue
            taken = True
            w = self.windows[key].setdefault(end, _Win(start, end))
            w.elements.append((t, v))
            if self.on_element(key, w, t):
                self.fire(key, w, self.wm)
            if not self.global_:
                self.timers.add((cleanup_time(end, self.spec.lateness), key))
        if not taken:
            self.late.append({"key": key, "ts": t, "watermark": self.wm})
        self.max_ts = max(self.max_ts, t)
        self.advance(watermark_after(self.max_ts, self.spec.bound))

    def on_element(self, key: str, w: _Win, t: int) -> bool:
        kind, _, arg = self.trig.partition(":")
        if kind == "count":
            w.count += 1
            if w.count >= int(arg):
                w.count = 0
                return True
            return False
        if kind in ("event", "continuous"):
            if self.wmax(w) <= self.wm:
                return True
            self.timers.add((self.wmax(w), key))
            if kind == "continuous" and w.next_fire is None:
                w.next_fire = min(t - t % int(arg) + int(arg), self.wmax(w))
                self.timers.add((w.next_fire, key))
        return False

    def on_time(self, w: _Win, at: int) -> bool:
        kind, _, arg = self.trig.partition(":")
        if kind not in ("event", "continuous"):
            return False
        if at == self.wmax(w):
            return True
        if kind == "continuous" and w.next_fire == at:
            if self.wmax(w) <= self.wm:  # the window's own end fires in this jump: once
                w.next_fire = None
                return False
            # the first multiple of the interval after the watermark (one firing per jump)
            now = max(self.wm, at)
            nxt = min(now - now % int(arg) + int(arg), self.wmax(w))
            w.next_fire = nxt if nxt > now else None
            if nxt > now:
                self.timers.add((nxt, self.key_of(w)))
            return True
        return False

    def key_of(self, w: _Win) -> str:
        return next(k for k, ws in self.windows.items() if any(x is w for x in ws.values()))

    def advance(self, wm: int) -> None:
        self.wm = max(self.wm, wm)
        while True:
            due = sorted(x for x in self.timers if x[0] <= self.wm)
            if not due:
                return
            at, key = due[0]
            self.timers.discard((at, key))
            for end in sorted(self.windows[key]):
                w = self.windows[key][end]
                if self.on_time(w, at):
                    self.fire(key, w, self.wm)
                if not self.global_ and at == cleanup_time(end, self.spec.lateness):
                    self.clean_up(key, w)
                    del self.windows[key][end]

    def clean_up(self, key: str, w: _Win) -> None:
        """A time window emitted with ``final: false`` is emitted once more, final: with what
        the window function would see now, or else with what it last fired with."""
        if w.owed is None:
            return
        seen = w.elements
        if self.evict is not None and "-after" not in self.evict:
            seen = self.evicted(w.elements)
        values = [v for _, v in seen] or w.owed
        self.out[key].append(
            {
                "op": self.spec.op,
                "key": key,
                "start": w.start,
                "end": w.end,
                **aggregates(values),
                "final": True,
            }
        )

    def fire(self, key: str, w: _Win, wm: int) -> None:
        seen = w.elements
        before = self.evict is not None and "-after" not in self.evict
        if self.evict is not None:
            evicted = self.evicted(w.elements)
            if before:
                seen = evicted
            w.elements = evicted
        if not seen:
            return
        times = [t for t, _ in seen]
        if self.global_:
            start, end = min(times), min(max(times) + 1, MAX_TIME)
            final = self.purging
        else:
            start, end = w.start, w.end
            final = cleanup_time(end, self.spec.lateness) <= wm
        self.out[key].append(
            {"op": self.spec.op, "key": key, "start": start, "end": end,
             **aggregates([v for _, v in seen]), "final": final}
        )  # fmt: skip
        if not self.global_:  # a final emission pays what the window owed
            w.owed = None if final else [v for _, v in seen]
        if self.purging:
            w.elements = []

    def evicted(self, elements: list[Element]) -> list[Element]:
        assert self.evict is not None
        kind, _, arg = self.evict.partition(":")
        n = int(arg)
        if kind.startswith("count"):
            return elements[-n:] if len(elements) > n else list(elements)
        if not elements:
            return []
        newest = max(t for t, _ in elements)
        return [(t, v) for t, v in elements if t > newest - n]


def simulate(records: list[dict[str, Any]], spec: TSpec) -> Outcome:
    model = _Model(spec)
    for rec in records:
        model.feed(rec)
    model.advance(MAX_TIME)
    return Outcome(dict(model.out), model.late)


def by_key(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        out[r["key"]].append(r)
    return dict(out)
