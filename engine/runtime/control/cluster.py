"""Checks before and while cluster mode submits a job's workers as one Spark barrier stage.

A barrier stage of N long-running tasks needs N task slots at once for the job's whole life
and must never have a second copy of a task running, so what would be a slow start or a
tuning choice for a batch job is an error here, and each is caught before the stage is
submitted, with the fix in the message:

- ``parse_master`` (``runtime.settings``): the forms a ``master`` takes (``spark://``, ``yarn``, …);
- ``check_reachable``: a standalone master that does not answer, within seconds rather than
  Spark's own minute of "All masters are unresponsive";
- ``check_conf``: dynamic allocation and speculation, which break the one-task-per-worker rule;
- ``wait_for_slots``: fewer slots than workers, rather than Spark retrying its own slot check
  for minutes (``cluster_session`` also makes that check give up in seconds).

Once the stage runs, ``is_barrier_failure`` and ``failure_summary`` read Spark's error: Spark
raises a plain ``SparkException`` for every aborted job, so its message is the only mark of a
failed barrier stage and of what failed in it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from weir.base.errors import ConfigError
from weir.base.extras import require
from weir.base.settings import read_env
from weir.engine.runtime.settings import SPARK_LOCAL_IP, parse_master, spark_addresses

__all__ = [
    "check_conf",
    "check_reachable",
    "cluster_session",
    "failure_summary",
    "is_barrier_failure",
    "parse_master",
    "wait_for_slots",
]

log = logging.getLogger(__name__)

# Spark checks a barrier stage's slots at submission and by default retries that check 40 times
# 15 s apart; wait_for_slots has already waited for the slots, so a failing check means they
# went away (an executor lost), and the job manager should hear it in seconds
_SLOT_CHECK_CONF = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "5",
}

_REFUSED = {
    "spark.dynamicAllocation.enabled": (
        "a barrier stage holds all its executors for the job's life, and dynamic allocation "
        "would release one that looks idle and so kill a worker"
    ),
    "spark.speculation": (
        "a speculative copy of a task would be a second live worker for the same key groups"
    ),
}


def check_reachable(master: str, timeout_s: float = 5.0) -> None:
    """Raise ``ConfigError`` unless a standalone master of ``master`` accepts a TCP connection
    within ``timeout_s`` in all. With several (standby) masters, one answering is enough: Spark
    registers with whichever leads. ``k8s://`` and ``yarn`` are left to Spark, which reaches
    them through their own client configuration."""
    if not master.startswith("spark://"):
        return
    deadline = time.monotonic() + timeout_s
    problems = []
    for host, port in spark_addresses(master, master):
        left = max(0.1, deadline - time.monotonic())
        try:
            with socket.create_connection((host, port), timeout=left):
                return
        except TimeoutError:
            problems.append(f"{host}:{port} gave no answer in {timeout_s:g} s")
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            problems.append(f"{host}:{port} {reason}" if "," in master else reason)
    raise ConfigError(
        f"cannot reach the Spark master at {master}: {'; '.join(problems)}; start it or fix "
        "`master`"
    )


def check_conf(conf: Mapping[str, str]) -> None:
    """Refuse Spark settings under which a barrier stage's workers cannot be trusted to stay one
    per key-group range: dynamic allocation and speculation."""
    for key, reason in _REFUSED.items():
        value = conf.get(key, "false")
        if str(value).strip().lower() == "true":
            raise ConfigError(
                f"{key}={value}: {reason}; set {key}=false for this application (`spark_conf` "
                "or spark-defaults.conf)"
            )


def cluster_session(
    master: str,
    app: str,
    conf: Mapping[str, str],
    driver_host: str | None = None,
) -> Any:
    """A SparkSession on the cluster at ``master`` for cluster mode, after ``parse_master``,
    ``check_conf`` and ``check_reachable``. ``conf`` (the user's extra settings) is applied last;
    the session's effective settings (spark-defaults.conf included) are checked again.
    ``driver_host``: the address executors reach the driver at (default ``SPARK_LOCAL_IP``,
    else 127.0.0.1)."""
    master = parse_master(master)
    check_conf(conf)
    require("spark", f"`master` {master} (the workers on a Spark cluster)")
    from pyspark.sql import SparkSession

    check_reachable(master)
    host = driver_host or read_env(SPARK_LOCAL_IP) or "127.0.0.1"
    # the executors run the tasks with the driver's interpreter path: weir's worker code and
    # the job's imports must be installed at the same path on every cluster host
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from weir.engine.runtime.control.sparkauth import split_secrets, start_context, unprotected
    from weir.engine.runtime.control.sparkstart import get_or_create

    # secrets (spark.authenticate.secret, …password) never reach spark-submit's command line
    plain, secret = split_secrets(conf)
    settings = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.driver.host": host,
        "spark.driver.bindAddress": host,
        "spark.ui.enabled": "false",
        # a barrier stage's progress bar never moves: the tasks run until the job stops
        "spark.ui.showConsoleProgress": "false",
        **_SLOT_CHECK_CONF,
        **plain,
    }
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    if secret:
        get_or_create(_Started(lambda: start_context(settings, secret)))
    session = get_or_create(builder)
    effective = dict(session.sparkContext.getConf().getAll())
    try:
        check_conf(effective)
    except ConfigError:
        session.stop()
        raise
    if (exposed := unprotected(effective)) is not None:
        log.warning(
            "master=%s: %s; set both to true on the cluster and for weir (README, cluster mode)",
            master,
            exposed,
        )
    log.info("spark session master=%s app=%s driver_host=%s", master, app, host)
    return session


class _Started:
    """``sparkstart.get_or_create``'s builder for a context ``start`` makes (its ``stop`` stops
    it, as a session's would, on a Ctrl-C meanwhile)."""

    def __init__(self, start: Any) -> None:
        self._start = start

    def getOrCreate(self) -> Any:  # noqa: N802 - the builder's name
        return self._start()


def task_slots(spark: Any) -> int:
    """How many tasks the application's executors can run at once now (Spark's own count for
    its barrier check: each executor's cores over ``spark.task.cpus``, and other resources)."""
    sc = spark.sparkContext._jsc.sc()
    profile = sc.resourceProfileManager().defaultResourceProfile()
    return int(sc.maxNumConcurrentTasks(profile))


def wait_for_slots(spark: Any, n: int, timeout_s: float = 30.0, *, barrier: bool = True) -> int:
    """Wait until the application's executors offer at least ``n`` task slots at once and
    return how many they offer; ``ConfigError`` after ``timeout_s`` with fewer. A barrier stage
    needs all ``n`` at once; other work (a backfill) needs ``n`` to start at all."""
    deadline = time.monotonic() + timeout_s
    while (slots := task_slots(spark)) < n and time.monotonic() < deadline:
        time.sleep(0.25)
    if slots >= n:
        return slots
    master = spark.sparkContext.master
    offers = f"{slots} task slot{'' if slots == 1 else 's'}"
    if not barrier:
        raise ConfigError(
            f"the cluster at {master} offers {offers} after {timeout_s:g} s (other applications "
            f"hold its cores, or it has none): free cores or add workers, or run on this host "
            "with `master` 'local[*]'"
        )
    lower = f", or lower `parallelism` to {slots}" if slots > 0 else ""
    raise ConfigError(
        f"the cluster at {master} offers {offers} after {timeout_s:g} s; a barrier stage needs "
        f"all {n} at once: add workers or cores{lower}"
    )


_BARRIER_FAILED = "Could not recover from a failed barrier"
_SLOTS_SHORT = "BarrierJobSlotsNumberCheckFailed"
_TASK = re.compile(r"barrier task ResultTask\((\d+), (\d+)\)")
_EXECUTOR_LOST = re.compile(r"ExecutorLostFailure \(executor (\S+)[^)]*\) Reason: ([^\n]*)")
_PYTHON_CRASH = re.compile(r"(Python worker exited unexpectedly[^.\n]*)")
_PYTHON_ERROR = re.compile(r"PythonException: .*?Traceback \(most recent call last\):\n(.*)", re.S)


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a Py4J error whose JVM is gone cannot render itself
        return repr(exc)


def is_barrier_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (a Py4JJavaError from a barrier stage's action) says the stage failed
    because one of its tasks did: the job manager restarts every worker from the checkpoint."""
    return _BARRIER_FAILED in _text(exc)


def failure_summary(exc: BaseException) -> str:
    """One line saying why a barrier stage ended (which task, and what happened to it), without
    the Java stack."""
    text = _text(exc)
    if _SLOTS_SHORT in text:
        return "the cluster offered fewer task slots than the barrier stage has tasks"
    if _BARRIER_FAILED not in text:
        first = next((line for line in text.splitlines() if line.strip(": ")), text)
        return first.strip(": ")[:300]
    task = _TASK.search(text)
    # a barrier stage's partition i is worker i
    who = f"barrier task {task.group(2)}" if task else "a barrier task"
    return f"{who} failed: {_cause(text)}"


def _cause(text: str) -> str:
    if lost := _EXECUTOR_LOST.search(text):
        return f"executor {lost.group(1)} lost ({lost.group(2).strip()})"
    if crash := _PYTHON_CRASH.search(text):
        return crash.group(1).strip()
    if error := _PYTHON_ERROR.search(text):
        return _last_traceback_line(error.group(1))
    return "see the Spark driver log"


def _last_traceback_line(traceback: str) -> str:
    last = "a Python exception"
    for line in traceback.splitlines():
        if line.startswith(("\tat ", " SQLSTATE")):
            break
        if line and not line[0].isspace():
            last = line
    return last
