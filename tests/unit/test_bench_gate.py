"""The bench gate on small JSONs: names, directions, the threshold, missing figures."""

from __future__ import annotations

import json
from argparse import ArgumentTypeError
from pathlib import Path

import pytest

from benchmarks.gate import compare, direction, flatten, gate, main, render, threshold_arg


def test_nested_figures_are_named_by_their_path_and_lists_of_objects_by_their_first_field() -> None:
    doc = {
        "a": {"events_per_s": 10, "flag": True, "name": "x"},
        "sweep": [{"timeout_ms": 0, "p99_ms": 5}, {"timeout_ms": 10, "p99_ms": 7}],
        "each": [{"id": 1, "sync_ms": 3}],  # per-item detail: left out
        "q": {"quantiles_ms": [1, 2, 3]},  # a curve: left out
    }
    assert flatten(doc) == {
        "a.events_per_s": 10.0,
        "sweep[timeout_ms=0].timeout_ms": 0.0,
        "sweep[timeout_ms=0].p99_ms": 5.0,
        "sweep[timeout_ms=10].timeout_ms": 10.0,
        "sweep[timeout_ms=10].p99_ms": 7.0,
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("single_worker.dense.events_per_s", "higher"),
        ("checkpoints.throughput.ratio", "higher"),
        ("parallel.p2_over_p1", "higher"),
        ("kafka.weir_p1_over_bare", "higher"),
        ("kafka.weir_expr_p1_over_bare_cpu", "higher"),
        ("kafka.weir_expr_p1.events_per_cpu_s", "higher"),
        ("kafka.weir_expr_p1.startup_cpu_s", "lower"),
        ("kafka.bare_confluent.events_per_cpu_s", "info"),  # the client's floor
        ("kafka.bare_batch", "info"),  # the bare consumer's batch, chosen by the run
        ("queries.p99_weir_over_bare", "lower"),  # a latency ratio: lower is better
        ("queries.processes.2.p99_weir_over_bare", "lower"),
        ("checkpoints.sync_phase_1m_keys.sync_p99_ms", "lower"),
        ("single_worker.dense.seconds", "lower"),
        ("checkpoints.sync_phase_1m_keys.largest_checkpoint_bytes", "lower"),
        ("parallel.p2.backpressure[0]", "lower"),
        ("queries.weir.non_2xx", "lower"),
        ("kafka.bare_kafka_python_events_per_s", "info"),  # the host's floor
        ("peers.1m_keys.quix_streams.events_per_s", "info"),  # the peer's own rate
        ("parallel.machine_parallel_capacity", "info"),
        ("seconds.checkpoints", "info"),
        ("freshness.buffer_timeout_ms", "info"),  # a setting
        ("single_worker.dense.events", "info"),  # a count
    ],
)
def test_direction(name: str, expected: str) -> None:
    assert direction(name) == expected


def test_worse_beyond_the_threshold_is_flagged_either_way() -> None:
    kept = {"s": {"events_per_s": 100, "p99_ms": 10, "events": 5}}
    now = {"s": {"events_per_s": 85, "p99_ms": 10.5, "events": 1}}
    rows = {r.figure: r for r in compare(kept, now, 0.10)}
    assert rows["s.events_per_s"].ratio == 0.85 and rows["s.events_per_s"].worse
    assert not rows["s.p99_ms"].worse  # 5% worse: within 10%
    assert not rows["s.events"].worse  # information only
    assert [r.figure for r in compare(kept, now, 0.20) if r.worse] == []
    assert [r.figure for r in compare(kept, now, 0.01) if r.worse] == ["s.events_per_s", "s.p99_ms"]


def test_better_is_never_flagged() -> None:
    kept = {"s": {"events_per_s": 100, "p99_ms": 10}}
    now = {"s": {"events_per_s": 300, "p99_ms": 1}}
    assert not any(r.worse for r in compare(kept, now, 0.10))


def test_missing_figures_are_reported_and_sections_not_run_are_left_out(tmp_path: Path) -> None:
    kept = {"s": {"old_ms": 1, "both_ms": 1}, "other": {"x_ms": 1}, "seconds": {"other": 9}}
    now = {"s": {"new_ms": 1, "both_ms": 1}, "seconds": {"s": 1}}
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    result = gate(tmp_path / "kept.json", now, 0.10)
    assert result["only_kept"] == ["s.old_ms"]
    assert result["only_now"] == ["s.new_ms", "seconds.s"]
    assert {"other.x_ms", "seconds.other"}.isdisjoint(r["figure"] for r in result["rows"])
    text = render(result)
    assert "not measured now: s.old_ms" in text
    assert "not in the kept file: s.new_ms, seconds.s" in text


def test_a_missing_or_broken_kept_file_is_reported_not_raised(tmp_path: Path) -> None:
    result = gate(tmp_path / "absent.json", {"s": {"a_ms": 1}}, 0.1)
    assert "no kept figures" in result["problem"]
    assert result["rows"] == []
    assert "no kept figures" in render(result)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert "no kept figures" in gate(broken, {}, 0.1)["problem"]


def test_the_command_line_compares_two_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"s": {"events_per_s": 100}}))
    new.write_text(json.dumps({"s": {"events_per_s": 50}}))
    assert main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "s.events_per_s" in out and "WORSE" in out and "0.500" in out
    assert main([str(old), str(new), "--strict"]) == 1
    capsys.readouterr()
    assert main([str(old), str(new), "--gate-threshold", "60%"]) == 0
    assert "WORSE" not in capsys.readouterr().out.splitlines()[1]


def test_a_threshold_that_is_not_a_fraction_names_the_fix() -> None:
    assert threshold_arg("10%") == pytest.approx(0.1)
    assert threshold_arg("0.25") == 0.25
    with pytest.raises(ArgumentTypeError, match=r"'ten' is not a number; give a fraction such"):
        threshold_arg("ten")
    with pytest.raises(ArgumentTypeError, match=r"'-1' is out of range; give 0.1 for 10%"):
        threshold_arg("-1")
