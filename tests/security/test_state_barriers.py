"""Live backfills and checkpoint barriers (issue 17, item 10): a checkpoint holds a backfill on
every worker or on none. A real ``weir run`` at parallelism 2 checkpoints back to back while
backfills, each with a key on either worker, are loaded one after another; afterwards every
checkpoint is restored, worker by worker, and must hold each backfill's two keys together or
neither."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from rocksdict import Options, Rdict, SstFileWriter

from tests.support import WeirServer, wait_until
from weir.engine.job import operator_state_id
from weir.state import cells
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import key_group, range_for_operator
from weir.state.restore import restore_worker_db

MAX_PAR = 128
SID = operator_state_id("counts")
BACKFILLS = 60
JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("bars", max_parallelism=128)
(
    job.source(sources.generator("ads", rate=5_000, ids=2_000, splits=2), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=100))
    .key_by("id")
    .window(windows.tumbling(ms=100))
    .aggregate("counts", n=agg.count())
)
"""


def _keys_per_worker(i: int) -> tuple[str, str]:
    """A key of worker 0 and one of worker 1 (of 2), both new to backfill ``i``."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < 2:
        key = f"bf{i}-{n}"
        worker = 0 if key_group(key, MAX_PAR) in range_for_operator(MAX_PAR, 2, 0) else 1
        found.setdefault(worker, key)
        n += 1
    return found[0], found[1]


def _end(i: int) -> int:
    return -1_000_000 + 100 * i  # long closed for the live job; one window end per backfill


def _write_cell(path: Path, key: str, end: int) -> None:
    """A backfill file holding ``key``'s window ``end`` (count 7) as the operator stores it: a
    cell (``state/cells.py``)."""
    kg = key_group(key, MAX_PAR)
    rows = cells.CellRows([key.encode()], np.full(1, kg, np.uint16), [np.array([7])])
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path / f"kg-{kg:05d}.sst"))
    for k, v in cells.encode_cells(rows, SID, end, 0):
        writer[k] = v
    writer.finish()


def _write_backfill(directory: Path, i: int) -> None:
    directory.mkdir(parents=True)
    for key in _keys_per_worker(i):
        _write_cell(directory, key, _end(i))


def _stored_ends(db: Rdict, key: str) -> set[int]:
    """The window ends ``db`` holds for ``key`` (its bucket's cells)."""

    def scan(lo: bytes, hi: bytes) -> list[tuple[bytes, bytes]]:
        entries = []
        for k, v in db.items(from_key=lo):
            if k >= hi:
                break
            entries.append((k, v))
        return entries

    entries = cells.key_entries(scan, key_group(key, MAX_PAR), SID, key.encode())
    return set(cells.key_windows(entries, key.encode()))


def _loaded(storage: CheckpointStorage, n: int, work: Path) -> Iterator[tuple[int, bool, bool]]:
    """For each backfill: is its worker-0 key, and its worker-1 key, in checkpoint ``n``?"""
    meta = storage.metadata(n)
    present: list[set[str]] = []
    for w in range(2):
        target = work / f"chk-{n}-w{w}"
        restore_worker_db(storage, n, meta, range_for_operator(MAX_PAR, 2, w), target)
        db = Rdict(str(target), Options(raw_mode=True))
        try:
            keys = set()
            for i in range(BACKFILLS):
                key = _keys_per_worker(i)[w]
                if _end(i) in _stored_ends(db, key):
                    keys.add(key)
            present.append(keys)
        finally:
            db.close()
    for i in range(BACKFILLS):
        a, b = _keys_per_worker(i)
        yield i, a in present[0], b in present[1]


def test_a_checkpoint_holds_a_backfill_on_all_workers_or_none(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    bf = tmp_path / "bf"
    chk = tmp_path / "chk"
    server = weir_server(
        job,
        "--parallelism", "2",
        "--checkpoint-dir", str(chk),
        "--checkpoint-interval-ms", "1",
        "--checkpoints-retained", "100000",
        "--backfill-dir", str(bf),
        "--state-retention-ms", str(10**13),
    )  # fmt: skip
    client = server.client()
    wait_until(lambda: (client.get("/jobs/bars").json().get("last_checkpoint") or 0) >= 2, 30)
    first = client.get("/jobs/bars").json()["last_checkpoint"]
    for i in range(BACKFILLS):
        _write_backfill(bf / f"b{i}", i)
        body = {"op": "counts", "path": str(bf / f"b{i}"), "min_end": _end(i), "max_end": _end(i)}
        r = client.post("/jobs/bars/backfills", json=body, timeout=60)
        assert r.status_code == 200, r.text
    # a window the live job can still change is refused, whatever the request claims
    future = bf / "future"
    future.mkdir()
    _write_cell(future, _keys_per_worker(BACKFILLS)[0], 2**62)
    claim = {"op": "counts", "path": str(future), "min_end": -5, "max_end": -5}
    r = client.post("/jobs/bars/backfills", json=claim)
    assert r.status_code == 409 and "the live job can still change" in r.text, r.text
    last = client.get("/jobs/bars").json()["last_checkpoint"]
    wait_until(lambda: client.get("/jobs/bars").json()["last_checkpoint"] > last, 30)
    server.stop()

    storage = CheckpointStorage(chk, "bars")
    ids = [n for n in storage.ids() if n >= first]
    assert len(ids) > BACKFILLS // 2, f"too few checkpoints during the backfills: {ids}"
    split = []
    partial = 0
    for n in ids:
        rows = list(_loaded(storage, n, tmp_path / "restored"))
        split += [(n, i, a, b) for i, a, b in rows if a != b]
        partial += 0 < sum(a for _, a, _ in rows) < BACKFILLS
    assert split == [], json.dumps(split[:10])
    assert partial, "no checkpoint fell between the first and the last backfill"


def test_no_checkpoint_begins_while_a_backfill_holds_the_coordinator(tmp_path: Path) -> None:
    """The coordinator's side, step by step: ``hold`` waits for the checkpoint in flight, no
    tick triggers one until ``release`` (the finished job's final one included), then it does."""
    from tests.unit.test_coordinator import Harness, _snapshot
    from weir.engine.runtime.messages import CheckpointAck, TriggerCheckpoint

    h = Harness(tmp_path, checkpoint_interval_ms=1)
    n = h.triggered()
    held = threading.Event()
    holder = threading.Thread(target=lambda: (h.coordinator.hold(10, threading.Event()),
                                              held.set()))  # fmt: skip
    holder.start()
    assert not held.wait(0.2)  # checkpoint n is in flight: the backfill waits
    for w in (0, 1):
        h.coordinator.acknowledge(w, CheckpointAck(n, _snapshot(w)))
    assert held.wait(5)
    holder.join()
    for _ in range(20):
        h.coordinator.tick(ready=True, finished=True)
        time.sleep(0.002)
    assert [m.checkpoint for m in h.sent if isinstance(m, TriggerCheckpoint)] == [n]
    assert not h.coordinator.final_settled()  # the final checkpoint is deferred, not skipped
    h.coordinator.release()
    h.coordinator.tick(ready=True, finished=True)
    assert [m.checkpoint for m in h.sent if isinstance(m, TriggerCheckpoint)] == [n, n + 1]
