"""A brute-force model of weir's semantics, written from the contract (DESIGN.md, "Time"), not
from the engine: one record at a time, the watermark recomputed after every record, every window
kept as the plain list of its values.

    outcome = simulate(lines, Spec(bound=200, size=1_000, lateness=1_500))
    outcome.emissions[("ad-0", 0, 1_000)]  # [{"key", "start", "end", <aggs>, "final"}, ...]

The aggregates are fixed to the ones the test jobs use:
``count=agg.count(), total=agg.sum("value"), lo=agg.min("value"), hi=agg.max("value"),
avg=agg.mean("value")``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

WindowKey = tuple[str, int, int]
MIN_TIME = -(1 << 63)  # event time is a signed 64-bit integer (Flink's long)
MAX_TIME = (1 << 63) - 1
Step = tuple[str, str]  # ("filter" | "map" | "flat_map", source text of a lambda)

IMPRESSIONS_ONLY: tuple[Step, ...] = (("filter", "lambda e: e['event'] == 'impression'"),)
AGGREGATES_SRC = (
    'count=agg.count(), total=agg.sum("value"), lo=agg.min("value"), '
    'hi=agg.max("value"), avg=agg.mean("value")'
)
AGG_NAMES = ("count", "total", "lo", "hi", "avg")
MAX_KEY_BYTES = 0xFFFF


@dataclass(frozen=True)
class Spec:
    """What a test job does; ``steps`` are rendered into the job file and evaluated here."""

    bound: int
    size: int
    lateness: int
    steps: tuple[Step, ...] = IMPRESSIONS_ONLY
    slide: int | None = None  # None: tumbling windows of ``size``; else sliding ``(size, slide)``
    gap: int | None = None  # session windows with this gap (``size`` is then unused)
    gap_field: str | None = None  # dynamic session windows: each record's gap is this field
    offset: int = 0  # tumbling and sliding windows' offset (Flink's)
    step: int | None = None  # cumulate windows: every ``step`` within each ``size`` cycle
    op: str = "imps"
    ts_field: str = "ts"
    key_field: str = "id"
    value_field: str = "value"


def cumulate_windows_of(t: int, size: int, step: int) -> list[tuple[int, int]]:
    """Every cumulating window holding ``t``: by definition, ``[ws, ws + k*step)`` for each
    ``k`` in ``1..size/step`` with ``ws + k*step > t``, where ``ws`` starts ``t``'s cycle."""
    ws = (t // size) * size
    found = [(ws, ws + k * step) for k in range(1, size // step + 1) if ws + k * step > t]
    if found[-1][1] >= MAX_TIME:  # the 64-bit rule, as for windows_of
        found = [w for w in found if w[1] < MAX_TIME] + [(ws, MAX_TIME)]
    return [(max(start, MIN_TIME), end) for start, end in found]


def window_of(t: int, size: int, offset: int = 0) -> tuple[int, int]:
    return windows_of(t, size, None, offset)[0]


def windows_of(t: int, size: int, slide: int | None, offset: int = 0) -> list[tuple[int, int]]:
    """Every window holding ``t``: by definition, each ``[k*slide + offset, k*slide + offset +
    size)`` holding ``t`` (brute force over k, not the engine's arithmetic), then the 64-bit
    rule: a start before ``MIN_TIME`` is ``MIN_TIME``, and the windows ending at or past
    ``MAX_TIME`` are one, ``[earliest of their starts, MAX_TIME)``, which holds ``MAX_TIME``
    too."""
    step = size if slide is None else slide
    k_hi = (t - offset) // step
    found = [
        (k * step + offset, k * step + offset + size)
        for k in range(k_hi - size // step - 1, k_hi + 1)
        if k * step + offset <= t < k * step + offset + size
    ]
    if found and found[-1][1] >= MAX_TIME:  # (a window holding MAX_TIME ends past it)
        lowest = MAX_TIME - size  # every window ending at or past MAX_TIME, by brute force
        k_lo = (lowest - offset) // step
        edge = [k * step + offset for k in range(k_lo, k_lo + 2) if k * step + offset >= lowest]
        found = [w for w in found if w[1] < MAX_TIME] + [(min(edge), MAX_TIME)]
    return [(max(start, MIN_TIME), end) for start, end in found]


NULL_FORM = "\\N"  # the NULL key as stored and queried; a string shaped like it gains a "\\"


def stored_key(raw: Any) -> str | None:
    """A key as state stores it, by the contract: a string as itself (``\\N``, ``\\\\N``, …
    shifted by one backslash), an int in decimal, NULL as ``\\N``; None for no valid key."""
    if raw is None:
        return NULL_FORM
    if type(raw) is str:
        shaped = raw.endswith("N") and len(raw) > 1 and set(raw[:-1]) == {"\\"}
        return "\\" + raw if shaped else raw
    if type(raw) is int:
        return str(raw)
    return None


def key_of_result(stored: str) -> str | None:
    """The key a result record prints: NULL is ``None``; a shifted string loses its shift."""
    if stored == NULL_FORM:
        return None
    if stored.endswith("N") and len(stored) > 2 and set(stored[:-1]) == {"\\"}:
        return stored[1:]
    return stored


def cleanup_time(end: int, lateness: int) -> int:
    """Flink's ``TimeWindow.cleanupTime``: ``end - 1 + lateness``, clamped to ``MAX_TIME``."""
    return min(end - 1 + lateness, MAX_TIME)


def watermark_after(max_ts: int, bound: int) -> int:
    return max(max_ts - bound - 1, MIN_TIME)


def aggregates(values: list[int | float]) -> dict[str, Any]:
    total = sum(values[1:], values[0])
    return {
        "count": len(values),
        "total": total,
        "lo": min(values),
        "hi": max(values),
        "avg": total / len(values),
    }


@dataclass
class _Window:
    values: list[int | float] = field(default_factory=list)
    fired: bool = False


@dataclass
class _Session:
    start: int
    end: int
    values: list[int | float]
    fired: bool = False
    final: bool = False


@dataclass
class Outcome:
    spec: Spec
    emissions: dict[WindowKey, list[dict[str, Any]]] = field(default_factory=dict)
    late: list[dict[str, Any]] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)
    windows: dict[WindowKey, list[int | float]] = field(default_factory=dict)
    data_watermark: int | None = None
    records_to_op: int = 0

    @property
    def emission_count(self) -> int:
        return sum(len(v) for v in self.emissions.values())

    def dead_by_stage(self) -> Counter[str]:
        return Counter(d["stage"] for d in self.dead)

    def retained(self, key: WindowKey, retention_ms: int | None) -> bool:
        """A window stays queryable until ``end - 1 + lateness + retention <= data watermark``."""
        if retention_ms is None or self.data_watermark is None:
            return True
        end = key[2]
        return end - 1 + self.spec.lateness + retention_ms > self.data_watermark

    def state_by_key(self, retention_ms: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """What ``GET /{job}/{op}/state/{key}`` answers once the input is done."""
        out: dict[str, list[dict[str, Any]]] = {}
        for wk in sorted(self.windows, key=lambda w: (w[0], w[2])):
            if not self.retained(wk, retention_ms):
                continue
            key, start, end = wk
            out.setdefault(key, []).append(
                {"start": start, "end": end, **aggregates(self.windows[wk]), "final": True}
            )
        return out


def _compile(steps: Iterable[Step]) -> list[tuple[str, Callable[[Any], Any]]]:
    return [(kind, eval(src)) for kind, src in steps]  # noqa: S307 - test-owned source text


class _Simulation:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.out = Outcome(spec)
        self.steps = _compile(spec.steps)
        self.state: dict[WindowKey, _Window] = {}
        self.unfired: dict[WindowKey, _Window] = {}
        self.awaiting: dict[WindowKey, _Window] = {}
        self.sessions: dict[str, list[_Session]] = {}
        self.closed_sessions: dict[WindowKey, list[int | float]] = {}
        self.max_ts: int | None = None

    # -- the pipeline, one record at a time ------------------------------------------------

    def feed_line(self, line: str | bytes) -> None:
        if isinstance(line, bytes):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                self._dead("decode", line.decode("utf-8", errors="replace").rstrip("\n"))
                return
        else:
            text = line
        if not text.strip():
            return  # blank lines are skipped silently
        try:
            value = json.loads(text)
        except ValueError:
            self._dead("decode", text.rstrip("\n"))
            return
        self.feed_value(value)

    def feed_value(self, value: Any) -> None:
        if not isinstance(value, dict):
            self._dead("decode", value)
            return
        spec = self.spec
        if spec.ts_field not in value:
            self._dead("timestamp", value)
            return
        t = value[spec.ts_field]
        if type(t) is float and t.is_integer():
            t = int(t)
        if type(t) is not int or not MIN_TIME <= t <= MAX_TIME:
            self._dead("timestamp", value)
            return
        # the watermark starts at MIN_TIME: a window whose last instant is MIN_TIME has
        # fired by the time its first record comes (as Flink's EventTimeTrigger)
        wm_before = MIN_TIME if self.max_ts is None else watermark_after(self.max_ts, spec.bound)
        self.max_ts = t if self.max_ts is None else max(self.max_ts, t)
        for rec in self._stateless([value]):
            self._keyed(rec, t, wm_before)
        self._advance(watermark_after(self.max_ts, spec.bound))

    def _stateless(self, recs: list[Any]) -> list[Any]:
        for kind, fn in self.steps:
            out: list[Any] = []
            for r in recs:
                try:
                    if kind == "map":
                        out.append(fn(r))
                    elif kind == "filter":
                        if fn(r):
                            out.append(r)
                    else:
                        out.extend(list(fn(r)))
                except Exception:  # noqa: BLE001 - the engine sends these aside too
                    self._dead(kind, r)
            recs = out
        return recs

    def _keyed(self, rec: Any, t: int, wm_before: int) -> None:
        spec = self.spec
        if not isinstance(rec, dict) or spec.key_field not in rec:
            self._dead("key_by", rec)
            return
        key = stored_key(rec[spec.key_field])
        if key is None:
            self._dead("key_by", rec)
            return
        if len(key.encode()) > MAX_KEY_BYTES:  # the state key stores a 2-byte length
            self._dead("key_by", rec)
            return
        v = rec.get(spec.value_field)
        bad = type(v) not in (int, float)  # dead, unless late: the late decision comes first
        if not bad:
            self.out.records_to_op += 1
        if spec.gap is not None or spec.gap_field is not None:
            self._session(key, t, v, wm_before, rec, bad)
            return
        taken = False
        spans = (
            cumulate_windows_of(t, spec.size, spec.step)
            if spec.step is not None
            else windows_of(t, spec.size, spec.slide, spec.offset)
        )
        if bad:
            if spans and all(cleanup_time(end, spec.lateness) <= wm_before for _, end in spans):
                self._late(key, t, wm_before, rec)
            else:
                self._dead(f"aggregate:{spec.op}", rec)
            return
        if not spans:  # between two windows of a sliding window with gaps: in none
            return
        assert isinstance(v, (int, float))  # not bad: a JSON number
        for start, end in spans:
            wk = (key, start, end)
            if end - 1 > wm_before:  # on time
                w = self.state.get(wk)
                if w is None:
                    w = self.state[wk] = self.unfired[wk] = _Window()
                w.values.append(v)
                taken = True
            elif wm_before < cleanup_time(end, spec.lateness):  # behind it, within lateness
                w = self.state.setdefault(wk, _Window(fired=True))
                w.values.append(v)
                self.awaiting[wk] = w
                self._emit(wk, w, final=False)
                taken = True
        if not taken:  # late only when every window it belongs to is late (Flink's rule)
            self._late(key, t, wm_before, rec)

    def _late(self, key: str, t: int, wm: int, rec: Any) -> None:
        self.out.late.append({"op": self.spec.op, "key": key, "ts": t, "watermark": wm,
                              "record": rec})  # fmt: skip

    def _session(self, key: str, t: int, v: Any, wm: int, rec: Any, bad: bool = False) -> None:
        """Sessions, by definition: the record's window [t, t+gap) absorbs every live session
        of the key it overlaps or touches (Flink's ``TimeWindow.intersects``: events at most the
        gap apart are one session); lateness is judged on the merged session. A dynamic gap
        (``gap_field``) that is not a positive int sends the record to the dead letters; an end
        past ``MAX_TIME`` is ``MAX_TIME``."""
        spec = self.spec
        gap = spec.gap
        if spec.gap_field is not None:
            gap = rec.get(spec.gap_field)
            if type(gap) is not int or gap <= 0:
                self._dead(f"gap:{spec.op}", rec)
                return
        assert gap is not None
        live = self.sessions.setdefault(key, [])
        lo, hi = t, min(t + gap, MAX_TIME)
        overlapping = [s for s in live if s.start <= hi and lo <= s.end]
        start = min([lo] + [s.start for s in overlapping])
        end = max([hi] + [s.end for s in overlapping])
        if cleanup_time(end, spec.lateness) <= wm:
            self._late(key, t, wm, rec)
            return
        if bad:
            self._dead(f"aggregate:{spec.op}", rec)
            return
        values = [x for s in overlapping for x in s.values] + [v]
        merged = _Session(start, end, values)
        live[:] = [s for s in live if s not in overlapping] + [merged]
        if end - 1 <= wm:
            merged.fired = True
            self._emit((key, start, end), _Window(values), final=False)

    def _advance_sessions(self, wm: int) -> None:
        lateness = self.spec.lateness
        for key, live in self.sessions.items():
            for s in live:
                if not s.fired and s.end - 1 <= wm:
                    s.fired = True
                    s.final = cleanup_time(s.end, lateness) <= wm
                    self._emit((key, s.start, s.end), _Window(s.values), s.final)
            for s in [s for s in live if cleanup_time(s.end, lateness) <= wm]:
                if not s.final:
                    self._emit((key, s.start, s.end), _Window(s.values), final=True)
                self.closed_sessions[(key, s.start, s.end)] = s.values
                live.remove(s)

    def _advance(self, wm: int) -> None:
        if self.spec.gap is not None or self.spec.gap_field is not None:
            self._advance_sessions(wm)
            return
        lateness = self.spec.lateness
        for wk in [wk for wk in self.unfired if wk[2] - 1 <= wm]:
            w = self.unfired.pop(wk)
            w.fired = True
            final = cleanup_time(wk[2], lateness) <= wm
            if not final:
                self.awaiting[wk] = w
            self._emit(wk, w, final)
        for wk in [wk for wk in self.awaiting if cleanup_time(wk[2], lateness) <= wm]:
            self._emit(wk, self.awaiting.pop(wk), final=True)

    def finish(self) -> Outcome:
        self._advance(MAX_TIME)  # the end of the input: the final watermark
        spec = self.spec
        if self.max_ts is not None:
            self.out.data_watermark = watermark_after(self.max_ts, spec.bound)
        self.out.windows = {wk: list(w.values) for wk, w in self.state.items()}
        self.out.windows.update(self.closed_sessions)
        return self.out

    def _emit(self, wk: WindowKey, w: _Window, final: bool) -> None:
        key, start, end = wk
        shown = key_of_result(key)
        record = {"op": self.spec.op, "key": shown, "start": start, "end": end,
                  **aggregates(w.values), "final": final}  # fmt: skip
        self.out.emissions.setdefault((shown, start, end), []).append(record)  # type: ignore[arg-type]

    def _dead(self, stage: str, item: Any) -> None:
        self.out.dead.append({"stage": stage, "input": item})


def simulate(lines: Iterable[str | bytes], spec: Spec) -> Outcome:
    """Run raw JSONL lines (as a file source would read them) through the model."""
    sim = _Simulation(spec)
    for line in lines:
        sim.feed_line(line)
    return sim.finish()


def simulate_decoded(values: Iterable[Any], spec: Spec) -> Outcome:
    """Run already-decoded values (as a generator source hands them over) through the model."""
    sim = _Simulation(spec)
    for value in values:
        sim.feed_value(value)
    return sim.finish()


def group_emissions(results: Iterable[dict[str, Any]]) -> dict[WindowKey, list[dict[str, Any]]]:
    """Result records grouped per ``(key, start, end)``, each group in emission order."""
    out: dict[WindowKey, list[dict[str, Any]]] = {}
    for r in results:
        out.setdefault((r["key"], r["start"], r["end"]), []).append(r)
    return out


def canonical(items: Iterable[Any]) -> list[str]:
    """A multiset of JSON values as a sorted list of canonical JSON texts."""
    return sorted(json.dumps(i, sort_keys=True) for i in items)
