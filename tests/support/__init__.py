"""Helpers shared by the test packages: event files, job files, the ``weir`` command, waiting.

Fixtures in ``tests/conftest.py`` wrap these as factories; property tests (which cannot take
function-scoped fixtures under Hypothesis) import them directly.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.procs import children as children
from tests.support.procs import cmdline as cmdline
from tests.support.procs import comm as comm
from tests.support.procs import descendants as descendants
from tests.support.procs import worker_pids as worker_pids
from tests.support.reference import AGGREGATES_SRC, IMPRESSIONS_ONLY, Step
from weir.base.errors import ConfigError
from weir.base.procmem import rss_bytes as rss_bytes
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.view import BackfillEntry, SavepointResult, unreported
from weir.engine.watermarks import MIN_WATERMARK
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import KeyGroupRange

T = TypeVar("T")

# the base URL of in-process test clients: the API answers only Hosts that name it, and
# TestClient's own default ("testserver") is none of them
LOCAL = "http://127.0.0.1"

_CONSOLE_SCRIPT = Path(sys.executable).with_name("weir")
WEIR: list[str] = (
    [str(_CONSOLE_SCRIPT)] if _CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "weir"]
)

# Keys the generated inputs use: plain ones, one with a slash, a unicode one, and an int
# (stored and queried as its decimal string).
KEYS: tuple[str | int, ...] = ("ad-0", "ad-1", "ad-2", "ad-3", "ad-4", "a/b", "ü-ключ", 17)
KEY_WEIGHTS = (30, 20, 12, 8, 5, 5, 5, 5)


def wait_until(
    fn: Callable[[], T | None], timeout: float = 15.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.1f}s waiting for {what or fn!r}; last value {last!r}"
            )
        time.sleep(interval)


@dataclass
class WeirResult:
    rc: int
    stdout: str
    stderr: str

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclass
class WeirServer:
    """A running ``weir run`` (no ``--exit-at-end``) and where to reach it."""

    proc: subprocess.Popen[bytes]
    base_url: str
    job: str
    state_dir: Path
    stderr_path: Path
    _clients: list[httpx.Client] = field(default_factory=list)

    @property
    def job_dir(self) -> Path:
        return self.state_dir / self.job

    def client(self) -> httpx.Client:
        c = httpx.Client(base_url=self.base_url, timeout=10.0, trust_env=False)
        self._clients.append(c)
        return c

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_finished(self, timeout: float = 30.0) -> dict[str, Any]:
        c = self.client()

        def finished() -> dict[str, Any] | None:
            assert self.proc.poll() is None, f"weir exited early:\n{self.stderr()}"
            try:
                body: dict[str, Any] = c.get(f"/jobs/{self.job}").json()
            except httpx.ConnectError as exc:  # alive, yet not serving: say what it logged
                raise AssertionError(f"weir stopped serving ({exc}):\n{self.stderr()}") from exc
            assert body.get("state") != "failed", f"job failed:\n{self.stderr()}"
            return body if body.get("state") == "finished" else None

        return wait_until(finished, timeout, what=f"job {self.job} to finish")

    def crash(self) -> None:
        """kill -9 of the job manager and its workers at once (the process group), returning once
        every worker is gone (their RocksDB locks are released only then)."""
        workers = descendants(self.proc.pid)
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        wait_until(lambda: not any(alive(w) for w in workers), 15.0, what="workers to exit")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL (of the process group this fixture created) after ``timeout``."""
        for c in self._clients:
            c.close()
        self._clients.clear()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return self.proc.returncode


def write_lines(path: Path, lines: Iterable[str | bytes]) -> Path:
    """Write raw lines (a newline is added to each) exactly as given."""
    with open(path, "wb") as fh:
        for line in lines:
            fh.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


def event_lines(events: Iterable[dict[str, Any]]) -> list[str]:
    return [json.dumps(e, ensure_ascii=False) for e in events]


def write_events(path: Path, events: Sequence[dict[str, Any]]) -> Path:
    """Write events as JSONL (one object per line)."""
    return write_lines(path, event_lines(events))


def read_jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def make_events(
    n: int,
    seed: int,
    *,
    start: int = -3_000,
    step: int = 5,
    jitter: int = 150,
    far_fraction: float = 0.05,
    far_lag: tuple[int, int] = (1_000, 6_000),
    keys: Sequence[str | int] = KEYS,
    weights: Sequence[int] = KEY_WEIGHTS,
) -> list[dict[str, Any]]:
    """Out-of-order ad events: most lag the running clock by up to ``jitter`` ms, a
    ``far_fraction`` lag by ``far_lag`` ms (late, or within lateness); 10% are clicks."""
    rng = random.Random(seed)
    clock = start
    out = []
    for _ in range(n):
        clock += rng.randint(0, 2 * step)
        lag = rng.randint(*far_lag) if rng.random() < far_fraction else rng.randint(0, jitter)
        out.append(
            {
                "id": rng.choices(keys, weights=weights)[0],
                "event": "click" if rng.random() < 0.1 else "impression",
                "ts": clock - lag,
                "value": rng.randint(-50, 100),
            }
        )
    return out


def job_text(
    source_path: Path,
    *,
    bound: int,
    size: int,
    lateness: int,
    name: str = "t1",
    op: str = "imps",
    steps: Sequence[Step] = IMPRESSIONS_ONLY,
    max_parallelism: int = 128,
    slide: int | None = None,
    gap: int | None = None,
) -> str:
    chain = "".join(f"\n    .{kind}({src})" for kind, src in steps)
    if gap is not None:
        assigner = f"windows.session(gap_ms={gap})"
    elif slide is not None:
        assigner = f"windows.sliding(size_ms={size}, slide_ms={slide})"
    else:
        assigner = f"windows.tumbling(ms={size})"
    return f"""from weir import Job, WatermarkStrategy, agg, sources, windows

job = Job({name!r}, max_parallelism={max_parallelism})
(
    job.source(
        sources.jsonl({str(source_path)!r}),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms={bound}),
    ){chain}
    .key_by("id")
    .window({assigner}, allowed_lateness_ms={lateness})
    .aggregate({op!r}, {AGGREGATES_SRC})
)
"""


UDA_JOB_BOUND = 200
# an order-sensitive user-defined aggregate: the first and last values in the order they were
# added, and how many merges built the accumulator (a fold in another order, or a merge that
# streaming does not do, changes it)
_TRAIL = """
class Trail:
    def create(self):
        return [0, [], [], 0]

    def add(self, acc, r):
        n, head, tail, m = acc
        v = r["value"]
        return [n + 1, head if len(head) >= 3 else head + [v], (tail + [v])[-3:], m]

    def merge(self, a, b):
        return [a[0] + b[0], (a[1] + b[1])[:3], (a[2] + b[2])[-3:], a[3] + b[3] + 1]

    def result(self, acc):
        return {"n": acc[0], "head": acc[1], "tail": acc[2], "merges": acc[3]}
"""
_UDA_JOB = (
    "from weir import Job, WatermarkStrategy, agg, sources, windows\n"
    + _TRAIL
    + """
job = Job("t1", max_parallelism=128)
(
    job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=BOUND))
    .filter(lambda e: e["event"] == "impression")
    .map(lambda e: dict(e, x=e["value"] * 0.1))
    .key_by("id")
    .window(ASSIGNER, allowed_lateness_ms=LATENESS)
    .aggregate("imps", AGGREGATES)
)
"""
)
# the Trail UDA beside built-ins, one of them a float sum (its value depends on the fold order)
WITH_UDA = 'trail=Trail(), n=agg.count(), total=agg.sum("x"), avg=agg.mean("value")'
BUILTINS = 'n=agg.count(), total=agg.sum("value"), lo=agg.min("value")'


def uda_job_text(assigner: str, lateness: int, aggregates: str) -> str:
    """Job ``t1``, operator ``imps``: impressions keyed by ``id`` with ``x = value * 0.1``, the
    ``windows.…`` ``assigner`` and ``agg.…`` ``aggregates`` (``Trail()`` is defined)."""
    text = _UDA_JOB.replace("BOUND", str(UDA_JOB_BOUND)).replace("ASSIGNER", assigner)
    return text.replace("LATENESS", str(lateness)).replace("AGGREGATES", aggregates)


def alive(pid: int) -> bool:
    """``pid`` or any of its threads has not finished exiting. A killed process's main thread
    can be a zombie while its other threads still run their exit, and their shared file table
    (with RocksDB's ``LOCK``) is closed only when the last of them is done."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return False
    for task in tasks:
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state != "Z":
            return True
    return False


class Distinct:
    """A user-defined aggregate: how many distinct values (accumulator: a sorted list, which
    msgpack can store)."""

    def create(self) -> list[int]:
        return []

    def add(self, acc: list[int], record: dict[str, Any]) -> list[int]:
        return sorted(set(acc) | {record["value"]})

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return sorted(set(a) | set(b))

    def result(self, acc: list[int]) -> int:
        return len(acc)


class FixedRuntime:
    """A ``view.JobRuntime`` with fixed answers: one worker that has not reported, no
    checkpoint, no problem. Tests of the API alone subclass it."""

    parallelism = 1
    ranges = [KeyGroupRange(0, 127)]
    generation = 0
    source = "file:///in.jsonl"
    last_checkpoint: int | None = None
    completed_checkpoints = 0
    checkpoints: list[dict[str, Any]] = []
    checkpoint_problem: str | None = None
    status_problem: str | None = None
    failure_reason: str | None = None
    dead_letter_problem: str | None = None
    state_retention_ms = 3_600_000
    restarts = 0
    restored_from: str | None = None
    backfills: list[BackfillEntry] = []

    def __init__(self, storage_root: Path) -> None:
        self.storage = CheckpointStorage(storage_root, "j")

    def worker_status(self) -> list[WorkerStatus]:
        return [unreported(0, self.ranges[0])]

    def operator_watermark(self, op: str) -> int:
        return MIN_WATERMARK

    def state_watermark(self, op: str) -> int:
        return MIN_WATERMARK

    def state(self) -> str:
        return "running"

    def trigger_savepoint(self, timeout_s: float = 60.0) -> SavepointResult:
        raise ConfigError("this test's job takes no savepoint")

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> BackfillEntry:
        raise ConfigError("this test's job takes no backfill")


def chk_dir(storage: CheckpointStorage, n: int) -> Path:
    """Checkpoint ``n``'s directory, in storage on a file system."""
    return Path(storage.location(n))


def shared_dir(storage: CheckpointStorage) -> Path:
    """The shared SST files' directory, in storage on a file system."""
    return Path(storage.where) / "shared"


def impression_counts(
    events: Iterable[dict[str, Any]], size: int
) -> dict[tuple[str, int, int], int]:
    """Impressions per (id, window start, window end) of a tumbling window of ``size`` ms."""
    counts: dict[tuple[str, int, int], int] = {}
    for e in events:
        if e["event"] == "impression":
            start = e["ts"] - e["ts"] % size
            k = (str(e["id"]), start, start + size)
            counts[k] = counts.get(k, 0) + 1
    return counts


def stored_windows(
    entries: Iterable[tuple[bytes, bytes]], state_id: int, sessions: bool = False
) -> list[tuple[bytes, int | None, int, Any]]:
    """``(key, start, end, slots)`` of every window of state ``state_id`` in ``entries`` (a
    RocksDB scan in key order), as the operator stores them: cells (``state/cells.py``; the
    start is None, the assigner's to give) or, for ``sessions``, rows with their start."""

    from weir.engine.runtime.stored.codec import decode_session
    from weir.state import cells
    from weir.state.layout import decode_state_key

    out: list[tuple[bytes, int | None, int, Any]] = []
    by_cell: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for k, v in entries:
        if int.from_bytes(k[2:4], "big") != state_id:
            continue  # a cleanup timer, another state
        if sessions:
            _, _, key, end = decode_state_key(k)
            start, slots = decode_session(v)
            out.append((key, start, end, slots))
        else:  # a key group's cells, fine and coarse, merged by generation below
            by_cell.setdefault(k[:4], []).append((k, v))
    for group in by_cell.values():
        for end, rows in cells.windows_of(group):
            out.extend((key, None, end, slots) for key, slots in rows)
    return out
