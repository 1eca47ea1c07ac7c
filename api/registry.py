"""What the API knows about running jobs: their definition, their job manager, and a secondary
RocksDB reader per worker. Routes get it through a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from api.committed import CommittedReader, CommittedView
from engine.job import Job, WindowOperator
from engine.runtime.config import RunConfig
from engine.runtime.fold import FoldPlan
from state.checkpoints import CheckpointStorage
from state.keygroups import KeyGroupRange, operator_for_key_group
from state.rocksdb import SecondaryReader


class JobRuntime(Protocol):
    """The part of a job manager the API reads."""

    parallelism: int
    ranges: list[KeyGroupRange]

    def worker_status(self) -> list[dict[str, Any]]: ...

    def operator_watermark(self, op: str) -> int: ...

    def state(self) -> str: ...

    generation: int
    last_checkpoint: int | None
    checkpoints: list[dict[str, Any]]
    storage: CheckpointStorage

    def trigger_savepoint(self, timeout_s: float = 60.0) -> dict[str, Any]: ...

    def ingest_backfill(self, req: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]: ...


@dataclass
class JobHandle:
    job: Job
    runtime: JobRuntime
    readers: list[SecondaryReader]
    source: str = ""
    plans: dict[str, FoldPlan] = field(default_factory=dict)
    committed: CommittedReader | None = None
    generation: int = 0

    def plan(self, op: WindowOperator) -> FoldPlan:
        plan = self.plans.get(op.name)
        if plan is None:
            plan = self.plans[op.name] = FoldPlan(op.aggregates)
        return plan

    def reader_for(self, key_group: int) -> SecondaryReader:
        generation = self.runtime.generation
        if generation != self.generation:  # the job restarted: its RocksDB files were rebuilt
            self.generation = generation
            for r in self.readers:
                r.close()
        index = operator_for_key_group(
            self.job.max_parallelism, self.runtime.parallelism, key_group
        )
        return self.readers[index]

    def committed_view(self) -> CommittedView | None:
        if self.committed is None:
            return None
        return self.committed.view(self.runtime.last_checkpoint)

    def close(self) -> None:
        for r in self.readers:
            r.close()
        if self.committed is not None:
            self.committed.close()


def handle_for(job: Job, runtime: JobRuntime, cfg: RunConfig) -> JobHandle:
    readers = [
        SecondaryReader(
            cfg.worker_state_path(job.name, i),
            cfg.job_dir(job.name) / "api-secondary" / f"worker-{i}",
        )
        for i in range(runtime.parallelism)
    ]
    committed = CommittedReader(runtime.storage, cfg.job_dir(job.name) / "api-committed")
    return JobHandle(
        job, runtime, readers, source=job.sources[0].source.describe(), committed=committed
    )


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, JobHandle] = {}

    def add(self, handle: JobHandle) -> None:
        self.jobs[handle.job.name] = handle

    def close(self) -> None:
        for h in self.jobs.values():
            h.close()
