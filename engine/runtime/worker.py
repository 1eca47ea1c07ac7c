"""A worker process: reads its source split, runs the chain and owns one RocksDB instance.

It reports status (watermarks, counters) to the job manager over a pipe every
``status_interval_ms`` and stops when told to. After a bounded source ends it sends the final
watermark (which fires every window), flushes, reports ``finished`` and keeps its state open for
queries until stopped.
"""

from __future__ import annotations

import logging
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from engine.errors import WeirError
from engine.job import Job
from engine.runtime.chain import Chain, sink_nodes, window_operators
from engine.runtime.config import RunConfig
from engine.runtime.loader import load_configured_job
from engine.runtime.outputs import DeadLetters, LateRecords
from engine.runtime.window_op import WindowRuntime
from engine.sinks import Sink, SinkWriter
from engine.sinks import from_url as sink_from_url
from engine.watermarks import MAX_WATERMARK
from state.keygroups import range_for_operator
from state.rocksdb import RocksState

log = logging.getLogger(__name__)

FLUSH_BACKOFF = 3.0


def default_side_sink(cfg: RunConfig, job: str, url: str | None, name: str) -> Sink:
    if url:
        return sink_from_url(url)
    return sink_from_url(f"file://{(cfg.job_dir(job) / name).resolve()}")


class Worker:
    def __init__(self, cfg: RunConfig, index: int, conn: Connection, job: Job) -> None:
        self.cfg = cfg
        self.index = index
        self.conn = conn
        self.job = job
        source_node = job.sources[0]
        self.source = source_node.source
        self.range = range_for_operator(job.max_parallelism, cfg.parallelism, index)
        self.state = RocksState(cfg.worker_state_path(job.name, index))
        self.dead = DeadLetters(
            default_side_sink(cfg, job.name, cfg.dead_letter_url, "dead-letter.jsonl")
        )
        self.late = LateRecords(default_side_sink(cfg, job.name, cfg.late_sink_url, "late.jsonl"))
        self.ops = {
            op.name: WindowRuntime(
                op,
                self.state,
                self.range,
                job.max_parallelism,
                self.late,
                self.dead,
                cfg.state_retention_ms,
            )
            for op in window_operators(source_node)
        }
        self.result_sinks: dict[str, list[SinkWriter]] = {
            name: [s.open() for s in rt.op.sinks] for name, rt in self.ops.items()
        }
        self.stream_sinks = {id(n): n.sink.open() for n in sink_nodes(source_node)}
        self.chain = Chain(source_node, self.ops, self.stream_sinks, self.dead)
        self.finished = False
        self.started = time.time()

    def status(self) -> dict[str, Any]:
        return {
            "worker": self.index,
            "key_groups": self.range.to_json(),
            "watermark": self.watermark(),
            "records_in": self.chain.records_in,
            "dead_letters": self.dead.count,
            "dead_letters_by_stage": dict(self.dead.by_reason),
            "finished": self.finished,
            "operators": {
                name: {
                    "watermark": rt.watermark,
                    "data_watermark": rt.data_watermark,
                    "records_in": rt.records_in,
                    "results_out": rt.results_out,
                    "late": self.late.count[name],
                    "open_windows": rt.open_windows,
                }
                for name, rt in self.ops.items()
            },
            "time": time.time(),
        }

    def watermark(self) -> int:
        return MAX_WATERMARK if self.finished else self.chain.watermark

    def run(self) -> None:
        splits = self.source.splits()
        reader = self.source.open(splits[self.index] if self.index < len(splits) else splits[0])
        flush_s = self.cfg.flush_interval_ms / 1000.0
        status_s = self.cfg.status_interval_ms / 1000.0
        next_flush = last_status = time.monotonic()
        try:
            while not self._stop_requested():
                batch = reader.read_batch(self.cfg.batch_size)
                self.chain.process(batch)
                data_wm = self.chain.watermark
                self._advance(data_wm, data_wm, self.chain.trace)
                if batch.end:
                    self._finish()
                    break
                now = time.monotonic()
                if now >= next_flush:
                    self._flush()
                    done = time.monotonic()
                    # a flush may take at most ~1/4 of the time: under load, freshness gives way
                    next_flush = done + max(flush_s, FLUSH_BACKOFF * (done - now))
                if now - last_status >= status_s:
                    self.conn.send(("status", self.status()))
                    last_status = now
        finally:
            reader.close()
        if self.finished:
            self.conn.send(("status", self.status()))
            self.conn.send(("finished", self.index))
            while not self._stop_requested(block=True):
                pass
        self.close()

    def _stop_requested(self, block: bool = False) -> bool:
        if block or self.conn.poll():
            try:
                msg = self.conn.recv()
            except EOFError:
                return True
            return bool(msg == "stop")
        return False

    def _advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        for name, rt in self.ops.items():
            rt.advance(watermark, data_watermark, trace)
            results = rt.drain()
            if results:
                for w in self.result_sinks[name]:
                    w.write(results)

    def _flush(self) -> None:
        for rt in self.ops.values():
            rt.flush()
            rt.purge()
        self.dead.flush()
        self.late.flush()
        for writers in self.result_sinks.values():
            for w in writers:
                w.flush()

    def _finish(self) -> None:
        data_wm = self.chain.watermark
        self._advance(MAX_WATERMARK, data_wm)
        for rt in self.ops.values():
            rt.flush()
            rt.purge(force=True)
        self._flush()
        self.finished = True
        log.info(
            "worker=%d finished records_in=%d dead_letters=%d",
            self.index,
            self.chain.records_in,
            self.dead.count,
        )

    def close(self) -> None:
        self._flush()
        for writers in self.result_sinks.values():
            for w in writers:
                w.close()
        for w in self.stream_sinks.values():
            w.close()
        self.dead.close()
        self.late.close()
        self.state.close()


def worker_main(cfg: RunConfig, index: int, conn: Connection) -> None:
    """Entry point of a spawned worker process."""
    logging.basicConfig(
        level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        job = load_configured_job(cfg)
        worker = Worker(cfg, index, conn, job)
        conn.send(("ready", index))
        worker.run()
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
