"""The pattern operator in a job (``keyed.pattern(p).select(...)``), run in-process by
``weir.testing`` over RocksDB: event-time order whatever the arrival order, per key, late
events and timed-out partial matches to their side outputs, a raising condition to the dead
letters, the same matches at any parallelism and batch size, and the partial matches readable
where the query API reads a key's state (``weir.engine.runtime.stored``). After Flink's
``CEPITCase`` (the Flink test's name where one is ported)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir import Job, WatermarkStrategy, sources, testing
from weir.base.errors import JobDefinitionError, MalformedPatternError
from weir.engine.cep import LATE, TIMED_OUT, AfterMatchSkipStrategy, Pattern
from weir.engine.runtime.stored.codec import decode_state
from weir.state import layout
from weir.state.keygroups import key_group
from weir.state.rocksdb import RocksState


def _job(pattern: Pattern, bound_ms: int = 100, fn: Any = None) -> tuple[Job, Any]:
    job = Job("cep")
    stream = job.source(
        sources.jsonl("/unused.jsonl"),
        watermarks=WatermarkStrategy.bounded_out_of_orderness(bound_ms),
    )
    result = stream.key_by("id").pattern(pattern).select(fn, name="matches")
    return job, result


def _start_middle_end(within: int | None = None) -> Pattern:
    p = (
        Pattern.begin("start").where(lambda e: e["name"] == "start")
        .followed_by_any("middle").where(lambda e: e["name"] == "middle")
        .followed_by("end").where(lambda e: e["name"] == "end")
    )  # fmt: skip
    return p if within is None else p.within(within)


def _ids(results: list[Any]) -> list[tuple[str, tuple[int, ...]]]:
    return sorted(
        (r["key"], tuple(e["n"] for evs in r["match"].values() for e in evs)) for r in results
    )


EVENTS = [  # two keys, arriving out of order within the 100 ms bound
    {"id": "k1", "ts": 30, "n": 3, "name": "middle"},
    {"id": "k1", "ts": 10, "n": 1, "name": "start"},
    {"id": "k2", "ts": 12, "n": 11, "name": "start"},
    {"id": "k1", "ts": 20, "n": 2, "name": "middle"},
    {"id": "k2", "ts": 40, "n": 14, "name": "end"},
    {"id": "k1", "ts": 50, "n": 5, "name": "end"},
    {"id": "k2", "ts": 25, "n": 12, "name": "middle"},
    {"id": "k1", "ts": 40, "n": 4, "name": "other"},
]


def test_testSimplePatternCEP_in_event_time_per_key() -> None:
    """Arrival order does not matter, only event time: k1's two middles both pair with its
    start and end (followed_by_any), k2's single path matches, no key sees another's events."""
    job, _ = _job(_start_middle_end())
    out = testing.run(job, EVENTS)
    assert _ids(out.results) == [("k1", (1, 2, 5)), ("k1", (1, 3, 5)), ("k2", (11, 12, 14))]
    assert out.dead == []


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("batch_size", [1, 3, 1024])
def test_matches_do_not_depend_on_batching_or_parallelism(
    parallelism: int, batch_size: int
) -> None:
    job, _ = _job(_start_middle_end())
    out = testing.run(job, EVENTS, batch_size=batch_size, parallelism=parallelism)
    assert _ids(out.results) == [("k1", (1, 2, 5)), ("k1", (1, 3, 5)), ("k2", (11, 12, 14))]


def test_select_function_and_match_time() -> None:
    """Flink's ``PatternSelectFunction``: one record per match; the default record's ``ts`` is
    the match's last event's time."""
    job, _ = _job(_start_middle_end(), fn=lambda m: {"first": m["start"][0]["n"], "n": len(m)})
    assert sorted(map(str, testing.run(job, EVENTS).results)) == sorted(
        map(str, [{"first": 1, "n": 3}, {"first": 1, "n": 3}, {"first": 11, "n": 3}])
    )
    job, _ = _job(_start_middle_end())
    assert {r["ts"] for r in testing.run(job, EVENTS).results} == {50, 40}


def test_timed_out_partial_matches_go_to_their_side_output() -> None:
    """Flink's ``testTimeoutHandling``: a partial match older than ``within`` is dropped and
    reported with its timeout time (start + within)."""
    job, _ = _job(_start_middle_end(within=25), bound_ms=0)
    events = [
        {"id": "k", "ts": 1, "n": 1, "name": "start"},
        {"id": "k", "ts": 5, "n": 2, "name": "middle"},
        {"id": "k", "ts": 30, "n": 3, "name": "end"},  # 29 ms after the start: too late
        {"id": "k", "ts": 31, "n": 4, "name": "start"},
        {"id": "k", "ts": 40, "n": 5, "name": "middle"},
        {"id": "k", "ts": 50, "n": 6, "name": "end"},  # 19 ms after its start: a match
    ]
    out = testing.run(job, events)
    assert _ids(out.results) == [("k", (4, 5, 6))]
    timed_out = out.side["matches"][TIMED_OUT.name]
    assert sorted((t["ts"], tuple(e["n"] for v in t["match"].values() for e in v))
                  for t in timed_out) == [(26, (1,)), (26, (1, 2)), (56, (4,))]  # fmt: skip
    # (4,): the start at 31 still waits for another middle (followed_by_any) until 31 + 25


def test_late_events_go_to_the_late_output_and_match_nothing() -> None:
    """Flink's ``CepOperator``: an event at or before the watermark it arrives under is late."""
    job, _ = _job(_start_middle_end(), bound_ms=0)
    events = [
        {"id": "k", "ts": 10, "n": 1, "name": "start"},
        {"id": "k", "ts": 30, "n": 3, "name": "end"},
        {"id": "k", "ts": 20, "n": 2, "name": "middle"},  # the watermark is 29 by now
    ]
    out = testing.run(job, events)
    assert out.results == []
    late = out.side["matches"][LATE.name]
    assert [(r["ts"], r["watermark"], r["record"]["n"]) for r in late] == [(20, 29, 2)]


def test_a_raising_condition_sends_the_event_to_the_dead_letters_and_the_key_goes_on() -> None:
    def start(e: dict[str, Any]) -> bool:
        if e["n"] == 666:
            raise ValueError("bad event")
        return bool(e["name"] == "start")

    pattern = (
        Pattern.begin("start").where(start).followed_by("end").where(lambda e: e["name"] == "end")
    )
    job, _ = _job(pattern, bound_ms=0)
    events = [
        {"id": "k", "ts": 1, "n": 1, "name": "start"},
        {"id": "k", "ts": 2, "n": 666, "name": "x"},
        {"id": "k", "ts": 3, "n": 2, "name": "end"},
    ]
    out = testing.run(job, events)
    assert _ids(out.results) == [("k", (1, 2))]
    assert len(out.dead) == 1 and "bad event" in out.dead[0]["reason"]
    assert "666" in out.dead[0]["reason"]


def _stored(state: RocksState, job: Job, key: str) -> dict[str, Any]:
    """A key's states as ``GET /{job}/{op}/state/{key}`` reads them (the stored codec)."""
    op = job.operators["matches"]
    kg = key_group(key, job.max_parallelism)
    prefix = layout.key_prefix(kg, op.state_id, key.encode())
    rows = state.scan(prefix, layout.prefix_upper_bound(prefix))
    return dict(decode_state(value)[0::2] for _, value in rows)


def test_partial_matches_are_queryable_per_key(tmp_path: Path) -> None:
    job, _ = _job(_start_middle_end(within=1_000), bound_ms=0)
    state = RocksState(tmp_path / "db")
    with testing.Harness(job, state=state) as harness:
        harness.feed([
            {"id": "k", "ts": 10, "n": 1, "name": "start"},
            {"id": "k", "ts": 20, "n": 2, "name": "middle"},
            {"id": "k", "ts": 30, "n": 3, "name": "start"},
            {"id": "k", "ts": 40, "n": 4, "name": "noise"},  # lets the watermark pass 30
            {"id": "k", "ts": 99, "n": 9, "name": "noise"},
        ])  # fmt: skip
        harness.flush()
        summary = _stored(state, job, "k")["partial_matches"]
        assert summary == {
            "count": 3,  # start@10, start@10+middle@20, start@30
            "waiting_in": summary["waiting_in"],
            "queued": 1,  # the event at 99 waits for the watermark
            "oldest_start": 10,
        }
        assert sorted(summary["waiting_in"]) == ["end", "middle", "middle"]


def test_a_pattern_that_can_match_nothing_is_refused() -> None:
    job = Job("cep")
    keyed = job.source(sources.jsonl("/unused.jsonl")).key_by("id")
    with pytest.raises(MalformedPatternError, match="can match no event"):
        keyed.pattern(Pattern.begin("a").optional())
    with pytest.raises(MalformedPatternError, match="pass a Pattern"):
        keyed.pattern("a")  # type: ignore[arg-type]


def test_weir_explain_shows_the_pattern() -> None:
    from weir.engine.explain import describe, render

    skip = AfterMatchSkipStrategy.skip_past_last_event()
    pattern = (
        Pattern.begin("fail", skip).where(lambda e: e["kind"] == "fail").times(3).consecutive()
        .followed_by("ok").where(lambda e: e["kind"] == "ok").within(60_000)
    )  # fmt: skip
    job, _ = _job(pattern)
    text = render(describe(job))
    assert "pattern operator matches: skip skip_past_last_event, within 60000 ms" in text
    here = "test_weir_explain_shows_the_pattern.<locals>.<lambda>"
    assert f"begin fail where {here} (times, inner=strict, times 3..3)" in text
    assert f"followed_by ok where {here} (single, within 60000 ms)" in text


def test_the_backfill_refuses_a_pattern_operator_by_name() -> None:
    from weir.engine.spark.plan import backfill_operator

    job, _ = _job(_start_middle_end())
    with pytest.raises(JobDefinitionError, match="'matches' of job 'cep' is a CEP pattern"):
        backfill_operator(job, "matches")
