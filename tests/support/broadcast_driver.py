"""Drive one worker's keyed broadcast operator by hand, as Flink's
``KeyedTwoInputStreamOperatorTestHarness`` drives a ``CoBroadcastWithKeyedOperator``: keyed and
broadcast records under a watermark the test sets, on a real RocksDB under a test directory,
snapshotted into real checkpoint storage and restored from it at any parallelism
(``state/restore.py``, as a worker restores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from weir.engine.job import BroadcastNode, KeyedBroadcastNode, KeySelector
from weir.engine.runtime.operators.broadcast import KeyedBroadcastRuntime
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.state.checkpoints import CheckpointStorage
from weir.state.keygroups import canonical_key, key_group, range_for_operator
from weir.state.restore import restore_worker_db
from weir.state.rocksdb import RocksState
from weir.testing import Collected


def operator(
    fn: Any,
    *,
    name: str = "op",
    states: tuple[str, ...] = ("broadcast-state",),
    key: KeySelector = canonical_key,
    side_outputs: tuple[str, ...] = (),
) -> KeyedBroadcastNode:
    op = KeyedBroadcastNode(name, key, fn, broadcast=BroadcastNode(states))
    op.side_outputs = {tag: [] for tag in side_outputs}
    return op


class Subtask:
    """Worker ``index`` of ``parallelism`` running ``op`` on RocksDB at ``db``."""

    def __init__(
        self,
        op: KeyedBroadcastNode,
        db: Path,
        *,
        max_parallelism: int = 128,
        parallelism: int = 1,
        index: int = 0,
        watermark: int = MIN_WATERMARK,
    ) -> None:
        self.op = op
        self.index = index
        self.max_parallelism = max_parallelism
        self.range = range_for_operator(max_parallelism, parallelism, index)
        self.state = RocksState(db)
        self.dead_sink = Collected()
        self.dead = DeadLetters(self.dead_sink)
        self.rt = KeyedBroadcastRuntime(
            op, self.state, self.range, max_parallelism, LateRecords(None), self.dead, 10**12
        )
        self.watermark = watermark
        if watermark != MIN_WATERMARK:
            self.rt.restore(watermark, watermark)
        self.output: list[Any] = []
        self.side: dict[str, list[Any]] = {}

    def owns(self, key: str) -> bool:
        return key_group(key, self.max_parallelism) in self.range

    def element(self, record: Any, ts: int) -> None:
        """A keyed record, under the current watermark."""
        sel = self.op.key
        key = canonical_key(record[sel] if isinstance(sel, str) else sel(record))
        assert self.owns(key), f"key {key!r} is not in worker {self.index}'s key groups"
        self.rt.process([key], [record], [ts], [self.watermark])
        self._collect()

    def broadcast(self, record: Any, ts: int) -> None:
        self.rt.process_broadcast([""], [record], [ts], [self.watermark])
        self._collect()

    def advance(self, watermark: int) -> None:
        self.watermark = max(self.watermark, watermark)
        self.rt.advance(self.watermark, self.watermark)
        self._collect()

    def _collect(self) -> None:
        self.output.extend(self.rt.drain())
        for tag, recs in self.rt.drain_side().items():
            self.side.setdefault(tag, []).extend(recs)

    def dead_letters(self) -> list[dict[str, Any]]:
        self.dead.flush()
        return list(self.dead_sink.records)

    def checkpoint(self, storage: CheckpointStorage, n: int, tmp: Path) -> dict[str, Any]:
        """This worker's part of checkpoint ``n``: its state written, RocksDB's checkpoint
        uploaded; returns its ``_metadata`` entry."""
        self.rt.flush()
        local = tmp / f"local-{n}-{self.index}"
        self.state.checkpoint(local)
        files, _ = storage.upload(local, n, self.index, f"run-w{self.index}", {})
        return {
            "index": self.index,
            "key_groups": self.range.to_json(),
            "files": [f.to_json() for f in files],
            "operators": {self.op.name: {"watermark": self.watermark}},
        }

    def finish(self) -> None:
        self.advance(MAX_WATERMARK)

    def close(self) -> None:
        self.state.close()


def snapshot_all(
    subtasks: list[Subtask], tmp: Path, n: int = 1
) -> tuple[CheckpointStorage, dict[str, Any]]:
    """Checkpoint ``n`` of every subtask, with its ``_metadata``, as the job manager writes it."""
    storage = CheckpointStorage(tmp / "chk", "j")
    storage.ensure()
    workers = [s.checkpoint(storage, n, tmp) for s in subtasks]
    first = subtasks[0]
    meta = {
        "id": n,
        "max_parallelism": first.max_parallelism,
        "parallelism": len(subtasks),
        "workers": workers,
    }
    storage.write_metadata(n, meta)
    return storage, json.loads(json.dumps(meta))


def restore_all(
    op: KeyedBroadcastNode,
    storage: CheckpointStorage,
    meta: dict[str, Any],
    parallelism: int,
    tmp: Path,
) -> list[Subtask]:
    """Every worker of a new parallelism, restored from the checkpoint as workers are."""
    n, m = int(meta["id"]), int(meta["max_parallelism"])
    wm = min(int(w["operators"][op.name]["watermark"]) for w in meta["workers"])
    out = []
    for i in range(parallelism):
        target = tmp / f"restored-{parallelism}-{i}"
        restore_worker_db(
            storage, n, meta, range_for_operator(m, parallelism, i), target, broadcast=True
        )
        out.append(
            Subtask(op, target, max_parallelism=m, parallelism=parallelism, index=i, watermark=wm)
        )
    return out


def key_for(subtask: Subtask, prefix: str = "") -> str:
    """The first key ``prefix + str(i)`` that worker owns (Flink's ``findValidTriggerKey``)."""
    i = 0
    while not subtask.owns(f"{prefix}{i}"):
        i += 1
    return f"{prefix}{i}"
