"""Batching invariance (DESIGN.md, "Time"): results must be as if the watermark advanced after
every record, so how the input is cut into batches (and when state is flushed to the state
backend) never changes which records are late nor any result. The engine's chain and window
operator run in-process over the in-memory state backend (``tests/contract/`` holds RocksDB to
the same behaviour) and are compared with the brute-force model in ``tests/support/reference.py``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tests.support import event_lines
from tests.support.inprocess import run_batches
from tests.support.reference import Spec, canonical, group_emissions, simulate, simulate_decoded

# Shrinking a failing example of these properties can take minutes; it is off unless
# HYPOTHESIS_SHRINK=1, and tests/unit/test_window_operator.py holds hand-shrunk cases.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + (
    [Phase.shrink] if os.environ.get("HYPOTHESIS_SHRINK") == "1" else []
)
BATCHING = settings(max_examples=100, phases=PHASES)

KEYS = st.sampled_from(["a", "b", "c/d", "ü", 7])
BAD_RECORDS: list[Any] = [
    {"id": "a", "event": "impression", "value": 1},  # no timestamp
    {"id": "a", "event": "impression", "ts": "12", "value": 1},  # string timestamp
    {"id": "a", "event": "impression", "ts": 1.5, "value": 1},  # fractional timestamp
    {"id": "a", "event": "impression", "ts": True, "value": 1},  # bool is not a timestamp
    {"event": "impression", "ts": 5, "value": 1},  # no key
    {"id": None, "event": "impression", "ts": 5, "value": 1},  # null key
    {"id": "b", "event": "impression", "ts": 5},  # no value to aggregate
    {"id": "b", "event": "impression", "ts": 5, "value": "7"},  # non-numeric value
    {"id": "b", "ts": 5, "value": 1},  # the filter raises (no "event")
    [1, 2],  # not an object
    42,
]


EVENT = st.tuples(
    st.integers(0, 25),  # how far the clock moves
    st.one_of(st.integers(0, 30), st.integers(0, 400)),  # how far the event lags the clock
    KEYS,
    st.integers(0, 19),  # 0: a bad record, 1: an integral float timestamp, 2: a click
    st.integers(-20, 100),  # the value (for a bad record: which one)
)


@st.composite
def events(draw: st.DrawFn, *, bad: bool = True, max_size: int = 60) -> list[Any]:
    """Out-of-order events: a clock moving forward, each event lagging it a little or a lot."""
    clock = draw(st.integers(-400, 400))
    out: list[Any] = []
    for step, lag, key, kind, value in draw(st.lists(EVENT, max_size=max_size)):
        clock += step
        if bad and kind == 0:
            rec = BAD_RECORDS[value % len(BAD_RECORDS)]
            if isinstance(rec, dict) and type(rec.get("ts")) is int:
                rec = {**rec, "ts": clock}
            out.append(rec)
            continue
        ts: int | float = clock - lag
        if kind == 1:
            ts = float(ts)  # an integral float is a valid timestamp
        event = "click" if kind == 2 else "impression"
        out.append({"id": key, "event": event, "ts": ts, "value": value})
    return out


@st.composite
def specs(draw: st.DrawFn, *, lateness: st.SearchStrategy[int] | None = None) -> Spec:
    return Spec(
        bound=draw(st.sampled_from([0, 1, 10, 40])),
        size=draw(st.sampled_from([1, 7, 25, 100])),
        lateness=draw(lateness if lateness is not None else st.sampled_from([0, 5, 30, 150])),
    )


@st.composite
def sliding_specs(draw: st.DrawFn) -> Spec:
    size, slide = draw(st.sampled_from([(10, 5), (12, 5), (30, 10), (100, 25), (7, 7), (25, 1)]))
    return Spec(
        bound=draw(st.sampled_from([0, 1, 10, 40])),
        size=size,
        slide=slide,
        lateness=draw(st.sampled_from([0, 5, 30, 150])),
    )


@st.composite
def session_specs(draw: st.DrawFn) -> Spec:
    return Spec(
        bound=draw(st.sampled_from([0, 1, 10, 40])),
        size=1,
        gap=draw(st.sampled_from([1, 5, 20, 60])),
        lateness=draw(st.sampled_from([0, 5, 30, 150])),
    )


WINDOW_KINDS = {"sliding": sliding_specs, "session": session_specs}


@st.composite
def cuts(draw: st.DrawFn, n: int) -> tuple[list[int], list[bool]]:
    """Random batch sizes for ``n`` items, and after which batches to flush state."""
    sizes = draw(st.lists(st.integers(1, 12), max_size=n))
    flushes = draw(st.lists(st.booleans(), min_size=len(sizes) + 1, max_size=len(sizes) + 1))
    return sizes, flushes  # run_batches feeds what the sizes leave over as one more batch


def _assert_matches(run: Any, ref: Any) -> None:
    assert group_emissions(run.results) == ref.emissions
    assert canonical(run.late) == canonical(ref.late)
    assert canonical(run.dead) == canonical(ref.dead)


@BATCHING
@given(data=st.data(), spec=specs())
def test_one_record_per_batch_matches_reference(data: st.DataObject, spec: Spec) -> None:
    evs = data.draw(events())
    run = run_batches(evs, spec, [1] * len(evs))
    _assert_matches(run, simulate_decoded(evs, spec))


@BATCHING
@given(data=st.data(), spec=specs(lateness=st.sampled_from([5, 30, 150])))
def test_any_batching_matches_reference(data: st.DataObject, spec: Spec) -> None:
    """The property the design promises, with allowed lateness in play."""
    evs = data.draw(events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, flush_after=flushes)
    _assert_matches(run, simulate_decoded(evs, spec))


@BATCHING
@given(data=st.data(), spec=specs(lateness=st.just(0)))
def test_any_batching_matches_reference_without_lateness(data: st.DataObject, spec: Spec) -> None:
    evs = data.draw(events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, flush_after=flushes)
    _assert_matches(run, simulate_decoded(evs, spec))


@pytest.mark.parametrize("kind", sorted(WINDOW_KINDS))
@BATCHING
@given(data=st.data())
def test_sliding_and_session_windows_any_batching_match_reference(
    kind: str, data: st.DataObject
) -> None:
    """Every window holding a record (sliding, on panes) and merged sessions, against the
    model, under any batching and flushes, with bad records and lateness."""
    spec = data.draw(WINDOW_KINDS[kind]())
    evs = data.draw(events())
    sizes, flushes = data.draw(cuts(len(evs)))
    run = run_batches(evs, spec, sizes, flush_after=flushes)
    _assert_matches(run, simulate_decoded(evs, spec))


@pytest.mark.parametrize("kind", sorted(WINDOW_KINDS))
@settings(BATCHING, max_examples=40)
@given(data=st.data())
def test_sliding_and_session_windows_one_record_per_batch_match_reference(
    kind: str, data: st.DataObject
) -> None:
    spec = data.draw(WINDOW_KINDS[kind]())
    evs = data.draw(events())
    run = run_batches(evs, spec, [1] * len(evs))
    _assert_matches(run, simulate_decoded(evs, spec))


@settings(BATCHING, max_examples=50)
@given(data=st.data(), spec=specs())
def test_two_batchings_give_identical_results(data: st.DataObject, spec: Spec) -> None:
    evs = data.draw(events(bad=False))
    a_sizes, a_flush = data.draw(cuts(len(evs)))
    run_a = run_batches(evs, spec, a_sizes, flush_after=a_flush)
    run_b = run_batches(evs, spec, [len(evs)])
    assert group_emissions(run_a.results) == group_emissions(run_b.results)
    assert canonical(run_a.late) == canonical(run_b.late)


RAW_BAD_LINES = [
    b'{"id": "a", "event": "impression", "ts": 5',  # truncated
    b"not json",
    b"\xff\xfe\x00garbage",  # not UTF-8
    b"[1, 2, 3]",
    b'"a string"',
    b"null",
    b"   ",  # blank: skipped silently
]


@BATCHING
@given(data=st.data(), spec=specs(lateness=st.just(0)))
def test_raw_lines_with_malformed_input_any_batching(data: st.DataObject, spec: Spec) -> None:
    lines: list[bytes] = [line.encode() for line in event_lines(data.draw(events()))]
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(lines)))
        lines.insert(at, data.draw(st.sampled_from(RAW_BAD_LINES)))
    sizes, flushes = data.draw(cuts(len(lines)))
    run = run_batches(
        [line + b"\n" for line in lines],
        spec,
        sizes,
        decoded=False,
        flush_after=flushes,
    )
    _assert_matches(run, simulate(lines, spec))


def test_reference_model_sanity() -> None:
    """The model itself, on a hand-checked trace (bound 10, size 100, lateness 50)."""
    spec = Spec(bound=10, size=100, lateness=50)
    trace = [(5, "a"), (50, "a"), (120, "b"), (60, "a"), (200, "a"), (90, "a"), (400, "a")]
    lines = [json.dumps({"id": k, "event": "impression", "ts": t, "value": t}) for t, k in trace]
    ref = simulate(lines, spec)
    # (120) moves the watermark to 109: [0,100) of "a" fires, not final (149 > 109)
    # (60) arrives under 109: within lateness, updates and re-emits
    # (200) moves the watermark to 189 >= 149: final
    # (90) arrives under 189 >= 149: late
    assert [(e["count"], e["total"], e["final"]) for e in ref.emissions[("a", 0, 100)]] == [
        (2, 55, False),
        (3, 115, False),
        (3, 115, True),
    ]
    assert [(r["ts"], r["watermark"]) for r in ref.late] == [(90, 189)]
    assert ref.emissions[("b", 100, 200)] == [
        {
            "op": "imps",
            "key": "b",
            "start": 100,
            "end": 200,
            "count": 1,
            "total": 120,
            "lo": 120,
            "hi": 120,
            "avg": 120.0,
            "final": True,
        }
    ]
    assert ref.data_watermark == 389
