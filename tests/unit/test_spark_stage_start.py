"""``SparkWorkers._run_stage`` runs the barrier stage in a thread of its own and sets ``done``
with Spark's reason when the stage ends. Getting the context and setting its job group were
outside its ``try``: a py4j error there ended the thread with ``done`` unset and no reason, so
the job manager waited out its connect deadline and then named the wrong cause. A stand-in for
the session isolates the method (the cluster tier runs the real stage)."""

from __future__ import annotations

import threading

from weir.engine.runtime.control.spark_workers import SparkWorkers


class GoneSession:
    """A session whose JVM went away: every call into it fails, as py4j's do."""

    @property
    def sparkContext(self) -> object:  # noqa: N802 - PySpark's name
        raise ConnectionRefusedError(111, "Connection refused (py4j gateway)")


def test_a_stage_that_cannot_even_start_says_why_and_is_done() -> None:
    workers = SparkWorkers.__new__(SparkWorkers)
    workers._stage_error = None
    done = threading.Event()
    workers._run_stage(GoneSession(), b"", 2, "weir-j-1", done)
    assert done.is_set()
    assert workers._stage_error is not None and "Connection refused" in workers._stage_error
