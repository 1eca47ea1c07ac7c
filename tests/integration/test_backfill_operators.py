"""One ``weir backfill`` computes every window operator of a job in one Spark application and
writes one savepoint a job restores all of them from (issue 39, item 9): its summary counts the
dead letters alike for every operator, a session operator's included, and the run prints no
pandas ``FutureWarning``."""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import WeirResult, WeirServer, read_jsonl, write_lines
from tests.support.backfill import backfill_in_process

BOUND, GAP, SIZE, LATENESS = 200, 400, 1_000, 0  # no re-emission: one result a window
AGGS = ("n", "total")

JOB = """from pathlib import Path

from weir import Job, WatermarkStrategy, agg, sinks, sources, windows

out = Path(__file__).parent
job = Job("two", max_parallelism=32)
s = job.source(sources.jsonl({src!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms={bound}))
s.key_by("id").window(windows.tumbling(ms={size}), allowed_lateness_ms={lateness}).aggregate(
    "imps", n=agg.count(), total=agg.sum("value")).sink(sinks.jsonl(out / "imps.jsonl"))
s.key_by("id").window(windows.session(gap_ms={gap}), allowed_lateness_ms={lateness}).aggregate(
    "sess", n=agg.count(), total=agg.sum("value")).sink(sinks.jsonl(out / "sess.jsonl"))
"""


def _history(path: Path) -> tuple[Path, int]:
    """Events with disorder (some late), unreadable lines and events without ``value``; the
    latter at the newest time so far, so never late for either operator: every operator must
    count them dead. Returns the file and how many lines are dead for every operator."""
    rng = random.Random(39)
    lines, newest, dead = [], 0, 0
    for i in range(2_500):
        t = i * 9 + rng.randint(-350, 350)
        event = {"id": f"ad-{rng.randint(0, 11)}", "ts": t, "value": rng.randint(1, 9)}
        if i % 40 == 0:
            del event["value"]
            event["ts"] = t = max(t, newest)
            dead += 1
        newest = max(newest, t)
        lines.append(json.dumps(event))
        if i % 70 == 0:
            lines.append('{"id": "ad-1", "ts": ')  # cut short: unreadable
            dead += 1
    return write_lines(path, lines), dead


def _served(server: WeirServer, op: str, keys: set[str]) -> dict[tuple[str, int, int], Any]:
    client = server.client()
    got: dict[tuple[str, int, int], Any] = {}
    for key in sorted(keys):
        r = client.get(f"/two/{op}/state/{quote(key, safe='')}", params={"limit": 10_000})
        assert r.status_code == 200, (op, key, r.text)
        for w in r.json()["windows"]:
            got[(key, w["start"], w["end"])] = {a: w[a] for a in AGGS}
    return got


def test_one_backfill_writes_every_operator_into_one_savepoint_with_one_dead_count(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    weir_server: Callable[..., WeirServer],
    spark: Any,
) -> None:
    src, dead = _history(tmp_path / "history.jsonl")
    job = tmp_path / "job.py"
    job.write_text(JOB.format(src=str(src), bound=BOUND, size=SIZE, gap=GAP, lateness=LATENESS))
    r = run_weir("run", str(job), "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(tmp_path / "stream-state"))  # fmt: skip
    assert r.rc == 0, r.stderr
    streamed: dict[str, dict[tuple[str, int, int], Any]] = {}
    for op in ("imps", "sess"):  # each operator's sink, one result per window
        streamed[op] = {(r["key"], r["start"], r["end"]): {a: r[a] for a in AGGS}
                        for r in read_jsonl(tmp_path / f"{op}.jsonl")}  # fmt: skip
        assert streamed[op], op

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = backfill_in_process(spark, tmp_path, str(job), "--input", str(src),
                                "--into-savepoint", str(tmp_path / "sp"))  # fmt: skip
    assert r.rc == 0, r.stderr[-3000:]
    assert [str(w.message) for w in caught if w.category is FutureWarning] == []
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(summary["backfill"]) == ["imps", "sess"]
    # the same input, the same dead letters for each operator (sessions counted theirs too)
    assert [summary["backfill"][op]["dead"] for op in ("imps", "sess")] == [dead, dead]
    assert summary["backfill"]["imps"]["late"] > 0  # the disorder makes some records late
    for op in ("imps", "sess"):
        assert summary["backfill"][op]["windows"] == len(streamed[op])
        assert summary["backfill"][op]["sst_dir"].endswith(f"/two/{op}/sst")
    meta = json.loads((Path(summary["savepoint"]) / "_metadata").read_text())
    assert sorted(meta["backfill"]) == ["imps", "sess"]
    assert all(sorted(w["operators"]) == ["imps", "sess"] for w in meta["workers"])

    empty = write_lines(tmp_path / "empty.jsonl", [])
    server = weir_server(job, "--restore", summary["savepoint"], "--source", str(empty),
                         "--parallelism", "2", state_dir=tmp_path / "restored")  # fmt: skip
    server.wait_finished()
    for op in ("imps", "sess"):
        keys = {k for k, _, _ in streamed[op]}
        assert _served(server, op, keys) == streamed[op], op


def test_op_backfills_one_operator_of_several(tmp_path: Path, spark: Any) -> None:
    src, _ = _history(tmp_path / "history.jsonl")
    job = tmp_path / "job.py"
    job.write_text(JOB.format(src=str(src), bound=BOUND, size=SIZE, gap=GAP, lateness=LATENESS))
    r = backfill_in_process(spark, tmp_path, str(job), "--input", str(src), "--op", "sess",
                            "--into-savepoint", str(tmp_path / "sp"))  # fmt: skip
    assert r.rc == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(summary["backfill"]) == ["sess"]
    meta = json.loads((Path(summary["savepoint"]) / "_metadata").read_text())
    assert all(list(w["operators"]) == ["sess"] for w in meta["workers"])
