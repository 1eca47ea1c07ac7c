"""The admin routes of a real ``weir run``: a backfill path that leaves ``--backfill-dir`` (by
``..``, a symlink, or plainly) is a 400 naming it, with nothing loaded; job names in URLs are
only looked up. (An API bound off loopback without a token: ``tests/security/test_http_deploy``.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support import WeirServer, job_text


def _bounded_job(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    job = tmp_path / "job.py"
    job.write_text(job_text(src, bound=0, size=10, lateness=0))
    return job


def _backfill(client: httpx.Client, path: str) -> httpx.Response:
    body = {"op": "imps", "path": path, "min_end": 0, "max_end": 1}
    return client.post("/jobs/t1/backfills", json=body)


def test_backfill_paths_must_stay_under_the_backfill_dir(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    allowed = tmp_path / "bf"
    outside = tmp_path / "outside"
    for d in (allowed / "files", allowed / "empty", outside):
        d.mkdir(parents=True)
    (outside / "kg-1.sst").write_bytes(b"not yours")
    (allowed / "link").symlink_to(outside)
    (allowed / "files" / "kg-3.sst").symlink_to(outside / "kg-1.sst")
    server = weir_server(_bounded_job(tmp_path), "--backfill-dir", str(allowed))
    server.wait_finished()
    client = server.client()
    cases = {
        str(outside): "is not under",
        f"{allowed}/../outside": "contains '..'",
        str(allowed / "link"): "a symlink to",
        str(allowed / "files"): "backfill file",
        "bf/files": "is not an absolute path",
    }
    for path, why in cases.items():
        r = _backfill(client, path)
        assert r.status_code == 400, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "path_refused" and why in error["message"], (path, error)
        assert path in error["message"]
    r = _backfill(client, str(allowed / "empty"))  # inside, but no backfill there
    assert r.status_code == 409 and "kg-*.sst" in r.json()["error"]["message"]
    assert client.get("/jobs/t1").json()["backfills"] == []


def test_job_names_in_urls_are_only_looked_up(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    server = weir_server(_bounded_job(tmp_path))
    client = server.client()
    for job in ("%2E%2E", "..%2F..%2Fetc", "t1%2F..%2F.."):
        for r in (client.post(f"/jobs/{job}/savepoints"), client.get(f"/jobs/{job}")):
            assert r.status_code == 404, (job, r.text)
            assert r.json()["error"]["code"] in ("job_not_found", "not_found")
