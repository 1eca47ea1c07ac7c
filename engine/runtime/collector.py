"""The cyclic garbage collector, set for a worker's loop.

CPython's collector walks every tracked container of a generation when the generation's count
passes its threshold; a full pass walks them all. A worker holds tens of thousands of objects
that never become garbage (modules, functions, classes, the job, restored state) and makes
thousands more a batch, nearly all freed by their reference counts, not by the collector. With
the default thresholds (700, 10, 10) the passes repeat over the long-lived ones: on the bench's
one-worker jobs a fifth to a quarter of the loop's CPU went to the collector ("Benchmarks").

``tuned()`` does what CPython's documentation suggests for such a process: one collection,
then ``gc.freeze()`` (everything alive when the loop starts is left out of later passes; its
reference counts still free it) and a young generation of ``YOUNG`` objects instead of 700.
Nothing is switched off: cycles are still collected, later, and a full pass still happens
when the long-lived generation has grown by a quarter. The settings are put back when the
block ends (a Spark executor reuses its Python worker, the bench runs a worker in-process).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG = 50_000  # net new container objects between young collections
MIDDLE = 20  # young collections per middle one
OLD = 10  # middle collections before a full one is considered (CPython's default)


@contextmanager
def tuned() -> Iterator[None]:
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


__all__ = ["MIDDLE", "OLD", "YOUNG", "tuned"]
