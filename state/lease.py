"""The job's lease: one object, ``<checkpoint-dir>/<job>/leader``, that says which job manager
runs the job and which checkpoints it committed (DESIGN.md, "Job-manager failover").

Flink keeps its leader and its completed-checkpoint pointers in one fenced store (a ZooKeeper
node, a Kubernetes ConfigMap updated only by the holder of its leader annotation); weir keeps
both in one object of the checkpoint storage itself, written only with conditional writes
(``ObjectStore.put_new`` / ``put_if``: S3's ``If-None-Match`` and ``If-Match``, a hard link and
a locked compare-and-rename in a directory). So a job manager that lost the lease cannot commit:
its write fails because the object changed.

The record (``LeaderRecord``) holds:

- ``epoch``: one more at every change of holder; every ``_metadata`` carries the epoch of the
  job manager that wrote it;
- ``holder``: who holds it (run id, host, process, state directory, API address);
- ``lease_ms`` and ``renewal``: the holder replaces the record every ``lease_ms / 4``; a
  contender that sees the same version for ``lease_ms`` on its own clock takes over;
- ``released``: the holder stopped in order; anyone may take over at once;
- ``lineage``: where the job's state began (``base``: a checkpoint, or nothing) and the
  checkpoints committed since, newest last. A checkpoint is committed when the record naming it
  is written, not when its ``_metadata`` is: a ``_metadata`` a stale job manager writes late
  is in no lineage, so it never becomes the checkpoint a restart restores.

This module only reads and writes the record; ``engine/runtime/control/leadership.py`` holds,
renews and gives up the lease.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from weir.base.errors import StateError, StorageError
from weir.state.checkpoints import CheckpointStorage

LEADER = "leader"
FORMAT = 1
HISTORY = 32  # committed checkpoint ids a lineage remembers (a restore falls back through them)


@dataclass(frozen=True, slots=True)
class Holder:
    """A job manager, as its lease names it.

    Attributes:
        run: its run id (new at every start of ``weir run``).
        host: its host name.
        node: the kernel boot and pid namespace it runs in (``""`` unknown): processes with
            the same node see each other's pids, so one can tell that the other is gone.
        pid: its process id, in that namespace.
        state_dir: its state directory (absolute).
        lock: the device and inode of its state directory's run lock: the same directory, also
            seen from another container of the same volume.
        api: where its HTTP API serves, once it does.
    """

    run: str
    host: str
    node: str
    pid: int
    state_dir: str
    lock: str
    api: str | None = None


@dataclass(frozen=True, slots=True)
class Lineage:
    """The job's state as its job managers carried it on: it began at ``base`` (a checkpoint's
    location, None: empty state) and ``checkpoints`` were committed since, oldest first."""

    base: str | None = None
    checkpoints: tuple[int, ...] = ()

    @property
    def newest(self) -> int | None:
        return self.checkpoints[-1] if self.checkpoints else None

    @property
    def resumable(self) -> bool:
        """There is state to resume: a fresh start would throw it away."""
        return bool(self.checkpoints) or self.base is not None

    def committed(self, n: int) -> Lineage:
        return replace(self, checkpoints=(*self.checkpoints, n)[-HISTORY:])

    def upto(self, n: int, location: str) -> Lineage:
        """Resumed from checkpoint ``n`` (at ``location``): what came after it is no longer
        this lineage's."""
        kept = tuple(c for c in self.checkpoints if c <= n)
        return Lineage(self.base if kept else location, kept)


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    """``<job>/leader``'s content. ``time_ms`` is the writer's wall clock, for people: no
    decision reads it (the clocks of two hosts differ; a lease is timed on each one's own)."""

    job: str
    epoch: int
    holder: Holder
    lease_ms: int
    renewal: int = 0
    released: bool = False
    lineage: Lineage = field(default_factory=Lineage)
    time_ms: int = 0

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "job": self.job,
            "epoch": self.epoch,
            "holder": {
                "run": self.holder.run,
                "host": self.holder.host,
                "node": self.holder.node,
                "pid": self.holder.pid,
                "state_dir": self.holder.state_dir,
                "lock": self.holder.lock,
                "api": self.holder.api,
            },
            "lease_ms": self.lease_ms,
            "renewal": self.renewal,
            "released": self.released,
            "lineage": {"base": self.lineage.base, "checkpoints": list(self.lineage.checkpoints)},
            "time_ms": self.time_ms,
        }
        return json.dumps(body, indent=1).encode()

    @staticmethod
    def from_bytes(data: bytes, where: str) -> LeaderRecord:
        """Raises ``StorageError`` naming ``where`` when ``data`` is not a record this weir
        wrote."""
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {FORMAT}")
            h, lin = raw["holder"], raw["lineage"]
            holder = Holder(
                _text(h["run"]), _text(h["host"]), _text(h["node"]), _int(h["pid"]),
                _text(h["state_dir"]), _text(h["lock"]),
                None if h["api"] is None else _text(h["api"]),
            )  # fmt: skip
            lineage = Lineage(
                None if lin["base"] is None else _text(lin["base"]),
                tuple(_int(n) for n in lin["checkpoints"]),
            )
            return LeaderRecord(
                _text(raw["job"]), _int(raw["epoch"]), holder, _int(raw["lease_ms"]),
                _int(raw["renewal"]), _flag(raw["released"]), lineage, _int(raw["time_ms"]),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"cannot read the job's lease {where}: {exc}; it is not a lease this weir "
                "wrote. Remove it only when no job manager of the job runs anywhere"
            ) from None


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{v!r} is not a string")
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{v!r} is not an integer")
    return v


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{v!r} is not true or false")
    return v


class LeaseStore:
    """Reads and conditionally writes one job's ``leader`` object."""

    def __init__(self, storage: CheckpointStorage) -> None:
        self.storage = storage
        self.key = f"{storage.job}/{LEADER}"

    @property
    def where(self) -> str:
        return storage_url(self.storage)

    def read(self) -> tuple[LeaderRecord, str] | None:
        """The record and its version, or None when there is none."""
        found = self.storage.store.get_versioned(self.key)
        if found is None:
            return None
        data, version = found
        return LeaderRecord.from_bytes(data, self.where), version

    def create(self, record: LeaderRecord) -> str:
        """Write the first record; ``StorageConflict`` when one exists."""
        return self.storage.store.put_new(self.key, record.to_bytes())

    def replace(self, record: LeaderRecord, version: str) -> str:
        """Replace the record of ``version``; ``StorageConflict`` when it changed."""
        return self.storage.store.put_if(self.key, record.to_bytes(), version)


def storage_url(storage: CheckpointStorage) -> str:
    """Where the lease of ``storage``'s job is, for messages."""
    return storage.root.child(storage.job).child(LEADER).url


def newest_epoch(storage: CheckpointStorage, look: int = 3) -> int:
    """The highest epoch among the newest ``look`` complete checkpoints' ``_metadata`` (0: none
    carries one): a lease written anew (its object was removed) starts above it."""
    best = 0
    for n in storage.ids()[-look:]:
        try:
            epoch = storage.metadata(n).get("epoch", 0)
        except StateError:
            continue
        if isinstance(epoch, int):
            best = max(best, epoch)
    return best


__all__ = ["LEADER", "Holder", "LeaderRecord", "LeaseStore", "Lineage", "newest_epoch"]
