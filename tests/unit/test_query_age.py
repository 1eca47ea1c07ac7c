"""``benchmarks.query_age``'s figures: the mean rate by span of age, and the flushes and
compactions read from the workers' RocksDB LOGs."""

from __future__ import annotations

from pathlib import Path

from benchmarks.query_age import rocksdb_events, span_means


def test_each_round_counts_in_the_span_its_age_starts_in() -> None:
    rounds = [
        {"age_s": 0, "requests_per_s": 10_000},
        {"age_s": 119, "requests_per_s": 8_000},
        {"age_s": 120, "requests_per_s": 7_000},
        {"age_s": 650, "requests_per_s": 5_000},
        {"age_s": 700, "requests_per_s": 6_000},
    ]
    assert span_means(rounds) == {"0-120s": 9_000, "120-300s": 7_000, "600-s": 5_500}


def test_flushes_and_compactions_are_counted_over_every_worker_and_rolled_log(
    tmp_path: Path,
) -> None:
    started = 'EVENT_LOG_v1 {"time_micros": 1, "job": 2, "event": "%s_started"}\n'
    for worker, name, flushes, compactions in (
        ("worker-0", "LOG", 2, 1),
        ("worker-0", "LOG.old.1", 1, 0),
        ("worker-1", "LOG", 3, 2),
    ):
        db = tmp_path / "job" / worker / "db"
        db.mkdir(parents=True, exist_ok=True)
        lines = [started % "flush"] * flushes + [started % "compaction"] * compactions
        (db / name).write_text("".join(lines) + '{"event": "flush_finished"}\n')
    assert rocksdb_events(tmp_path) == {"flushes": 6, "compactions": 3}
