"""``GET /metrics`` of a running two-worker pattern job (a real ``weir run``): the pattern
operator's partial matches (a gauge) and timeouts (a counter) per operator, named as the other
operator series are, and a window operator of the same job without them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.support import WeirServer, wait_until

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
from weir.engine.cep import Pattern

job = Job("cepm")
ads = job.source(sources.generator("ads", rate=2000, ids=50), timestamp="ts",
                 watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
pattern = (
    Pattern.begin("seen").where(lambda e: e["event"] == "impression")
    .followed_by("clicked").where(lambda e: e["event"] == "click")
    .within(300)
)
ads.key_by("id").pattern(pattern).select(lambda m: {"n": 1}, name="clicks")
ads.key_by("id").window(windows.tumbling(ms=1_000)).aggregate("counts", n=agg.count())
"""


def scrape(server: WeirServer) -> dict[str, Metric]:
    r = server.client().get("/metrics")
    assert r.status_code == 200
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def samples(families: dict[str, Metric], name: str, op: str) -> list[float]:
    return [s.value for s in families[name].samples if s.labels == {"job": "cepm", "op": op}]


def test_partial_matches_and_timeouts_per_pattern_operator(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "cepm.py"
    job.write_text(JOB)
    server = weir_server(job, "--parallelism", "2")

    def both_moving() -> dict[str, Metric] | None:
        families = scrape(server)
        timed_out = samples(families, "weir_cep_timed_out", "clicks")
        partial = samples(families, "weir_cep_partial_matches", "clicks")
        return families if timed_out and timed_out[0] > 0 and partial and partial[0] > 0 else None

    families = wait_until(both_moving, 30.0, what="timeouts and partial matches in /metrics")
    assert families["weir_cep_partial_matches"].type == "gauge"
    assert families["weir_cep_timed_out"].type == "counter"  # exposed as ..._total
    assert {s.name for s in families["weir_cep_timed_out"].samples} == {"weir_cep_timed_out_total"}
    assert samples(families, "weir_cep_partial_matches", "counts") == []  # not a pattern
    assert samples(families, "weir_cep_timed_out", "counts") == []
