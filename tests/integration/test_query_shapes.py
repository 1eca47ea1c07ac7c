"""Query shapes beyond the point lookup, against real ``weir run`` servers read with httpx: every
key of one window (``GET /{job}/{op}/windows/{start}``) against the brute-force reference model
and against point lookups, live and committed, across pages; its errors; the freshness bound
(``min_watermark``, ``min_checkpoint``) on a live Kafka job, met by input fed after the request
started, or a 409 with the current values; and the OpenAPI document's operation ids and models.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support import WeirServer, event_lines, job_text, make_events, wait_until, write_lines
from tests.support.kafka_broker import create_topic, send
from tests.support.reference import Spec, simulate
from weir.api import keylist
from weir.state import cells
from weir.state.keygroups import key_group

SPEC = Spec(bound=200, size=1_000, lateness=0)
# lengths 1..20, non-ASCII, a key that is a prefix of others: orders by length would differ
KEYS = ("a", "ab", "b", "ad-10", "ad-9", "zz" * 10, "é", "ü-ключ", 17, "a/b", "ad-1", "B")
WEIGHTS = (10, 8, 8, 6, 6, 5, 5, 5, 5, 5, 5, 5)
OPERATION_IDS = {
    "health", "list_jobs", "get_job", "list_checkpoints", "take_savepoint", "load_backfill",
    "stream_token", "get_state", "list_keys", "stream_state", "lookup", "top", "window_keys",
    "get_broadcast_state", "sql",
}  # fmt: skip
READS = ("get_state", "list_keys", "lookup", "top", "window_keys", "get_broadcast_state", "sql")


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, module_weir_server: Callable[..., WeirServer]
) -> tuple[httpx.Client, list[str]]:
    root = tmp_path_factory.mktemp("shapes")
    lines = event_lines(make_events(3_000, seed=20, keys=KEYS, weights=WEIGHTS, step=3))
    job = root / "job.py"
    job.write_text(job_text(write_lines(root / "in.jsonl", lines), bound=SPEC.bound,
                            size=SPEC.size, lateness=SPEC.lateness))  # fmt: skip
    server = module_weir_server(
        job, "--parallelism", "2", "--checkpoint-interval-ms", "100", state_dir=root / "state"
    )
    server.wait_finished(60)
    return server.client(), lines


def _reference(lines: list[str]) -> dict[int, list[dict[str, Any]]]:
    """Window start -> ``{"key", "key_group", <aggregates>, "final"}`` of every key, in the
    listing's order: the cells' (key group, bucket, key bytes)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for key, windows in simulate(lines, SPEC).state_by_key().items():
        for w in windows:
            entry = {"key": key, "key_group": key_group(key, 128), **w}
            del entry["start"], entry["end"]
            out.setdefault(w["start"], []).append(entry)
    return {start: sorted(found, key=_cell_order) for start, found in out.items()}


def _cell_order(entry: dict[str, Any]) -> tuple[int, int, bytes]:
    raw = entry["key"].encode()
    return entry["key_group"], cells.bucket_of(raw), raw


def _all_pages(
    client: httpx.Client, path: str, limit: int, **params: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every page of a window listing: ``(keys, pages)``."""
    keys: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1_000):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        r = client.get(path, params=query)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["keys"]) <= limit
        pages.append(page)
        keys.extend(page["keys"])
        cursor = page["next_cursor"]
        if cursor is None:
            return keys, pages
    raise AssertionError("the listing never ended")


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [g["key"] for g in got] == [w["key"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert g == {**w, "avg": pytest.approx(w["avg"])}


@pytest.mark.parametrize("limit", [1, 4, 1_000])
def test_every_key_of_a_window_once_in_cell_order(
    finished: tuple[httpx.Client, list[str]], limit: int
) -> None:
    client, lines = finished
    reference = _reference(lines)
    starts = sorted(reference, key=lambda s: -len(reference[s]))[:3]
    assert len(reference[starts[0]]) >= 10  # most of the keys, of many lengths
    for start in starts:
        keys, pages = _all_pages(client, f"/t1/imps/windows/{start}", limit)
        names = [k["key"] for k in keys]
        assert len(set(names)) == len(names)
        _same(keys, reference[start])
        assert {p["end"] for p in pages} == {start + SPEC.size}
        assert {p["consistency"] for p in pages} == {"live"}


def test_a_window_nobody_has_is_one_empty_page(finished: tuple[httpx.Client, list[str]]) -> None:
    client, _ = finished
    r = client.get("/t1/imps/windows/-9000000000000")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["keys"] == [] and body["next_cursor"] is None and body["end"] == -8999999999000


def test_committed_listing_equals_committed_point_lookups(
    finished: tuple[httpx.Client, list[str]],
) -> None:
    client, lines = finished
    wait_until(lambda: client.get("/jobs/t1").json()["last_checkpoint"], 30, what="a checkpoint")
    by_start: dict[int, list[dict[str, Any]]] = {}
    checkpoint = None
    for key in sorted({str(k) for k in KEYS}):
        r = client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"consistency": "committed"})
        if r.status_code == 404:
            continue
        answer = r.json()
        checkpoint = answer["checkpoint"]
        for w in answer["windows"]:
            entry = {"key": key, "key_group": answer["key_group"], **w}
            del entry["start"], entry["end"]
            by_start.setdefault(w["start"], []).append(entry)
    assert by_start, "the committed view holds no window"
    for start, want in sorted(by_start.items())[:4]:
        keys, pages = _all_pages(client, f"/t1/imps/windows/{start}", 3, consistency="committed")
        assert keys == sorted(want, key=_cell_order)
        assert {(p["consistency"], p["checkpoint"]) for p in pages} == {("committed", checkpoint)}


def test_window_listing_errors(finished: tuple[httpx.Client, list[str]]) -> None:
    client, lines = finished
    start = min(_reference(lines))
    listing_cursor = keylist.Position(3, None).encode()  # the row layout's: not a cell position
    for cursor in ("not-a-cursor", "AAAA", listing_cursor):
        r = client.get(f"/t1/imps/windows/{start}", params={"cursor": cursor})
        assert r.status_code == 400, (cursor, r.text)
        assert r.json()["error"]["code"] == "invalid_cursor"
    r = client.get(f"/t1/imps/windows/{start + 1}")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_window_start"
    assert f"use {start} or {start + 1_000}" in r.json()["error"]["message"]
    assert client.get(f"/nope/imps/windows/{start}").json()["error"]["code"] == "job_not_found"
    r = client.get(f"/t1/nope/windows/{start}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "operator_not_found"


def test_openapi_has_one_stable_id_and_a_model_per_route(
    finished: tuple[httpx.Client, list[str]],
) -> None:
    client, _ = finished
    doc = client.get("/openapi.json").json()
    ops = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    ids = [op["operationId"] for _, _, op in ops]
    assert len(ids) == len(set(ids)) and set(ids) == OPERATION_IDS
    for path, method, op in ops:
        ok = op["responses"]["200"]["content"]
        if op["operationId"] == "stream_state":
            assert "text/event-stream" in ok
            continue
        assert "$ref" in ok["application/json"]["schema"], (method, path)
        assert all("content" in r for s, r in op["responses"].items() if s.startswith("4")), path
        names = {p["name"] for p in op.get("parameters", [])}
        fresh = {"min_watermark", "min_checkpoint", "timeout_ms"}
        assert (fresh <= names) == (op["operationId"] in READS), (path, names)
        if op["operationId"] in READS:
            assert "NotFreshEnough" in op["responses"]["409"]["content"]["application/json"][
                "schema"]["$ref"]  # fmt: skip


# -- a live job: the freshness bound --------------------------------------------------------------

BASE = 1_700_000_000_000
LIVE_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("fresh")
keyed = job.source(sources.kafka({bootstrap!r}, {topic!r}), timestamp="ts",
                   watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0)).key_by("id")
keyed.window(windows.sliding(size_ms=1000, slide_ms=500)).aggregate(
    "imps", n=agg.count(), total=agg.sum("value"))
keyed.window(windows.session(gap_ms=500)).aggregate("sess", n=agg.count())
"""


def _event(key: str, ts: int, value: int = 1) -> dict[str, Any]:
    return {"id": key, "ts": ts, "value": value}


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory,
    module_weir_server: Callable[..., WeirServer],
    kafka_broker: str,
) -> tuple[httpx.Client, str, str]:
    root = tmp_path_factory.mktemp("fresh")
    topic = f"fresh-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker, topic, 1)
    job = root / "job.py"
    job.write_text(LIVE_JOB.format(bootstrap=kafka_broker, topic=topic))
    # state reaches RocksDB once a second: the watermark runs that far ahead of what live reads
    # see, and a freshness bound has to wait for the state's own (it once took the operator's)
    server = module_weir_server(
        job, "--parallelism", "1", "--checkpoint-interval-ms", "300", "--flush-interval-ms",
        "1000", state_dir=root / "state",
    )  # fmt: skip
    client = server.client()
    keys = [f"k{i}" for i in range(12)] + ["k"]
    send(kafka_broker, topic, [(0, _event(k, BASE + i * 37)) for i, k in enumerate(keys * 3)])
    wait_until(lambda: _watermark(client) >= BASE + 1_000, 30, what="the first events")
    return client, kafka_broker, topic


def _watermark(client: httpx.Client) -> int:
    """The watermark of what ``imps``'s RocksDB holds: what live reads answer as of."""
    ops = client.get("/jobs/fresh").json()["operators"]
    return next(o["state_watermark"] or -(2**63) for o in ops if o["name"] == "imps")


def _last_checkpoint(client: httpx.Client) -> int:
    """The job's latest complete checkpoint (0: none yet)."""
    return int(client.get("/jobs/fresh").json()["last_checkpoint"] or 0)


def test_session_operator_has_no_window_listing(live: tuple[httpx.Client, str, str]) -> None:
    client = live[0]
    r = client.get(f"/fresh/sess/windows/{BASE}")
    assert r.status_code == 400 and r.json()["error"]["code"] == "not_supported"
    assert "session windows" in r.json()["error"]["message"]


def test_open_sliding_windows_list_what_point_lookups_read(
    live: tuple[httpx.Client, str, str],
) -> None:
    """Open sliding windows are composed from panes; the listing composes them as the point
    lookup does."""
    client = live[0]
    keys = client.get("/fresh/imps/state", params={"limit": 1000}).json()["keys"]
    by_start: dict[int, list[dict[str, Any]]] = {}
    for key in sorted(keys):
        answer = client.get(f"/fresh/imps/state/{key}").json()
        for w in answer["windows"]:
            entry = {"key": key, "key_group": answer["key_group"], **w}
            del entry["start"], entry["end"]
            by_start.setdefault(w["start"], []).append(entry)
    assert any(not e["final"] for found in by_start.values() for e in found), "no open window"
    for start, want in by_start.items():
        got = _all_pages(client, f"/fresh/imps/windows/{start}", 5)[0]
        assert got == sorted(want, key=_cell_order)


def test_a_read_waits_for_the_watermark_it_asks_for(live: tuple[httpx.Client, str, str]) -> None:
    client, bootstrap, topic = live
    now = _watermark(client)
    target = now + 5_000
    key = f"rw-{uuid.uuid4().hex[:6]}"
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        pending = pool.submit(
            client.get, f"/fresh/imps/state/{key}",
            params={"min_watermark": target, "timeout_ms": 30_000},
        )  # fmt: skip
        assert _watermark(client) < target and not pending.done()
        # the write, then what moves the watermark past it
        send(bootstrap, topic, [(0, _event(key, target - 100, 7)), (0, _event("k0", target + 1))])
        r = pending.result(60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["watermark"] >= target and time.monotonic() - started < 30
    window = next(w for w in body["windows"] if w["start"] <= target - 100 < w["end"])
    assert window["total"] == 7 and window["n"] == 1


def test_a_read_past_its_timeout_gets_409_with_the_current_values(
    live: tuple[httpx.Client, str, str],
) -> None:
    client = live[0]
    far = 4_000_000_000_000
    for path, params in [
        ("/fresh/imps/state/k1", {}),
        ("/fresh/imps/state", {}),
        ("/fresh/imps/top", {"by": "n"}),
        (f"/fresh/imps/windows/{BASE}", {}),
    ]:
        # the job checkpoints every 300 ms: the answer's checkpoint (and watermark) is the one
        # current while it was made, between what the job reports just before and just after
        checkpoint_before, watermark_before = _last_checkpoint(client), _watermark(client)
        started = time.monotonic()
        r = client.get(path, params={**params, "min_watermark": far, "timeout_ms": 300})
        assert r.status_code == 409, (path, r.text)
        assert time.monotonic() - started >= 0.3
        body = r.json()
        assert body["error"]["code"] == "not_fresh_enough"
        assert f"min_watermark={far}" in body["error"]["message"]
        assert watermark_before <= body["watermark"] <= _watermark(client) < far
        assert checkpoint_before <= (body["checkpoint"] or 0) <= _last_checkpoint(client)
    r = client.post(
        "/fresh/imps/lookup", json={"keys": ["k1"]}, params={"min_watermark": far, "timeout_ms": 0}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_fresh_enough"


@pytest.mark.parametrize("consistency", ["live", "committed"])
def test_a_read_waits_for_the_checkpoint_it_asks_for(
    live: tuple[httpx.Client, str, str], consistency: str
) -> None:
    client = live[0]
    current = wait_until(lambda: client.get("/jobs/fresh").json()["last_checkpoint"], 30)
    params = {"consistency": consistency, "timeout_ms": 20_000}
    r = client.get("/fresh/imps/state/k1", params={**params, "min_checkpoint": current + 2})
    assert r.status_code == 200, r.text
    assert r.json()["checkpoint"] >= current + 2
    r = client.get(f"/fresh/imps/windows/{BASE}", params={**params, "min_checkpoint": current})
    assert r.status_code == 200 and r.json()["checkpoint"] >= current
    r = client.get(
        "/fresh/imps/state/k1",
        params={**params, "min_checkpoint": 10**9, "timeout_ms": 200},
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_fresh_enough"
    assert r.json()["checkpoint"] >= current + 2
