"""Count, global and session windows, triggers and evictors against the brute-force model in
``tests/support/trigger_reference.py``, at any batch size and with state flushed at any point
(batching invariance, DESIGN.md "Time"): per key, the same results in the same order, and the
same late records."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.trigger_reference import TSpec, build_job, by_key, simulate
from weir import testing
from weir.state.memory import MemoryState
from weir.testing import Harness

TRIGGERED = settings(max_examples=100, deadline=None)

TRIGGERS = st.sampled_from(
    [None, "count:3", "purging:count:2", "event", "purging:event", "continuous:40",
     "purging:continuous:25", "never"]
)  # fmt: skip
EVICTORS = st.sampled_from([None, "count:2", "count-after:3", "time:30", "time-after:50"])


@st.composite
def specs(draw: st.DrawFn) -> TSpec:
    window = draw(st.sampled_from(["count", "global", "tumbling", "sliding", "session"]))
    lateness = draw(st.sampled_from([0, 30, 120]))
    bound = draw(st.sampled_from([0, 20]))
    if window == "count":
        size = draw(st.integers(1, 5))
        slide = draw(st.one_of(st.none(), st.integers(1, 4)))
        return TSpec("count", size, slide, lateness, bound)
    trigger, evictor = draw(TRIGGERS), draw(EVICTORS)
    if window == "global":
        return TSpec("global", 0, None, lateness, bound, trigger, evictor)
    if window == "session":  # gaps small enough that sessions merge, bridge and stay apart
        if trigger is None and evictor is None:
            trigger = "event"  # the triggered operator's, not the default session path's
        return TSpec("session", draw(st.sampled_from([10, 30])), None, lateness, bound, trigger,
                     evictor)  # fmt: skip
    size = draw(st.sampled_from([50, 100]))
    slide = 25 if window == "sliding" else None
    return TSpec(window, size, slide, lateness, bound, trigger, evictor)


@st.composite
def records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A clock moving forward, each record lagging it a little or a lot (late ones too)."""
    clock = draw(st.integers(0, 200))
    out = []
    for step, lag, key, value in draw(
        st.lists(
            st.tuples(
                st.integers(0, 30),
                st.one_of(st.integers(0, 25), st.integers(0, 300)),
                st.sampled_from(["a", "b", "c"]),
                st.integers(-5, 50),
            ),
            max_size=40,
        )
    ):
        clock += step
        out.append({"id": key, "ts": max(0, clock - lag), "value": value})
    return out


def run(
    spec: TSpec, recs: list[dict[str, Any]], sizes: list[int], flushes: list[bool]
) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, int]]]:
    pos = 0
    with Harness(build_job(spec), state=MemoryState()) as h:
        for i, n in enumerate([*sizes, len(recs)]):
            h.feed(recs[pos : pos + n])
            pos += n
            if i < len(flushes) and flushes[i]:
                h.flush()
        out = h.finish()
    return by_key(out.results), [(r["key"], r["ts"]) for r in out.late]


# a record arriving under watermark 169 registers a continuous firing at 120, in the past: it
# fires once, as of 169 (it once fired at the batch's earlier watermark 148, then again at 160)
LATE_TIMER = [
    {"id": "a", "ts": 105, "value": 0}, {"id": "a", "ts": 149, "value": 30},
    {"id": "a", "ts": 170, "value": 29}, {"id": "b", "ts": 93, "value": 1},
]  # fmt: skip


@TRIGGERED
@given(
    spec=specs(),
    recs=records(),
    sizes=st.lists(st.integers(1, 7), max_size=8),
    flushes=st.lists(st.booleans(), max_size=8),
)
@example(TSpec("global", 0, None, 0, 0, "continuous:40", None), LATE_TIMER, [], [])
def test_triggered_windows_equal_the_model_at_any_batch_size(
    spec: TSpec, recs: list[dict[str, Any]], sizes: list[int], flushes: list[bool]
) -> None:
    want = simulate(recs, spec)
    got, late = run(spec, recs, sizes, flushes)
    assert got == want.by_key
    assert late == [(r["key"], r["ts"]) for r in want.late]


@TRIGGERED
@given(
    gap=st.sampled_from([10, 30]),
    lateness=st.sampled_from([0, 30, 120]),
    recs=records(),
    sizes=st.lists(st.integers(1, 7), max_size=8),
)
def test_sessions_under_an_explicit_event_time_trigger_emit_what_the_session_operator_does(
    gap: int, lateness: int, recs: list[dict[str, Any]], sizes: list[int]
) -> None:
    """The triggered operator and the default session operator (``session.py``, untouched by a
    trigger) are two implementations of one rule: per key, the same emissions and the same late
    records; only the order of a key's emissions at one watermark may differ."""
    explicit = TSpec("session", gap, None, lateness, 20, "event")
    default = TSpec("session", gap, None, lateness, 20)
    got, late = run(explicit, recs, sizes, [])
    want, want_late = run(default, recs, sizes, [])
    assert {k: sorted(map(repr, v)) for k, v in got.items()} == {
        k: sorted(map(repr, v)) for k, v in want.items()
    }
    assert sorted(late) == sorted(want_late)


# b's record arrives under watermark 175 (a's 176 came before it) on a worker of its own and
# registers its continuous firing at 160, in the past; that worker's next watermark is 199, its
# window's end: the firing is due at 175, not in one jump with the end (which fired it once)
PASSED_FIRING = [
    *[{"id": "a", "ts": 95, "value": 0}] * 8,
    *({"id": "a", "ts": t, "value": 0} for t in (105, 116, 146, 176)),
    {"id": "b", "ts": 159, "value": 0}, {"id": "a", "ts": 200, "value": 0},
]  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    spec=specs(),
    recs=records(),
    parallelism=st.sampled_from([2, 4]),
    batch=st.integers(1, 7),
)
@example(
    spec=TSpec("tumbling", 50, trigger="continuous:40"), recs=PASSED_FIRING, parallelism=4, batch=2
)
def test_triggered_windows_equal_the_model_at_every_parallelism(
    spec: TSpec, recs: list[dict[str, Any]], parallelism: int, batch: int
) -> None:
    """Workers own disjoint key groups and see every split's watermarks: per key, the same
    results in the same order at any parallelism (the end of input included: a continuous
    trigger fires a window once when the final watermark passes its next firing and its end
    together), and the same late records."""
    want = simulate(recs, spec)
    out = testing.run(build_job(spec), recs, batch_size=batch, parallelism=parallelism)
    assert by_key(out.results) == want.by_key
    assert sorted((r["key"], r["ts"]) for r in out.late) == sorted(
        (r["key"], r["ts"]) for r in want.late
    )
