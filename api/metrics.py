"""Prometheus metrics (text exposition format 0.0.4), without a client library: pipeline
counters and gauges from the workers' status, and per-route request counts and latency
histograms recorded by a middleware (labelled by route template, so keys never become labels).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from typing import Any

from fastapi import FastAPI, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from weir.api.registry import Registry
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _labels(**labels: Any) -> str:
    inner = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + inner + "}"


class HttpMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.responses: dict[tuple[str, str, int], int] = {}
        self.hist: dict[tuple[str, str], list[float]] = {}  # bucket counts..., sum, count

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            key = (method, route, status)
            self.responses[key] = self.responses.get(key, 0) + 1
            h = self.hist.setdefault((method, route), [0.0] * (len(BUCKETS) + 2))
            i = bisect_left(BUCKETS, seconds)
            for j in range(i, len(BUCKETS)):
                h[j] += 1
            h[-2] += seconds
            h[-1] += 1

    def render(self) -> list[str]:
        with self._lock:
            out = [
                "# HELP weir_http_responses_total HTTP responses by route and status.",
                "# TYPE weir_http_responses_total counter",
            ]
            for (method, route, status), n in sorted(self.responses.items()):
                lab = _labels(method=method, route=route, status=status)
                out.append(f"weir_http_responses_total{lab} {n}")
            out += [
                "# HELP weir_http_request_duration_seconds Request latency by route.",
                "# TYPE weir_http_request_duration_seconds histogram",
            ]
            for (method, route), h in sorted(self.hist.items()):
                for bound, cumulative in zip(BUCKETS, h, strict=False):
                    lab = _labels(method=method, route=route, le=bound)
                    out.append(f"weir_http_request_duration_seconds_bucket{lab} {int(cumulative)}")
                lab = _labels(method=method, route=route, le="+Inf")
                out.append(f"weir_http_request_duration_seconds_bucket{lab} {int(h[-1])}")
                lab = _labels(method=method, route=route)
                out.append(f"weir_http_request_duration_seconds_sum{lab} {h[-2]:.6f}")
                out.append(f"weir_http_request_duration_seconds_count{lab} {int(h[-1])}")
            return out


def _pipeline(registry: Registry) -> list[str]:
    series: dict[str, tuple[str, str, list[str]]] = {
        "weir_records_in_total": ("counter", "Records read from sources, per worker.", []),
        "weir_dead_letters_total": ("counter", "Records sent to the dead-letter output.", []),
        "weir_backpressure_ratio": ("gauge", "Share of time a worker's source was paused.", []),
        "weir_exchange_pending_bytes": ("gauge", "Bytes waiting in a worker's outputs.", []),
        "weir_operator_records_in_total": ("counter", "Records into an operator.", []),
        "weir_operator_results_out_total": ("counter", "Results an operator emitted.", []),
        "weir_late_records_total": ("counter", "Records past allowed lateness.", []),
        "weir_watermark_ms": ("gauge", "An operator's event-time watermark.", []),
        "weir_watermark_lag_ms": ("gauge", "Wall clock minus an operator's watermark.", []),
        "weir_source_lag_records": (
            "gauge",
            "Records of a source split not read yet (Kafka: high watermark minus position).",
            [],
        ),
        "weir_checkpoints_completed_total": ("counter", "Checkpoints completed in this run.", []),
        "weir_checkpoint_duration_ms": ("gauge", "The last checkpoint's total duration.", []),
        "weir_checkpoint_sync_ms": ("gauge", "The last checkpoint's synchronous part.", []),
        "weir_checkpoint_size_bytes": ("gauge", "The last checkpoint's full size.", []),
        "weir_checkpoint_incremental_bytes": (
            "gauge",
            "Bytes the last checkpoint uploaded.",
            [],
        ),
        "weir_restarts_total": ("counter", "Restarts from a checkpoint after a failure.", []),
    }
    now_ms = time.time() * 1000
    for name, handle in sorted(registry.jobs.items()):
        workers = handle.runtime.worker_status()
        for w in workers:
            lab = _labels(job=name, worker=w.get("worker", 0))
            series["weir_records_in_total"][2].append(f"{lab} {w.get('records_in', 0)}")
            series["weir_dead_letters_total"][2].append(f"{lab} {w.get('dead_letters', 0)}")
            series["weir_backpressure_ratio"][2].append(f"{lab} {w.get('backpressure', 0.0)}")
            series["weir_exchange_pending_bytes"][2].append(f"{lab} {w.get('pending_bytes', 0)}")
            for split, lag in sorted(w.get("source_lag", {}).items()):
                slab = _labels(job=name, split=split)
                series["weir_source_lag_records"][2].append(f"{slab} {lag}")
        jlab = _labels(job=name)
        taken = handle.runtime.checkpoints
        completed = handle.runtime.completed_checkpoints
        series["weir_checkpoints_completed_total"][2].append(f"{jlab} {completed}")
        series["weir_restarts_total"][2].append(f"{jlab} {handle.runtime.restarts}")
        if taken:
            last = taken[-1]
            for metric, field in (
                ("weir_checkpoint_duration_ms", "duration_ms"),
                ("weir_checkpoint_sync_ms", "sync_ms"),
                ("weir_checkpoint_size_bytes", "size"),
                ("weir_checkpoint_incremental_bytes", "incremental_size"),
            ):
                series[metric][2].append(f"{jlab} {last[field]}")
        for op in handle.job.operators:
            per: list[Any] = [w.get("operators", {}).get(op, {}) for w in workers]
            lab = _labels(job=name, op=op)
            for metric, field in (
                ("weir_operator_records_in_total", "records_in"),
                ("weir_operator_results_out_total", "results_out"),
                ("weir_late_records_total", "late"),
            ):
                series[metric][2].append(f"{lab} {sum(p.get(field, 0) for p in per)}")
            wm = handle.runtime.operator_watermark(op)
            if wm not in (MIN_WATERMARK, MAX_WATERMARK):
                series["weir_watermark_ms"][2].append(f"{lab} {wm}")
                series["weir_watermark_lag_ms"][2].append(f"{lab} {now_ms - wm:.0f}")
    out: list[str] = []
    for metric, (kind, text, samples) in series.items():
        out += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
        out += [f"{metric}{s}" for s in samples]
    return out


def install(app: FastAPI, registry: Registry) -> None:
    http = HttpMetrics()

    app.add_middleware(Observe, http=http)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        text = "\n".join(_pipeline(registry) + http.render()) + "\n"
        return Response(text, media_type="text/plain; version=0.0.4")


class Observe:
    """Request latency and status by route template (pure ASGI, so it costs little)."""

    def __init__(self, app: ASGIApp, http: HttpMetrics) -> None:
        self.app = app
        self.http = http

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                self.http.observe(scope["method"], route, status, time.perf_counter() - t0)
            await send(message)

        await self.app(scope, receive, tracked)
