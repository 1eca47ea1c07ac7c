"""``GET /metrics`` of a running two-worker job with checkpoints, parsed with prometheus_client's
own parsers: every family's type and unit suffix, the build, and values whose unit or source
could be wrong (watermarks and checkpoint times in seconds, matched against ``/jobs/{job}``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

import weir
from tests.support import WeirServer, wait_until, worker_pids

LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("live")
(
    job.source(sources.generator("ads", rate=2000, ids=50), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""
UNITS = ("_total", "_seconds", "_bytes", "_ratio", "_records", "_info")
UNITLESS = {  # counts of things
    "weir_open_windows", "weir_job_state", "weir_open_sse_streams", "weir_cep_partial_matches",
}  # fmt: skip


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> WeirServer:
    job = tmp_path_factory.mktemp("metrics") / "live.py"
    job.write_text(LIVE_JOB)
    server = module_weir_server(job, "--parallelism", "2", "--checkpoint-interval-ms", "300")
    client = server.client()
    wait_until(lambda: (client.get("/jobs/live").json().get("last_checkpoint") or 0) >= 2, 30.0,
               what="two checkpoints")  # fmt: skip
    return server


def scrape(server: WeirServer) -> dict[str, Metric]:
    r = server.client().get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(families: dict[str, Metric], name: str, **labels: str) -> float:
    found = [s.value for s in families[name].samples if s.labels == labels]
    assert len(found) == 1, (name, labels, families[name].samples)
    return found[0]


def test_names_types_and_the_build(live: WeirServer) -> None:
    families = scrape(live)
    for name, family in families.items():
        exposed = {s.name for s in family.samples} or {name}
        if family.type == "counter":
            assert exposed <= {f"{name}_total", f"{name}_created"}, name
        elif name.endswith("_created"):
            continue  # prometheus_client's creation time of a counter or histogram
        elif family.type == "gauge":
            assert name in UNITLESS or name.endswith(UNITS), f"{name} names no unit"
        else:
            assert (name, family.type) == ("weir_http_request_duration_seconds", "histogram")
    assert value(families, "weir_build_info", version=weir.__version__) == 1
    assert value(families, "weir_job_state", job="live", state="running") == 1
    assert sum(s.value for s in families["weir_job_state"].samples) == 1
    for legacy in ("weir_watermark_ms", "weir_checkpoint_duration_ms", "weir_checkpoint_sync_ms"):
        assert legacy not in families


def test_watermarks_are_seconds_of_the_operators_watermark(live: WeirServer) -> None:
    client = live.client()

    def watermark() -> int:
        ops = client.get("/jobs/live").json()["operators"]
        found: int = next(op["watermark"] for op in ops if op["name"] == "counts")
        return found

    before = watermark()
    families = scrape(live)
    after = watermark()
    scraped_at = time.time()
    mark = value(families, "weir_watermark_timestamp_seconds", job="live", op="counts")
    assert before <= mark * 1000 <= after
    lag = value(families, "weir_watermark_lag_seconds", job="live", op="counts")
    assert 0 < lag < 30, "event times are the wall clock's, 100 ms out of order at most"
    assert abs((scraped_at - lag) - mark) < 5


def test_checkpoint_series_are_the_last_completed_checkpoint(live: WeirServer) -> None:
    families = scrape(live)
    detail: dict[str, Any] = live.client().get("/jobs/live").json()
    at = value(families, "weir_last_checkpoint_timestamp_seconds", job="live")
    last = next(c for c in detail["checkpoints"] if c["time"] == round(at * 1000))
    assert value(families, "weir_last_checkpoint_duration_seconds", job="live") == pytest.approx(
        last["duration_ms"] / 1000
    )
    assert value(
        families, "weir_last_checkpoint_sync_duration_seconds", job="live"
    ) == pytest.approx(last["sync_ms"] / 1000)
    assert value(families, "weir_last_checkpoint_size_bytes", job="live") == last["size"] > 0
    uploaded = value(families, "weir_last_checkpoint_uploaded_bytes", job="live")
    assert uploaded == last["incremental_size"]
    assert value(families, "weir_checkpoints_completed", job="live") >= 2
    assert value(families, "weir_restarts", job="live") == 0
    assert abs(time.time() - at) < 30


def test_records_in_per_worker_and_per_operator(live: WeirServer) -> None:
    def consistent() -> tuple[dict[str, Metric], float] | None:
        """A scrape whose operator count is within the job's records read, taken after it:
        each worker reports its counters on its own beat, so the operator (fed by both
        workers' sources) may be a beat ahead of a source's count in one scrape."""
        families = scrape(live)
        after = live.client().get("/jobs/live").json()["records_in"]
        into_op = value(families, "weir_operator_records_in", job="live", op="counts")
        return (families, after) if 0 < into_op <= after else None

    families, after = wait_until(consistent, 10.0, what="the operator's count within the job's")
    per_worker = {
        s.labels["worker"]: s.value
        for s in families["weir_records_in"].samples
        if s.name == "weir_records_in_total"
    }
    assert set(per_worker) == {"0", "1"} and all(v > 0 for v in per_worker.values())
    assert sum(per_worker.values()) <= after
    assert value(families, "weir_dead_letters", job="live", worker="0") == 0


def test_memory_is_each_workers_resident_set_and_what_rocksdb_holds(live: WeirServer) -> None:
    """Each worker reports its pid, its RSS and its RocksDB's memory; ``/jobs`` and
    ``/metrics`` show them, and the API's readers of the workers' state show theirs."""
    workers = live.client().get("/jobs/live").json()["workers"]
    assert sorted(w["pid"] for w in workers) == worker_pids(live.proc.pid)
    for w in workers:
        mem = w["memory"]
        assert set(mem) == {"rss", "memtables", "block_cache", "table_readers"}
        # a worker holding its windows and RocksDB: tens of MiB, its memtables a part of them
        assert 20 * 2**20 < mem["rss"] < 2**31 and 0 < mem["memtables"] < mem["rss"]
    # a lookup opens the API's reader of each worker's state
    for i in range(50):
        live.client().get(f"/live/counts/state/ad-{i}")
    families = scrape(live)
    for worker in ("0", "1"):
        rss = value(families, "weir_worker_memory_bytes", job="live", worker=worker, kind="rss")
        assert rss > 20 * 2**20
        held = value(
            families, "weir_state_reader_memory_bytes", job="live", worker=worker, kind="memtables"
        )
        assert held > 0  # the worker's WAL, replayed into the reader's memtables


def test_openmetrics_when_the_scraper_asks_for_it(live: WeirServer) -> None:
    r = live.client().get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert r.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in openmetrics_families(r.text)}  # the strict parser
    assert families["weir_watermark_lag_seconds"].unit == "seconds"
    assert families["weir_last_checkpoint_size_bytes"].unit == "bytes"
    assert r.text.endswith("# EOF\n")
