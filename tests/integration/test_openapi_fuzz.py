"""Schemathesis over the OpenAPI document of a running ``weir run`` (a finished job with
checkpoints, so every route has state to read): generated requests, valid and not, bounded in
number, must never get a 5xx; every error body is ``{"error": {"code", "message"}}`` (a 409
``not_fresh_enough`` adds the current ``watermark`` and ``checkpoint``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import WeirServer, event_lines, job_text, make_events, write_lines


@pytest.fixture(scope="module")
def fuzz_target(
    tmp_path_factory: pytest.TempPathFactory,
    module_weir_server: Callable[..., WeirServer],
) -> Iterator[tuple[Any, str]]:
    root = tmp_path_factory.mktemp("fuzz")
    src = write_lines(root / "in.jsonl", event_lines(make_events(1_500, seed=70)))
    job = root / "job.py"
    job.write_text(job_text(src, bound=200, size=1_000, lateness=500))
    server = module_weir_server(
        job, "--parallelism", "2", "--checkpoint-interval-ms", "200", state_dir=root / "state"
    )
    server.wait_finished(60)
    import schemathesis  # here, not at collection: its import costs every worker ~0.4 CPU-s

    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    # an event stream never ends: its behaviour is tested in test_query_api.py
    yield schema.exclude(path_regex=r".*/stream$"), server.base_url


def test_no_request_gets_a_server_error(fuzz_target: tuple[Any, str]) -> None:
    """Every operation, up to 30 generated cases each, valid and invalid (schemathesis' pytest
    plugin does not load under pytest 9, so the operations' Hypothesis strategies are driven
    here)."""
    import schemathesis

    schema, base_url = fuzz_target
    tried: list[str] = []
    statuses: Counter[int] = Counter()
    for found in schema.get_all_operations():
        operation = found.ok()
        tried.append(operation.label)

        @given(
            case=st.one_of(
                operation.as_strategy(),
                operation.as_strategy(schemathesis.GenerationMode.NEGATIVE),
            )
        )
        @settings(
            max_examples=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: Any) -> None:
            _short_waits(case)
            statuses[_call(case, base_url)] += 1
            params = case.path_parameters or {}
            if "job" in params:  # again on the real job and operator, so state is read
                params["job"] = "t1"
                if "op" in params:
                    params["op"] = "imps"
                statuses[_call(case, base_url)] += 1

        check()
    assert len(tried) >= 10, tried  # the document lists every route
    assert "GET /{job}/{op}/windows/{start}" in tried, tried
    # the run reached real state as well as errors
    assert statuses[200] >= 20 and statuses[404] >= 10 and statuses[422] >= 5, statuses


def _short_waits(case: Any) -> None:
    """A generated freshness bound the finished job never meets would wait up to a minute."""
    query = case.query or {}
    if isinstance(query.get("timeout_ms"), int) and query["timeout_ms"] > 200:
        query["timeout_ms"] = 200


def _call(case: Any, base_url: str) -> int:
    response = case.call(base_url=base_url, timeout=30)
    where = (case.method, case.formatted_path, case.query, response.text[:300])
    assert response.status_code < 500, where
    if response.status_code >= 400 and response.status_code != 405:
        body = response.json()
        if response.status_code == 409 and body["error"]["code"] == "not_fresh_enough":
            assert set(body) == {"error", "watermark", "checkpoint"}, where
        else:
            assert set(body) == {"error"}, where
        assert set(body["error"]) == {"code", "message"}, where
    return int(response.status_code)
