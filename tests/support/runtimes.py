"""The job runtimes the contract suite runs against, over one real job: a ``JobManager`` started
in this process (what ``weir run``'s own API reads) and a ``RemoteRuntime`` over its state
directory (what ``weir api`` reads), so both describe the same workers, checkpoints and failures.
A new implementation of ``view.JobRuntime`` is one more entry in ``IMPLEMENTATIONS``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import job_text, wait_until, worker_pids, write_events
from tests.support.reference import IMPRESSIONS_ONLY
from weir.api.remote import RemoteRuntime
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.jobmanager import JobManager
from weir.engine.runtime.loader import load_configured_job
from weir.engine.runtime.view import STATUS_FORMAT, JobRuntime, JobStatus
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.checkpoints import CheckpointStorage

IN_PROCESS, REMOTE = "in-process", "remote"


def plain_status(job: str, state: str = "running") -> JobStatus:
    """A job manager's status of one worker and nothing else (no checkpoint, no workers
    reported), as ``jobmanager.json`` would hold it: for tests of the file and its publisher."""
    return JobStatus(
        format=STATUS_FORMAT, job=job, run_id="r", pid=1, written_at=0, state=state,
        failure=None, source="x", operators=[], parallelism=1, max_parallelism=1,
        ranges=[(0, 0)], generation=0, restarts=0, last_checkpoint=None,
        completed_checkpoints=0, checkpoints=[], checkpoint_problem=None, restored_from=None,
        backfills=[], workers=[], control_port=None, api_url=None, cluster=False, ended=False,
    )  # fmt: skip


IMPLEMENTATIONS = (IN_PROCESS, REMOTE)
PARALLELISM = 2
# odd: Flink's ceiling formula gives worker 0 [0, 3] and worker 1 [4, 6]; a floor gives [0, 2]
MAX_PARALLELISM = 7
BOUND, SIZE = 200, 1_000
# the remote view reads a file published every 250 ms (and soon after a change): a condition
# it must reach is waited for this long, on a loaded machine
LAG_S = 10.0
JOB_S = 60.0  # the longest a test job may take to reach a state
FINAL_STATES = ("finished", "failed", "stopped", "cancelled")

# A user map that sleeps per record, so a job over a small file runs for seconds: long enough
# for both views to see it running and for checkpoints to complete while it does.
_PACED = '''import time


def paced(event):
    """Let each record take {pace_s} s, so the job runs long enough to watch."""
    time.sleep({pace_s})
    return event


'''


class StateTimeline:
    """What ``state()`` each runtime said over the job's life, repeats collapsed, sampled every
    20 ms from just after the job started until it is stopped."""

    def __init__(self, runtimes: dict[str, JobRuntime]) -> None:
        self._runtimes = runtimes
        self.seen: dict[str, list[str]] = {name: [] for name in runtimes}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="test-timeline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def final(self, name: str) -> list[str]:
        """The states ``name`` went through, once it says a final one."""
        seen = self.seen[name]
        wait_until(lambda: seen and seen[-1] in FINAL_STATES, JOB_S,
                   what=f"the {name} runtime to say a final state")  # fmt: skip
        return list(self.seen[name])

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            for name, runtime in self._runtimes.items():
                state, seen = runtime.state(), self.seen[name]
                if not seen or seen[-1] != state:
                    seen.append(state)


@dataclass
class LiveJob:
    """A job running under a ``JobManager`` in this process, and ``weir api``'s view of it."""

    cfg: RunConfig
    job: Job
    manager: JobManager
    remote: RemoteRuntime
    inputs: list[Path]  # worker i reads inputs[i]
    events: list[list[dict[str, Any]]]  # what each input holds
    pids: list[int]  # the worker processes, by index
    timeline: StateTimeline
    storage: CheckpointStorage = field(init=False)

    def __post_init__(self) -> None:
        self.storage = CheckpointStorage(self.cfg.checkpoints_root, self.job.name)

    def runtime(self, impl: str) -> JobRuntime:
        return self.manager if impl == IN_PROCESS else self.remote

    @property
    def source(self) -> str:
        return f"file://{self.inputs[0].parent / 'in-*.jsonl'}"


def write_job(root: Path, pace_s: float) -> Path:
    """Job ``t1``: impressions of ``in-*.jsonl`` (one file per worker) keyed by ``id``, counted
    in tumbling windows of ``SIZE`` ms by operator ``imps``; each record paced by ``pace_s``."""
    steps = [*IMPRESSIONS_ONLY, ("map", "paced")] if pace_s else IMPRESSIONS_ONLY
    text = job_text(root / "in-*.jsonl", bound=BOUND, size=SIZE, lateness=0,
                    max_parallelism=MAX_PARALLELISM, steps=steps)  # fmt: skip
    path = root / "job.py"
    path.write_text((_PACED.format(pace_s=pace_s) if pace_s else "") + text, encoding="utf-8")
    return path


@contextmanager
def live_job(
    root: Path, events: Sequence[list[dict[str, Any]]], pace_s: float = 0.0, **cfg: Any
) -> Iterator[LiveJob]:
    """Start the job over ``events`` (one list per worker) at ``PARALLELISM``, with ``cfg``'s
    ``RunConfig`` fields; stop it on the way out."""
    inputs = [write_events(root / f"in-{i}.jsonl", part) for i, part in enumerate(events)]
    config = RunConfig(job_file=write_job(root, pace_s), state_dir=root / "state",
                       backfill_dir=root / "backfill", parallelism=PARALLELISM,
                       **cfg)  # fmt: skip
    job = load_configured_job(config)
    manager = JobManager(config, job)
    remote = RemoteRuntime(
        job, config.job_dir(job.name), CheckpointStorage(config.checkpoints_root, job.name)
    )
    timeline = StateTimeline({IN_PROCESS: manager, REMOTE: remote})
    before = set(worker_pids(os.getpid()))  # other jobs' workers, of other fixtures
    manager.start()
    try:
        timeline.start()
        pids = wait_until(lambda: new_workers(before), 10.0, what="the workers to exec")
        yield LiveJob(config, job, manager, remote, inputs, list(events), pids, timeline)
    finally:
        timeline.stop()
        manager.stop()


def new_workers(before: set[int]) -> list[int] | None:
    """This process's worker processes not in ``before``, in index order (they are spawned in
    order), once all of them have exec'd (a child shows up as a worker only then)."""
    found = sorted(set(worker_pids(os.getpid())) - before)
    return found if len(found) == PARALLELISM else None


def settled(runtime: JobRuntime) -> bool:
    """Finished, and its final checkpoint (the one that holds the end of the input, where every
    window has fired) is complete."""
    checkpoints = runtime.checkpoints
    return (
        runtime.state() == "finished"
        and bool(checkpoints)
        and checkpoints[-1]["watermark"] == MAX_WATERMARK
    )


def wait_settled(runtime: JobRuntime) -> None:
    wait_until(lambda: settled(runtime), JOB_S, what="the job to finish and checkpoint its end")
