"""The cyclic garbage collector, set for a worker's loop.

CPython's collector walks every tracked container of a generation when the generation's count
passes its threshold; a full pass walks them all. Its generations assume that most objects die
young, and a worker's state does not: an open window's accumulators live as long as the window
(seconds to hours), one list per key, and at a million keys nearly every event makes one. Each
survives a young pass, a middle pass and then every full pass until its window fires, and a
walk over millions of objects scattered in memory costs about a microsecond an object. With
CPython's default thresholds (700, 10, 10) a fifth to a quarter of the loop's CPU went to the
collector ("Benchmarks"); with a young generation of 50,000 but nothing else, still a tenth at
1M ids (``python -m benchmarks.hotpath peer --keys 1000000``), nearly all of it in passes that
found nothing: the loop makes no cyclic garbage of its own.

So, as CPython's documentation suggests for such a process (``gc.freeze``):

- ``tuned()``: one collection, then everything alive is frozen (left out of later passes; its
  reference counts still free it) and the young generation is ``YOUNG`` objects, not 700.
- ``settle(now)`` at each flush of the loop: everything alive then is frozen too, so a young
  pass walks only what was made since the last flush and no object is walked twice. Young
  passes still run: a user's function that makes cyclic garbage by the tens of thousands a
  flush has it collected there; less waits for the next full pass.
- A cycle that becomes garbage after it was frozen is collected by the next full pass: every
  ``FULL_EVERY_S`` ``settle`` unfreezes everything and collects it all, once. The pass is
  timed and the next one waits so that full passes take at most ``FULL_SHARE`` of the time.

Nothing is switched off. The settings are put back when the block ends (a Spark executor
reuses its Python worker, the bench runs a worker in-process).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger(__name__)

YOUNG = 50_000  # net new container objects between young collections
MIDDLE = 20  # young collections per middle one
OLD = 10  # middle collections before a full one is considered (CPython's default)
FULL_EVERY_S = 60.0  # a full pass at least this often, frozen objects included...
FULL_SHARE = 0.02  # ...unless that would take more than this share of the time


@dataclass
class _Schedule:
    every_s: float
    next_full: float
    full_passes: int = 0


_active: _Schedule | None = None


@contextmanager
def tuned(full_every_s: float | None = None) -> Iterator[None]:
    """The loop's settings for the block (``full_every_s``: ``FULL_EVERY_S`` by default)."""
    global _active
    every = FULL_EVERY_S if full_every_s is None else full_every_s
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
    _active = _Schedule(every, time.monotonic() + every)
    try:
        yield
    finally:
        _active = None
        gc.set_threshold(*before)
        gc.unfreeze()


def settle(now: float) -> float:
    """At a flush of the loop (``now``: ``time.monotonic()``): freeze what is alive, after a
    full pass over everything when one is due. Returns the seconds that pass took (0.0: none
    ran). Outside ``tuned`` it does nothing."""
    schedule = _active
    if schedule is None:
        return 0.0
    took = 0.0
    if now >= schedule.next_full:
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        took = time.perf_counter() - started
        schedule.full_passes += 1
        schedule.next_full = now + max(schedule.every_s, took / FULL_SHARE)
        log.debug("full collection: %d unreachable objects in %.3f s", found, took)
    gc.freeze()
    return took


def full_passes() -> int:
    """Full passes ``settle`` has run in the current ``tuned`` block."""
    return 0 if _active is None else _active.full_passes


__all__ = ["FULL_EVERY_S", "FULL_SHARE", "MIDDLE", "OLD", "YOUNG", "full_passes", "settle", "tuned"]
