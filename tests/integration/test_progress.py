"""Progress of ``weir produce`` and ``weir backfill``: one line redrawn in place on a terminal
(a pty here), plain lines with no carriage return anywhere else; Spark's stages as its status
tracker reports them."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import WEIR, WeirResult, make_events, write_events
from weir.app.progress import SparkProgress, StatusLine

RATE_LINE = r"weir produce: {n} events to {target}, [\d,]+ events/s \([\d.]+ s\)"


def _on_a_terminal(argv: list[str], cwd: Path, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pty; its exit code, stdout and what the pty showed."""
    main, other = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=other)
    os.close(other)
    shown = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        try:
            chunk = os.read(main, 65536) if ready else b""
        except OSError:  # the child is gone and the pty is drained
            break
        shown += chunk
        if not chunk and proc.poll() is not None:
            break
    os.close(main)
    out = proc.communicate(timeout=10)[0]
    return proc.returncode, out.decode(), shown.decode()


def test_produce_on_a_terminal_redraws_one_line(tmp_path: Path) -> None:
    target = "events.jsonl"  # short: the line is cut to the terminal's width
    argv = [*WEIR, "produce", "--file", target, "--count", "400000", "--clock", "synthetic"]
    rc, out, shown = _on_a_terminal(argv, tmp_path)
    assert rc == 0, shown
    assert '"events": 400000' in out
    # every redraw starts with a carriage return; the line ends once, at the end (the pty
    # shows a newline as \r\n)
    assert shown.startswith("\rweir produce: ") and shown.endswith("\r\n"), repr(shown)
    draws = shown[:-2].split("\r")[1:]
    assert all(re.fullmatch(RATE_LINE.format(n=r"[\d,]+", target=target) + " *", d) for d in draws)
    assert re.fullmatch(RATE_LINE.format(n="400,000", target=target) + " *", draws[-1])


def test_produce_off_a_terminal_writes_plain_lines(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    target = tmp_path / "events.jsonl"
    r = run_weir("produce", "--file", str(target), "--count", "50000", "--clock", "synthetic")
    assert r.rc == 0, r.stderr
    assert "\r" not in r.stderr
    first, *_, last = r.error_lines()  # the first line at once, the final one at the end
    assert re.fullmatch(RATE_LINE.format(n=r"[\d,]+", target=target), first)
    assert re.fullmatch(RATE_LINE.format(n="50,000", target=target), last)


def test_backfill_off_a_terminal_writes_plain_lines(
    tmp_path: Path, run_weir: Callable[..., WeirResult], write_job: Callable[..., Path]
) -> None:
    history = write_events(tmp_path / "history.jsonl", make_events(5_000, seed=2))
    job = write_job(history, bound=200, size=1_000, lateness=0)
    r = run_weir(
        "backfill", str(job), "--input", str(history), "--master", "local[2]",
        "--into-savepoint", str(tmp_path / "savepoints"), timeout=180,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert "\r" not in r.stderr  # neither ours nor Spark's console progress bar
    progress = [line for line in r.error_lines() if line.startswith("weir backfill: ")]
    # the time as app.progress.elapsed writes it: "4.2 s", or "1 min 05 s" on a slow host
    took = r"(?:[\d.]+ s|\d+ min \d\d s)"
    assert re.fullmatch(rf"weir backfill: [1-9]\d* stages? done, {took}", progress[-1]), progress


def test_spark_progress_shows_stages_tasks_and_records(spark: Any) -> None:
    """Two stages: 4 tasks that write a shuffle, then 8 slow tasks (2 at a time on local[2],
    one key each) reading it, whose records Spark reports as each task ends."""

    def slow(kv: tuple[int, int]) -> tuple[int, int]:
        time.sleep(0.3)
        return kv

    # jobs before the block (ten stages), as on the test session's shared SparkSession: none
    # of them is counted
    earlier = spark.sparkContext.parallelize(range(10), 2).map(lambda x: (x, x))
    for _ in range(5):
        assert earlier.reduceByKey(lambda a, b: a + b).count() == 10
    out = io.StringIO()
    pairs = spark.sparkContext.parallelize(range(1_000), 4).map(lambda x: (x % 8, x))
    with SparkProgress(spark.sparkContext, StatusLine(out, every_s=0.0), poll_s=0.05):
        assert len(pairs.reduceByKey(lambda a, b: a + b, 8).map(slow).collect()) == 8
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    stage = re.compile(r"weir backfill: stage (\d+): (\d)/([48]) tasks done, \d running")
    done: dict[str, list[int]] = {}
    for m in filter(None, map(stage.match, lines)):
        done.setdefault(m.group(1), []).append(int(m.group(2)))
    assert done and all(d == sorted(d) for d in done.values()), lines  # tasks done only rise
    assert any(re.search(r", [\d,]+ records read \(", line) for line in lines), "\n".join(lines)
    assert re.fullmatch(r"weir backfill: [2-9] stages done, [\d.]+ s", lines[-1]), lines
