"""The API's error paths in isolation: state that is not there yet, and an unexpected failure.
Both must answer JSON and leave the connection usable (the integration tests cover the rest
against a real ``weir run``)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.support import LOCAL, FixedRuntime
from weir import Job, agg, sources, windows
from weir.api import JobHandle, Registry, create_app
from weir.state.secondary import SecondaryReader


class StubRuntime(FixedRuntime):
    def state(self) -> str:
        return "starting"


class BrokenReader(SecondaryReader):
    def scan(self, lo: bytes, hi: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        raise RuntimeError("disk on fire")

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]:
        raise RuntimeError("disk on fire")


def _app(tmp_path: Path, reader: SecondaryReader) -> TestClient:
    job = Job("j")
    (
        job.source(sources.jsonl(tmp_path / "in.jsonl"))
        .key_by("id")
        .window(windows.tumbling(ms=1000))
        .aggregate("op", n=agg.count())
    )
    registry = Registry()
    registry.add(JobHandle(job, StubRuntime(tmp_path / "checkpoints"), [reader]))
    return TestClient(create_app(registry), base_url=LOCAL, raise_server_exceptions=False)


def test_state_not_created_yet_is_a_503_with_retry_after(tmp_path: Path) -> None:
    reader = SecondaryReader(tmp_path / "missing-db", tmp_path / "secondary")
    client = _app(tmp_path, reader)
    r = client.get("/j/op/state/k")
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    body = r.json()["error"]
    assert body["code"] == "state_unavailable"
    assert "missing-db" in body["message"] and "retry" in body["message"]


def test_an_unexpected_error_is_a_json_500_and_the_server_keeps_answering(
    tmp_path: Path,
) -> None:
    client = _app(tmp_path, BrokenReader(tmp_path / "db", tmp_path / "secondary"))
    r = client.get("/j/op/state/k")
    assert r.status_code == 500
    assert r.json() == {
        "error": {"code": "internal", "message": "RuntimeError: the server failed to answer"}
    }
    assert client.get("/health").status_code == 200
