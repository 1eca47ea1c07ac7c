"""Where a job's workers run: local processes, or the tasks of one Spark barrier stage on the
cluster ``--master`` names (cluster mode; ``cluster.py`` checks the master and its slots)."""

from __future__ import annotations

from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.control.workers import WorkerGroup, WorkerProcesses


def worker_group(cfg: RunConfig) -> WorkerGroup:
    """The job's workers: a barrier stage on the Spark cluster ``cfg.master``, else local
    processes.

    Args:
        cfg: the run's configuration; ``cfg.master`` set means cluster mode.

    Returns:
        A group that has not started yet (``spawn`` starts an attempt).
    """
    if cfg.master is None:
        return WorkerProcesses()
    from weir.engine.runtime.control.spark_workers import SparkWorkers  # pyspark: only then

    return SparkWorkers(cfg)
