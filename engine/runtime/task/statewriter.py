"""The one thread that writes a worker's frozen state generations to RocksDB.

The worker's loop freezes what its operators have not written (``operators/delta.py``: a copy
of the changed slots, no encoding) at each flush and at each checkpoint barrier, and hands the
generations here; this thread encodes and writes them, in the order they were handed over. A
checkpoint's generations come with what to do once they are written (take RocksDB's
checkpoint), so RocksDB's checkpoint holds everything before the barrier and nothing after it:
later generations wait in the queue behind it.

The loop writes to RocksDB itself (a purge, the end of input, a backfill's ingest) only while
this thread is ``idle``: nothing queued, nothing being written. It freezes a flush's generation
only then too, so at most two generations are frozen at once (one being written, and a
barrier's behind it) besides the live one. After a write it also waits for this thread to rest
(``rested``): RocksDB's write holds the GIL, so the writer's share of the loop's time is bounded
and, under load, a key changed many times between two flushes is written once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from weir.base.errors import StateError, WeirError, WorkerFailed
from weir.engine.runtime.heap import MMAP_THRESHOLD
from weir.engine.runtime.messages import OperatorMarks
from weir.engine.runtime.operators.delta import StateDelta
from weir.state.backend import StateBackend

log = logging.getLogger(__name__)

WRITE_CHUNK = 1024  # entries per RocksDB batch: the loop gets the GIL back between batches
# ... and bytes per batch of cells: a batch's buffer stays below the size the worker's malloc
# maps afresh (``heap.MMAP_THRESHOLD``: a buffer of a MiB or more is unmapped when freed), so
# the heap's pages are reused, where batches of 1,024 cells (~3 MB at 1M keys) faulted ~14k
# new pages a run in and cleared them (the cpu bench's SQL job: ~89k page faults, now ~77k)
WRITE_BYTES = MMAP_THRESHOLD // 4
# RocksDB's write holds the GIL, so a flush's write takes the loop's time: after a write of
# c CPU seconds the next flush waits REST * c, which keeps the writer to ~1/(1+REST) of it
REST = 3.0
# ... but never longer than this: what waits for the next flush is what a checkpoint barrier
# copies in its synchronous part, and what a query cannot see yet
MAX_REST_S = 0.1
Then = Callable[[WeirError | None], None]  # runs on this thread once a job's writes are done
Marks = dict[str, OperatorMarks]  # each operator's watermarks when a generation was frozen


class StateWriter:
    def __init__(self, index: int, state: StateBackend) -> None:
        self._index = index
        self._state = state
        self._jobs: deque[tuple[list[StateDelta], Then | None, Marks | None]] = deque()
        self._cv = threading.Condition()
        self._closing = False
        self.failure: WorkerFailed | None = None
        self._rested_at = 0.0  # monotonic time the next flush may be handed over from
        # each operator's watermarks as of what RocksDB holds: every change it made before that
        # watermark is written, so a live read (a secondary of this RocksDB) sees it
        self.written: Marks = {}
        self._thread = threading.Thread(
            target=self._run, name=f"weir-state-writer-{index}", daemon=True
        )
        self._thread.start()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being written: the loop may write RocksDB itself."""
        return not self._jobs

    def rested(self, now: float) -> bool:
        """Idle, and the rest after the last write is over: a flush may be handed over. Under
        load this coalesces more changes per flush (a key changed ten times is written once),
        so fresher state costs the loop at most a quarter of its time (while a write takes
        under ``MAX_REST_S / REST`` of CPU; past that the bound wins); a light load, whose
        writes are short, flushes at the flush interval."""
        return not self._jobs and now >= self._rested_at

    def submit(
        self, generations: list[StateDelta], then: Then | None = None, marks: Marks | None = None
    ) -> None:
        """Queues ``generations``; ``then`` runs once they are written, and ``written`` becomes
        ``marks`` (the operators' watermarks when they were frozen)."""
        with self._cv:
            self._jobs.append((generations, then, marks))
            self._cv.notify_all()

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Block until every generation handed over is written; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._jobs, timeout_s)

    def check(self) -> None:
        """A generation that could not be written fails the worker (its changes exist nowhere
        else; the job restarts from its last checkpoint)."""
        if self.failure is not None:
            raise self.failure

    def close(self, timeout_s: float | None = None) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._jobs or self._closing)
                if not self._jobs:
                    return
                generations, then, marks = self._jobs[0]
            try:
                self._handle(generations, then, marks)
            except Exception as exc:  # noqa: BLE001 - what ``then`` raised: fail, never hang
                log.error("worker=%d after a state write: %r", self._index, exc, exc_info=True)
                self.failure = self.failure or WorkerFailed(
                    self._index, f"after a state write: {type(exc).__name__}: {exc}"
                )
            finally:  # popped whatever happened: the loop waits on an empty queue
                with self._cv:
                    self._jobs.popleft()
                    self._cv.notify_all()

    def _handle(
        self, generations: list[StateDelta], then: Then | None, marks: Marks | None
    ) -> None:
        cpu0 = time.thread_time()
        error = self._write(generations)
        if error is None and marks is not None:
            self.written = marks
        rest = min(REST * (time.thread_time() - cpu0), MAX_REST_S)
        self._rested_at = time.monotonic() + rest
        if then is not None:
            then(error)

    def _write(self, generations: list[StateDelta]) -> WeirError | None:
        """Writes ``generations``; the error that failed the worker, if one did. Whatever the
        write raises fails it: a worker whose writer thread died would wait for it forever."""
        try:
            for generation in generations:
                generation.write(self._state, WRITE_CHUNK, WRITE_BYTES)
        except WeirError as exc:
            log.error("worker=%d state write failed: %s", self._index, exc)
            self.failure = WorkerFailed(self._index, f"state write failed: {exc}")
            return exc
        except Exception as exc:  # noqa: BLE001 - a bug or a library's own error, said with its stack
            log.error("worker=%d state write failed: %r", self._index, exc, exc_info=True)
            error = StateError(f"{type(exc).__name__}: {exc}")
            self.failure = WorkerFailed(self._index, f"state write failed: {error}")
            return error
        return None
