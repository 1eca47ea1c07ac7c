"""The HTTP API of a finished two-worker job, served by ``weir run`` on a loopback port and
queried with httpx: every key's windows (read from the RocksDB of the worker owning its key
group) equal the brute-force model; the query parameters, the error bodies, and the /jobs,
/jobs/{job} and /health answers."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support import WeirServer, event_lines, job_text, make_events, write_lines
from tests.support.reference import AGG_NAMES, Outcome, Spec, simulate

SPEC = Spec(bound=200, size=1_000, lateness=1_500)
N_EVENTS = 3_000
MAX_WATERMARK = 2**63 - 1


@dataclass
class Finished:
    server: WeirServer
    client: httpx.Client
    ref: Outcome
    n_lines: int
    detail: dict[str, Any]
    source: Path


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> Finished:
    root = tmp_path_factory.mktemp("http")
    lines = event_lines(make_events(N_EVENTS, seed=99))
    src = write_lines(root / "in.jsonl", lines)
    job = root / "job.py"
    job.write_text(
        job_text(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness),
        encoding="utf-8",
    )
    server = module_weir_server(job, "--parallelism", "2")
    detail = server.wait_finished()
    return Finished(server, server.client(), simulate(lines, SPEC), len(lines), detail, src)


def state_url(key: str, job: str = "t1", op: str = "imps") -> str:
    return f"/{quote(job, safe='')}/{quote(op, safe='')}/state/{quote(key, safe='')}"


def test_every_key_matches_the_reference(finished: Finished) -> None:
    expected = finished.ref.state_by_key()
    assert len(expected) == 8
    for key, windows in expected.items():
        r = finished.client.get(state_url(key))
        assert r.status_code == 200, (key, r.text)
        body = r.json()
        assert body["windows"] == windows, key


def test_state_answer_envelope(finished: Finished) -> None:
    body = finished.client.get(state_url("ad-1")).json()
    assert body["job"] == "t1" and body["op"] == "imps" and body["key"] == "ad-1"
    assert body["key_group"] == zlib.crc32(b"ad-1") % 128
    assert body["checkpoint"] is None
    assert body["consistency"] == "live"
    assert isinstance(body["watermark"], int)
    assert body["watermark"] >= finished.ref.data_watermark
    ends = [w["end"] for w in body["windows"]]
    assert ends == sorted(ends)
    assert all(w["final"] for w in body["windows"])
    assert set(body["windows"][0]) == {"start", "end", "final", *AGG_NAMES}


@pytest.mark.parametrize("key", ["a/b", "ü-ключ", "17"])
def test_keys_with_slash_unicode_and_int_round_trip(finished: Finished, key: str) -> None:
    r = finished.client.get(state_url(key))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["key"] == key
    assert body["key_group"] == zlib.crc32(key.encode()) % 128
    assert body["windows"] == finished.ref.state_by_key()[key]


def test_slash_key_also_answers_unencoded(finished: Finished) -> None:
    r = finished.client.get("/t1/imps/state/a/b")
    assert r.status_code == 200
    assert r.json()["windows"] == finished.ref.state_by_key()["a/b"]


def test_from_to_bound_window_starts_inclusively(finished: Finished) -> None:
    windows = finished.ref.state_by_key()["ad-0"]
    assert len(windows) >= 6
    lo, hi = windows[1]["start"], windows[4]["start"]
    got = finished.client.get(state_url("ad-0"), params={"from": lo, "to": hi}).json()["windows"]
    assert got == windows[1:5]
    only_from = finished.client.get(state_url("ad-0"), params={"from": lo + 1}).json()
    assert only_from["windows"] == windows[2:]
    only_to = finished.client.get(state_url("ad-0"), params={"to": hi}).json()
    assert only_to["windows"] == windows[:5]
    one = finished.client.get(state_url("ad-0"), params={"from": lo, "to": lo}).json()
    assert one["windows"] == [windows[1]]


def test_limit_keeps_the_last_windows(finished: Finished) -> None:
    windows = finished.ref.state_by_key()["ad-0"]
    c = finished.client
    assert c.get(state_url("ad-0"), params={"limit": 1}).json()["windows"] == windows[-1:]
    assert c.get(state_url("ad-0"), params={"limit": 3}).json()["windows"] == windows[-3:]
    assert c.get(state_url("ad-0"), params={"limit": 10_000}).json()["windows"] == windows
    lo, hi = windows[0]["start"], windows[3]["start"]
    both = c.get(state_url("ad-0"), params={"from": lo, "to": hi, "limit": 2}).json()
    assert both["windows"] == windows[2:4]


@pytest.mark.parametrize(
    ("path", "params", "status", "code", "names"),
    [
        ("/nope/imps/state/ad-0", {}, 404, "job_not_found", "nope"),
        ("/t1/nope-op/state/ad-0", {}, 404, "operator_not_found", "nope-op"),
        ("/t1/imps/state/no-such-key", {}, 404, "key_not_found", "no-such-key"),
        ("/t1/imps/state/ad-0", {"from": 10, "to": 5}, 400, "invalid_range", "to=5"),
        ("/t1/imps/state/ad-0", {"limit": 0}, 422, "invalid_request", "limit"),
        ("/t1/imps/state/ad-0", {"limit": 10_001}, 422, "invalid_request", "limit"),
        ("/t1/imps/state/ad-0", {"limit": "x"}, 422, "invalid_request", "limit"),
        ("/t1/imps/state/ad-0", {"from": "abc"}, 422, "invalid_request", "from"),
        ("/t1/imps/state/ad-0", {"to": "1.5"}, 422, "invalid_request", "to"),
        ("/t1/imps/state/ad-0", {"consistency": "eventual"}, 422, "invalid_request", "consistency"),
        ("/jobs/nope", {}, 404, "job_not_found", "nope"),
    ],
)
def test_error_bodies(
    finished: Finished, path: str, params: dict[str, Any], status: int, code: str, names: str
) -> None:
    r = finished.client.get(path, params=params)
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert names in body["error"]["message"]


def test_committed_reads_without_checkpoints_are_a_400_naming_the_fix(finished: Finished) -> None:
    r = finished.client.get(state_url("ad-0"), params={"consistency": "committed"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "committed_unavailable"
    assert "--checkpoint-interval-ms" in err["message"]


def test_jobs_list(finished: Finished) -> None:
    body = finished.client.get("/jobs").json()
    assert body == {
        "jobs": [{"name": "t1", "state": "finished", "parallelism": 2, "operators": ["imps"]}]
    }


def test_job_detail_counters(finished: Finished) -> None:
    body = finished.client.get("/jobs/t1").json()
    ref = finished.ref
    assert body["name"] == "t1"
    assert body["state"] == "finished"
    assert body["source"] == f"file://{finished.source}"
    assert body["parallelism"] == 2 and body["max_parallelism"] == 128
    assert body["records_in"] == finished.n_lines
    assert body["dead_letters"] == 0
    assert body["checkpoints"] == []
    assert body["watermark"] == MAX_WATERMARK  # the end-of-input mark fired every window
    (op,) = body["operators"]
    assert op["name"] == "imps"
    assert op["window"]["type"] == "tumbling" and op["window"]["size_ms"] == SPEC.size
    assert op["allowed_lateness_ms"] == SPEC.lateness
    assert op["aggregates"] == {
        "count": "count",
        "total": "sum",
        "lo": "min",
        "hi": "max",
        "avg": "mean",
    }
    assert op["records_in"] == ref.records_to_op
    assert op["late_records"] == len(ref.late)
    assert op["results_out"] == ref.emission_count
    assert op["open_windows"] == 0
    workers = body["workers"]
    assert [w["index"] for w in workers] == [0, 1]
    assert [w["key_groups"] for w in workers] == [[0, 63], [64, 127]]
    assert all(w["finished"] is True for w in workers)
    assert sum(w["records_in"] for w in workers) == finished.n_lines  # one file: one split
    assert all(w["dead_letters"] == 0 and w["dead_letters_by_stage"] == {} for w in workers)


def test_health(finished: Finished) -> None:
    assert finished.client.get("/health").json() == {
        "status": "ok",
        "jobs": {"t1": "finished"},
        "problems": {},
    }


def test_unknown_route_has_an_error_body(finished: Finished) -> None:
    r = finished.client.get("/no/such/route/at/all/here")
    assert r.status_code == 404
    assert set(r.json()) == {"error"}


@pytest.mark.parametrize("kind", ["sliding", "session"])
def test_sliding_and_session_windows_are_served(
    tmp_path: Path, weir_server: Callable[..., WeirServer], kind: str
) -> None:
    """Every key's windows over HTTP once the input is done: sliding windows (start derived from
    the end) and sessions (start stored with the state, superseded sessions deleted)."""
    spec = (
        Spec(bound=200, size=1_000, slide=250, lateness=600)
        if kind == "sliding"
        else Spec(bound=200, size=1, gap=40, lateness=3_000)
    )
    lines = event_lines(make_events(1_500, seed=5))
    src = write_lines(tmp_path / "in.jsonl", lines)
    job = tmp_path / "job.py"
    job.write_text(
        job_text(
            src, bound=spec.bound, size=spec.size, lateness=spec.lateness,
            slide=spec.slide, gap=spec.gap,
        ),
        encoding="utf-8",
    )  # fmt: skip
    server = weir_server(job, "--parallelism", "2")
    server.wait_finished()
    client = server.client()
    expected = simulate(lines, spec).state_by_key()
    assert len(expected) == 8
    for key, windows in expected.items():
        r = client.get(state_url(key), params={"limit": 10_000})
        assert r.status_code == 200, (key, r.text)
        assert r.json()["windows"] == windows, key
