"""The state backends the contract suite runs against, each with how it opens, restores and
reopens under a directory. A new backend is one more ``Kind`` in ``KINDS``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from weir.state.backend import Snapshottable, StateBackend
from weir.state.memory import MemoryState
from weir.state.rocksdb import RocksState


class Backend(StateBackend, Snapshottable, Protocol):
    """A backend the suite can also checkpoint and restore."""


@dataclass(frozen=True)
class Kind:
    name: str
    open: Callable[[Path], Backend]  # a backend at a directory (a fresh one for a new directory)
    # a new instance, at a directory of its own, holding what a checkpoint directory holds
    restore: Callable[[Path, Path], Backend]
    persists: bool  # whether reopening a closed backend's directory finds its state


def _restore_rocks(checkpoint: Path, at: Path) -> Backend:
    # as a worker does (state/restore.py): the checkpoint's files are copied into place, opened
    shutil.copytree(checkpoint, at)
    return RocksState(at)


ROCKSDB = Kind("rocksdb", RocksState, _restore_rocks, persists=True)
MEMORY = Kind(
    "memory", lambda _at: MemoryState(), lambda chk, _at: MemoryState.restore(chk), persists=False
)
KINDS = (ROCKSDB, MEMORY)


class Opened:
    """Backends of one kind under one directory, each at a path of its own; ``close_all`` at
    teardown closes every one (closing twice is part of the contract)."""

    def __init__(self, kind: Kind, root: Path) -> None:
        self.kind = kind
        self.root = root
        self._open: list[Backend] = []

    def path(self, name: str) -> Path:
        return self.root / f"{self.kind.name}-{name}"

    def new(self, name: str = "db") -> Backend:
        return self._keep(self.kind.open(self.path(name)))

    def restore(self, checkpoint: Path, name: str) -> Backend:
        return self._keep(self.kind.restore(checkpoint, self.path(name)))

    def _keep(self, backend: Backend) -> Backend:
        self._open.append(backend)
        return backend

    def close_all(self) -> None:
        for backend in self._open:
            backend.close()
