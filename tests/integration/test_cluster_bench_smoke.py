"""The cluster benchmark (``make bench-cluster``) at its smallest configuration on the session's
standalone Spark cluster, so that it keeps working: real ``weir run`` processes locally and on
the cluster, the Tansu broker, an executor killed. Each of the four figures is in the JSON and
is a positive number; the figures' goals are the benchmark's to report, not asserted here (two
one-core workers on a shared host say little about speed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import cluster_bench
from tests.support.spark_cluster import SparkCluster


@pytest.fixture(scope="module")
def result(spark_cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    workdir = tmp_path_factory.mktemp("cluster-bench")
    out = cluster_bench.measure(workdir, spark_cluster, cluster_bench.SMOKE)
    return json.loads(json.dumps(out))  # what the benchmark writes: plain JSON


def _positive(*values: Any) -> bool:
    return all(isinstance(v, int | float) and v > 0 for v in values)


def test_throughput_side_by_side(result: dict[str, Any]) -> None:
    tp = result["throughput"]
    events = cluster_bench.SMOKE.events
    assert tp["events"] == events and tp["rounds"] == 1
    for mode in cluster_bench.MODES:
        assert len(tp[f"{mode}_events_per_s"]) == 1, tp
        assert _positive(*tp[f"{mode}_events_per_s"]), tp
    assert _positive(
        tp["cluster_over_local_median"],
        tp["local_tcp_over_local_median"],
        tp["cluster_over_local_per_cpu_median"],
    )
    assert tp["cluster_over_local_median"] == round(
        tp["cluster_events_per_s"][0] / tp["local_events_per_s"][0], 3
    )
    assert _positive(*tp["cluster_start_s"], *tp["cluster_seconds"]), tp
    assert tp["cluster_hosts"] == ["127.0.0.1", "127.0.0.1"]  # the tasks ran on the executors
    [cpu] = tp["cluster_cpu_s"]
    assert set(cpu) == {"job_manager", "driver_jvm", "executor_jvm", "executor_python"}, cpu
    assert set(tp["local_cpu_s"][0]) == {"job_manager", "workers"}, tp
    # CPU is the growth between two status polls around the run: a smoke run of 20k events
    # can start and end between them on a loaded host, so a part's share may round to 0
    assert all(v >= 0 for v in cpu.values()), cpu
    assert tp["local_cpu_s"][0]["workers"] >= 0, tp


def test_query_latency_through_the_driver(result: dict[str, Any]) -> None:
    q = result["queries"]
    assert q["keys"] >= 20 and q["keys"] % 2 == 0, q  # as many keys on each worker
    assert q["lookups_per_side"] == cluster_bench.SMOKE.queries
    for pattern in ("sequential", f"concurrent_{cluster_bench.SMOKE.concurrency}"):
        row = q[pattern]
        for side in ("local", "cluster"):
            assert _positive(row[f"{side}_p50_ms"], row[f"{side}_p99_ms"]), row
            assert row[f"{side}_p50_ms"] <= row[f"{side}_p99_ms"], row
        assert row["cluster_minus_local_p50_ms"] == pytest.approx(
            row["cluster_p50_ms"] - row["local_p50_ms"], abs=0.011
        )


def test_freshness_on_the_cluster_and_locally(result: dict[str, Any]) -> None:
    f = result["freshness"]
    assert f["checkpoint_interval_ms"] == cluster_bench.SMOKE.checkpoint_interval_ms
    for side in ("local", "cluster"):
        row = f[side]
        assert row["samples"] >= 10, row
        assert _positive(row["p50_ms"], row["p99_ms"]), row
        assert row["p50_ms"] <= row["p99_ms"], row


def test_recovery_after_an_executor_loss(result: dict[str, Any]) -> None:
    r = result["recovery"]
    assert r["restarts"] >= 1, r
    steps = [r["noticed_s"], r["stage_resubmitted_s"], r["first_record_s"]]
    assert _positive(*steps, r["new_executor_s"]), r  # each step seen in the log and status
    assert steps == sorted(steps), r  # noticed, then a new stage, then records
    # the new stage waits for an executor in the lost one's place (its JVM starts first)
    assert r["new_executor_s"] <= r["stage_resubmitted_s"], r
    assert r["first_record_s"] <= r["status_shows_records_s"], r
    assert r["stage_resubmitted_s"] >= r["restart_delay_ms"] / 1000, r
