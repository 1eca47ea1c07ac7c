"""A keyed broadcast operator's watermark is the minimum of its two inputs', with an idle input
left out as everywhere else: the real chains, keyed side and operator of one worker
(``tests.support.multiinput.TwoInputHarness``), the broadcast input from its own source."""

from __future__ import annotations

from typing import Any

from tests.support.multiinput import TwoInputHarness
from weir import Job, KeyedBroadcastProcessFunction, WatermarkStrategy, sources
from weir.engine.runtime.task.routing import IDLE


class Fires(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, rule: Any, ctx: Any) -> None:
        ctx.broadcast_state("rules").put(rule["kind"], rule["limit"])

    def process_element(self, event: Any, ctx: Any) -> None:
        ctx.register_event_time_timer(ctx.timestamp)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit([ctx.key, timestamp, ctx.watermark, ctx.broadcast_state("rules").items()])


def _job() -> Job:
    wm = WatermarkStrategy.bounded_out_of_orderness(ms=0)
    job = Job("b", max_parallelism=64)
    events = job.source(sources.jsonl("/events.jsonl"), name="events", watermarks=wm)
    rules = job.source(sources.jsonl("/rules.jsonl"), name="rules", watermarks=wm)
    events.key_by("id").connect(rules.broadcast("rules")).process(Fires(), name="op")
    return job


def test_the_broadcast_input_holds_the_watermark_back_until_it_is_idle() -> None:
    with TwoInputHarness(_job()) as h:
        h.feed(1, [{"kind": "a", "limit": 3, "ts": 0}])  # the rules' watermark: -1
        h.feed(0, [{"id": "x", "ts": t} for t in (100, 200, 300)])  # the events': 299
        assert h.results("op") == []  # min(299, -1): the timer at 100 waits for the rules
        h.feed(1, [{"kind": "a", "limit": 4, "ts": 150}])  # the rules' watermark: 149
        assert h.results("op") == [["x", 100, 149, [("a", 4)]]]
        h.keyed.deliver("0", [], [149], 149, IDLE, 1)  # the rules go idle: left out
        assert h.results("op")[1:] == [["x", 200, 299, [("a", 4)]]]
