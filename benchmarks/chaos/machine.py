"""The chaos run's job and its model (after Flink's ``StateMachineExample``): per key, events
follow a state machine; a lost or duplicated event makes a transition the machine does not have,
which the job reports. Beside it, per-key tumbling windows of the same events, checked against a
brute-force model.

Events are ``{"key", "ts", "event", "v"}``; every key walks ``start -a-> W -b-> Y -e-> Z -g->
start`` or ``start -c-> X -b|d-> ...``. No state has a transition on the event that led into it,
so a duplicate is always invalid, and a lost event leaves the next one without a transition too.
The job emits ``{"key", "alert": ...}`` for an invalid transition and ``{"key", "cycle": n}``
when a key returns to ``start``; its windows emit ``{"key", "start", "end", "n", "total"}``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

TRANSITIONS: dict[str, dict[str, str]] = {
    "start": {"a": "W", "c": "X"},
    "W": {"b": "Y"},
    "X": {"b": "Y", "d": "Z"},
    "Y": {"e": "Z"},
    "Z": {"g": "start"},
}
WINDOW_MS = 2_000
STEP_MS = 5  # event time advances this much per event (a synthetic clock: reproducible)
END_KEY = "__end__"  # the last event of each partition: its time fires every window

# the job weir runs: the driver fills in the paths and the broker
JOB = '''from weir import Job, WatermarkStrategy, agg, sinks, sources, windows

TRANSITIONS = {transitions!r}


class Machine:
    """Per key, the state of its state machine; an event it has no transition for is an
    alert (a lost or duplicated event)."""

    def process(self, event, ctx):
        if ctx.key.startswith("__"):
            return
        state = ctx.value("state")
        cycles = ctx.value("cycles")
        here = state.get() or "start"
        nxt = TRANSITIONS.get(here, {{}}).get(event["event"])
        if nxt is None:
            ctx.emit({{"key": ctx.key, "alert": f"{{here}} -{{event['event']}}-> ?",
                       "ts": ctx.timestamp}})
            return
        state.set(nxt)
        if nxt == "start":
            n = (cycles.get() or 0) + 1
            cycles.set(n)
            ctx.emit({{"key": ctx.key, "cycle": n}})


job = Job("chaos", max_parallelism=64)
events = job.source(
    sources.kafka({bootstrap!r}, {topic!r}),
    timestamp="ts",
    watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
).key_by("key")
events.process(Machine(), name="machine").sink(sinks.jsonl({machine_out!r}))
(
    events.window(windows.tumbling(ms={window_ms}))
    .aggregate("counts", n=agg.count(), total=agg.sum("v"))
    .sink(sinks.jsonl({windows_out!r}))
)
'''


def job_text(bootstrap: str, topic: str, machine_out: str, windows_out: str) -> str:
    """The job file's text."""
    return JOB.format(
        transitions=TRANSITIONS, bootstrap=bootstrap, topic=topic, machine_out=machine_out,
        windows_out=windows_out, window_ms=WINDOW_MS,
    )  # fmt: skip


def events(n: int, keys: int, seed: int) -> list[dict[str, Any]]:
    """``n`` events over ``keys`` keys, each key's valid for the machine, in time order."""
    rng = random.Random(seed)
    state = {f"m-{k}": "start" for k in range(keys)}
    names = sorted(state)
    out = []
    for i in range(n):
        key = rng.choice(names)
        event = rng.choice(sorted(TRANSITIONS[state[key]]))
        state[key] = TRANSITIONS[state[key]][event]
        out.append({"key": key, "ts": i * STEP_MS, "event": event, "v": rng.randint(1, 100)})
    return out


@dataclass(frozen=True)
class Model:
    """What the job must output for ``events``: every window's count and total, and every
    key's completed cycles."""

    windows: dict[tuple[str, int], tuple[int, int]]
    cycles: dict[str, int]


def model(evs: list[dict[str, Any]]) -> Model:
    """The brute-force model: the windows fire at the end (the end-marker's time passes them)."""
    n: Counter[tuple[str, int]] = Counter()
    total: Counter[tuple[str, int]] = Counter()
    cycles: Counter[str] = Counter()
    state: dict[str, str] = {}
    for e in evs:
        start = e["ts"] - e["ts"] % WINDOW_MS
        n[(e["key"], start)] += 1
        total[(e["key"], start)] += e["v"]
        nxt = TRANSITIONS[state.get(e["key"], "start")][e["event"]]
        state[e["key"]] = nxt
        cycles[e["key"]] += nxt == "start"
    return Model({w: (n[w], total[w]) for w in n}, {k: c for k, c in cycles.items() if c})


def end_marker(last_ts: int) -> dict[str, Any]:
    """An event far enough after ``last_ts`` that every window of the input fires."""
    return {"key": END_KEY, "ts": last_ts + 4 * WINDOW_MS, "event": "end", "v": 0}


@dataclass(frozen=True)
class Verdict:
    """How the output compares with the model."""

    invalid: list[dict[str, Any]]  # alerts: invalid transitions the job saw
    missing: int  # windows or cycles of the model not in the output
    duplicates: int  # outputs written more than once
    wrong: list[str]  # windows whose values differ (a few, for the report)
    extra: int  # outputs the model does not have

    @property
    def ok(self) -> bool:
        return not (self.invalid or self.missing or self.duplicates or self.wrong or self.extra)


def verdict(want: Model, machine: list[dict[str, Any]], wins: list[dict[str, Any]]) -> Verdict:
    """Compare the job's two outputs with ``want``."""
    invalid = [r for r in machine if "alert" in r]
    cycles = Counter((r["key"], r["cycle"]) for r in machine if "cycle" in r)
    got = Counter((r["key"], r["start"]) for r in wins)
    expected_cycles = {(k, i) for k, c in want.cycles.items() for i in range(1, c + 1)}
    values = {(r["key"], r["start"]): (r["n"], r["total"]) for r in wins}
    wrong = [
        f"{w}: {values[w]} != {v}"
        for w, v in want.windows.items()
        if w in values and values[w] != v
    ]
    return Verdict(
        invalid=invalid[:10] if invalid else [],
        missing=len(set(want.windows) - set(got)) + len(expected_cycles - set(cycles)),
        duplicates=sum(c - 1 for c in got.values() if c > 1)
        + sum(c - 1 for c in cycles.values() if c > 1),
        wrong=wrong[:5],
        extra=len(set(got) - set(want.windows)) + len(set(cycles) - expected_cycles),
    )


def complete(want: Model, machine: list[dict[str, Any]], wins: list[dict[str, Any]]) -> bool:
    """Every window and cycle of the model is in the output (or more: the verdict tells)."""
    seen = {(r["key"], r["start"]) for r in wins}
    cycles = sum(1 for r in machine if "cycle" in r)
    return len(seen) >= len(want.windows) and cycles >= sum(want.cycles.values())
