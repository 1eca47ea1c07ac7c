"""Keyed broadcast process functions against a brute-force model: records of both inputs in one
deterministic order, each input with its own watermark (its largest timestamp - bound - 1), the
operator's the minimum of the two. Whatever the batching, the state flushes and the restarts
(a new runtime on the same state backend, as after a restore), the function sees the same
records, watermarks, broadcast state and keys' state, and its timers fire at the same points,
so it emits exactly what the model does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batching import BATCHING
from tests.support.broadcast_driver import operator
from weir.engine.runtime.operators.broadcast import KeyedBroadcastRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.state.keygroups import range_for_operator
from weir.state.memory import MemoryState

BOUND = 10
TIMER_AFTER = 15
Item = tuple[str, dict[str, Any], int]  # input ("k" keyed, "b" broadcast), record, timestamp


class Thresholds:
    """Broadcast rules ``kind -> limit`` (put, remove, or bump every key's count); keyed records
    count per key, report their rule and set a timer; timers report what they see."""

    def process_broadcast_element(self, rec: dict[str, Any], ctx: Any) -> None:
        rules = ctx.broadcast_state("rules")
        if rec["op"] == "put":
            rules.put(rec["kind"], rec["v"])
        elif rec["op"] == "remove":
            rules.remove(rec["kind"])
        else:

            def bump(key: str, st: Any) -> None:
                st.set(st.get() + rec["v"])
                ctx.emit(["bumped", key, st.get()])

            ctx.apply_to_keyed_state("n", bump)
        ctx.emit(["b", ctx.timestamp, ctx.watermark, sorted(rules.items())])

    def process_element(self, rec: dict[str, Any], ctx: Any) -> None:
        n = ctx.value("n")
        n.set(n.get(0) + 1)
        limit = ctx.broadcast_state("rules").get(rec["kind"])
        ctx.register_event_time_timer(ctx.timestamp + TIMER_AFTER)
        ctx.emit(["k", ctx.key, ctx.timestamp, ctx.watermark, n.get(), limit])

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        rules = ctx.broadcast_state("rules")
        ctx.emit(["t", ctx.key, timestamp, ctx.watermark, ctx.value("n").get(), len(rules)])


@dataclass
class Model:
    """The function above, by hand: dicts for the state, a set of timers, the watermark
    rule spelled out."""

    rules: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    timers: set[tuple[int, str]] = field(default_factory=set)
    out: list[Any] = field(default_factory=list)

    def fire(self, upto: int) -> None:
        for at, key in sorted(t for t in self.timers if t[0] <= upto):
            self.timers.discard((at, key))
            self.out.append(["t", key, at, upto, self.counts.get(key), len(self.rules)])

    def run(self, items: list[Item]) -> list[Any]:
        for (side, rec, ts), w in zip(items, arrival_watermarks(items), strict=True):
            self.fire(w)
            if side == "k":
                key = rec["id"]
                self.counts[key] = self.counts.get(key, 0) + 1
                self.timers.add((ts + TIMER_AFTER, key))
                limit = self.rules.get(rec["kind"])
                self.out.append(["k", key, ts, w, self.counts[key], limit])
                continue
            if rec["op"] == "put":
                self.rules[rec["kind"]] = rec["v"]
            elif rec["op"] == "remove":
                self.rules.pop(rec["kind"], None)
            else:
                for key in sorted(self.counts):
                    self.counts[key] += rec["v"]
                    self.out.append(["bumped", key, self.counts[key]])
            self.out.append(["b", ts, w, sorted(self.rules.items())])
        self.fire(after_all(items))  # a timer set behind the watermark fires on its next move
        self.fire(MAX_WATERMARK)
        return self.out


def arrival_watermarks(items: list[Item]) -> list[int]:
    """The operator's watermark each record arrives under: the minimum of the inputs'."""
    top = {"k": MIN_WATERMARK, "b": MIN_WATERMARK}
    out = []
    for side, _, ts in items:
        out.append(min(v if v == MIN_WATERMARK else v - BOUND - 1 for v in top.values()))
        top[side] = max(top[side], ts)
    return out


def after_all(items: list[Item]) -> int:
    return arrival_watermarks([*items, ("k", {}, MIN_WATERMARK)])[-1]


def run_engine(items: list[Item], sizes: list[int], flushes: list[int]) -> list[Any]:
    """The runtime over ``items`` cut into batches of ``sizes``; after batch ``i``, flush when
    ``flushes[i]`` is 1 and restart on the same state when it is 2."""
    state = MemoryState()
    op = operator(Thresholds(), states=("rules",), key="id")

    def build(wm: int) -> KeyedBroadcastRuntime:
        rt = KeyedBroadcastRuntime(
            op, state, range_for_operator(128, 1, 0), 128, LateRecords(None), DeadLetters(None), 1
        )
        rt.restore(wm, wm)
        return rt

    rt, out, pos, wms = build(MIN_WATERMARK), [], 0, arrival_watermarks(items)
    for i, n in enumerate(sizes):
        batch, bwms = items[pos : pos + n], wms[pos : pos + n]
        j = 0
        while j < len(batch):  # consecutive records of one input go in together
            run = 1
            while j + run < len(batch) and batch[j + run][0] == batch[j][0]:
                run += 1
            part, pwms = batch[j : j + run], bwms[j : j + run]
            if part[0][0] == "k":
                keys = [r["id"] for _, r, _ in part]
                rt.process(keys, [r for _, r, _ in part], [t for *_, t in part], pwms)
            else:
                rt.process_broadcast(
                    [""] * len(part), [r for _, r, _ in part], [t for *_, t in part], pwms
                )
            j += run
        pos += n
        wm = after_all(items[:pos])
        rt.advance(wm, wm)
        out.extend(rt.drain())
        if flushes[i]:
            rt.flush()
        if flushes[i] == 2:
            rt = build(wm)
    rt.advance(MAX_WATERMARK, MAX_WATERMARK)
    out.extend(rt.drain())
    return out


RECORD = st.tuples(
    st.integers(0, 20),  # how far the clock moves
    st.integers(0, 40),  # how far the record lags it
    st.sampled_from(["k", "k", "k", "b"]),
    st.sampled_from(["a", "b", "c"]),  # the key, or the rule's kind
    st.sampled_from(["put", "put", "remove", "bump"]),
    st.integers(-5, 50),
)


@st.composite
def streams(draw: st.DrawFn) -> list[Item]:
    clock = draw(st.integers(-100, 100))
    out: list[Item] = []
    for step, lag, side, name, op, v in draw(st.lists(RECORD, max_size=50)):
        clock += step
        if side == "k":
            out.append(("k", {"id": name, "kind": draw(st.sampled_from("abc"))}, clock - lag))
        else:
            out.append(("b", {"op": op, "kind": name, "v": v}, clock - lag))
    return out


@settings(BATCHING, max_examples=80)
@given(items=streams(), data=st.data())
def test_keyed_broadcast_function_matches_the_model_however_batched(
    items: list[Item], data: st.DataObject
) -> None:
    sizes: list[int] = []
    while sum(sizes) < len(items):
        sizes.append(data.draw(st.integers(1, max(1, len(items) - sum(sizes)))))
    flushes = [data.draw(st.sampled_from([0, 0, 1, 2])) for _ in sizes]
    expected = Model().run(items)
    assert run_engine(items, sizes, flushes) == expected
    assert run_engine(items, [1] * len(items), [0] * len(items)) == expected
