"""What a ``weir`` process spends before its work starts, kept small (issue 38: the CPU of the
whole process tree counts against a job's events per CPU-second).

- ``one_blas_thread``: numpy's OpenBLAS starts a thread per core when numpy is imported, and
  that thread spins for a while whether or not anything calls BLAS (weir never does: its
  kernels are its own). One worker is already one core's worth of work, so each process keeps
  one BLAS thread, as Spark does for its Python workers; a user's own
  ``OPENBLAS_NUM_THREADS`` wins.
- ``exit_now``: the interpreter's teardown frees every module and object one at a time before
  the process ends (~60 ms of CPU after ``weir run`` loaded a SQL job), all for memory the
  OS takes back at once; the ``weir`` command ends without it, once it has done what the
  teardown does that matters (threads joined, ``atexit`` handlers run, output flushed).
- ``collector_paused``: start-up creates ~90,000 objects that live as long as the process
  (modules, classes, a SQL job's plan) and almost no garbage; the cyclic collector's passes
  over them while they are made free nothing. The pause ends where the zygote is forked, after
  ``gc.freeze()`` (``control.zygote.start``): the collector then leaves the start-up's objects
  alone in the supervisor and in every worker, whose pages stay shared (the recipe of the
  ``gc.freeze`` documentation).

Example:
    >>> with collector_paused():
    ...     import weir.app.supervise
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

__all__ = ["BLAS_THREADS_ENV", "collector_paused", "exit_now", "one_blas_thread"]

BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> None:
    """One OpenBLAS thread in this process and the processes it starts, unless the user's
    environment says otherwise; effective only before numpy is first imported."""
    os.environ.setdefault(BLAS_THREADS_ENV, "1")


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, then as it was before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` as the interpreter's exit would, but without its teardown:
    every thread that is not a daemon joined, the ``atexit`` handlers run (logging's flush,
    temporary files), standard output and error flushed; then ``os._exit``. For a command's
    last step only: nothing may run after it."""
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more to say
            pass
    os._exit(code)
