"""Progress of long commands on stderr: on a terminal, one line redrawn in place; anywhere else
(CI logs, pipes, files), a plain line every few seconds and never a carriage return.

``weir produce`` shows its rate (``rate_text``); ``weir backfill`` shows Spark's stages
(``SparkProgress``, polling ``SparkContext.statusTracker()`` from a thread).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TextIO

log = logging.getLogger(__name__)


class StatusLine:
    """One status line: on a terminal redrawn at most every ``redraw_s``, elsewhere written as a
    plain line at most every ``every_s`` (the first one at once)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        every_s: float = 5.0,
        redraw_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.tty = self.stream.isatty()
        self._interval = redraw_s if self.tty else every_s
        self._clock = clock
        self._last = -math.inf
        self._drawn = ""  # on a terminal: the text on the line now

    def show(self, text: str, *, now: bool = False) -> None:
        """Show ``text`` unless the last one was shown less than an interval ago (``now``: show
        it anyway)."""
        t = self._clock()
        if not now and t - self._last < self._interval:
            return
        self._last = t
        if self.tty:
            text = text[: _columns(self.stream) - 1]  # a wrapped line cannot be redrawn
            self.stream.write("\r" + text.ljust(len(self._drawn)))
            self._drawn = text
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, text: str | None = None) -> None:
        """Show the final ``text`` whatever the time; on a terminal, end the line."""
        if text is not None:
            self.show(text, now=True)
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = ""


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def rate_text(sent: int, seconds: float, target: str) -> str:
    """``weir produce``'s line: events so far, to where, and their mean rate."""
    rate = sent / seconds if seconds > 0 else 0.0
    return f"weir produce: {sent:,} events to {target}, {rate:,.0f} events/s ({elapsed(seconds)})"


def elapsed(seconds: float) -> str:
    """``4.2 s``, or ``12 min 05 s`` from a minute on."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


@dataclass(frozen=True)
class StageProgress:
    """One running Spark stage. ``records``: what its tasks read so far (input and shuffle
    records), when Spark reports it."""

    stage: int
    tasks: int
    done: int
    running: int
    records: int | None = None


def stages_text(running: Sequence[StageProgress], stages_done: int, seconds: float) -> str:
    """``weir backfill``'s line: the running stages' tasks and records, and the stages done."""
    if not running and not stages_done:
        return f"weir backfill: no stage running yet ({elapsed(seconds)})"
    tail = f"{stages_done} stage{'' if stages_done == 1 else 's'} done, {elapsed(seconds)}"
    if not running:
        return f"weir backfill: {tail}"
    ids = ", ".join(str(s.stage) for s in running)
    done, tasks = sum(s.done for s in running), sum(s.tasks for s in running)
    text = (
        f"weir backfill: stage{'s' if len(running) > 1 else ''} {ids}: {done}/{tasks} tasks "
        f"done, {sum(s.running for s in running)} running"
    )
    records = sum(s.records or 0 for s in running)
    if records:
        text += f", {records:,} records read"
    return f"{text} ({tail})"


class SparkProgress:
    """Shows the stages of a SparkContext's jobs on a ``StatusLine`` while the ``with`` block
    runs, polling ``statusTracker()`` every ``poll_s`` from a thread of its own."""

    def __init__(self, sc: Any, line: StatusLine, *, poll_s: float = 0.5) -> None:
        self._tracker = sc.statusTracker()
        # records read are not in the public tracker: Spark's status store has them, through
        # the JVM gateway (None where that private API is missing)
        self._store: Any = _status_store(sc)
        self._line = line
        self._poll_s = poll_s
        self._t0 = time.monotonic()
        # a context that ran jobs before this block (a notebook's, a test session's) is not
        # this block's work: its stages are left out of the count
        self._earlier = self._stage_ids()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def __enter__(self) -> SparkProgress:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        final = None
        if exc_type is None:
            try:
                final = self.text()
            except Exception as exc:  # as in _run: the backfill's result matters, not this
                log.debug("spark progress: no final line: %s", exc)
        self._line.close(final)

    def _stage_ids(self) -> set[int]:
        """Every stage of every job the context knows, running or not."""
        t = self._tracker
        stage_ids = set(t.getActiveStageIds())
        for job in t.getJobIdsForGroup():
            info = t.getJobInfo(job)
            if info is not None:
                stage_ids.update(info.stageIds)
        return stage_ids

    def snapshot(self) -> tuple[list[StageProgress], int]:
        """The running stages of every job started in the block so far, and how many stages
        finished."""
        t = self._tracker
        active = set(t.getActiveStageIds())
        stage_ids = self._stage_ids() - self._earlier
        running, done = [], 0
        for sid in sorted(stage_ids):
            stage = t.getStageInfo(sid)
            if stage is None:
                continue
            # every task done is a stage done, whether or not the tracker has been told yet:
            # its listener runs behind, and a job's last stage may still be active there when
            # the job has returned (the final line then named a finished stage as running)
            if stage.numTasks and stage.numCompletedTasks >= stage.numTasks:
                done += 1
            elif sid in active:
                running.append(
                    StageProgress(sid, stage.numTasks, stage.numCompletedTasks,
                                  stage.numActiveTasks, self._records(sid))
                )  # fmt: skip
        return running, done

    def text(self) -> str:
        running, done = self.snapshot()
        return stages_text(running, done, time.monotonic() - self._t0)

    def _records(self, stage: int) -> int | None:
        if self._store is None:
            return None
        try:
            data = self._store.lastStageAttempt(stage)
            return int(data.inputRecords()) + int(data.shuffleReadRecords())
        except Exception as exc:  # not in the store yet, or the private API changed
            log.debug("stage=%s records unavailable: %s", stage, exc)
            return None

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self._line.show(self.text())
            except Exception as exc:  # progress must never break the backfill
                log.debug("spark progress stopped: %s", exc)
                return


def _status_store(sc: Any) -> Any:
    try:
        return sc._jsc.sc().statusStore()
    except Exception:
        return None
