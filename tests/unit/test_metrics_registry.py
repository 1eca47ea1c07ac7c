"""Each app has its own Prometheus registry: two apps in one process count apart, and a
status series that a request metric would clash with is refused when the app is made."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import DuplicateTimeseries

from tests.support import LOCAL
from weir.api import Registry, create_app
from weir.api.metrics import ApiMetrics, RequestSeries


def _responses(client: TestClient, route: str) -> float:
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    return sum(
        s.value
        for s in families["weir_http_responses"].samples
        if s.name.endswith("_total") and s.labels["route"] == route
    )


def test_two_apps_in_one_process_count_their_own_requests() -> None:
    a, b = (
        TestClient(create_app(Registry()), base_url=LOCAL),
        TestClient(create_app(Registry()), base_url=LOCAL),
    )
    for _ in range(3):
        assert a.get("/health").status_code == 200
    b.get("/jobs")
    assert _responses(a, "/health") == 3
    assert _responses(b, "/health") == 0 and _responses(b, "/jobs") == 1


def test_a_metric_named_like_a_status_series_is_refused() -> None:
    metrics = ApiMetrics(Registry())
    with pytest.raises(DuplicateTimeseries, match="weir_restarts_total"):
        Counter("weir_restarts_total", "clash", registry=metrics.registry)


def test_request_series_are_cumulative_and_add_up() -> None:
    series = RequestSeries(buckets=(0.01, 0.1))
    for seconds in (0.005, 0.01, 0.05, 0.5):  # 0.01 is in its own bucket: "le" is <=
        series.observe("GET", "/r", 200, seconds)
    series.observe("GET", "/r", 404, 0.001)
    families = {f.name: f for f in series.collect()}
    counted = {s.labels["status"]: s.value for s in families["weir_http_responses"].samples}
    assert counted == {"200": 4, "404": 1}
    samples = families["weir_http_request_duration_seconds"].samples
    buckets = {s.labels["le"]: s.value for s in samples if s.name.endswith("_bucket")}
    assert buckets == {"0.01": 3, "0.1": 4, "+Inf": 5}
    assert next(s.value for s in samples if s.name.endswith("_count")) == 5
    assert next(s.value for s in samples if s.name.endswith("_sum")) == pytest.approx(0.566)


def test_a_metric_named_like_a_request_series_is_refused() -> None:
    metrics = ApiMetrics(Registry())
    with pytest.raises(DuplicateTimeseries, match="weir_http_responses"):
        Counter("weir_http_responses", "clash", registry=metrics.registry)
