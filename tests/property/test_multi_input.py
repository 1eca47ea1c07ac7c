"""Two inputs: whatever the batch sizes and however the two sources' batches interleave, a
union feeding a window and a connected co-process function give the brute-force reference's
results (every record within its own source's bound); an operator fed by one source moves
with that source alone, and an idle input holds back no operator it feeds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.multiinput import (
    TwoInputHarness,
    both_rows,
    ctr_rows,
    expected_both,
    expected_ctr,
    make_events,
    make_job,
)
from weir.engine.runtime.task.routing import IDLE
from weir.engine.watermarks import MIN_WATERMARK


def _batches(events: list[dict[str, object]], size: int) -> list[list[dict[str, object]]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    sizes=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    order=st.lists(st.booleans(), min_size=1, max_size=50),
)
def test_union_window_and_co_process_are_batching_and_interleaving_invariant(
    seed: int, sizes: tuple[int, int], order: list[bool]
) -> None:
    views = make_events(300, seed, step=12)
    clicks = make_events(120, seed + 1, step=30)
    queues = [_batches(views, sizes[0]), _batches(clicks, sizes[1])]
    with TwoInputHarness(make_job()) as harness:
        turn = 0
        while queues[0] or queues[1]:
            side = int(order[turn % len(order)])
            turn += 1
            if not queues[side]:
                side = 1 - side
            harness.feed(side, queues[side].pop(0))
        harness.finish()
        assert both_rows(harness.results("both")) == sorted(expected_both(views, clicks))
        assert ctr_rows(harness.results("ctr")) == sorted(expected_ctr(views, clicks))
        only = sorted((r["key"], r["start"], r["n"]) for r in harness.results("views_only"))
        assert only == sorted((k, s, n) for k, s, _, n, _ in expected_both(views, []))


def test_an_operator_fed_by_one_source_does_not_wait_for_the_other() -> None:
    views = make_events(200, 1, step=20)
    with TwoInputHarness(make_job()) as harness:
        harness.feed(0, views)  # the second source has sent nothing: its watermark is the minimum
        assert harness.results("views_only"), "a window on views alone fires on views' watermark"
        assert harness.results("both") == [] and harness.results("ctr") == []
        ctr = harness.keyed.ops["ctr"]
        assert harness.keyed.ops["views_only"].watermark > ctr.watermark
        harness.feed(1, [{"id": "ad-1", "ts": views[-1]["ts"], "value": 1}])
        assert harness.results("both") and harness.results("ctr")  # now both inputs moved
        assert ctr.watermark == harness.keyed.ops["both"].watermark


def test_an_idle_input_stops_holding_back_the_operators_it_feeds() -> None:
    views = make_events(200, 2, step=20)
    with TwoInputHarness(make_job()) as harness:
        harness.feed(0, views)
        assert harness.results("both") == []
        harness.keyed.deliver("0", [], [MIN_WATERMARK], MIN_WATERMARK, IDLE, 1)
        assert harness.results("both"), "with clicks idle, the union moves with views alone"
        assert harness.keyed.ops["ctr"].watermark == harness.keyed.ops["views_only"].watermark
