"""Barrier stages on the session's real Spark standalone cluster (a master and two one-core
workers on loopback): the slots check, where the tasks run, and how a killed task or executor
ends the stage. The tasks are closures, so cloudpickle ships them by value and the executors
need not import this module."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.support.spark_cluster import SparkCluster
from weir.base.errors import ConfigError
from weir.engine.runtime.control.cluster import (
    cluster_session,
    failure_summary,
    is_barrier_failure,
    wait_for_slots,
)

# long enough to outlive every check below, short enough that a task Spark failed to stop
# ends on its own
TASK_LIFE_S = 90


@pytest.fixture(scope="module")
def session(spark_cluster: SparkCluster) -> Iterator[Any]:
    spark = cluster_session(
        spark_cluster.master_url, "weir-cluster-test", {"spark.executor.memory": "512m"}
    )
    spark.sparkContext.setLogLevel("OFF")
    assert wait_for_slots(spark, 2, timeout_s=60) == 2
    yield spark
    spark.stop()


def _recording_task(out: Path, sleep_s: float) -> Callable[[Iterator[int]], Iterator[Any]]:
    """A barrier task that writes its pid and cwd to ``out/<partition>``, exchanges pids with
    the others, and lives ``sleep_s`` (ended early by a file ``out/stop``)."""

    def task(_: Iterator[int]) -> Iterator[Any]:
        import os as os_
        import time as time_
        from pathlib import Path as Path_

        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        me = ctx.partitionId()
        (Path_(out) / f"{me}.tmp").write_text(f"{os_.getpid()} {os_.getcwd()}")
        (Path_(out) / f"{me}.tmp").rename(Path_(out) / str(me))
        peers = ctx.allGather(str(os_.getpid()))
        deadline = time_.monotonic() + sleep_s
        while time_.monotonic() < deadline and not (Path_(out) / "stop").exists():
            time_.sleep(0.05)
        yield me, os_.getpid(), peers

    return task


def _started(out: Path, n: int) -> dict[int, tuple[int, str]]:
    def read() -> dict[int, tuple[int, str]] | None:
        found = {}
        for i in range(n):
            path = out / str(i)
            if not path.exists():
                return None
            pid, cwd = path.read_text().split(" ", 1)
            found[i] = (int(pid), cwd)
        return found

    return wait_until(read, timeout=60, what=f"{n} barrier tasks to start")


class _Stage:
    """Runs a barrier stage's collect() in a thread, so a test can act while it runs."""

    def __init__(self, spark: Any, n: int, task: Callable[..., Any]) -> None:
        self.result: list[Any] | None = None
        self.error: BaseException | None = None
        self.ended_at: float | None = None
        rdd = spark.sparkContext.parallelize(range(n), n).barrier().mapPartitions(task)
        self.thread = threading.Thread(target=self._run, args=(rdd,), daemon=True)
        self.thread.start()

    def _run(self, rdd: Any) -> None:
        try:
            self.result = rdd.collect()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            self.error = exc
        self.ended_at = time.monotonic()

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the barrier stage still runs after {timeout_s} s"


def test_a_barrier_stage_runs_its_tasks_in_two_executors(
    spark_cluster: SparkCluster, session: Any, tmp_path: Path
) -> None:
    stage = _Stage(session, 2, _recording_task(tmp_path, TASK_LIFE_S))
    started = _started(tmp_path, 2)
    app = session.sparkContext.applicationId
    executors = spark_cluster.executor_pids(app)
    assert {e.worker for e in executors} == {0, 1}
    assert [a.cores for a in spark_cluster.applications() if a.id == app] == [2]
    pythons = spark_cluster.python_worker_pids()
    (tmp_path / "stop").write_text("")
    stage.join(30)
    assert stage.error is None, stage.error
    assert stage.result is not None
    pids = {me: pid for me, pid, _ in stage.result}
    assert pids == {i: started[i][0] for i in range(2)}
    assert pids[0] != pids[1] and set(pids.values()) <= set(pythons)
    # each task ran in its own executor's directory: <worker work dir>/<app id>/<executor id>
    cwds = {Path(cwd) for _, cwd in started.values()}
    roots = {d.resolve() / app for d in spark_cluster.work_dirs}
    assert len(cwds) == 2 and {cwd.parent for cwd in cwds} == roots
    # allGather handed every task the same list: both pids, in partition order
    assert all(peers == [str(pids[0]), str(pids[1])] for _, _, peers in stage.result)


def test_asking_for_more_slots_than_the_cluster_has_fails_in_time(session: Any) -> None:
    master = session.sparkContext.master
    t0 = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=rf"the cluster at {master} offers 2 task slots after 3 s; a barrier stage needs "
        r"all 3 at once: add workers or cores, or lower `parallelism` to 2",
    ):
        wait_for_slots(session, 3, timeout_s=3)
    assert time.monotonic() - t0 < 6


def test_a_backfill_on_a_cluster_without_a_free_core_fails_in_time(session: Any) -> None:
    # a backfill needs one slot to start; Spark alone would wait for cores forever
    master = session.sparkContext.master
    with pytest.raises(
        ConfigError,
        match=rf"the cluster at {master} offers 2 task slots after 1 s \(other applications "
        r"hold its cores, or it has none\): free cores or add workers, or run on this host "
        r"with `master` 'local\[\*\]'",
    ):
        wait_for_slots(session, 3, timeout_s=1, barrier=False)


def test_spark_own_slot_check_gives_up_in_seconds(session: Any) -> None:
    # the stage goes to Spark without wait_for_slots: its own check must not retry for minutes
    t0 = time.monotonic()
    stage = _Stage(session, 3, lambda it: it)
    stage.join(30)
    assert stage.error is not None and not is_barrier_failure(stage.error)
    assert failure_summary(stage.error) == (
        "the cluster offered fewer task slots than the barrier stage has tasks"
    )
    assert time.monotonic() - t0 < 20


def test_killing_a_task_python_worker_aborts_the_stage(session: Any, tmp_path: Path) -> None:
    stage = _Stage(session, 2, _recording_task(tmp_path, TASK_LIFE_S))
    started = _started(tmp_path, 2)
    killed_at = time.monotonic()
    os.kill(started[0][0], 9)
    stage.join(15)
    assert stage.ended_at is not None and stage.ended_at - killed_at < 10
    assert stage.error is not None and is_barrier_failure(stage.error)
    assert failure_summary(stage.error) == (
        "barrier task 0 failed: Python worker exited unexpectedly (crashed)"
    )


def test_an_exception_in_a_task_is_summarized_without_the_stack(session: Any) -> None:
    def task(it: Iterator[int]) -> Iterator[int]:
        from pyspark import BarrierTaskContext

        if BarrierTaskContext.get().partitionId() == 1:
            raise ValueError("no such key group: 4097")
        yield from it

    stage = _Stage(session, 2, task)
    stage.join(30)
    assert stage.error is not None and is_barrier_failure(stage.error)
    assert failure_summary(stage.error) == (
        "barrier task 1 failed: ValueError: no such key group: 4097"
    )


def test_losing_an_executor_aborts_the_stage_and_its_slot_comes_back(
    spark_cluster: SparkCluster, session: Any, tmp_path: Path
) -> None:
    stage = _Stage(session, 2, _recording_task(tmp_path, TASK_LIFE_S))
    started = _started(tmp_path, 2)
    app = session.sparkContext.applicationId
    worker_1 = spark_cluster.work_dirs[1].resolve()
    [on_1] = [i for i, (_, cwd) in started.items() if Path(cwd).is_relative_to(worker_1)]
    lost = [e for e in spark_cluster.executor_pids(app) if e.worker == 1]
    killed = spark_cluster.kill_executor(1)
    assert lost and {e.pid for e in lost} | {started[on_1][0]} <= set(killed)
    stage.join(15)
    assert stage.error is not None and is_barrier_failure(stage.error)
    summary = failure_summary(stage.error)
    assert summary.startswith(f"barrier task {on_1} failed: executor {lost[0].executor_id} lost (")
    # the worker launches a new executor, so a restarted stage finds its two slots again
    assert wait_for_slots(session, 2, timeout_s=60) == 2
    assert {e.executor_id for e in spark_cluster.executor_pids(app)}.isdisjoint(
        {e.executor_id for e in lost}
    )
