"""Sessions and user-defined aggregates backfilled on a real local SparkSession (started once
for the module): the backfill's savepoint (what ``weir backfill --into-savepoint`` writes),
restored by ``weir run --restore`` at another parallelism, serves over HTTP exactly the windows
``weir run`` serves after streaming the same JSONL, with the same records late."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.support import (
    KEYS,
    UDA_JOB_BOUND,
    WITH_UDA,
    WeirServer,
    make_events,
    read_jsonl,
    uda_job_text,
    write_events,
    write_lines,
)
from weir.engine.runtime.loader import load_job
from weir.engine.spark.backfill import run_backfill
from weir.engine.spark.load import make_savepoint

GAP, SESSION_LATENESS = 150, 500
Windows = dict[tuple[str, int, int], dict[str, Any]]


def _served(server: WeirServer) -> Windows:
    """Every window of every key, as ``GET /t1/imps/state/{key}`` answers it."""
    client = server.client()
    got: Windows = {}
    for key in map(str, KEYS):
        r = client.get(f"/t1/imps/state/{quote(key, safe='')}", params={"limit": 10_000})
        assert r.status_code == 200, (key, r.text)
        for w in r.json()["windows"]:
            got[(key, w["start"], w["end"])] = w
    return got


def _streamed_and_backfilled(
    tmp: Path, weir_server: Callable[..., WeirServer], spark: Any, assigner: str, lateness: int
) -> tuple[Windows, Windows, list[dict[str, Any]], list[dict[str, Any]]]:
    """``weir run`` over the events, and backfill -> savepoint -> ``weir run --restore``: the
    windows each serves, the late records streaming wrote and the events."""
    events = make_events(2_000, seed=7, step=20, far_fraction=0.1, far_lag=(300, 3_000))
    src = write_events(tmp / "history.jsonl", events)
    job_file = tmp / "job.py"
    job_file.write_text(uda_job_text(assigner, lateness, WITH_UDA))
    live = weir_server(job_file, "--source", f"file://{src}", "--parallelism", "2",
                       state_dir=tmp / "stream")  # fmt: skip
    live.wait_finished()
    streamed = _served(live)
    late = read_jsonl(tmp / "stream" / "t1" / "late.jsonl")

    result = run_backfill(job_file, [str(src)], tmp / "backfill", master="local[2]",
                          progress=False, session=spark)  # fmt: skip
    assert result.late == len(late) >= 20 and result.windows == len(streamed)
    job = load_job(job_file)
    savepoint = make_savepoint(job, [result], tmp / "sp", tmp / "w")
    empty = write_lines(tmp / "empty.jsonl", [])
    restored = weir_server(job_file, "--restore", str(savepoint), "--source", f"file://{empty}",
                           "--parallelism", "2", state_dir=tmp / "restored")  # fmt: skip
    restored.wait_finished()
    return streamed, _served(restored), late, events


def test_a_session_job_backfills_to_the_sessions_weir_run_serves(
    tmp_path: Path, weir_server: Callable[..., WeirServer], spark: Any
) -> None:
    streamed, backfilled, late, events = _streamed_and_backfilled(
        tmp_path, weir_server, spark, f"windows.session(gap_ms={GAP})", SESSION_LATENESS
    )
    assert backfilled == streamed
    # what a groupBy over event time would get wrong is in there: records that bridge two
    # sessions (merged, which the UDA counts) ...
    assert sum(1 for w in streamed.values() if w["trail"]["merges"]) >= 5
    # ... late records that would have extended a session whose lateness had passed ...
    extending = [
        x for x in late
        if any(k == x["key"] and x["ts"] < end and x["ts"] + GAP > start
               for k, start, end in streamed)
    ]  # fmt: skip
    assert len(extending) >= 20
    # ... and records whose own window was past its lateness, kept because they joined a live
    # session
    behind = _behind_their_lateness(events)
    assert sum((behind - Counter((x["key"], x["ts"]) for x in late)).values()) >= 5


def _behind_their_lateness(events: list[dict[str, Any]]) -> Counter[tuple[str, int]]:
    """Impressions whose own session ``[t, t + gap)`` was past its lateness on arrival."""
    behind: Counter[tuple[str, int]] = Counter()
    max_ts: int | None = None
    for e in events:
        wm = None if max_ts is None else max_ts - UDA_JOB_BOUND - 1
        if e["event"] == "impression" and wm is not None:
            if e["ts"] + GAP - 1 + SESSION_LATENESS <= wm:
                behind[(str(e["id"]), e["ts"])] += 1
        max_ts = e["ts"] if max_ts is None else max(max_ts, e["ts"])
    return behind


def test_a_uda_job_backfills_to_the_windows_weir_run_serves(
    tmp_path: Path, weir_server: Callable[..., WeirServer], spark: Any
) -> None:
    """Sliding windows on panes: the UDA's windows are composed from pane accumulators (the
    merges it counts), then updated by records within lateness; a float sum beside it."""
    streamed, backfilled, _, _ = _streamed_and_backfilled(
        tmp_path, weir_server, spark, "windows.sliding(size_ms=1000, slide_ms=300)", 800
    )
    assert backfilled == streamed
    assert all(w["final"] for w in streamed.values())
    assert sum(1 for w in streamed.values() if w["trail"]["merges"]) > len(streamed) / 2
