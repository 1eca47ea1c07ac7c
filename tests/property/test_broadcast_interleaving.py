"""A keyed broadcast function that decides at event time (a timer at each event's time looks up
the rule in force then) gives the brute-force model's output however the rules and the events
interleave and are batched: the real chains, keyed side and operator of one worker
(``tests.support.multiinput.TwoInputHarness``), the rules from their own source, in time order. The
operator's watermark is the minimum of both inputs', so when a timer fires, every rule up to
its time has arrived."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from tests.support.multiinput import TwoInputHarness
from weir import Job, KeyedBroadcastProcessFunction, WatermarkStrategy, sources

BOUND = 20


class AtEventTime(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, rule: Any, ctx: Any) -> None:
        rules = ctx.broadcast_state("rules")
        rules.put(rule["kind"], sorted([*rules.get(rule["kind"], []), [rule["ts"], rule["v"]]]))

    def process_element(self, event: Any, ctx: Any) -> None:
        ctx.list("pending").append([event["ts"], event["kind"], event["n"]])
        ctx.register_event_time_timer(event["ts"])

    def on_timer(self, ts: int, ctx: Any) -> None:
        pending = ctx.list("pending")
        due = sorted(p for p in pending.get() if p[0] <= ts)
        rest = [p for p in pending.get() if p[0] > ts]
        pending.clear()
        for p in rest:
            pending.append(p)
        for t, kind, n in due:
            in_force = [v for since, v in ctx.broadcast_state("rules").get(kind, []) if since <= t]
            ctx.emit([ctx.key, t, n, in_force[-1] if in_force else None])


def _job() -> Job:
    wm = WatermarkStrategy.bounded_out_of_orderness(ms=BOUND)
    job = Job("b", max_parallelism=64)
    events = job.source(sources.jsonl("/events.jsonl"), name="events", watermarks=wm)
    rules = job.source(sources.jsonl("/rules.jsonl"), name="rules", watermarks=wm)
    events.key_by("id").connect(rules.broadcast("rules")).process(AtEventTime(), name="op")
    return job


def _model(events: list[Any], rules: list[Any]) -> list[Any]:
    out = []
    for e in events:
        in_force = [r["v"] for r in rules if r["kind"] == e["kind"] and r["ts"] <= e["ts"]]
        out.append([e["id"], e["ts"], e["n"], in_force[-1] if in_force else None])
    return sorted(out, key=repr)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """Events within the bound of the largest time before them (never behind the watermark
    they arrive under), and rules in time order, each at its own time."""
    clock, events = 0, []
    for n, (step, lag, key, kind) in enumerate(
        draw(
            st.lists(
                st.tuples(
                    st.integers(0, 15),
                    st.integers(0, BOUND),
                    st.sampled_from("xyz"),
                    st.sampled_from("ab"),
                ),
                max_size=40,
            )
        )
    ):
        clock += step
        events.append({"id": key, "kind": kind, "ts": max(0, clock - lag), "n": n})
    times = sorted(set(draw(st.lists(st.integers(0, clock + 50), max_size=12))))
    rules = [
        {"kind": draw(st.sampled_from("ab")), "ts": t, "v": draw(st.integers(0, 9))} for t in times
    ]
    return events, rules


@settings(BATCHING, max_examples=50)
@given(data=inputs(), turns=st.lists(st.tuples(st.booleans(), st.integers(1, 8)), max_size=60))
def test_output_does_not_depend_on_how_the_inputs_interleave(
    data: tuple[list[Any], list[Any]], turns: list[tuple[bool, int]]
) -> None:
    events, rules = data
    pos = [0, 0]
    feeds = [events, rules]
    with TwoInputHarness(_job()) as h:
        for rules_turn, n in turns:
            src = int(rules_turn)
            batch = feeds[src][pos[src] : pos[src] + n]
            pos[src] += len(batch)
            if batch:
                h.feed(src, batch)
        for src in (0, 1):
            if feeds[src][pos[src] :]:
                h.feed(src, feeds[src][pos[src] :])
        h.finish()
        got = sorted(h.results("op"), key=repr)
    assert got == _model(events, rules)
