"""The leak check's verdict (``benchmarks.soak.leak_verdict``) on made-up samples: a memtable's
saw-tooth over a flat level passes, a steady climb beyond the bound fails, and so do a worker
that was replaced, a job that fell behind and a query load that answered nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.soak import LEAK_BOUND_MIB_PER_MIN, leak_verdict

MIB = 2**20
RATE = 2_000
LOAD = json.dumps({"kinds": {"point": {"ok": 10}}})


def _samples(
    rss_of: dict[int, Any],
    n: int = 30,
    step_s: float = 2.0,
    held_of: dict[int, Any] | None = None,
) -> list[dict[str, Any]]:
    """``n`` samples every ``step_s``; ``rss_of[pid](i)`` is that process's RSS in MiB, and
    ``held_of[pid](i)`` what its RocksDB holds of it (none by default)."""
    held_of = held_of or {}
    return [
        {
            "t": 30 + i * step_s,
            "rss": {p: int(f(i) * MIB) for p, f in rss_of.items()},
            "held": {p: int(held_of[p](i) * MIB) if p in held_of else 0 for p in rss_of},
            "fds": {p: 40 for p in rss_of},
            "records_in": int(RATE * (30 + i * step_s)),
            "state": "running",
        }
        for i in range(n)
    ]


def _saw(i: int) -> float:
    return 50.0 + 6.0 * (i % 5) / 4  # a 6 MiB saw-tooth over a flat 50 MiB


def test_a_saw_tooth_over_a_flat_level_passes() -> None:
    report = leak_verdict(_samples({1: _saw, 2: _saw, 3: lambda i: 70.0}), RATE, LOAD)
    assert report["ok"], report["checks"]
    # the saw-tooth's phase tilts the line a little (1.2 MiB a minute here): well within the bound
    assert all(abs(v) < LEAK_BOUND_MIB_PER_MIN / 2 for v in report["rss_mib_per_min"].values())


def test_a_steady_climb_beyond_the_bound_fails() -> None:
    # 100 bytes a record at 2,000 records/s: 11.4 MiB a minute, 0.38 MiB a 2 s sample
    def leaking(i: int) -> float:
        return _saw(i) + i * 100 * RATE * 2 / MIB

    report = leak_verdict(_samples({1: _saw, 2: leaking}), RATE, LOAD)
    assert not report["checks"]["rss_flat"]
    assert report["rss_mib_per_min"]["2"] > 1.5 * LEAK_BOUND_MIB_PER_MIN
    assert not report["ok"]


def test_memtables_filling_through_the_run_pass_and_a_climb_beside_them_fails() -> None:
    """What RocksDB holds is not judged: memtables filling for the whole minute (no flush in
    it) pass; the same climb with RocksDB holding nothing more is a leak."""

    def filling(i: int) -> float:
        return 8.0 + i * 0.4  # 12 MiB a minute

    def worker(i: int) -> float:
        return _saw(i) + filling(i)

    report = leak_verdict(_samples({1: worker}, held_of={1: filling}), RATE, LOAD)
    assert report["ok"], report["rss_mib_per_min"]
    report = leak_verdict(_samples({1: worker}, held_of={1: lambda i: 8.0}), RATE, LOAD)
    assert not report["checks"]["rss_flat"]


def test_a_rise_that_levels_off_is_a_warm_up_and_passes() -> None:
    # 6 MiB over the first 20 s sampled, then flat: 5+ MiB a minute over the run, 0 in its half
    def warming(i: int) -> float:
        return 70.0 + min(i, 10) * 0.6

    report = leak_verdict(_samples({1: warming}), RATE, LOAD)
    assert abs(report["rss_late_mib_per_min"]["1"]) < 0.01
    assert report["ok"], report["checks"]


def test_a_leak_that_starts_late_fails() -> None:
    # flat for the first third, then 11 MiB a minute (one that starts in the later half is
    # below the bound over the whole run: it is caught by a longer run, make soak's)
    def leaking(i: int) -> float:
        return 50.0 + max(0, i - 10) * 100 * RATE * 2 / MIB

    report = leak_verdict(_samples({1: leaking}), RATE, LOAD)
    assert report["rss_late_mib_per_min"]["1"] > 1.5 * LEAK_BOUND_MIB_PER_MIN
    assert not report["checks"]["rss_flat"]


def test_a_climb_of_descriptors_fails() -> None:
    samples = _samples({1: _saw})
    for i, s in enumerate(samples):
        s["fds"][1] = 40 + i  # one more every 2 s: 30 a minute
    assert not leak_verdict(samples, RATE, LOAD)["checks"]["fds_flat"]


def test_a_replaced_worker_a_lagging_job_or_a_silent_load_fails() -> None:
    samples = _samples({1: _saw, 2: _saw})
    for s in samples[15:]:
        s["rss"][3] = s["rss"].pop(2)  # worker 2 died and worker 3 took its place
    assert not leak_verdict(samples, RATE, LOAD)["checks"]["same_processes"]
    assert not leak_verdict(_samples({1: _saw}), 3 * RATE, LOAD)["checks"]["kept_up"]
    assert not leak_verdict(_samples({1: _saw}), RATE, "")["checks"]["queried"]


def test_too_few_samples_is_an_error_not_a_verdict() -> None:
    with pytest.raises(RuntimeError, match="a slope needs 10 or more"):
        leak_verdict(_samples({1: _saw}, n=5), RATE, LOAD)
