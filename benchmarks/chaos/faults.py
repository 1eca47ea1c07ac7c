"""The faults the chaos driver injects, one at a time, and how long the job takes to recover
from each (``recovery_s``: from the kill, or from the end of an outage, until the job commits a
checkpoint again past the one it had, or for ``weir api`` until it answers again).

- ``worker``: kill -9 of a worker; its job manager restarts the workers from the latest
  checkpoint.
- ``jobmanager``: kill -9 of ``weir run``; its supervisor loop starts it again with
  ``--restore auto`` (a new epoch of the lease).
- ``api``: kill -9 of ``weir api``; its supervisor starts it again on the same port.
- ``standby``: a second ``weir run`` of the job against the same storage with a state directory
  of its own: it must wait as a standby, commit nothing (the lease's epoch does not move), and
  stop on SIGTERM.
- ``s3``: the SeaweedFS process stopped for some seconds, then started again.
- ``kafka``: the broker paused (SIGSTOP) for some seconds, then continued.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.chaos.parts import Broker, Supervised
from tests.support import WEIR, wait_until
from tests.support.procs import worker_pids
from tests.support.s3_server import S3Server
from tests.support.spark_cluster import SparkCluster
from weir.base.errors import StorageError
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import LeaseStore

KINDS = ("worker", "jobmanager", "api", "standby", "s3", "kafka")
RECOVERY_TIMEOUT_S = 120.0
# a new driver's Spark application and its executors took ~100 s on the loaded test machine
CLUSTER_RECOVERY_TIMEOUT_S = 300.0


@dataclass
class Rig:
    """What the faults act on and look at."""

    work: Path
    job_file: Path
    storage: CheckpointStorage
    jobmanager: Supervised
    api: Supervised
    api_url: str
    s3: S3Server
    broker: Broker
    env: dict[str, str]
    jm_flags: tuple[str, ...]
    state: Path
    outage_s: float
    rng: random.Random
    spark: SparkCluster | None = None  # the job runs on this cluster
    started: float = field(default_factory=time.monotonic)

    @property
    def patience_s(self) -> float:
        """How long a recovery may take before the fault counts as not recovered from."""
        return RECOVERY_TIMEOUT_S if self.spark is None else CLUSTER_RECOVERY_TIMEOUT_S

    def lease(self) -> tuple[int, int | None] | None:
        """The lease's epoch and newest committed checkpoint (None: storage did not answer)."""
        try:
            found = LeaseStore(self.storage).read()
        except StorageError:
            return None
        if found is None:
            return (0, None)
        return found[0].epoch, found[0].lineage.newest

    def status(self) -> dict[str, Any]:
        """The job manager's published status ({} while there is none)."""
        try:
            body: dict[str, Any] = orjson.loads(
                (self.state / "chaos" / "jobmanager.json").read_bytes()
            )
        except (OSError, orjson.JSONDecodeError):
            return {}
        return body

    def records_in(self) -> int:
        return sum(w.get("records_in", 0) for w in self.status().get("workers", []))

    def committed_past(self, before: int | None, epoch_above: int = -1) -> Callable[[], bool]:
        def past() -> bool:
            now = self.lease()
            if now is None:
                return False
            epoch, newest = now
            return epoch > epoch_above and newest is not None and newest > (before or 0)

        return past


def _recover(rig: Rig, until: Callable[[], bool], what: str) -> float:
    t0 = time.monotonic()
    wait_until(until, rig.patience_s, what=what, interval=0.1)
    return round(time.monotonic() - t0, 2)


def _settled(rig: Rig) -> tuple[int, int | None]:
    """The lease as it is, once storage answers."""
    found: list[tuple[int, int | None]] = []

    def read() -> bool:
        now = rig.lease()
        if now is not None:
            found.append(now)
        return now is not None

    wait_until(read, rig.patience_s, what="the lease to be readable")
    return found[-1]


def kill_worker(rig: Rig) -> dict[str, Any]:
    _, before = _settled(rig)
    jm = wait_until(rig.jobmanager.pid, 60.0, what="a running job manager")
    restarts = rig.status().get("restarts", 0)
    if rig.spark is not None:  # an executor (its JVM and Python worker) on a random worker
        assert rig.spark.kill_executor(rig.rng.randrange(rig.spark.workers)), "no executor"
    else:
        pids = wait_until(lambda: worker_pids(jm), 30.0, what="its workers")
        os.kill(rig.rng.choice(pids), signal.SIGKILL)
    t0 = time.monotonic()
    # restarted (a checkpoint in flight may still complete before the job manager notices)
    wait_until(lambda: rig.status().get("restarts", 0) > restarts, rig.patience_s,
               what="the job manager to restart its workers")  # fmt: skip
    _, at_restart = _settled(rig)
    _recover(rig, rig.committed_past(max(before or 0, at_restart or 0)), "a checkpoint after it")
    return {"recovery_s": round(time.monotonic() - t0, 2)}


def kill_jobmanager(rig: Rig) -> dict[str, Any]:
    epoch, before = _settled(rig)
    jm = wait_until(rig.jobmanager.pid, 60.0, what="a running job manager")
    # the driver with its JVM (its process group); a local job manager alone (its workers
    # see it gone and exit)
    if rig.spark is not None:
        os.killpg(jm, signal.SIGKILL)
    else:
        os.kill(jm, signal.SIGKILL)
    took = _recover(rig, rig.committed_past(before, epoch), "a checkpoint of a new epoch")
    return {"recovery_s": took, "epoch": epoch + 1}


def kill_api(rig: Rig) -> dict[str, Any]:
    pid = wait_until(rig.api.pid, 60.0, what="a running weir api")
    os.kill(pid, signal.SIGKILL)

    def answers() -> bool:
        try:
            r = httpx.get(f"{rig.api_url}/jobs/chaos", timeout=2.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200 and rig.api.pid() not in (None, pid)

    return {"recovery_s": _recover(rig, answers, "weir api to answer again")}


def second_jobmanager(rig: Rig) -> dict[str, Any]:
    """A standby must never commit: the lease's epoch stays, and it stops on SIGTERM."""
    epoch, _ = _settled(rig)
    state = rig.work / f"standby-{time.monotonic_ns()}"
    log = state.with_suffix(".log")
    argv = [*WEIR, "run", str(rig.job_file), "--state-dir", str(state), *rig.jm_flags]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, env=rig.env,
                                cwd=rig.work, start_new_session=True)  # fmt: skip
    try:
        wait_until(lambda: "standby: the lease" in log.read_text(errors="replace"), 60.0,
                   what="the second job manager to wait as a standby")  # fmt: skip
        time.sleep(rig.outage_s)  # a fault's duration, not a condition
        assert proc.poll() is None, log.read_text(errors="replace")
        now = _settled(rig)[0]
        assert now == epoch, f"the lease's epoch moved from {epoch} to {now} under a standby"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert _settled(rig)[0] == epoch
    return {"recovery_s": 0.0, "standby_exit": proc.returncode, "epoch": epoch}


def s3_outage(rig: Rig) -> dict[str, Any]:
    _, before = _settled(rig)
    rig.s3.stop()
    time.sleep(rig.outage_s)  # the outage's length, not a wait for a condition
    rig.s3.start()
    took = _recover(rig, rig.committed_past(before), "a checkpoint after S3 is back")
    return {"recovery_s": took, "down_s": rig.outage_s}


def kafka_pause(rig: Rig) -> dict[str, Any]:
    _, before = _settled(rig)
    rig.broker.pause()
    try:
        time.sleep(rig.outage_s)  # the pause's length
    finally:
        rig.broker.resume()
    # checkpoints go on while the source waits: recovered once records flow in again
    seen = rig.records_in()
    t0 = time.monotonic()
    wait_until(lambda: rig.records_in() > seen, rig.patience_s, interval=0.1,
               what="records to flow in after the broker continued")  # fmt: skip
    _recover(rig, rig.committed_past(before), "a checkpoint after the broker continued")
    return {"recovery_s": round(time.monotonic() - t0, 2), "paused_s": rig.outage_s}


FAULTS: dict[str, Callable[[Rig], dict[str, Any]]] = {
    "worker": kill_worker,
    "jobmanager": kill_jobmanager,
    "api": kill_api,
    "standby": second_jobmanager,
    "s3": s3_outage,
    "kafka": kafka_pause,
}


def schedule(kinds: list[str], seconds: float, rng: random.Random) -> list[tuple[float, str]]:
    """When each fault starts (seconds after the job started): seeded, spread over the run
    with a random offset in each slot, in a random order."""
    order = list(kinds)
    rng.shuffle(order)
    slot = seconds / (len(order) + 1)
    return [(slot * (i + 0.5) + rng.uniform(0, slot / 2), k) for i, k in enumerate(order)]
