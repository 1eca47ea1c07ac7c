"""Prometheus metrics through ``prometheus_client``, in a registry of the app's own (several
apps can live in one process, and the library's global registry would mix them).

Two kinds of series: request metrics (responses by route template and status, latency
histograms, open event streams) that the app updates as requests go, and the series derived from
each job's status (records, watermarks, checkpoints, restarts, source lag, backpressure, dead
letters), which ``JobsCollector`` reads from the job runtimes when Prometheus scrapes. Units
follow Prometheus' conventions: seconds, bytes, ``_timestamp_seconds`` for points in time,
``_total`` for counters. Routes are labelled by their template, so keys never become labels.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from weir import __version__
from weir.api.registry import JobHandle, Registry
from weir.engine.cep import patterns_of
from weir.engine.cep.function import PARTIAL_MATCHES, TIMED_OUT_METRIC
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.view import JOB_STATES
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

W, OP, JOB = ("job", "worker"), ("job", "op"), ("job",)
# name: (type, help, labels); names end in their unit (seconds, bytes) or _total
SERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "weir_records_in_total": ("counter", "Records read from sources.", W),
    "weir_dead_letters_total": ("counter", "Records sent to the dead-letter output.", W),
    "weir_backpressure_ratio": ("gauge", "Share of its run a worker's source was paused.", W),
    "weir_exchange_pending_bytes": ("gauge", "Bytes waiting in a worker's outputs.", W),
    "weir_source_lag_records": (
        "gauge",
        "Records of a source split not read yet (Kafka: high watermark minus position).",
        ("job", "split"),
    ),
    "weir_operator_records_in_total": ("counter", "Records into an operator.", OP),
    "weir_operator_results_out_total": ("counter", "Results an operator emitted.", OP),
    "weir_late_records_total": ("counter", "Records past allowed lateness.", OP),
    "weir_open_windows": ("gauge", "Windows an operator holds open.", OP),
    "weir_cep_partial_matches": (
        "gauge",
        "Partial matches a pattern operator's keys hold (runs past their first event).",
        OP,
    ),
    "weir_cep_timed_out_total": (
        "counter",
        "Partial matches of a pattern operator that timed out (its within window passed).",
        OP,
    ),
    "weir_watermark_timestamp_seconds": ("gauge", "An operator's event-time watermark.", OP),
    "weir_watermark_lag_seconds": ("gauge", "Wall clock minus an operator's watermark.", OP),
    "weir_job_state": ("gauge", "1 for the job's state, 0 for the others.", ("job", "state")),
    "weir_checkpoints_completed_total": ("counter", "Checkpoints completed in this run.", JOB),
    "weir_restarts_total": ("counter", "Restarts after a failure.", JOB),
    "weir_state_catch_up_failures_total": (
        "counter",
        "Catch-ups of the API's reader with a worker's RocksDB that failed (its as-of stayed).",
        W,
    ),
    "weir_last_checkpoint_timestamp_seconds": (
        "gauge",
        "When the last completed checkpoint was triggered.",
        JOB,
    ),
    "weir_last_checkpoint_duration_seconds": (
        "gauge",
        "The last completed checkpoint's duration, trigger to complete.",
        JOB,
    ),
    "weir_last_checkpoint_sync_duration_seconds": (
        "gauge",
        "The synchronous part of the last completed checkpoint (its slowest worker).",
        JOB,
    ),
    "weir_last_checkpoint_size_bytes": ("gauge", "The last completed checkpoint's size.", JOB),
    "weir_last_checkpoint_uploaded_bytes": (
        "gauge",
        "Bytes the last completed checkpoint uploaded (its incremental part).",
        JOB,
    ),
}
CEP_SERIES = ("weir_cep_partial_matches", "weir_cep_timed_out_total")
Families = dict[str, CounterMetricFamily | GaugeMetricFamily]


def _families() -> Families:
    out: Families = {}
    for name, (kind, text, labels) in SERIES.items():
        unit = next((u for u in ("seconds", "bytes") if name.endswith(f"_{u}")), "")
        if kind == "counter":
            out[name] = CounterMetricFamily(name, text, labels=labels)
        else:
            out[name] = GaugeMetricFamily(name, text, labels=labels, unit=unit)
    return out


class JobsCollector:
    """The series derived from each job's status, read from its runtime at scrape time."""

    def __init__(self, jobs: Registry) -> None:
        self.jobs = jobs

    def describe(self) -> Iterator[Metric]:
        """The series' names without samples: the registry refuses a clash at ``register``."""
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        f = _families()
        for name, handle in sorted(self.jobs.jobs.items()):
            workers = handle.runtime.worker_status()
            _add_workers(f, name, workers)
            _add_operators(f, name, handle, workers)
            _add_job(f, name, handle)
            for i, reader in enumerate(handle.readers):  # a restart's new readers count anew
                f["weir_state_catch_up_failures_total"].add_metric(
                    [name, str(i)], reader.catch_up_failures
                )
        for cep in CEP_SERIES:  # shown where a job has a pattern operator, not as empty families
            if not f[cep].samples:
                del f[cep]
        yield from f.values()


def _add_workers(f: Families, job: str, workers: list[WorkerStatus]) -> None:
    for w in workers:
        labels = [job, str(w["worker"])]
        f["weir_records_in_total"].add_metric(labels, w["records_in"])
        f["weir_dead_letters_total"].add_metric(labels, w["dead_letters"])
        f["weir_backpressure_ratio"].add_metric(labels, w["backpressure"])
        f["weir_exchange_pending_bytes"].add_metric(labels, w["pending_bytes"])
        for split, lag in sorted(w["source_lag"].items()):
            f["weir_source_lag_records"].add_metric([job, split], lag)


def _add_operators(f: Families, job: str, handle: JobHandle, workers: list[WorkerStatus]) -> None:
    now = time.time()
    patterns = set(patterns_of(handle.job))
    for op in handle.job.operators:
        per = [w["operators"][op] for w in workers if op in w["operators"]]
        labels = [job, op]
        for metric, total in (
            ("weir_operator_records_in_total", sum(p["records_in"] for p in per)),
            ("weir_operator_results_out_total", sum(p["results_out"] for p in per)),
            ("weir_late_records_total", sum(p["late"] for p in per)),
            ("weir_open_windows", sum(p["open_windows"] for p in per)),
        ):
            f[metric].add_metric(labels, total)
        if op in patterns:
            for metric, figure in (
                ("weir_cep_partial_matches", PARTIAL_MATCHES),
                ("weir_cep_timed_out_total", TIMED_OUT_METRIC),
            ):
                f[metric].add_metric(labels, sum(p["metrics"].get(figure, 0) for p in per))
        wm = handle.runtime.operator_watermark(op)
        if wm not in (MIN_WATERMARK, MAX_WATERMARK):  # none yet, or the end of the input
            f["weir_watermark_timestamp_seconds"].add_metric(labels, wm / 1000)
            f["weir_watermark_lag_seconds"].add_metric(labels, now - wm / 1000)


def _add_job(f: Families, job: str, handle: JobHandle) -> None:
    runtime = handle.runtime
    state = runtime.state()
    for s in JOB_STATES:
        f["weir_job_state"].add_metric([job, s], 1.0 if s == state else 0.0)
    taken = runtime.checkpoints
    f["weir_checkpoints_completed_total"].add_metric([job], runtime.completed_checkpoints)
    f["weir_restarts_total"].add_metric([job], runtime.restarts)
    if not taken:
        return
    last = taken[-1]
    for metric, value in (
        ("weir_last_checkpoint_timestamp_seconds", last["time"] / 1000),
        ("weir_last_checkpoint_duration_seconds", last["duration_ms"] / 1000),
        ("weir_last_checkpoint_sync_duration_seconds", last["sync_ms"] / 1000),
        ("weir_last_checkpoint_size_bytes", last["size"]),
        ("weir_last_checkpoint_uploaded_bytes", last["incremental_size"]),
    ):
        f[metric].add_metric([job], value)


class ApiMetrics:
    """The app's registry: the build, the request metrics, and a ``JobsCollector``."""

    def __init__(self, jobs: Registry) -> None:
        self.registry = CollectorRegistry()
        build = Info("weir_build", "The weir version serving this API.", registry=self.registry)
        build.info({"version": __version__})
        # a scrape is answered by one process; with several on one port, this says which
        process = Info(
            "weir_api_process",
            "The API process that answered this scrape (weir api --workers N runs N).",
            registry=self.registry,
        )
        process.info({"pid": str(os.getpid())})
        self.responses = Counter(
            "weir_http_responses_total",
            "HTTP responses by route and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "weir_http_request_duration_seconds",
            "Time from a request to its response's start, by route (an event stream's start).",
            ("method", "route"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.open_streams = Gauge(
            "weir_open_sse_streams", "Server-Sent Event streams open now.", registry=self.registry
        )
        self.keys_examined = Counter(
            "weir_key_listing_positions",
            "RocksDB positions key listings examined (each bounded by a scan budget).",
            registry=self.registry,
        )
        self.registry.register(JobsCollector(jobs))
        # each request's children, found once: ``labels()`` validates and locks on every call,
        # and routes are templates, so these stay as small as the app's route table
        self._counted: dict[tuple[str, str, int], Counter] = {}
        self._timed: dict[tuple[str, str], Histogram] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        counted = self._counted.get((method, route, status))
        if counted is None:
            counted = self._counted[method, route, status] = self.responses.labels(
                method, route, str(status)
            )
        counted.inc()
        timed = self._timed.get((method, route))
        if timed is None:
            timed = self._timed[method, route] = self.latency.labels(method, route)
        timed.observe(seconds)

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The scrape's body and content type: the text format, or OpenMetrics when the
        ``Accept`` header asks for it (prometheus_client's negotiation)."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


def install(app: FastAPI, jobs: Registry) -> ApiMetrics:
    """The app's metrics and ``GET /metrics``; the request series are fed by
    ``errors.CatchAll`` (``ApiMetrics.observe``), which wraps every response's ``send``."""
    metrics = ApiMetrics(jobs)
    app.state.metrics = metrics

    @app.get("/metrics", include_in_schema=False)
    def scrape(request: Request) -> Response:
        body, content_type = metrics.exposition(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    return metrics


__all__ = ["ApiMetrics", "JobsCollector", "install"]
