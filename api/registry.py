"""What the API knows about running jobs: their definition, their job manager, and a secondary
RocksDB reader per worker. Routes get it through a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.job import Job, WindowOperator
from engine.runtime.config import RunConfig
from engine.runtime.fold import FoldPlan
from state.keygroups import KeyGroupRange, operator_for_key_group
from state.rocksdb import SecondaryReader


class JobRuntime(Protocol):
    """The part of a job manager the API reads."""

    parallelism: int
    ranges: list[KeyGroupRange]

    def worker_status(self) -> list[dict[str, Any]]: ...

    def operator_watermark(self, op: str) -> int: ...

    def state(self) -> str: ...


@dataclass
class JobHandle:
    job: Job
    runtime: JobRuntime
    readers: list[SecondaryReader]
    source: str = ""
    plans: dict[str, FoldPlan] = field(default_factory=dict)

    def plan(self, op: WindowOperator) -> FoldPlan:
        plan = self.plans.get(op.name)
        if plan is None:
            plan = self.plans[op.name] = FoldPlan(op.aggregates)
        return plan

    def reader_for(self, key_group: int) -> SecondaryReader:
        index = operator_for_key_group(
            self.job.max_parallelism, self.runtime.parallelism, key_group
        )
        return self.readers[index]

    def close(self) -> None:
        for r in self.readers:
            r.close()


def handle_for(job: Job, runtime: JobRuntime, cfg: RunConfig) -> JobHandle:
    readers = [
        SecondaryReader(
            cfg.worker_state_path(job.name, i),
            cfg.job_dir(job.name) / "api-secondary" / f"worker-{i}",
        )
        for i in range(runtime.parallelism)
    ]
    return JobHandle(job, runtime, readers, source=job.sources[0].source.describe())


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, JobHandle] = {}

    def add(self, handle: JobHandle) -> None:
        self.jobs[handle.job.name] = handle

    def close(self) -> None:
        for h in self.jobs.values():
            h.close()
