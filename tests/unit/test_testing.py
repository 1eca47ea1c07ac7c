"""``weir.testing.run(job, events)`` against the brute-force model (tests/support/reference.py):
tumbling, sliding and session windows with late data and dead letters, and a process function with
keyed state and event-time timers against a model written here from its contract."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.property.test_batching import BAD_RECORDS
from tests.support import make_events
from tests.support.inprocess import build_job
from tests.support.reference import Spec, canonical, group_emissions, simulate_decoded
from weir import Job, JobDefinitionError, WatermarkStrategy, agg, sinks, sources, testing, windows
from weir.engine.watermarks import MIN_WATERMARK

N = 2_000


def _with_bad_records(events: list[dict[str, Any]], every: int = 97) -> list[Any]:
    out: list[Any] = []
    for i, e in enumerate(events):
        out.append(e)
        if i % every == 0:
            out.append(BAD_RECORDS[(i // every) % len(BAD_RECORDS)])
    return out


def _assert_matches_reference(events: list[Any], spec: Spec) -> testing.Result:
    ref = simulate_decoded(events, spec)
    result = testing.run(build_job(spec), events)
    assert group_emissions(result.results) == ref.emissions
    assert canonical(result.late) == canonical(ref.late)
    assert canonical([{"stage": d["stage"], "input": d["input"]} for d in result.dead]) == (
        canonical(ref.dead)
    )
    assert result.by_operator == {spec.op: result.results}
    return result


@pytest.mark.parametrize(
    "spec",
    [
        Spec(bound=200, size=1_000, lateness=0),
        Spec(bound=200, size=1_000, lateness=1_500),
        Spec(bound=200, size=1_000, slide=250, lateness=600),
        Spec(bound=200, size=1, gap=40, lateness=3_000),
        Spec(bound=0, size=1, gap=300, lateness=0),
    ],
    ids=["tumbling", "tumbling-lateness", "sliding", "session", "session-no-lateness"],
)
def test_windows_late_records_and_dead_letters_match_the_reference(spec: Spec) -> None:
    events = _with_bad_records(make_events(N, seed=spec.size + spec.lateness))
    ref = simulate_decoded(events, spec)
    # the input exercises what it should: late records, dead letters of several stages
    assert len(ref.late) >= 10 and len(ref.dead_by_stage()) >= 3
    if spec.lateness:
        assert sum(len(s) > 1 for s in ref.emissions.values()) >= 5  # windows emitted again
    result = _assert_matches_reference(events, spec)
    assert all(isinstance(d["reason"], str) and d["reason"] for d in result.dead)


def test_late_records_name_their_operator_key_and_watermark() -> None:
    spec = Spec(bound=0, size=10, lateness=10)
    events = [
        {"id": "a", "event": "impression", "ts": t, "value": v}
        for t, v in [(1, 1), (25, 2), (12, 3), (3, 4), (30, 5)]
    ]
    result = _assert_matches_reference(events, spec)
    # after 25 the watermark is 24: 12 is within the lateness of [10, 20) and updates it (emitted
    # again); 3 is past the lateness of [0, 10): late, with the watermark it arrived under
    assert result.late == [
        {"op": "imps", "key": "a", "ts": 3, "watermark": 24, "record": events[3]}
    ]
    emissions = {
        w: [(r["count"], r["final"]) for r in rs]
        for w, rs in group_emissions(result.results).items()
    }
    assert emissions == {
        ("a", 0, 10): [(1, True)],
        ("a", 10, 20): [(1, False), (1, True)],
        ("a", 20, 30): [(1, False), (1, True)],
        ("a", 30, 40): [(1, True)],
    }


def test_batch_size_changes_nothing() -> None:
    spec = Spec(bound=200, size=1_000, slide=500, lateness=800)
    events = _with_bad_records(make_events(500, seed=3))
    one = testing.run(build_job(spec), events, batch_size=1)
    big = testing.run(build_job(spec), events, batch_size=4096)
    # each window's emissions and the side outputs are the same; only how emissions of
    # different windows interleave follows the batches
    assert one.results and group_emissions(one.results) == group_emissions(big.results)
    assert canonical(one.late) == canonical(big.late) and one.late
    assert one.dead == big.dead and one.dead


class Tally:
    """Counts a key's records in value state, keeps its values in list state, and sets a timer
    25 ms after each record; emits on every record and every timer."""

    def process(self, event: dict[str, Any], ctx: Any) -> None:
        n = ctx.value("n")
        n.set(n.get(0) + 1)
        ctx.list("values").append(event["value"])
        ctx.register_event_time_timer(ctx.timestamp + 25)
        ctx.emit(["record", ctx.key, ctx.timestamp, ctx.watermark, n.get()])

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit(["timer", ctx.key, timestamp, ctx.value("n").get(), len(ctx.list("values").get())])


def _tally_model(events: list[dict[str, Any]], bound: int) -> dict[str, list[list[Any]]]:
    """Per key, what ``Tally`` emits, from the contract: a record arrives under the watermark
    of the records before it; a key's timers at or below that watermark fire (in time order)
    before it; the end of input fires the rest."""
    out: dict[str, list[list[Any]]] = {}
    counts: dict[str, int] = {}
    timers: dict[str, set[int]] = {}
    max_ts: int | None = None
    for e in events:
        key, ts = str(e["id"]), e["ts"]
        wm = MIN_WATERMARK if max_ts is None else max_ts - bound - 1
        emitted = out.setdefault(key, [])
        for t in sorted(t for t in timers.get(key, set()) if t <= wm):
            timers[key].discard(t)
            emitted.append(["timer", key, t, counts[key], counts[key]])
        counts[key] = counts.get(key, 0) + 1
        timers.setdefault(key, set()).add(ts + 25)
        emitted.append(["record", key, ts, wm, counts[key]])
        max_ts = ts if max_ts is None else max(max_ts, ts)
    for key, pending in timers.items():
        out[key] += [["timer", key, t, counts[key], counts[key]] for t in sorted(pending)]
    return out


def test_a_process_function_sees_the_records_watermarks_and_timers_of_the_model() -> None:
    bound = 400  # every event lags the clock less than this: no timer is set in the past
    events = make_events(
        N, seed=5, far_fraction=0.0, jitter=150, keys=["a", "b", "c", 7], weights=[4, 3, 2, 1]
    )
    job = Job("proc")
    (
        job.source(
            sources.jsonl("/unused.jsonl"),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=bound),
        )
        .key_by("id")
        .process(Tally(), name="tally")
    )
    result = testing.run(job, events, batch_size=64)
    want = _tally_model(events, bound)
    got: dict[str, list[list[Any]]] = {}
    for r in result.results:
        got.setdefault(r[1], []).append(r)
    assert got == want
    assert sum(r[0] == "timer" for r in result.results) >= 100  # timers fired mid-stream too
    assert result.late == [] and result.dead == []


def test_several_operators_stream_sinks_and_the_jobs_own_sinks(tmp_path: Path) -> None:
    """Each operator's output is also kept apart; a stream's ``.sink`` output is in ``sunk``;
    the job's own sink files are never written."""
    out = tmp_path / "out.jsonl"
    job = Job("two")
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0),
    )
    stream.filter(lambda e: e["event"] == "click").sink(sinks.jsonl(out))
    keyed = stream.key_by("id")
    keyed.window(windows.tumbling(ms=100)).aggregate("count", n=agg.count()).sink(sinks.jsonl(out))
    keyed.window(windows.session(gap_ms=50)).aggregate("sessions", n=agg.count())
    events = make_events(300, seed=9)
    result = testing.run(job, events)
    assert set(result.by_operator) == {"count", "sessions"}
    assert sorted(map(repr, result.results)) == sorted(
        repr(r) for rs in result.by_operator.values() for r in rs
    )
    late = [r for r in result.late if r["op"] == "count"]
    assert late and sum(r["n"] for r in result.by_operator["count"]) == len(events) - len(late)
    assert result.sunk == [e for e in events if e["event"] == "click"]
    assert not out.exists()


def test_state_lives_in_a_temporary_directory_that_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = Spec(bound=0, size=10, lateness=0)
    result = testing.run(build_job(spec), [{"id": "a", "event": "impression", "ts": 1, "value": 2}])
    assert [(r["key"], r["count"], r["total"]) for r in result.results] == [("a", 1, 2)]
    assert list(tmp_path.iterdir()) == []


def test_a_harness_keeps_state_where_it_is_told(tmp_path: Path) -> None:
    spec = Spec(bound=0, size=10, lateness=0)
    with testing.Harness(build_job(spec), state_dir=tmp_path) as h:
        h.feed(
            [b'{"id": "a", "event": "impression", "ts": 1, "value": 2}', b"{oops"], decoded=False
        )
        h.flush()
        assert (tmp_path / "db" / "CURRENT").exists()
        result = h.finish()
    assert [r["count"] for r in result.results] == [1]
    assert [(d["stage"], d["input"]) for d in result.dead] == [("decode", "{oops")]
    assert "malformed JSON" in result.dead[0]["reason"]


def test_bad_arguments_are_named() -> None:
    job = build_job(Spec(bound=0, size=10, lateness=0))
    with pytest.raises(ValueError, match="batch_size=0 is too small; use 1 or more"):
        testing.run(job, [], batch_size=0)
    with pytest.raises(JobDefinitionError, match="has no source"):
        testing.run(Job("empty"), [])
