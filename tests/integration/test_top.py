"""``GET /{job}/{op}/top`` against a running ``weir run``: the merged per-worker top keys equal a
ranking computed from every key's results, and the current window is ranked while it is open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import WeirServer, read_jsonl, wait_until
from tests.support.reference import group_emissions

BOUNDED = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("top")
(
    job.source(sources.generator("ads", rate=0, ids=400, skew=0.6, count=60_000,
                                 clock="synthetic", step=0.5, disorder=50),
               timestamp="ts", watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", n=agg.count(), total=agg.sum("value"), low=agg.min("value"))
)
"""

LIVE = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("toplive")
(
    job.source(sources.generator("ads", rate=3000, ids=300), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=60_000))
    .aggregate("stats", n=agg.count())
)
"""


def _ranking(rows: list[dict[str, Any]], by: str, n: int) -> list[dict[str, Any]]:
    ranked = sorted(rows, key=lambda r: (-r[by], r["key"]))[:n]
    return [{"key": r["key"], "value": r[by]} for r in ranked]


def test_top_n_of_the_latest_window_equals_a_ranking_of_every_key(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "top.py"
    job.write_text(BOUNDED)
    out = tmp_path / "out.jsonl"
    server = weir_server(job, "--parallelism", "2", "--sink", f"file://{out}")
    server.wait_finished(60)
    client = server.client()
    last = {k: v[-1] for k, v in group_emissions(read_jsonl(out)).items()}
    latest_end = max(end for _, _, end in last)
    rows = [r for (_, _, end), r in last.items() if end == latest_end]
    assert len(rows) > 200  # more keys than either worker's share of the top 100
    for by, n in (("n", 10), ("total", 100), ("low", 7)):
        r = client.get("/top/stats/top", params={"by": by, "n": n})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["window"] == {"start": latest_end - 10_000, "end": latest_end}
        assert body["keys"] == _ranking(rows, by, n), by
    # any retained window by its start, ranked from state: equal to the sink's ranking of it
    by_end: dict[int, list[dict[str, Any]]] = {}
    for (_, _, end), r in last.items():
        by_end.setdefault(end, []).append(r)
    assert len(by_end) >= 3
    for end, window_rows in sorted(by_end.items()):
        for by, n in (("n", 10), ("total", 100), ("low", 7)):
            r = client.get("/top/stats/top", params={"by": by, "n": n, "window": end - 10_000})
            assert r.status_code == 200, r.text
            assert r.json()["window"] == {"start": end - 10_000, "end": end}
            assert r.json()["keys"] == _ranking(window_rows, by, n), (end, by)
    r = client.get("/top/stats/top", params={"by": "n", "window": 5})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_window_start"
    assert "use 0 or 10000" in r.json()["error"]["message"]
    r = client.get("/top/stats/top", params={"by": "n", "window": "yesterday"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_window"
    r = client.get("/top/stats/top", params={"by": "n", "window": latest_end + 100_000})
    assert r.status_code == 404 and r.json()["error"]["code"] == "window_not_found"
    assert "--state-retention-ms" in r.json()["error"]["message"]
    assert client.get("/top/stats/top", params={"by": "nope"}).json()["error"]["code"] == (
        "unknown_aggregate"
    )
    assert client.get("/top/stats/top", params={"by": "n", "n": 101}).status_code == 422
    r = client.get("/top/stats/top", params={"by": "n", "window": "current"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "window_not_found"


def test_top_n_of_the_current_window_while_it_is_open(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "live.py"
    job.write_text(LIVE)
    server = weir_server(job, "--parallelism", "2")
    client = server.client()

    def ranked() -> dict[str, Any] | None:
        r = client.get("/toplive/stats/top", params={"by": "n", "n": 5, "window": "current"})
        return r.json() if r.status_code == 200 and len(r.json()["keys"]) == 5 else None

    first = wait_until(ranked, 30.0, what="a ranked current window")
    values = [k["value"] for k in first["keys"]]
    assert values == sorted(values, reverse=True)
    # the ranking follows the window as it fills, and matches the keys' own answers
    second = wait_until(
        lambda: (b := ranked()) and b["keys"][0]["value"] > first["keys"][0]["value"] and b,
        30.0,
        what="the counts to grow",
    )
    # the ranking reads the worker's memory, which can be a flush ahead of the RocksDB the state
    # route reads (the API catches up with it a moment later): each key's own answer reaches
    # the ranked value within a few flushes
    end = second["window"]["end"]

    def counted(key: str) -> int:
        state = client.get(f"/toplive/stats/state/{key}").json()
        return int(next(w for w in state["windows"] if w["end"] == end)["n"])

    for entry in second["keys"]:
        key, value = entry["key"], entry["value"]
        wait_until(lambda k=key, v=value: counted(k) >= v, 10.0,
                   what=f"key {key}'s state to reach its ranked count {value}")  # fmt: skip
