"""A worker: reads its source splits, runs the chain, exchanges keyed records with the other
workers, and runs the keyed operators of its key-group range on its own RocksDB.

One loop, one thread: drain the inputs from other workers, read a source batch unless the
outputs are backed up or a barrier is being aligned, ship output buffers that are full or older
than the buffer timeout, flush state, report status (every ``status_interval_ms``). Its parts:
the source side (``sources``), routing (``routing``, ``exchange``), the keyed side (``keyed``),
barrier alignment (``barriers``) and snapshots (``snapshot``). When every input has ended, the
final watermark has fired every window; the worker flushes, reports ``Finished`` once its file
outputs are written, and keeps its state open for queries until stopped.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from functools import partial
from typing import Any

from weir.base.errors import WorkerFailed
from weir.base.procmem import rss_bytes
from weir.engine.job import Job
from weir.engine.runtime import gctuning
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.messages import (
    BackfillStep,
    CheckpointAborted,
    CheckpointCompleted,
    ExchangeListening,
    ExchangePeers,
    Finished,
    ManagerLink,
    StateServing,
    StatusReport,
    Stop,
    TriggerCheckpoint,
    WorkerStatus,
)
from weir.engine.runtime.operators.delta import StateDelta
from weir.engine.runtime.operators.factory import runtimes_for
from weir.engine.runtime.outputs import (
    DeadLetters,
    LateRecords,
    OutputGate,
    dead_letter_sink,
    side_sink,
    tagged_sinks,
)
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.task.acceptor import Stopped
from weir.engine.runtime.task.barriers import BarrierAligner
from weir.engine.runtime.task.colchain import chain_for
from weir.engine.runtime.task.exchange import Exchange
from weir.engine.runtime.task.framing import unpack_ints
from weir.engine.runtime.task.graph import SplitId, graph_of, split_ids
from weir.engine.runtime.task.ingest import backfill_step
from weir.engine.runtime.task.keyed import KeyedSide
from weir.engine.runtime.task.restore import (
    mark_format,
    restore_db,
    restore_operators,
    restore_positions,
)
from weir.engine.runtime.task.routing import ENDED, Barrier, Router, decode_frame, rows_of
from weir.engine.runtime.task.snapshot import Snapshotter
from weir.engine.runtime.task.sources import SplitStart, source_sides
from weir.engine.runtime.task.stateserver import StateServer
from weir.engine.watermarks import MAX_WATERMARK
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import range_for_operator
from weir.state.rocksdb import RocksState

log = logging.getLogger(__name__)

FLUSH_BACKOFF = 3.0  # a state flush may take at most ~1/(1+3) of the time
TICK_S = 0.01  # how often processing-time windows check the clock
HOSTNAME = socket.gethostname()


class ManagerGone(Exception):
    """The pipe to the job manager closed without a ``Stop``: the job manager is gone (killed,
    or it lost its lease). Not a ``WeirError``: the worker has nobody to tell, and exits."""


class Worker:
    def __init__(
        self,
        cfg: RunConfig,
        index: int,
        link: ManagerLink,
        job: Job,
        terminated: threading.Event | None = None,
        auth: PeerAuth | None = None,
        facts: RunFacts | None = None,
    ) -> None:
        self.cfg, self.index, self.link, self.job = cfg, index, link, job
        self.facts = facts = facts or RunFacts()
        self._terminated = terminated or threading.Event()
        p = cfg.parallelism
        graph = graph_of(job)
        self.range = range_for_operator(job.max_parallelism, p, index)
        storage = CheckpointStorage(cfg.checkpoints_root, job.name)
        restored: dict[str, Any] | None = None
        confirmed: dict[str, FileRef] = {}
        if facts.restore_from is not None:
            restored, confirmed = restore_db(
                cfg, facts.restore_from, job.name, job.max_parallelism, index, self.range, storage,
                broadcast=bool(graph.broadcast),
            )  # fmt: skip
        self.state = RocksState(cfg.worker_state_path(job.name, index))
        self.outputs = OutputGate()  # file outputs: exactly-once through the checkpoints
        self.dead = DeadLetters(dead_letter_sink(cfg, job), self.outputs)
        self.late = LateRecords(
            side_sink(cfg, job.name, cfg.late_sink_url, "late.jsonl"), self.outputs
        )
        args = (self.state, self.range, job.max_parallelism, self.late, self.dead)
        ops, feeds = runtimes_for(graph.keyby, *args, cfg.state_retention_ms)
        every = split_ids(job, p)
        tagged = tagged_sinks(cfg, job)
        self.keyed = KeyedSide(ops, feeds, graph.inputs, p, every, self.outputs.open, tagged)
        self.stream_sinks = {id(n): self.outputs.open(n.sink) for n in graph.sinks}
        chain = partial(
            chain_for, sink_writers=self.stream_sinks, dead=self.dead,
            max_future_ms=cfg.max_future_ms, keyby_index=graph.keyby_index,
            columnar=graph.column_nodes(),
        )  # fmt: skip
        self.sources = source_sides(job, every[index::p], chain, cfg.idle_timeout_ms)
        self.exchange: Exchange | None = None
        if p > 1:
            if auth is None:
                raise WorkerFailed(index, "a worker of a parallel job needs the run's secret")
            host = facts.worker_host or "127.0.0.1"
            self.exchange = Exchange(index, p, auth, cfg.exchange_transport, host)
        self.state_server: StateServer | None = None
        if facts.serve_state:
            if auth is None:
                raise WorkerFailed(index, "a worker that serves its state needs the run's secret")
            db = cfg.worker_state_path(job.name, index)
            self.state_server = StateServer(
                index, db, db.parent / "served", auth, facts.worker_host or "127.0.0.1"
            )
        self.router = Router(
            index,
            p,
            job.max_parallelism,
            self.exchange,
            cfg.batch_size,
            self.keyed.deliver,
            lambda why, rec: self.dead.add("exchange", "unencodable", why, rec),
            graph.broadcast,
            graph.forward,
        )
        self._nodes = len(graph.keyby)
        self._columns = graph.column_nodes()
        self.barriers = BarrierAligner(index, p)
        self.snapshots = Snapshotter(
            cfg, job.name, index, self.range, self.state, link.send, confirmed, facts.run_id
        )
        self._open(every, restored)
        self.finished = False
        self._announced = False  # Finished sent
        self.run_started_at = self.finished_at = 0.0
        self.records_received = 0
        self.backpressured_s = 0.0
        self.started = time.monotonic()

    def _open(self, every: list[SplitId], restored: dict[str, Any] | None) -> None:
        """Open the splits from their start, or resume splits, channels and operators where
        checkpoint ``restored`` left them."""
        starts: dict[int, SplitStart] = {}
        if restored is not None:
            strategies = [s.watermarks for s in self.job.sources]
            p, sides, channels = self.cfg.parallelism, self.sources.sides, self.keyed.by_source
            starts = restore_positions(restored, strategies, every, p, sides, channels)
            restore_operators(restored, self.keyed.ops, self.state)
        else:
            mark_format(self.state)
        self.sources.open(starts)

    def status(self) -> WorkerStatus:
        elapsed = max(1e-9, time.monotonic() - self.started)
        return {
            "worker": self.index,
            "host": self.facts.worker_host or HOSTNAME,
            "pid": os.getpid(),
            "memory": {"rss": rss_bytes(), **self.state.memory()},
            "key_groups": (self.range.start, self.range.end),
            "splits": self.sources.split_ids,
            "source_lag": self.sources.lag(),
            "watermark": self.keyed.channels.watermark(),
            "records_in": self.sources.records_in,
            "records_sent": self.router.records_sent,
            "records_received": self.records_received,
            "backpressure": round(self.backpressured_s / elapsed, 4),
            "pending_bytes": self.exchange.pending_bytes if self.exchange else 0,
            "dead_letters": self.dead.count,
            "dead_letters_by_stage": dict(self.dead.by_reason),
            "dead_letter_kinds": self.dead.kinds(),
            "finished": self.finished,
            "restored_from": (self.facts.restore_from or "").rstrip("/").rpartition("/")[2] or None,
            "run_started_at": self.run_started_at,
            "first_record_at": self.sources.first_record_at,
            "finished_at": self.finished_at,
            "operators": self.keyed.status(self.late, self.snapshots.writer.written),
            "time": time.time(),
        }

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        if self.state_server is not None:
            self.state_server.start()
            self.link.send(StateServing(self.state_server.address))
        if self.exchange is not None:
            try:
                self._connect(self.exchange)
            except Stopped:
                self.close()
                return
        self.run_started_at = time.time()
        for side in self.sources.sides:
            if not side.readers:  # all its splits ended: tell everyone at once
                data_wm = side.inputs.data_watermark()
                self.router.route([], [MAX_WATERMARK], data_wm, ENDED, side.index)
        flush_s = self.cfg.flush_interval_ms / 1000.0
        status_s = self.facts.status_interval_ms / 1000.0
        timeout_s = self.cfg.buffer_timeout_ms / 1000.0
        next_flush = last_status = last_tick = time.monotonic()
        while not self._stop_requested():
            busy = self._move_records()
            now = time.monotonic()
            # a stop-with-savepoint's stopped sources stop processing time too: nothing fires
            # between the savepoint and the stop that a restore from it would fire again
            if self.keyed.clocked and self.sources.stopped_at is None and now - last_tick >= TICK_S:
                self.keyed.tick()
                last_tick = now
            self.router.ship(now, timeout_s)
            if now >= next_flush:
                self._flush()
                done = time.monotonic()
                next_flush = done + max(flush_s, FLUSH_BACKOFF * (done - now))
                gctuning.settle(done)  # what lives on is left out of young passes
            if now - last_status >= status_s:
                self.link.send(StatusReport(self.status()))
                last_status = now
            if not self.finished and self.keyed.channels.all_ended() and self.router.empty():
                self._finish()
            if self.finished and not self._announced and self.outputs.holding is None:
                self._announce_finished()
            if self.finished and not busy:
                self.link.poll(0.05)
            elif self.sources.stopped_at is not None and self.exchange is None:
                self.link.poll(0.01)  # nothing to read or drain until the job manager speaks
        self.close()

    def _connect(self, exchange: Exchange) -> None:
        """Listen, tell the job manager where, learn where the others listen, connect; any
        other word from the job manager meanwhile is a stop (``Stopped``)."""
        self.link.send(ExchangeListening(exchange.listen()))
        while True:
            if self._terminated.is_set():
                raise Stopped
            if not self.link.poll(0.05):
                continue
            try:
                msg = self.link.receive()
            except (EOFError, OSError):
                raise Stopped from None
            if not isinstance(msg, ExchangePeers):
                raise Stopped
            if len(msg.addresses) != self.cfg.parallelism:
                raise WorkerFailed(self.index, f"told {len(msg.addresses)} exchange addresses")
            exchange.connect(
                list(msg.addresses), lambda: self._terminated.is_set() or self.link.poll()
            )
            return

    def _move_records(self) -> bool:
        """Drain the other workers' frames, then read a source batch unless the outputs are
        backed up or a barrier is being aligned; True when records moved."""
        busy = False
        if self.exchange is not None:
            busy = self._drain(0 if self._reading() and not self.router.backpressured else 0.002)
            if self.exchange.closed_peers() and not self.finished:
                raise WorkerFailed(self.index, f"lost workers {self.exchange.closed_peers()}")
        if self._reading():  # again: a frame may have begun a barrier
            if self.router.backpressured:
                t0 = time.monotonic()
                self._drain(0.002)
                self.backpressured_s += time.monotonic() - t0
            else:
                batch = self.sources.read_next(self.cfg.batch_size)
                self.router.route(
                    batch.keyed, batch.trace, batch.data_watermark, batch.status, batch.source
                )
                busy = batch.had_records or busy
        return busy

    def _reading(self) -> bool:
        return self.sources.reading and self.barriers.pending is None

    def _drain(self, timeout: float) -> bool:
        """Handle the frames other workers sent; True when there were any."""
        assert self.exchange is not None
        frames = self.exchange.poll(timeout)
        for peer, payload in frames:
            self._on_frame(peer, payload)
        return bool(frames)

    def _stop_requested(self) -> bool:
        """Handle the job manager's messages; True when told to stop (or it is gone)."""
        if self._terminated.is_set():
            return True
        while self.link.poll():
            try:
                msg = self.link.receive()
            except (EOFError, OSError):
                raise ManagerGone from None
            match msg:
                case Stop():
                    return True
                case TriggerCheckpoint(checkpoint=n, stop_sources=stop):
                    self._begin_barrier(Barrier(n, stop))
                case CheckpointCompleted(checkpoint=n):
                    self.outputs.settled(n)
                    self.sources.commit(self.snapshots.completed(n))
                case CheckpointAborted(checkpoint=n):
                    self.outputs.settled(n)
                    self.sources.resume(n)
                case BackfillStep():
                    self.snapshots.writer.wait_idle()  # ingested after what is frozen
                    self.snapshots.check()
                    self.link.send(backfill_step(msg, self.keyed.ops, self.state, self.range))
        return False

    def _on_frame(self, peer: int, payload: bytes) -> None:
        if self.barriers.holds(peer):
            self.barriers.hold(peer, payload)  # after its barrier: waits for the snapshot
            return
        frame = decode_frame(payload, self._nodes, len(self.job.sources), self._columns)
        if isinstance(frame, Barrier):
            if frame.checkpoint > self.barriers.last:
                self._begin_barrier(frame)
            self.barriers.arrived(peer, frame.checkpoint)
            self._check_aligned()
            return
        for keyed, trace, data_wm, status, source in frame:
            self.records_received += rows_of(keyed)
            self.keyed.deliver(str(peer), keyed, unpack_ints(trace), data_wm, status, source)

    # -- checkpoints (aligned barriers) ----------------------------------------------------------

    def _begin_barrier(self, barrier: Barrier) -> None:
        """A checkpoint starts here: the source side records where its splits are and sends
        the barrier after everything it routed so far; it reads nothing more until the
        snapshot (a stop-with-savepoint's: nothing more at all, unless it is aborted)."""
        n = barrier.checkpoint
        if not self.barriers.begin(n):
            return
        # the coordinator triggers n only once n-1 is settled, though its word may not be read
        # yet: what was held for n-1 belongs before this barrier
        self.outputs.settled(n - 1)
        self.snapshots.begin(n, self.sources.positions())
        if barrier.stop_sources:
            self.sources.stop_at(n)
            log.info("worker=%d checkpoint=%d stop-with-savepoint: sources stopped", self.index, n)
        self.router.send_barrier(barrier)
        self._check_aligned()

    def _check_aligned(self) -> None:
        n = self.barriers.pending
        if n is None or not self.barriers.aligned:
            return
        marks = self.keyed.marks()
        self.snapshots.take(n, self._freeze, marks, self.sources.records_in)
        self.outputs.hold(n)  # everything before the barrier is written: the rest waits for n
        for peer, payload in self.barriers.release():
            self._on_frame(peer, payload)

    # -- state and shutdown ----------------------------------------------------------------------

    def _freeze(self) -> list[StateDelta]:
        """A checkpoint's synchronous part: the operators' unwritten state frozen (the state
        writer writes it), side outputs and sinks flushed."""
        generations = self.keyed.snapshot_operators(barrier=True)
        self._flush_outputs()
        return generations

    def _flush(self) -> None:
        """State to the state writer, side outputs and sinks. Only while the writer is idle and
        has rested after its last write (``StateWriter.rested``): the retention purge (it reads
        and writes RocksDB), then the operators' changes frozen and handed over; else they wait
        in memory for the next flush, and more of them coalesce into one write."""
        self.snapshots.check()
        if self.snapshots.rested(time.monotonic()):
            self.keyed.purge_operators()
            self.snapshots.flush(self.keyed.snapshot_operators(barrier=False), self.keyed.marks())
        self._flush_outputs()

    def _flush_outputs(self) -> None:
        self.dead.flush()
        self.late.flush()
        self.keyed.flush_sinks()
        for w in self.stream_sinks.values():  # a Kafka sink's sends acknowledged (or raised)
            w.flush()

    def _finish(self) -> None:
        self.snapshots.writer.wait_idle()
        self.snapshots.check()
        self.keyed.finish()  # written at once (the writer is idle): RocksDB holds it all
        self.snapshots.flush([], self.keyed.marks())
        self._flush_outputs()
        self.finished, self.finished_at = True, time.time()

    def _announce_finished(self) -> None:
        """Tell the job manager this worker is done, its held file outputs written (the last
        results may wait for a checkpoint in flight): a finished job's files hold them all."""
        self._announced = True
        self.link.send(StatusReport(self.status()))
        self.link.send(Finished(self.index))
        counts = (self.sources.records_in, self.router.records_sent, self.records_received)
        log.info(
            "worker=%d finished records_in=%d sent=%d received=%d dead_letters=%d",
            self.index, *counts, self.dead.count,
        )  # fmt: skip

    def close(self) -> None:
        self.snapshots.join(10.0)
        if self.snapshots.idle and self.snapshots.writer.failure is None:
            self.keyed.flush_operators(purge=False)
        self._flush_outputs()
        self.snapshots.close(10.0)
        # past the last checkpoint, which a restore from it cuts off again
        self.outputs.release()
        self.sources.close()
        self.keyed.close_sinks()
        for w in self.stream_sinks.values():
            w.close()
        self.dead.close()
        self.late.close()
        if self.state_server is not None:
            self.state_server.close()
        self.state.close()
        if self.exchange is not None:
            self.exchange.close()
