"""What the API knows about running jobs: their definition, their job manager (a
``view.JobRuntime``: the job manager in this process, or ``api.remote.RemoteRuntime`` for one
that runs apart), and a reader of each worker's live state (a secondary of its RocksDB, or a
cluster task's state server). Routes get it through a FastAPI
dependency."""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from weir.api.committed import CommittedReader, CommittedView
from weir.api.remote import RemoteRuntime
from weir.base.errors import StateError
from weir.engine.job import Job
from weir.engine.nodes import WindowNode
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.statereader import RemoteReader, RemoteSeeker
from weir.engine.runtime.stored import FoldPlan
from weir.engine.runtime.view import ClusterRuntime, JobRuntime
from weir.state.keygroups import operator_for_key_group
from weir.state.rocksdb import BoundedIter
from weir.state.secondary import SecondaryReader

log = logging.getLogger(__name__)


class StateReader(Protocol):
    """A worker's live state as routes read it: a secondary of its RocksDB on this host
    (``state.secondary.SecondaryReader``), or a cluster task's state server
    (``engine.runtime.control.statereader.RemoteReader``)."""

    caught_up_at: float
    reopened: int
    catch_up_failures: int

    def get(self, key: bytes) -> bytes | None: ...

    def scan(self, lo: bytes, hi: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]: ...

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]) -> list[list[tuple[bytes, bytes]]]: ...

    def iterator(self, hi: bytes) -> BoundedIter | RemoteSeeker: ...

    def memory(self) -> dict[str, int]:
        """The bytes it holds in this process outside Python's heap, by kind (a secondary: its
        RocksDB's ``memtables``, ``block_cache``, ``table_readers``; empty when none)."""
        ...

    def expire(self) -> None:
        """The next read sees every write made before this call (``SecondaryReader.expire``).

        Raises:
            StateError: a remote reader's state server did not answer.
        """
        ...

    def close(self) -> None: ...


@dataclass
class JobHandle:
    job: Job
    runtime: JobRuntime
    readers: list[StateReader]
    source: str = ""
    plans: dict[str, FoldPlan] = field(default_factory=dict)
    committed: CommittedReader | None = None
    generation: int = 0
    make_reader: Callable[[int], StateReader] | None = None  # to follow a new parallelism
    # why a live read would not be live (weir api: no leader vouches for the state it sees)
    live_problem: Callable[[], str | None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # (runtime, whether it is a ClusterRuntime): a Protocol's isinstance walks its members,
    # ~3% of a point lookup's time when asked on each one (``remote``)
    _cluster: tuple[object, bool] | None = field(default=None, repr=False, compare=False)

    def plan(self, op: WindowNode) -> FoldPlan:
        plan = self.plans.get(op.name)
        if plan is None:
            plan = self.plans[op.name] = FoldPlan(op.aggregates)
        return plan

    @property
    def remote(self) -> bool:
        """Live reads go over the network to a cluster's tasks: never on the event loop."""
        found = self._cluster
        if found is None or found[0] is not self.runtime:
            found = self._cluster = (self.runtime, isinstance(self.runtime, ClusterRuntime))
        return found[1] and self.runtime.on_cluster  # type: ignore[attr-defined]

    def reader_for(self, key_group: int) -> StateReader:
        """The reader of the worker that owns ``key_group``. ``StateError`` (503) when there
        is none yet, or when its state would not be live (``live_problem``)."""
        if self.live_problem is not None and (why := self.live_problem()) is not None:
            raise StateError(f"job {self.job.name!r}: {why}")
        generation = self.runtime.generation
        parallelism = self.runtime.parallelism
        if generation != self.generation or len(self.readers) != parallelism:
            self._follow(generation, parallelism)
        if parallelism < 1:
            raise StateError(f"job {self.job.name!r} has not reported its workers yet")
        index = operator_for_key_group(self.job.max_parallelism, parallelism, key_group)
        return self.readers[index]

    def _follow(self, generation: int, parallelism: int) -> None:
        with self._lock:
            if generation != self.generation:  # the job restarted: its files were rebuilt
                self.generation = generation
                for r in self.readers:
                    r.close()
            if self.make_reader is not None and (
                len(self.readers) != parallelism or not self._same_files()
            ):
                for r in self.readers:  # a new run elsewhere or at another parallelism
                    r.close()  # (weir api follows)
                self.readers = [self.make_reader(i) for i in range(parallelism)]

    def _same_files(self) -> bool:
        """The readers read the files the runtime names now (``weir api`` follows the leader
        to another state directory)."""
        if not isinstance(self.runtime, RemoteRuntime):
            return True
        paths = [getattr(r, "primary", None) for r in self.readers]
        return paths == [self.runtime.worker_state_path(i) for i in range(len(paths))]

    def expire_readers(self) -> None:
        """Every reader's next read sees what was written before this call (after a live
        backfill this API loaded: its caller reads next). A remote reader that does not answer
        is said with a WARNING: the backfill is loaded, and that worker's reads say why they
        fail or catch up within their bound."""
        for r in list(self.readers):
            try:
                r.expire()
            except StateError as exc:
                log.warning("job=%s cannot expire a state reader: %s", self.job.name, exc)

    def committed_view(self) -> CommittedView | None:
        if self.committed is None:
            return None
        return self.committed.view(self.runtime.last_checkpoint)

    def close(self) -> None:
        for r in self.readers:
            r.close()
        if self.committed is not None:
            self.committed.close()


def handle_for(
    job: Job, runtime: JobRuntime, cfg: RunConfig, api_dir: Path | None = None
) -> JobHandle:
    """``api_dir`` (default: the job's state directory) holds this API's own files: the
    secondary instances' and the committed views' (one directory per API process)."""
    api_dir = api_dir or cfg.job_dir(job.name)
    opened = itertools.count()

    def make_reader(i: int) -> StateReader:
        if isinstance(runtime, ClusterRuntime) and runtime.on_cluster:
            return RemoteReader(i, functools.partial(runtime.state_endpoint, i))
        if isinstance(runtime, RemoteRuntime):  # the leader's files, wherever they are now
            # a directory of its own: the one it replaces may still be read by a request
            secondary = api_dir / "api-secondary" / f"worker-{i}-{next(opened)}"
            return SecondaryReader(runtime.worker_state_path(i), secondary)
        return SecondaryReader(
            cfg.worker_state_path(job.name, i), api_dir / "api-secondary" / f"worker-{i}"
        )

    committed = CommittedReader(runtime.storage, api_dir / "api-committed")
    return JobHandle(
        job,
        runtime,
        [make_reader(i) for i in range(runtime.parallelism)],
        source=job.describe_sources(),
        committed=committed,
        make_reader=make_reader,
        live_problem=(
            (lambda: runtime.live_problem) if isinstance(runtime, RemoteRuntime) else None
        ),
    )


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, JobHandle] = {}

    def add(self, handle: JobHandle) -> None:
        self.jobs[handle.job.name] = handle

    def close(self) -> None:
        for h in self.jobs.values():
            h.close()
