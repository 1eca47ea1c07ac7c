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
import sys
import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from weir import __version__
from weir.api.registry import JobHandle, Registry
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
    "weir_worker_memory_bytes": (
        "gauge",
        "A worker's resident memory (kind rss) and what its RocksDB holds (memtables, "
        "block_cache, table_readers), as of its last status report.",
        ("job", "worker", "kind"),
    ),
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
    "weir_state_reader_memory_bytes": (
        "gauge",
        "What the API process's reader of a worker's RocksDB holds in memory (memtables "
        "replayed from its WAL, block_cache, table_readers).",
        ("job", "worker", "kind"),
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
                for kind, size in sorted(reader.memory().items()):
                    f["weir_state_reader_memory_bytes"].add_metric([name, str(i), kind], size)
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
        for kind, size in sorted(w["memory"].items()):
            f["weir_worker_memory_bytes"].add_metric([*labels, kind], size)
        for split, lag in sorted(w["source_lag"].items()):
            f["weir_source_lag_records"].add_metric([job, split], lag)


def _add_operators(f: Families, job: str, handle: JobHandle, workers: list[WorkerStatus]) -> None:
    now = time.time()
    # a job with a pattern operator has loaded CEP (its function is CEP's): others need not
    cep = sys.modules.get("weir.engine.cep")
    patterns = set() if cep is None else set(cep.patterns_of(handle.job))
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
            from weir.engine.cep.function import PARTIAL_MATCHES, TIMED_OUT_METRIC

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


class RequestSeries:
    """``weir_http_responses_total`` and ``weir_http_request_duration_seconds``, counted in
    plain dicts by ``observe`` and read by a scrape (``collect``). prometheus_client's children
    take a lock on every ``inc`` and ``observe`` (1.7 us of a point lookup); here every count
    is made on the event loop's thread, and a scrape copies a dict in one step (the GIL's)
    and takes the count of a histogram from its buckets, so what it reads adds up. Labels: a
    route is its template, so these stay as small as the app's route table."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.bounds = list(buckets)
        self._responses: dict[tuple[str, str, int], int] = {}
        # (method, route) -> the count of each bucket (not cumulative; the last +Inf), the sum
        self._timed: dict[tuple[str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One response of ``route`` (a template) with ``status``, ``seconds`` after its
        request."""
        key = (method, route, status)
        self._responses[key] = self._responses.get(key, 0) + 1
        timed = self._timed.get((method, route))
        if timed is None:
            timed = self._timed[method, route] = [0] * (len(self.bounds) + 1) + [0.0]
        timed[bisect_left(self.bounds, seconds)] += 1  # the first bound >= seconds: its le
        timed[-1] += seconds

    def describe(self) -> Iterator[Metric]:
        """The two families without samples: their names, which the registry refuses to
        register twice."""
        return self._families({}, {})

    def collect(self) -> Iterator[Metric]:
        """The two families as of now (prometheus_client calls this at each scrape)."""
        return self._families(dict(self._responses), dict(self._timed))

    def _families(
        self,
        counted: dict[tuple[str, str, int], int],
        timed: dict[tuple[str, str], list[float]],
    ) -> Iterator[Metric]:
        responses = CounterMetricFamily(
            "weir_http_responses",
            "HTTP responses by route and status.",
            labels=("method", "route", "status"),
        )
        for (method, route, status), n in counted.items():
            responses.add_metric([method, route, str(status)], n)
        yield responses
        latency = HistogramMetricFamily(
            "weir_http_request_duration_seconds",
            "Time from a request to its response's start, by route (an event stream's start).",
            labels=("method", "route"),
        )
        names = [*map(floatToGoString, self.bounds), "+Inf"]
        for (method, route), row in timed.items():
            counts = row[:-1]  # a copy: the loop may count on meanwhile
            buckets = list(zip(names, accumulate(counts), strict=True))
            latency.add_metric([method, route], buckets, sum_value=row[-1])
        yield latency


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
        self.requests = RequestSeries()
        self.registry.register(self.requests)
        self.open_streams = Gauge(
            "weir_open_sse_streams", "Server-Sent Event streams open now.", registry=self.registry
        )
        self.keys_examined = Counter(
            "weir_key_listing_positions",
            "RocksDB positions key listings examined (each bounded by a scan budget).",
            registry=self.registry,
        )
        self.registry.register(JobsCollector(jobs))
        self.observe = self.requests.observe

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


__all__ = ["ApiMetrics", "JobsCollector", "RequestSeries", "install"]
