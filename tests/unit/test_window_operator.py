"""The chain and window operator in-process over the in-memory state backend, on hand-checked
traces.

These pin down, deterministically, cases the batching properties in
tests/property/test_batching.py find at random.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import Distinct
from tests.support.inprocess import run_batches
from tests.support.reference import Spec, canonical, group_emissions, simulate_decoded
from weir import Job, WatermarkStrategy, agg, sources, windows


def _events(trace: list[tuple[int, str]]) -> list[dict[str, Any]]:
    return [{"id": k, "event": "impression", "ts": t, "value": t} for t, k in trace]


def _seq(results: list[dict[str, Any]], key: str, start: int, end: int) -> list[tuple[Any, ...]]:
    seq = group_emissions(results)[(key, start, end)]
    return [(r["count"], r["total"], r["final"]) for r in seq]


TRACE = [(5, "a"), (50, "a"), (120, "b"), (60, "a"), (200, "a"), (90, "a"), (400, "a")]
TRACE_SPEC = Spec(bound=10, size=100, lateness=50)
TRACE_EXPECTED = [(2, 55, False), (3, 115, False), (3, 115, True)]


@pytest.mark.parametrize(
    "sizes",
    [[1] * 7, [7], [3, 4], [4, 3], [2, 2, 2, 1]],
    ids=["per-record", "one-batch", "3+4", "4+3", "2+2+2+1"],
)
def test_late_update_sequence_does_not_depend_on_batching(tmp_path: Path, sizes: list[int]) -> None:
    """[0,100) of "a" fires under watermark 109 (not final: 149 > 109); (60) updates it within
    lateness; the watermark reaches 189 >= 149: final; (90) under 189 is late."""
    run = run_batches(_events(TRACE), TRACE_SPEC, sizes)
    assert _seq(run.results, "a", 0, 100) == TRACE_EXPECTED
    assert [(r["ts"], r["watermark"]) for r in run.late] == [(90, 189)]
    ref = simulate_decoded(_events(TRACE), TRACE_SPEC)
    assert group_emissions(run.results) == ref.emissions


def test_window_fired_and_finalized_within_one_batch_is_emitted_twice(tmp_path: Path) -> None:
    """bound 0, size 1, lateness 30: after (14) the watermark is 13, so [0,1) fires not final
    (0 + 30 > 13); after (31) it is 30, so [0,1) becomes final. In one batch or three, the
    sequence is the same: [not final, final]."""
    spec = Spec(bound=0, size=1, lateness=30)
    events = _events([(0, "a"), (14, "a"), (31, "a")])
    for sizes in ([1, 1, 1], [3]):
        run = run_batches(events, spec, sizes)
        assert _seq(run.results, "a", 0, 1) == [(1, 0, False), (1, 0, True)], sizes


def test_allowed_late_record_in_the_firing_batch_keeps_the_window(tmp_path: Path) -> None:
    """A record within lateness that arrives in the same batch that fires its window must add
    to the window, never replace it."""
    events = _events([(5, "a"), (50, "a"), (120, "a"), (60, "a"), (400, "a")])
    run = run_batches(events, Spec(bound=10, size=100, lateness=500), [5])
    seq = _seq(run.results, "a", 0, 100)
    assert seq[-1] == (3, 115, True)
    assert all(count >= 2 for count, _, _ in seq)


def test_dead_letters_do_not_stop_the_batch(tmp_path: Path) -> None:
    events: list[Any] = [
        {"id": "a", "event": "impression", "ts": 1, "value": 1},
        {"id": "a", "event": "impression", "ts": "x", "value": 1},
        {"id": "a", "event": "impression", "ts": 2, "value": "nan"},
        {"event": "impression", "ts": 3, "value": 1},
        {"id": "a", "ts": 4, "value": 1},
        [1],
        {"id": "a", "event": "impression", "ts": 5, "value": 2.5},
        {"id": True, "event": "impression", "ts": 6, "value": 1},  # a bool is not a key
        {"id": "k" * 65_536, "event": "impression", "ts": 6, "value": 1},  # too long to store
        {"id": "é" * 32_767, "event": "impression", "ts": 6, "value": 1},  # 65 534 bytes: fine
    ]
    spec = Spec(bound=0, size=10, lateness=0)
    run = run_batches(events, spec, [len(events)])
    assert _seq(run.results, "a", 0, 10) == [(2, 3.5, True)]
    assert _seq(run.results, "é" * 32_767, 0, 10) == [(1, 1, True)]
    ref = simulate_decoded(events, spec)
    assert canonical(run.dead) == canonical(ref.dead)
    assert sorted(d["stage"] for d in run.dead) == [
        "aggregate:imps",
        "decode",
        "filter",
        "key_by",
        "key_by",
        "key_by",
        "timestamp",
    ]


def test_user_defined_aggregate_with_late_updates_and_flushes(tmp_path: Path) -> None:
    job = Job("udf")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
        )
        .key_by("id")
        .window(windows.tumbling(ms=10), allowed_lateness_ms=20)
        .aggregate("imps", n=agg.count(), distinct=agg.custom(Distinct()))
    )
    values = [(1, 3), (2, 3), (5, 4), (12, 9), (4, 5), (7, 3), (40, 1), (3, 8)]
    events = [{"id": "k", "ts": t, "value": v} for t, v in values]
    run = run_batches(
        events, Spec(bound=0, size=10, lateness=20), [1] * 8,
        flush_after=[True] * 8, job=job,
    )  # fmt: skip
    seq = [(r["n"], r["distinct"], r["final"]) for r in group_emissions(run.results)[("k", 0, 10)]]
    # (12) fires [0,10) under 11 (not final: 9 + 20 > 11); (4) and (7) update it; (40) makes
    # it final; (3) arrives under 39 >= 29: late
    assert seq == [(3, 2, False), (4, 3, False), (5, 3, False), (5, 3, True)]
    assert [r["ts"] for r in run.late] == [3]
