"""``make bench-cpu`` runs each system several times in turn and reports its run of median CPU,
with every run's CPU and the load average after it (``benchmarks/cpu_bench.py``)."""

from __future__ import annotations

import os

import pytest

from benchmarks.cpu_bench import _median_run, bytecode_env


def test_the_run_of_median_cpu_is_reported_with_every_run() -> None:
    runs = [
        {"cpu_s": 3.0, "wall_s": 3.1, "output": "", "load_1m": 3.5, "reader": "slow"},
        {"cpu_s": 1.0, "wall_s": 1.2, "output": "", "load_1m": 0.5, "reader": "fast"},
        {"cpu_s": 2.0, "wall_s": 2.2, "output": "", "load_1m": 1.0, "reader": "mid"},
    ]
    got = _median_run(1_000_000, runs)
    assert got["cpu_s"] == 2.0 and got["wall_s"] == 2.2 and got["reader"] == "mid"
    assert got["events_per_cpu_s"] == 500_000
    assert got["cpu_s_runs"] == [3.0, 1.0, 2.0]  # in the order they ran
    assert got["load_1m_runs"] == [3.5, 0.5, 1.0]
    assert "output" not in got and "load_1m" not in got


def test_of_two_runs_the_cheaper_is_reported() -> None:
    runs = [
        {"cpu_s": 2.0, "wall_s": 2.0, "load_1m": 0.0},
        {"cpu_s": 1.5, "wall_s": 1.6, "load_1m": 0.0},
    ]
    assert _median_run(3_000, runs)["cpu_s"] == 1.5


def test_measured_processes_write_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell with PYTHONDONTWRITEBYTECODE set made every measured process compile what it
    imports (a SQL job's start-up 0.79 CPU-s instead of 0.5); the measured trees run without it,
    whether the environment is this process's or one given."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert "PYTHONDONTWRITEBYTECODE" not in bytecode_env()
    assert bytecode_env()["PATH"] == os.environ["PATH"]
    given = {"PYTHONDONTWRITEBYTECODE": "1", "WEIR_STATE_DIR": "/s"}
    assert bytecode_env(given) == {"WEIR_STATE_DIR": "/s"}
    assert given["PYTHONDONTWRITEBYTECODE"] == "1"  # the caller's mapping is left as it was
