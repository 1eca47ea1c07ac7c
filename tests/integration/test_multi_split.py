"""Several input files (a glob) are several splits, read by several workers. Watermarks then
depend on arrival order across splits, but a record within its own split's out-of-orderness
bound is never late (DESIGN.md, "Time"), so with in-bound input every window's result is exact
and emitted once (no lateness)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support import WeirResult, WeirServer, make_events, read_jsonl, write_events
from tests.support.reference import aggregates, group_emissions, window_of

BOUND, SIZE = 300, 1_000


def _splits(tmp_path: Path) -> tuple[list[dict[str, Any]], str]:
    everything: list[dict[str, Any]] = []
    for i, n in enumerate((1_500, 900, 300)):  # uneven: splits end at different times
        # lag at most 250 < bound 300: every record is within its split's bound
        events = make_events(n, seed=40 + i, jitter=250, far_fraction=0.0)
        write_events(tmp_path / f"part-{i}.jsonl", events)
        everything += events
    return everything, f"file://{tmp_path}/part-*.jsonl"


def _expected(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    values: dict[tuple[str, int, int], list[int]] = {}
    for e in events:
        if e["event"] == "impression":
            start, end = window_of(e["ts"], SIZE)
            values.setdefault((str(e["id"]), start, end), []).append(e["value"])
    out: dict[str, list[dict[str, Any]]] = {}
    for (key, start, end), vs in sorted(values.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        out.setdefault(key, []).append(
            {"start": start, "end": end, **aggregates(vs), "final": True}
        )
    return out


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_splits_in_bound_are_never_late(
    tmp_path: Path,
    write_job: Callable[..., Path],
    run_weir: Callable[..., WeirResult],
    parallelism: int,
) -> None:
    events, url = _splits(tmp_path)
    out = tmp_path / "out.jsonl"
    job = write_job(tmp_path / "unused.jsonl", bound=BOUND, size=SIZE, lateness=0)
    result = run_weir(
        "run", str(job), "--source", url, "--sink", f"file://{out}", "--exit-at-end",
        "--api-port", "0", "--state-dir", str(tmp_path / "st"),
        "--parallelism", str(parallelism),
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert read_jsonl(tmp_path / "st" / "t1" / "late.jsonl") == []
    got = group_emissions(read_jsonl(out))
    assert all(len(seq) == 1 and seq[0]["final"] for seq in got.values())
    flat = {
        (key, w["start"], w["end"]): {"op": "imps", "key": key, **w}
        for key, windows in _expected(events).items()
        for w in windows
    }
    assert {k: v[0] for k, v in got.items()} == flat


def test_queries_route_to_the_owning_worker(
    tmp_path: Path, write_job: Callable[..., Path], weir_server: Callable[..., WeirServer]
) -> None:
    """max_parallelism 16 over 2 workers: each key is read from the RocksDB of the worker that
    owns its key group (crc32 % 16), and every key is found exactly once."""
    events, url = _splits(tmp_path)
    job = write_job(
        tmp_path / "unused.jsonl", bound=BOUND, size=SIZE, lateness=0, max_parallelism=16
    )
    server = weir_server(job, "--source", url, "--parallelism", "2")
    detail = server.wait_finished()
    assert [w["key_groups"] for w in detail["workers"]] == [[0, 7], [8, 15]]
    assert detail["max_parallelism"] == 16
    expected = _expected(events)
    owners = {zlib.crc32(k.encode()) % 16 >= 8 for k in expected}
    assert owners == {False, True}  # both workers hold some keys
    client = server.client()
    for key, windows in expected.items():
        body = client.get(f"/t1/imps/state/{quote(key, safe='')}").json()
        assert body["key_group"] == zlib.crc32(key.encode()) % 16
        assert body["windows"] == windows, key
