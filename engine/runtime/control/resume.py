"""Where a run of a job begins (DESIGN.md, "Job-manager failover"): ``lead`` makes this job
manager the job's leader and decides, from the lease it took over, what its workers restore.

- ``restore`` auto: the newest committed checkpoint or savepoint of the job's lineage that can
  be restored (a broken one is skipped for the one before, with a log line), else empty state;
  ``latest``: the same, but an error when there is none. Without a lease (a job run by an
  older weir, or a savepoint ``weir backfill`` wrote) the newest complete checkpoint in storage
  is the lineage.
- A path or URL: that checkpoint; the lineage begins there.
- No ``restore``: empty state, refused when the job has a lineage to resume unless ``fresh``
  says so, so that nobody resets a job's state by restarting it.

The refusal, and a restore path's check, are made twice: before waiting for the lease (a
mistake fails at once) and with the lease held (what another job manager committed meanwhile
counts).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from weir.base.errors import ConfigError, StateError, StorageError
from weir.base.files import wait_unlocked
from weir.base.settings import named
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.leadership import Leadership, gone, holder_of
from weir.state.checkpoints import METADATA, CheckpointStorage
from weir.state.lease import Holder, LeaderRecord, LeaseStore, Lineage

log = logging.getLogger(__name__)

WORKERS_WAIT_S = 30.0  # how long a new job manager waits for a dead one's workers to exit


@dataclass(frozen=True, slots=True)
class StartPoint:
    """What this run's workers restore (``location``; None: empty state) and the lineage the
    run carries on."""

    location: str | None
    lineage: Lineage


def lead(
    cfg: RunConfig, job: str, storage: CheckpointStorage, run_id: str, stopping: threading.Event
) -> tuple[Leadership, StartPoint] | None:
    """Become the job's leader (waiting as a standby while another job manager holds the
    lease) and decide where this run starts. The caller holds the state directory's run lock.
    None when ``stopping`` was set while waiting.

    Raises:
        ConfigError: ``restore`` names nothing restorable, or a start without it would throw
            away a lineage (the lease is released again).
        StorageError: checkpoint storage cannot be listed at the start.
    """
    storage.ids()  # storage out of reach fails the start at once, not as a standby's retries
    _refuse_early(cfg, storage)
    job_dir = cfg.job_dir(job)
    if not wait_unlocked(cfg.workers_lock(job), WORKERS_WAIT_S):
        raise StateError(
            f"workers of an earlier run of job {job!r} on {cfg.state_dir} still hold "
            f"{cfg.workers_lock(job)} after {WORKERS_WAIT_S:.0f} s; stop them (their command "
            f"line names weir-{job}-worker) and start again"
        )
    me = holder_of(run_id, cfg.state_dir, job_dir / "run.lock")
    leadership = Leadership(storage, me, cfg.lease_ms)

    def holder_gone(other: Holder) -> bool:
        if not gone(me, other):
            return False
        theirs = Path(other.state_dir) / job / cfg.workers_lock(job).name
        return wait_unlocked(theirs, WORKERS_WAIT_S)  # its workers too

    leadership.acquire(stopping, holder_gone)
    if leadership.record is None:
        return None
    try:
        start = start_point(cfg, storage, leadership.record)
        leadership.begin(start.lineage)
    except BaseException:
        leadership.release()
        raise
    return leadership, start


def _refuse_early(cfg: RunConfig, storage: CheckpointStorage) -> None:
    if cfg.restore not in (None, "", "auto", "latest"):
        explicit(cfg.restore)  # a wrong path fails before any waiting for the lease
        return
    if cfg.restore or cfg.fresh:
        return
    try:
        found = LeaseStore(storage).read()
    except StorageError:
        return  # judged again once the lease is held
    _refuse_fresh(storage, None if found is None else found[0])


def start_point(
    cfg: RunConfig, storage: CheckpointStorage, record: LeaderRecord | None
) -> StartPoint:
    """Where a run with ``cfg``'s ``restore`` and ``fresh`` begins, given the lease's
    ``record`` (None: no lease was ever written)."""
    wanted = cfg.restore
    if not wanted:
        if not cfg.fresh:
            _refuse_fresh(storage, record)
        return StartPoint(None, Lineage())
    if wanted in ("auto", "latest"):
        found = resume_point(storage, record)
        if found is not None:
            n, location = found
            lineage = record.lineage if record is not None else Lineage()
            if n is not None and n in lineage.checkpoints:
                return StartPoint(location, lineage.upto(n, location))
            return StartPoint(location, Lineage(location))
        if wanted == "latest":
            raise ConfigError(
                f"`restore` latest: job {storage.job!r} has no complete checkpoint under "
                f"{storage.where}; run it with `checkpoint_interval_ms` first, pass "
                "`restore` auto (a fresh start when there is none), or drop `restore`"
            )
        log.info("job=%s has no checkpoint to resume under %s; a fresh start", storage.job,
                 storage.where)  # fmt: skip
        return StartPoint(None, Lineage())
    location = explicit(wanted)
    return StartPoint(location, Lineage(location))


def explicit(wanted: str) -> str:
    """The checkpoint a ``restore`` path or URL names, checked to be restorable."""
    given = wanted.removesuffix("/").removesuffix("/_metadata")
    try:
        storage, n = CheckpointStorage.at(given)
    except StateError:
        raise ConfigError(
            f"`restore` {wanted}: not a checkpoint directory; pass auto, latest or a chk-<n> "
            "directory (or s3://BUCKET/PREFIX/<job>/chk-<n>) holding a _metadata file"
        ) from None
    problem = storage.problem(n)
    if problem is not None:
        raise ConfigError(f"`restore` {wanted}: cannot restore this checkpoint: {problem}")
    return storage.location(n)


def resume_point(
    storage: CheckpointStorage, record: LeaderRecord | None
) -> tuple[int | None, str] | None:
    """The newest restorable checkpoint of the lineage (its id, None for a base elsewhere, and
    its location); None when the lineage is empty.

    Raises:
        ConfigError: the lineage has checkpoints but none can be restored.
    """
    if record is None:
        n = storage.latest_valid()
        return None if n is None else (n, storage.location(n))
    lineage = record.lineage
    problems: list[str] = []
    for n in reversed(lineage.checkpoints):
        if not storage.store.exists(f"{storage.job}/chk-{n}/{METADATA}"):
            continue  # retention deleted it: an older one than retention keeps
        problem = storage.problem(n)
        if problem is None:
            return n, storage.location(n)
        problems.append(f"chk-{n}: {problem}")
        log.error("checkpoint chk-%d of job %s is skipped: %s", n, storage.job, problem)
    if lineage.base is not None:
        try:
            return None, explicit(lineage.base)
        except ConfigError as exc:
            problems.append(str(exc))
    if lineage.resumable:
        raise ConfigError(
            f"job {storage.job!r}: no committed checkpoint under {storage.where} can be "
            f"restored ({'; '.join(problems) or 'they are gone'}); pass `restore` with a "
            "checkpoint that can, or `fresh` to start from empty state"
        )
    return None


def _refuse_fresh(storage: CheckpointStorage, record: LeaderRecord | None) -> None:
    if record is not None:
        lineage = record.lineage
        if not lineage.resumable:
            return
        newest = f"chk-{lineage.newest}" if lineage.newest is not None else lineage.base
    else:
        ids = storage.ids()
        if not ids:
            return
        newest = f"chk-{ids[-1]}"
    raise ConfigError(
        f"job {storage.job!r} has committed checkpoints under {storage.where} (the newest: "
        f"{newest}); a start without {named('restore')} would begin from empty state and "
        f"throw them away: pass {named('restore')} auto to resume from the newest, or "
        f"{named('fresh')} to start over"
    )


__all__ = ["StartPoint", "explicit", "lead", "resume_point", "start_point"]
