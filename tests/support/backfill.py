"""``weir backfill`` run in the test process on the session's SparkSession: the command's own
code (argument parsing, ``app/backfill.py``, the savepoint or the live load, its exit code and its
lines on stderr) without a JVM of its own, which takes 10-20 s to start on this machine. The
few tests that need the command as a separate process (its progress line, signals, the compose
service, cluster mode) still run it with ``run_weir``."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import WeirResult


def backfill_in_process(spark: Any, cwd: Path, *args: str) -> WeirResult:
    """``weir backfill *args`` in this process, in ``cwd``, on ``spark`` (which it leaves
    running): stdout, stderr and the exit code as the command's. ``--master`` is the session's
    (given or not: the command borrows the active session only on its own master).

    Raises:
        AssertionError: ``args`` name another master than the session's.
    """
    from weir.app import cli

    master = spark.sparkContext.master
    argv = list(args)
    if "--master" in argv:
        given = argv[argv.index("--master") + 1]
        assert given == master, f"the session runs on {master}, not --master {given}"
    else:
        argv += ["--master", master]
    out, err = io.StringIO(), io.StringIO()
    with _as_a_command(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["backfill", *argv])
    return WeirResult(rc, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _as_a_command(cwd: Path) -> Iterator[None]:
    """What a fresh ``weir`` process would have: ``cwd``, no ``WEIR_*`` variable; and the
    test process's umask back afterwards (the command sets 077)."""
    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("WEIR_")]}
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        with contextlib.chdir(cwd):
            yield
    finally:
        os.umask(umask)
        os.environ.update(saved)
