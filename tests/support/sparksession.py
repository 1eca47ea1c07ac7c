"""The test process's one local SparkSession: started on first use, shared by every test that
asks (one JVM instead of one per test or module), and started again when a test left it
unusable. A test stopped by its timeout in the middle of a call into the JVM leaves Py4J's
connection mid-answer, and every later call on it fails ("... does not exist in the JVM"):
without a fresh session, one slow test would fail every Spark test after it."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class SharedSpark:
    """``get()`` returns a working session on ``master``; ``stop()`` ends it."""

    def __init__(self, master: str = "local[2]") -> None:
        self.master = master
        self.starts = 0
        self._session: Any = None

    def get(self) -> Any:
        if self._session is not None and not _answers(self._session):
            log.warning("the shared SparkSession stopped answering; starting a new one")
            _discard()
            self._session = None
        if self._session is None:
            from weir.engine.spark.backfill import spark_session

            self._session = spark_session(self.master)
            self._session.sparkContext.setLogLevel("ERROR")
            self.starts += 1
        return self._session

    def stop(self) -> None:
        if self._session is None:
            return
        try:
            self._session.stop()
        except Exception:  # noqa: BLE001 - a broken gateway: end its JVM by hand
            _discard()
        self._session = None


def _answers(session: Any) -> bool:
    """One round trip through Py4J, and the context is not stopped."""
    try:
        return not session.sparkContext._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - any failure means the session cannot be used
        return False


def _discard() -> None:
    """End the JVM behind a broken session and forget it, as a fresh process would have: the
    next ``getOrCreate`` launches a new gateway."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        if gateway is not None:
            gateway.shutdown()
    except Exception as exc:  # noqa: BLE001 - it is broken; the process is killed below
        log.debug("gateway shutdown: %s", exc)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
