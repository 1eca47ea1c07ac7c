"""Dead letters are never silent (issue 39 item 1): the first record of each (stage, kind) is a
WARNING naming both and where it was read, later ones are counted at most every
``WARN_EVERY_S``, a split whose every record was dead says so, and the run's
``max_dead_letter_ratio`` is judged only once enough records were read (or the input ended)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from weir.base.errors import DeadLetterLimit
from weir.base.settings import BadValue, Number
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.outcome import DeadLetterJudge, kinds, summarise
from weir.engine.runtime.messages import OperatorStatus, WorkerStatus
from weir.engine.runtime.outputs import WARN_EVERY_S, DeadLetters
from weir.engine.runtime.view import unreported
from weir.state.keygroups import KeyGroupRange

LOGGER = "weir.engine.runtime.outputs"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_first_of_each_kind_is_one_warning_with_its_line(caplog: pytest.LogCaptureFixture) -> None:
    dead = DeadLetters(None)
    lines = [b'{"a": 1}\n', b'{"b": 2}\n', b'{"c": 3}\n']
    caplog.set_level(logging.WARNING, LOGGER)
    dead.reading("in.jsonl", 0, lines, first_line=41)
    for _ in range(5_000):  # counting never logs: only flush does, once a flush interval
        dead.add("timestamp", "missing-field", "record has no timestamp field 'ts'", lines[1])
    dead.add("map", "ZeroDivisionError", "map raised ZeroDivisionError", lines[2])
    dead.done_reading()
    assert _warnings(caplog) == []
    dead.flush()
    said = _warnings(caplog)
    assert len(said) == 2
    assert "stage=timestamp kind=missing-field first at split=in.jsonl line=42" in said[0]
    assert "record has no timestamp field 'ts'" in said[0]
    assert "stage=map kind=ZeroDivisionError first at split=in.jsonl line=43" in said[1]
    dead.add("timestamp", "missing-field", "record has no timestamp field 'ts'", {"x": 1})
    dead.flush()  # within WARN_EVERY_S of the last: nothing new is said
    assert len(_warnings(caplog)) == 2
    assert dead.count == 5_002


def test_counts_are_rate_limited_warnings(caplog: pytest.LogCaptureFixture) -> None:
    dead = DeadLetters(None)
    caplog.set_level(logging.WARNING, LOGGER)
    dead.add("key_by", "missing-field", "record has no key field 'id'", {"x": 1})
    t0 = time.monotonic()  # the dead letters' clock
    dead.report(t0)
    for _ in range(7):
        dead.add("key_by", "missing-field", "record has no key field 'id'", {"x": 1})
    start = len(_warnings(caplog))
    dead.report(t0 + WARN_EVERY_S / 2)
    assert len(_warnings(caplog)) == start
    dead.report(t0 + WARN_EVERY_S * 2)
    counted = _warnings(caplog)[start:]
    assert len(counted) == 1
    assert "stage=key_by kind=missing-field more=7" in counted[0] and "total=8" in counted[0]
    dead.report(t0 + WARN_EVERY_S * 4)  # nothing grew: nothing said
    assert len(_warnings(caplog)) == start + 1


def test_offset_sources_name_the_offset_and_record(caplog: pytest.LogCaptureFixture) -> None:
    dead = DeadLetters(None)
    caplog.set_level(logging.WARNING, LOGGER)
    items = [b"a", b"b", b"c"]
    dead.reading("events-3", 120, items, first_line=None)
    dead.add("decode", "malformed-json", "malformed JSON", items[2])
    dead.flush()
    assert "first at split=events-3 offset=120 record=2" in _warnings(caplog)[0]


def test_a_split_whose_every_record_was_dead_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = DeadLetters(None)
    caplog.set_level(logging.WARNING, LOGGER)
    for split, bad in (("all-bad", 3), ("some-bad", 1)):
        items: list[Any] = [{"i": i} for i in range(3)]
        dead.reading(split, 0, items, first_line=1)
        for item in items[:bad]:
            dead.add("timestamp", "missing-field", "record has no timestamp field 'ts'", item)
        dead.done_reading()
    dead.flush()
    before = len(_warnings(caplog))
    dead.split_ended("some-bad", 3)
    assert len(_warnings(caplog)) == before
    dead.split_ended("all-bad", 3)
    ended = _warnings(caplog)[before:]
    assert len(ended) == 1
    assert "split=all-bad ended and every one of its records=3 went to the dead letters" in ended[0]


def test_quiet_dead_letters_count_without_logging(caplog: pytest.LogCaptureFixture) -> None:
    dead = DeadLetters(None, quiet=True)
    caplog.set_level(logging.WARNING, LOGGER)
    dead.add("decode", "malformed-json", "malformed JSON", b"x")
    dead.flush()
    dead.split_ended("s", 1)
    assert _warnings(caplog) == [] and dead.count == 1


def _worker(index: int, records: int, dead: int, kind: str = "missing-field") -> WorkerStatus:
    status = unreported(index, KeyGroupRange(0, 127))
    status["records_in"] = records
    status["dead_letters"] = dead
    reason = "record has no timestamp field 'ts'"
    at = f"split=s{index} line=1"
    status["dead_letter_kinds"] = [
        {"stage": "timestamp", "kind": kind, "count": dead, "reason": reason, "at": at}
    ]
    return status


def test_the_limit_is_judged_from_min_records_or_at_the_end(tmp_path: Any) -> None:
    cfg = RunConfig(
        job_file=tmp_path / "job.py",
        state_dir=tmp_path,
        max_dead_letter_ratio=0.1,
        dead_letter_min_records=1_000,
    )
    judge = DeadLetterJudge(cfg, "t1", "file:///dead.jsonl")
    few = [_worker(0, 100, 50), _worker(1, 100, 0)]
    assert judge.verdict(few, input_ended=False) is None  # too few records read to judge
    problem = judge.problem(few)
    assert problem is not None and "50 of 200 records read (25.0%)" in problem
    ended = judge.verdict(few, input_ended=True)
    assert isinstance(ended, DeadLetterLimit)
    assert "`max_dead_letter_ratio`=0.1" in str(ended) and "line=1" in str(ended)
    within = [_worker(0, 5_000, 10), _worker(1, 5_000, 10)]
    assert judge.verdict(within, input_ended=True) is None and judge.problem(within) is None
    many = [_worker(0, 5_000, 2_000), _worker(1, 5_000, 0)]
    assert isinstance(judge.verdict(many, input_ended=False), DeadLetterLimit)
    unlimited = DeadLetterJudge(RunConfig(job_file=tmp_path / "job.py"), "t1", "x")
    assert unlimited.verdict(many, input_ended=True) is None and unlimited.problem(many) is None


def test_kinds_sum_over_workers_and_the_summary_warns(caplog: pytest.LogCaptureFixture) -> None:
    workers = [_worker(0, 10, 4), _worker(1, 10, 6), _worker(2, 10, 1, kind="not-an-integer")]
    summed = kinds(workers)
    assert [(k["kind"], k["count"]) for k in summed] == [
        ("missing-field", 10),
        ("not-an-integer", 1),
    ]
    assert summed[0]["at"] == "split=s0 line=1"
    workers[0]["operators"] = {"imps": _operator(retention_dropped=7)}
    caplog.set_level(logging.WARNING, "weir.engine.runtime.control.outcome")
    summarise("t1", workers, "file:///dead.jsonl", 3_600_000)
    said = _warnings(caplog)
    assert "dead_letters=11 of records_in=30 (36.7%)" in said[0]
    assert "10 at stage=timestamp kind=missing-field" in said[0]
    assert "op=imps retention dropped windows=7" in said[1]
    assert "`state_retention_ms`=3600000" in said[1]


def _operator(retention_dropped: int) -> OperatorStatus:
    return {
        "watermark": 0, "state_watermark": 0, "data_watermark": 0, "records_in": 0,
        "results_out": 0, "late": 0, "open_windows": 0, "retention_dropped": retention_dropped,
        "top": None, "metrics": {},
    }  # fmt: skip


def test_a_ratio_is_a_share_between_0_and_1() -> None:
    check = Number(0.0, 1.0)
    assert check.parse("0.25") == 0.25
    for bad in ("1.5", "-0.1", "nan"):
        with pytest.raises(BadValue):
            check.judge(check.parse(bad))
