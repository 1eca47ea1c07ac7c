"""Key listing at 300,000 keys (a real RocksDB, the API on loopback): a prefix that matches
nothing pages through the cells, each page within the scan budget; paging by
cursor lists every key exactly once, also when pages end on the scan budget; a malformed
cursor is a 400 naming the problem, never a 500."""

from __future__ import annotations

import base64
import statistics
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.security._http import serve, sliding_job, write_keys
from tests.support import FixedRuntime
from weir.api import JobHandle, Registry, cellkeys, create_app, keylist
from weir.state.secondary import SecondaryReader

N_KEYS = 300_000
KEYS = [f"k-{i}" for i in range(N_KEYS)]
PANES_ONLY = frozenset(KEYS[::7])  # keys held under the pane state id alone


@pytest.fixture(scope="module")
def handle(tmp_path_factory: pytest.TempPathFactory) -> JobHandle:
    tmp: Path = tmp_path_factory.mktemp("keylist")
    job = sliding_job(tmp)
    write_keys(tmp / "db", job, KEYS, PANES_ONLY)
    reader = SecondaryReader(tmp / "db", tmp / "secondary")
    return JobHandle(job, FixedRuntime(tmp / "chk"), [reader])


@pytest.fixture(scope="module")
def client(handle: JobHandle) -> Iterator[httpx.Client]:
    registry = Registry()
    registry.add(handle)
    with (
        serve(create_app(registry)) as served,
        httpx.Client(base_url=served.base_url, timeout=30.0, trust_env=False) as c,
    ):
        yield c


def _examined(client: httpx.Client) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name == "weir_key_listing_positions":
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError("no weir_key_listing_positions_total in /metrics")


def _timed(client: httpx.Client, params: dict[str, str | int]) -> tuple[float, dict[str, object]]:
    runs = []
    body: dict[str, object] = {}
    for _ in range(3):
        started = time.perf_counter()
        r = client.get("/j/op/state", params=params)
        runs.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text
        body = r.json()
    return statistics.median(runs), body


def test_a_prefix_that_matches_nothing_pages_within_the_scan_budget(
    client: httpx.Client,
) -> None:
    """Keys are in cells by hash bucket, so a prefix cannot be sought: a listing that matches
    nothing reads every bucket, but a page at a time, each within the scan budget (plus the
    one bucket it ends in), and it ends."""
    before = _examined(client)
    seen, pages = _pages(client, {"prefix": "zzz", "limit": 1})
    assert seen == [] and pages > 1
    per_page = (_examined(client) - before) / pages
    assert per_page <= keylist.SCAN_BUDGET + 64, per_page


def _pages(client: httpx.Client, params: dict[str, str | int]) -> tuple[list[str], int]:
    seen: list[str] = []
    cursor: str | None = None
    for pages in range(1, 10_000):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        r = client.get("/j/op/state", params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        seen.extend(body["keys"])
        cursor = body["next_cursor"]
        if cursor is None:
            return seen, pages
    raise AssertionError("the listing did not end")


def test_paging_by_cursor_lists_every_key_once(client: httpx.Client) -> None:
    seen, _ = _pages(client, {"limit": 1000})
    assert len(seen) == len(set(seen)) == N_KEYS
    assert set(seen) == set(KEYS)


def test_a_rare_prefix_pages_through_the_scan_budget(client: httpx.Client) -> None:
    expected = {k for k in KEYS if k.startswith("k-29999")}
    seen, pages = _pages(client, {"prefix": "k-29999", "limit": 3})
    assert len(seen) == len(set(seen)) and set(seen) == expected
    assert pages >= len(expected) // 3


def test_pages_cut_by_the_scan_budget_resume_where_they_ended(handle: JobHandle) -> None:
    op = handle.job.operators["op"]
    ids = [op.state_id, op.pane_state_id]  # type: ignore[union-attr]

    def between(kg: int, lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        return handle.readers[0].scan(lo, hi)

    expected = {k for k in KEYS if k.startswith("k-29999")}
    seen: list[str] = []
    start, cut = cellkeys.CellPosition(0, 0, None), 0
    for _ in range(100_000):
        page = cellkeys.list_keys(between, ids, 128, b"k-29999", start, limit=3, budget=40)
        assert page.examined <= 40 + 64  # a page ends after the bucket that spends the budget
        seen.extend(k.decode() for _, k, _ in page.found)
        cut += len(page.found) < 3 and page.next is not None
        if page.next is None:
            break
        start = page.next
    assert len(seen) == len(set(seen)) and set(seen) == expected
    assert cut > 10, "no page ended on the budget"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor!",
        _b64(b"5"),  # valid base64 of JSON that is not a position
        _b64(b"[1]"),
        _b64(b"\x00"),
        _b64(struct.pack(">BBH", 1, 0, 128)),  # a key group this job does not have
        _b64(struct.pack(">BBH", 9, 1, 3) + b"k-1"),  # another version
        _b64(struct.pack(">BBH", 1, 0, 3) + b"k-1"),  # a key after "no key"
    ],
)
def test_a_malformed_cursor_is_a_400(client: httpx.Client, cursor: str) -> None:
    r = client.get("/j/op/state", params={"cursor": cursor})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_cursor"
    assert cursor[:20] in error["message"] and "without a cursor" in error["message"]
