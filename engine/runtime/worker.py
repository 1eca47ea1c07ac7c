"""A worker process: reads its source splits, runs the chain, exchanges keyed records with the
other workers, and runs the window operators of its key-group range on its own RocksDB.

One loop, one thread: drain the inputs from other workers, read a source batch unless the
outputs are backed up, ship output buffers that are full or older than the buffer timeout, flush
state, report status. Records for this worker's own key groups never leave the process.

It reports status to the job manager over a pipe every ``status_interval_ms`` and stops when told
to. When every input has ended (bounded sources), the final watermark has fired every window; the
worker flushes, reports ``finished`` and keeps its state open for queries until stopped.
"""

from __future__ import annotations

import cProfile
import logging
import os
import pickle
import shutil
import signal
import threading
import time
import traceback
from array import array
from dataclasses import dataclass, field
from itertools import compress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from weir.app import logs
from weir.engine.errors import WeirError, WorkerFailed
from weir.engine.job import Job
from weir.engine.runtime import heap
from weir.engine.runtime.chain import Chain, KeyedBatch, json_exact_keyby, keyby_nodes, sink_nodes
from weir.engine.runtime.channels import Inputs, combine
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.exchange import Exchange, Stopped
from weir.engine.runtime.loader import load_configured_job
from weir.engine.runtime.operators import OperatorRuntime, runtime_for
from weir.engine.runtime.outputs import DeadLetters, LateRecords
from weir.engine.runtime.window_op import WindowRuntime
from weir.engine.sinks import Sink, SinkWriter
from weir.engine.sinks import from_url as sink_from_url
from weir.engine.sources import SplitReader
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.state.checkpoints import CheckpointStorage, FileRef
from weir.state.keygroups import key_groups, range_for_operator
from weir.state.restore import restore_worker_db
from weir.state.rocksdb import RocksState

log = logging.getLogger(__name__)

FLUSH_BACKOFF = 3.0  # a state flush may take at most ~1/(1+3) of the time
MAX_PENDING_BYTES = 16 * 1024 * 1024  # outputs backed up past this pause the source
TICK_S = 0.01  # how often processing-time windows check the clock
# one entry of a frame: keyed sub-batches of one source batch, the sender's watermark after each
# of its records, its data watermark, and the sender's input status
Entry = tuple[list[KeyedBatch], Any, int, int]
ACTIVE, IDLE, ENDED = 0, 1, 2
BARRIER = "barrier"  # an exchange frame ("barrier", n): everything before it belongs to chk n


def _pack_ints(values: list[int]) -> bytes:
    """Timestamps and watermarks cross the exchange as int64 arrays (a memcpy, not a pickle)."""
    return array("q", values).tobytes()


def _unpack_ints(raw: bytes | list[int]) -> list[int]:
    if isinstance(raw, list):
        return raw
    values = array("q")
    values.frombytes(raw)
    return values.tolist()


def default_side_sink(cfg: RunConfig, job: str, url: str | None, name: str) -> Sink:
    if url:
        return sink_from_url(url)
    return sink_from_url(f"file://{(cfg.job_dir(job) / name).resolve()}")


@dataclass
class Outbox:
    """What waits to be shipped to one other worker."""

    entries: list[Entry] = field(default_factory=list)
    records: int = 0
    since: float = 0.0

    def add(self, entry: Entry, now: float) -> None:
        parts, trace, data_wm, status = entry
        if not self.entries:
            self.since = now
        elif not parts and status == ACTIVE and not self.entries[-1][0] and not self.entries[-1][3]:
            self.entries[-1] = entry  # only time moved: the last watermark is all that matters
            return
        self.entries.append(entry)
        self.records += sum(len(p[1]) for p in parts)


class Worker:
    def __init__(self, cfg: RunConfig, index: int, conn: Connection, job: Job) -> None:
        self.cfg = cfg
        self.index = index
        self.conn = conn
        self.job = job
        self.p = cfg.parallelism
        source_node = job.sources[0]
        self.source = source_node.source
        self.range = range_for_operator(job.max_parallelism, self.p, index)
        self.storage = CheckpointStorage(cfg.checkpoints_root, job.name)
        self.restored: dict[str, Any] | None = None
        # SST files (by local name) a completed checkpoint holds: the next one references them
        self._confirmed: dict[str, FileRef] = {}
        if cfg.restore_from is not None:
            self._restore_db(cfg.restore_from)
        self.state = RocksState(cfg.worker_state_path(job.name, index))
        self.dead = DeadLetters(
            default_side_sink(cfg, job.name, cfg.dead_letter_url, "dead-letter.jsonl")
        )
        self.late = LateRecords(default_side_sink(cfg, job.name, cfg.late_sink_url, "late.jsonl"))
        self.node_ops: list[list[OperatorRuntime]] = [
            [
                runtime_for(
                    op,
                    self.state,
                    self.range,
                    job.max_parallelism,
                    self.late,
                    self.dead,
                    cfg.state_retention_ms,
                )
                for op in node.children
            ]
            for node in keyby_nodes(source_node)
        ]
        self.ops = {rt.op.name: rt for rts in self.node_ops for rt in rts}
        self._clocked = {n: rt for n, rt in self.ops.items() if rt.processing_time}
        self.json_exact = json_exact_keyby(source_node)
        self.result_sinks: dict[str, list[SinkWriter]] = {
            name: [s.open() for s in rt.op.sinks] for name, rt in self.ops.items()
        }
        self.stream_sinks = {id(n): n.sink.open() for n in sink_nodes(source_node)}
        self.chain = Chain(source_node, self.stream_sinks, self.dead, cfg.max_future_ms)
        every = self.source.splits(self.p)
        mine = every[index :: self.p]
        self.splits = Inputs(mine)
        self.channels = Inputs([str(i) for i in range(self.p)])
        self._ended_offsets: dict[str, Any] = {}
        self._ended_readers: dict[str, SplitReader] = {}
        offsets: dict[str, Any] = self._restore_sources(every) if self.restored is not None else {}
        self.readers: dict[str, SplitReader] = {
            s: self.source.open(s, offsets.get(s)) for s in mine if s not in self._ended_offsets
        }
        for j in range(self.p):
            if not every[j :: self.p]:  # a worker without splits never holds time back
                self.channels.inputs[str(j)].ended = True
                self.channels.inputs[str(j)].watermark = MAX_WATERMARK
        self.exchange = (
            Exchange(cfg.exchange_namespace(job.name), index, self.p) if self.p > 1 else None
        )
        self.outboxes = {j: Outbox() for j in range(self.p) if j != index}
        self._output_ended = False
        idle_ms = source_node.watermarks.idle_timeout_ms or cfg.idle_timeout_ms
        self._idle_s = idle_ms / 1000.0 if idle_ms else None
        self._last_data = {s: time.monotonic() for s in mine}
        # checkpoints: the one being aligned, the channels whose barrier arrived, frames held
        # back from those channels until the snapshot, and uploads not yet confirmed
        self._send_lock = threading.Lock()
        self._barrier: int | None = None
        self._last_barrier = 0
        self._aligned: set[str] = set()
        self._held: list[tuple[int, bytes]] = []
        self._uploaded: dict[int, list[FileRef]] = {}
        self._barrier_sources: dict[int, dict[str, Any]] = {}
        self._upload: threading.Thread | None = None
        if self.restored is not None:
            self._restore_operators(self.restored)
        self.finished = False
        self.run_started_at = 0.0
        self.first_record_at = 0.0
        self.finished_at = 0.0
        # counters
        self.records_sent = 0
        self.records_received = 0
        self.backpressured_s = 0.0
        self.started = time.monotonic()

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        elapsed = max(1e-9, time.monotonic() - self.started)
        return {
            "worker": self.index,
            "key_groups": self.range.to_json(),
            "splits": list(self.splits.inputs),
            "source_lag": self._source_lag(),
            "watermark": self.channels.watermark(),
            "records_in": self.chain.records_in,
            "records_sent": self.records_sent,
            "records_received": self.records_received,
            "backpressure": round(self.backpressured_s / elapsed, 4),
            "pending_bytes": self.exchange.pending_bytes if self.exchange else 0,
            "dead_letters": self.dead.count,
            "dead_letters_by_stage": dict(self.dead.by_reason),
            "finished": self.finished,
            "restored_from": self.cfg.restore_from.name if self.cfg.restore_from else None,
            "run_started_at": self.run_started_at,
            "first_record_at": self.first_record_at,
            "finished_at": self.finished_at,
            "operators": {
                name: {
                    "watermark": rt.watermark,
                    "data_watermark": rt.data_watermark,
                    "records_in": rt.records_in,
                    "results_out": rt.results_out,
                    "late": self.late.count[name],
                    "open_windows": rt.open_windows,
                    "top": rt.top_status() if hasattr(rt, "top_status") else None,
                }
                for name, rt in self.ops.items()
            },
            "time": time.time(),
        }

    def _source_lag(self) -> dict[str, int]:
        """Records each split has not read yet, for sources that know (Kafka partitions)."""
        out: dict[str, int] = {}
        for split, reader in self.readers.items():
            lag = getattr(reader, "lag", None)
            value = lag() if lag is not None else None
            if value is not None:
                out[split] = value
        return out

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        if self.exchange is not None:
            try:
                self.exchange.connect(should_stop=lambda: _terminated.is_set() or self.conn.poll())
            except Stopped:
                self.close()
                return
        self.run_started_at = time.time()
        if not self.readers:
            self._end_output()
        flush_s = self.cfg.flush_interval_ms / 1000.0
        status_s = self.cfg.status_interval_ms / 1000.0
        timeout_s = self.cfg.buffer_timeout_ms / 1000.0
        next_flush = last_status = last_tick = time.monotonic()
        splits = list(self.readers)
        turn = 0
        while not self._stop_requested():
            busy = False
            if self.exchange is not None:
                reading = bool(self.readers) and self._barrier is None and not self._backpressured()
                for peer, payload in self.exchange.poll(0 if reading else 0.002):
                    self._on_frame(peer, payload)
                    busy = True
                if self.exchange.closed_peers() and not self.finished:
                    raise WorkerFailed(self.index, f"lost workers {self.exchange.closed_peers()}")
            if self.readers and self._barrier is None:
                if self._backpressured():
                    t0 = time.monotonic()
                    if self.exchange is not None:
                        for peer, payload in self.exchange.poll(0.002):
                            self._on_frame(peer, payload)
                    self.backpressured_s += time.monotonic() - t0
                else:
                    splits = [s for s in splits if s in self.readers]
                    split = splits[turn % len(splits)]
                    turn += 1
                    busy = self._read(split) or busy
            now = time.monotonic()
            if self._clocked and now - last_tick >= TICK_S:
                self._tick()
                last_tick = now
            self._ship(now, timeout_s)
            if now >= next_flush:
                self._flush()
                done = time.monotonic()
                next_flush = done + max(flush_s, FLUSH_BACKOFF * (done - now))
            if now - last_status >= status_s:
                self._send(("status", self.status()))
                last_status = now
            if not self.finished and self.channels.all_ended() and self._outputs_empty():
                self._finish()
            if self.finished and not busy:
                self.conn.poll(0.05)
        self.close()

    def _tick(self) -> None:
        """Processing-time operators fire on the clock, input or not."""
        wm, data_wm = self.channels.watermark(), self.channels.data_watermark()
        for name, rt in self._clocked.items():
            rt.advance(wm, data_wm)
            results = rt.drain()
            if results:
                for w in self.result_sinks[name]:
                    w.write(results)

    def _stop_requested(self) -> bool:
        """Handle the job manager's messages; True when told to stop (or it is gone)."""
        if _terminated.is_set():
            return True
        while self.conn.poll():
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return True
            if msg == "stop":
                return True
            kind, n = msg[0], msg[1]
            if kind == "checkpoint":
                self._begin_barrier(int(n))
            elif kind == "completed":
                self._completed(int(n))
            elif kind in ("ingest_check", "ingest"):
                self._send((kind + "_done", n, self._ingest(kind == "ingest", msg[2])))
        return False

    def _send(self, msg: Any) -> None:
        with self._send_lock:
            self.conn.send(msg)

    def _backpressured(self) -> bool:
        return self.exchange is not None and self.exchange.pending_bytes > MAX_PENDING_BYTES

    def _outputs_empty(self) -> bool:
        if any(box.entries for box in self.outboxes.values()):
            return False
        return self.exchange is None or self.exchange.pending_bytes == 0

    # -- source side -----------------------------------------------------------------------------

    def _read(self, split: str) -> bool:
        """Read one batch of ``split`` and route it; True when it held records."""
        reader = self.readers[split]
        batch = reader.read_batch(self.cfg.batch_size)
        self.chain.process(batch, split)
        mark = self.splits.inputs[split]
        others = self.splits.others(split)
        keyed = [
            (node, keys, recs, ts, combine(wms, others))
            for node, keys, recs, ts, wms in self.chain.keyed
        ]
        trace = combine(self.chain.trace, others)
        mark.watermark = mark.data_watermark = self.chain.watermark(split)
        now = time.monotonic()
        if batch.items:
            self._last_data[split] = now
            mark.idle = False
            if not self.first_record_at:
                self.first_record_at = time.time()
        elif self._idle_s is not None and now - self._last_data[split] >= self._idle_s:
            mark.idle = True  # a quiet split stops holding the watermark back
        if batch.end:
            mark.watermark, mark.ended = MAX_WATERMARK, True
            self._ended_offsets[split] = reader.offset()
            self._ended_readers[split] = reader  # closed at the end: a final checkpoint commits
            del self.readers[split]
        out_wm = self.splits.watermark()
        if not trace or trace[-1] != out_wm:
            trace.append(out_wm)
        status = self._output_status()
        self._route(keyed, trace, self.splits.data_watermark(), status)
        if status == ENDED:
            self._output_ended = True
        return bool(batch.items)

    def _output_status(self) -> int:
        if self.splits.all_ended():
            return ENDED
        live = [i for i in self.splits.inputs.values() if not i.ended]
        return IDLE if all(i.idle for i in live) else ACTIVE

    def _end_output(self) -> None:
        """A worker without splits (or whose splits all ended) tells everyone it is done."""
        self._output_ended = True
        self._route([], [MAX_WATERMARK], self.splits.data_watermark(), ENDED)

    def _route(self, keyed: list[KeyedBatch], trace: list[int], data_wm: int, status: int) -> None:
        if self.p == 1:
            self._deliver(str(self.index), keyed, trace, data_wm, status)
            return
        parts: dict[int, list[KeyedBatch]] = {j: [] for j in range(self.p)}
        m, p = self.job.max_parallelism, self.p
        for node, keys, recs, ts, wms in keyed:
            owners = [kg * p // m for kg in key_groups(keys, m)]
            for j in range(p):
                mask = list(map(j.__eq__, owners))
                if any(mask):
                    parts[j].append(
                        (
                            node,
                            list(compress(keys, mask)),
                            list(compress(recs, mask)),
                            list(compress(ts, mask)),
                            list(compress(wms, mask)),
                        )
                    )
        now = time.monotonic()
        packed_trace: Any = _pack_ints(trace)
        for j, box in self.outboxes.items():
            box.add((parts[j], packed_trace, data_wm, status), now)
        self._deliver(str(self.index), parts[self.index], trace, data_wm, status)

    def _ship(self, now: float, timeout_s: float) -> None:
        """Send buffers that are full, older than the buffer timeout, or carry an end."""
        if self.exchange is None:
            return
        for j, box in self.outboxes.items():
            if not box.entries:
                continue
            if (
                box.records >= self.cfg.batch_size
                or now - box.since >= timeout_s
                or box.entries[-1][3] != ACTIVE
            ):
                self._ship_box(j, box)

    def _ship_box(self, j: int, box: Outbox) -> None:
        assert self.exchange is not None
        payload = pickle.dumps(box.entries, protocol=pickle.HIGHEST_PROTOCOL)
        self.exchange.send(j, payload)
        self.records_sent += box.records
        box.entries, box.records = [], 0

    # -- keyed side ------------------------------------------------------------------------------

    def _on_frame(self, peer: int, payload: bytes) -> None:
        if self._barrier is not None and str(peer) in self._aligned:
            self._held.append((peer, payload))  # after its barrier: waits for the snapshot
            return
        entries: list[Entry] | tuple[str, int] = pickle.loads(payload)
        if isinstance(entries, tuple):
            self._on_barrier(peer, entries[1])
            return
        for keyed, trace, data_wm, status in entries:
            self.records_received += sum(len(k[1]) for k in keyed)
            unpacked = [
                (
                    node,
                    keys,
                    orjson.loads(recs) if isinstance(recs, bytes) else recs,
                    _unpack_ints(ts),
                    _unpack_ints(wms),
                )
                for node, keys, recs, ts, wms in keyed
            ]
            self._deliver(str(peer), unpacked, _unpack_ints(trace), data_wm, status)

    def _deliver(
        self, channel: str, keyed: list[KeyedBatch], trace: list[int], data_wm: int, status: int
    ) -> None:
        """Keyed records and watermark progress from one input channel."""
        others = self.channels.others(channel)
        arrived_trace = combine(trace, others)
        for node, keys, recs, ts, wms in keyed:
            arrived = combine(wms, others)
            for rt in self.node_ops[node]:
                rt.process(keys, recs, ts, arrived, arrived_trace)
        mark = self.channels.inputs[channel]
        mark.watermark = max(mark.watermark, trace[-1])
        mark.data_watermark = max(mark.data_watermark, data_wm)
        mark.ended = status == ENDED
        mark.idle = status == IDLE
        self._advance(arrived_trace)

    def _advance(self, trace: list[int]) -> None:
        wm, data_wm = self.channels.watermark(), self.channels.data_watermark()
        for name, rt in self.ops.items():
            rt.advance(wm, data_wm, trace)
            results = rt.drain()
            if results:
                for w in self.result_sinks[name]:
                    w.write(results)

    # -- checkpoints (aligned barriers) ----------------------------------------------------------

    def _begin_barrier(self, n: int) -> None:
        """Checkpoint ``n`` starts here: on the job manager's trigger, or on the first barrier
        from a peer that got it first. The source side records its offsets and sends the
        barrier after everything it routed so far; it reads nothing more until the snapshot."""
        if n <= self._last_barrier:
            return
        self._last_barrier = self._barrier = n
        bound = self.chain.max_ts
        sources: dict[str, Any] = {
            s: {"offset": r.offset(), "max_ts": bound.get(s, MIN_WATERMARK), "ended": False}
            for s, r in self.readers.items()
        }
        for s, offset in self._ended_offsets.items():
            sources[s] = {"offset": offset, "max_ts": bound.get(s, MIN_WATERMARK), "ended": True}
        self._barrier_sources[n] = sources
        self._aligned = {str(self.index)}
        self.state.flush(wait=False)  # RocksDB's own threads flush the memtable while we align
        if self.exchange is not None:
            frame = pickle.dumps((BARRIER, n))
            for j, box in self.outboxes.items():
                if box.entries:
                    self._ship_box(j, box)
                self.exchange.send(j, frame)
        self._check_aligned()

    def _on_barrier(self, peer: int, n: int) -> None:
        if n > self._last_barrier:
            self._begin_barrier(n)
        if n == self._barrier:
            self._aligned.add(str(peer))
            self._check_aligned()

    def _check_aligned(self) -> None:
        if self._barrier is not None and len(self._aligned) == self.p:
            self._snapshot(self._barrier)

    def _snapshot(self, n: int) -> None:
        """Every input is at barrier ``n``. Synchronous part (the loop waits): write the state
        memory holds and RocksDB does not yet (at most a flush interval of changes), then the
        RocksDB checkpoint (a memtable flush, mostly done already by the one started at the
        barrier, and hard links). Asynchronous part, in a thread: the upload of new files."""
        if self._upload is not None:
            self._upload.join()
        t0 = time.perf_counter()
        self._flush(purge=False)
        t1 = time.perf_counter()
        local = self.cfg.job_dir(self.job.name) / f"worker-{self.index}" / f"chk-{n}"
        shutil.rmtree(local, ignore_errors=True)
        meta: dict[str, Any] = {
            "index": self.index,
            "key_groups": self.range.to_json(),
            "sources": self._barrier_sources[n],
            "operators": {
                name: {"watermark": rt.watermark, "data_watermark": rt.data_watermark}
                for name, rt in self.ops.items()
            },
            "records_in": self.chain.records_in,
        }
        try:
            self.state.checkpoint(local)
        except WeirError as exc:
            log.error("worker=%d checkpoint=%d failed: %s", self.index, n, exc)
            self._send(("decline", n, str(exc)))
        else:
            t2 = time.perf_counter()
            meta["flush_ms"] = round((t1 - t0) * 1000, 3)
            meta["rocksdb_ms"] = round((t2 - t1) * 1000, 3)
            meta["sync_ms"] = round((t2 - t0) * 1000, 3)
            self._upload = threading.Thread(
                target=self._upload_snapshot,
                args=(n, local, meta),
                name=f"weir-upload-{n}",
                daemon=True,
            )
            self._upload.start()
        self._barrier = None
        self._aligned = set()
        held, self._held = self._held, []
        for peer, payload in held:
            self._on_frame(peer, payload)

    def _upload_snapshot(self, n: int, local: Path, meta: dict[str, Any]) -> None:
        """Copy the checkpoint's new files to storage (file I/O and CRCs release the GIL)."""
        t0 = time.perf_counter()
        try:
            files, copied = self.storage.upload(
                local, n, self.index, f"{self.cfg.run_id}-w{self.index}", dict(self._confirmed)
            )
        except Exception as exc:  # noqa: BLE001 - a failed upload fails this checkpoint only
            log.error("worker=%d checkpoint=%d upload failed: %s", self.index, n, exc)
            self._send(("decline", n, f"upload failed: {type(exc).__name__}: {exc}"))
            return
        finally:
            shutil.rmtree(local, ignore_errors=True)
        self._uploaded[n] = files
        meta["files"] = [f.to_json() for f in files]
        meta["size"] = sum(f.size for f in files)
        meta["incremental_size"] = copied
        meta["async_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        self._send(("ack", n, meta))

    def _completed(self, n: int) -> None:
        """The job manager wrote checkpoint ``n``'s metadata: its files are what the next
        checkpoint can reference instead of uploading."""
        files = self._uploaded.pop(n, None)
        if files is not None:
            self._confirmed = {f.name: f for f in files if f.shared is not None}
        for old in [k for k in self._uploaded if k < n]:
            del self._uploaded[old]
        sources = self._barrier_sources.pop(n, {})
        for old in [k for k in self._barrier_sources if k < n]:
            del self._barrier_sources[old]
        for split, st in sources.items():  # e.g. Kafka: offsets to the group, for monitoring
            reader = self.readers.get(split) or self._ended_readers.get(split)
            commit = getattr(reader, "commit", None)
            if commit is not None:
                commit(st["offset"])

    # -- backfill into the running job -------------------------------------------------------

    def _ingest(self, apply: bool, req: dict[str, Any]) -> dict[str, Any]:
        """A backfill's SST files for this worker's key groups: checked for overlap with the
        windows this worker holds (``apply=False``), or ingested into its RocksDB. The rule:
        a backfill never touches a window the live job has, so nothing is counted twice."""
        from weir.engine.spark.load import sst_files

        rt = self.ops.get(req["op"])
        if not isinstance(rt, WindowRuntime):
            return {"error": f"operator {req['op']!r} is not a window operator of this job"}
        lo, hi = int(req["min_end"]), int(req["max_end"])
        try:
            if not apply:
                rt.flush()
                for key, end, _ in rt.stored_rows(rt.op.state_id):
                    if lo <= end <= hi:
                        return {
                            "error": f"key {key!r} already has the window ending at {end} in the "
                            f"live state; backfill windows ending before the live job's first "
                            f"(use --to)"
                        }
                open_ends = [e for e in rt.buckets if lo <= e <= hi]
                if open_ends:
                    return {"error": f"the live job has open windows ending at {open_ends[0]}"}
                return {"ok": True}
            files = sst_files(Path(req["path"]), self.range)
            if files:
                self.state.ingest(files)
                rt._restore_timer_ends()
            return {"ok": True, "files": len(files)}
        except WeirError as exc:
            return {"error": str(exc)}

    # -- restore ---------------------------------------------------------------------------------

    def _restore_db(self, chk: Path) -> None:
        """Rebuild this worker's RocksDB, for its key-group range, from checkpoint ``chk``."""
        storage = CheckpointStorage(chk.parent.parent, chk.parent.name)
        n = int(chk.name.removeprefix("chk-"))
        meta = storage.metadata(n)
        if int(meta["max_parallelism"]) != self.job.max_parallelism:
            raise WeirError(
                f"checkpoint {chk} has max_parallelism={meta['max_parallelism']} but the job has "
                f"{self.job.max_parallelism}; key groups cannot change, restore with the same"
            )
        target = self.cfg.worker_state_path(self.job.name, self.index)
        known = restore_worker_db(storage, n, meta, self.range, target)
        if storage.base == self.storage.base:
            self._confirmed = known
        self.restored = meta
        log.info("worker=%d restored key groups %s from %s", self.index, self.range.to_json(), chk)

    def _restore_sources(self, every: list[str]) -> dict[str, Any]:
        """Split offsets and watermarks as of the checkpoint; every sender's channel starts at
        the watermark its splits had (the same rule at any parallelism)."""
        assert self.restored is not None
        saved: dict[str, Any] = {}
        for w in self.restored["workers"]:
            saved.update(w.get("sources", {}))
        strategy = self.job.sources[0].watermarks
        offsets: dict[str, Any] = {}
        for split, mark in self.splits.inputs.items():
            st = saved.get(split)
            if st is None:
                continue  # a split the checkpoint did not have (a new file): from its start
            self.chain.max_ts[split] = int(st["max_ts"])
            mark.watermark = mark.data_watermark = strategy.watermark_for(int(st["max_ts"]))
            offsets[split] = st["offset"]
            if st["ended"]:
                mark.watermark, mark.ended = MAX_WATERMARK, True
                self._ended_offsets[split] = st["offset"]
        for j in range(self.p):
            theirs = every[j :: self.p]
            if not theirs:
                continue
            marks, data_marks, ended = [], [], True
            for split in theirs:
                st = saved.get(split)
                max_ts = int(st["max_ts"]) if st else MIN_WATERMARK
                done = bool(st and st["ended"])
                marks.append(MAX_WATERMARK if done else strategy.watermark_for(max_ts))
                if not (done and max_ts == MIN_WATERMARK):
                    data_marks.append(strategy.watermark_for(max_ts))
                ended = ended and done
            channel = self.channels.inputs[str(j)]
            channel.watermark = min(marks)
            channel.data_watermark = min(data_marks, default=MIN_WATERMARK)
            channel.ended = ended
        return offsets

    def _restore_operators(self, meta: dict[str, Any]) -> None:
        for name, rt in self.ops.items():
            marks = [w["operators"][name] for w in meta["workers"] if name in w["operators"]]
            if marks:
                rt.restore(
                    min(int(m["watermark"]) for m in marks),
                    min(int(m["data_watermark"]) for m in marks),
                )

    # -- state and shutdown ----------------------------------------------------------------------

    def _flush(self, purge: bool = True) -> None:
        """State to RocksDB (retention purges too, unless a snapshot is waiting), side outputs
        and sinks."""
        for rt in self.ops.values():
            rt.flush()
            if purge:
                rt.purge()
        self.dead.flush()
        self.late.flush()
        for writers in self.result_sinks.values():
            for w in writers:
                w.flush()

    def _finish(self) -> None:
        self._advance([MAX_WATERMARK])
        for rt in self.ops.values():
            rt.flush()
            rt.purge(force=True)
        self._flush()
        self.finished = True
        self.finished_at = time.time()
        self._send(("status", self.status()))
        self._send(("finished", self.index))
        log.info(
            "worker=%d finished records_in=%d sent=%d received=%d dead_letters=%d",
            self.index,
            self.chain.records_in,
            self.records_sent,
            self.records_received,
            self.dead.count,
        )

    def close(self) -> None:
        if self._upload is not None:
            self._upload.join(10.0)
        self._flush()
        for reader in [*self.readers.values(), *self._ended_readers.values()]:
            reader.close()
        for writers in self.result_sinks.values():
            for w in writers:
                w.close()
        for w in self.stream_sinks.values():
            w.close()
        self.dead.close()
        self.late.close()
        self.state.close()
        if self.exchange is not None:
            self.exchange.close()


_terminated = threading.Event()


def _on_sigterm(signum: int, frame: object) -> None:
    _terminated.set()


def worker_main(cfg: RunConfig, index: int, conn: Connection) -> None:
    """Entry point of a spawned worker process.

    The job manager owns a worker's lifecycle: Ctrl-C (SIGINT to the whole process group) is
    ignored here, so the job manager can stop workers in order; SIGTERM stops gracefully."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    logs.configure(cfg.log_level, cfg.log_format)  # a spawned process starts unconfigured
    heap.trim_in_background()
    try:
        job = load_configured_job(cfg)
        worker = Worker(cfg, index, conn, job)
        worker._send(("ready", index))
        profile_dir = os.environ.get("WEIR_PROFILE_DIR")
        if profile_dir:  # cProfile each worker; stats land in <dir>/worker-<i>.prof
            cProfile.runctx(
                "worker.run()",
                {},
                {"worker": worker},
                os.path.join(profile_dir, f"worker-{index}.prof"),
            )
        else:
            worker.run()
    except WorkerFailed as exc:
        _report_failure(conn, exc.reason)
        raise SystemExit(1) from None
    except WeirError as exc:
        _report_failure(conn, str(exc))
        raise SystemExit(1) from None
    except Exception:
        _report_failure(conn, traceback.format_exc())
        raise SystemExit(1) from None


def _report_failure(conn: Connection, reason: str) -> None:
    try:
        conn.send(("failed", reason))
    except OSError:
        pass


__all__ = ["Worker", "worker_main"]
