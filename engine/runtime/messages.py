"""What the job manager and its workers say to each other: one frozen dataclass per message,
encoded by ``wire.Codec`` (msgpack with a type tag, data only, never a pickle) and sent with
``Connection.send_bytes``; each side decodes with the same classes the other encoded with.

    job manager -> worker   ExchangePeers, TriggerCheckpoint, CheckpointCompleted,
                            CheckpointAborted, BackfillStep, Stop
    worker -> job manager   ExchangeListening, StateServing, StatusReport, Finished, Failed,
                            CheckpointAck, CheckpointDecline, BackfillReply

A worker's status (``WorkerStatus``) is also what the job manager publishes in
``jobmanager.json`` and the API reads, so it is a TypedDict: the JSON's own shape, checked
against the same definition on both reads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum
from multiprocessing.connection import Connection
from typing import Any, Generic, TypedDict, TypeVar

from weir.engine.runtime.wire import Codec, from_plain
from weir.state.checkpoints import FileRef

Out = TypeVar("Out")
In = TypeVar("In")

# -- a worker's status -------------------------------------------------------------------------


class RankedWindow(TypedDict):
    """A window's best keys by each numeric aggregate: ``by[aggregate] = [(key, value), ...]``."""

    start: int
    end: int
    by: dict[str, list[tuple[str, int | float]]]


class TopStatus(TypedDict):
    latest: RankedWindow | None  # the last fired window
    current: RankedWindow | None  # the newest open one (tumbling windows)


class OperatorStatus(TypedDict):
    watermark: int
    # the watermark as of what its RocksDB holds (a live read's): behind ``watermark`` by what
    # waits in memory for the next flush or in the state writer
    state_watermark: int
    data_watermark: int
    records_in: int
    results_out: int
    late: int
    open_windows: int
    retention_dropped: int  # windows whose query retention passed, deleted in this run
    metrics: dict[str, int]  # a process function's own figures (a pattern's partial matches)
    top: TopStatus | None  # None: an operator without shared windows to rank


class DeadLetterKind(TypedDict):
    """Records of one kind that went to the dead letters: the stage and the kind of reason
    (``timestamp``, ``missing-field``), how many, and the first one's reason and position."""

    stage: str
    kind: str
    count: int
    reason: str  # the first record's
    at: str  # where the first record was read (``split=… line=…``); "" on the keyed side


class WorkerStatus(TypedDict):
    worker: int
    host: str  # where it runs: this machine's name, or its executor's host on a cluster
    pid: int  # its process on that host (0 before its first report)
    # bytes: "rss" (its resident set, 0 where the system has no /proc) and what its state
    # backend holds outside Python's heap (RocksDB: "memtables", "block_cache", "table_readers")
    memory: dict[str, int]
    key_groups: tuple[int, int]
    splits: list[str]
    source_lag: dict[str, int]  # records not read yet, per split whose source knows
    watermark: int
    records_in: int
    records_sent: int
    records_received: int
    backpressure: float  # share of time the source waited for the outputs
    pending_bytes: int
    dead_letters: int
    dead_letters_by_stage: dict[str, int]
    dead_letter_kinds: list[DeadLetterKind]
    finished: bool
    restored_from: str | None
    run_started_at: float  # wall-clock seconds; 0.0 until it happens
    first_record_at: float
    finished_at: float
    operators: dict[str, OperatorStatus]
    time: float


# -- job manager -> worker ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExchangePeers:
    """Where every worker of this attempt listens for the exchange (``addresses[i]``: worker
    ``i``'s), once all of them have said (``ExchangeListening``)."""

    addresses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Start checkpoint ``checkpoint``: inject its barrier after what was read so far.
    ``stop_sources``: a stop-with-savepoint's; the source side reads nothing after its barrier
    until the checkpoint is aborted (Flink's synchronous savepoint)."""

    checkpoint: int
    stop_sources: bool = False


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    """Checkpoint ``checkpoint``'s metadata is written: its files may be referenced."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    """Checkpoint ``checkpoint`` failed (declined, timed out): sources it stopped read again."""

    checkpoint: int


class BackfillPhase(Enum):
    CHECK = "check"  # does the worker hold any window in the backfill's range?
    INGEST = "ingest"  # load the backfill's SST files for the worker's key groups


@dataclass(frozen=True, slots=True)
class BackfillFile:
    """A backfill file the job manager checked: its name and size (a regular file then)."""

    name: str
    size: int


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    """A live backfill. From the API: ``op``, ``path`` and the range. To the workers, the job
    manager adds what it checked: the backfill storage's resolved ``root`` (a directory; ""
    for object storage) and the ``files`` there, which are all a worker opens."""

    op: str
    path: str
    min_end: int
    max_end: int
    windows: int | None = None
    root: str = ""
    files: tuple[BackfillFile, ...] = ()

    @staticmethod
    def from_request(req: dict[str, Any]) -> BackfillRequest:
        """A request from the API (checked: ``MessageError`` names a wrong field); what the
        job manager checks (``root``, ``files``) is never taken from it."""
        asked = {**req, "root": "", "files": []}
        return from_plain(BackfillRequest, asked, "backfill request")


@dataclass(frozen=True, slots=True)
class BackfillStep:
    request_id: int
    phase: BackfillPhase
    request: BackfillRequest


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop now: flush, close, exit."""


# -- worker -> job manager ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExchangeListening:
    """Where this worker listens for the exchange: ``unix:<path>`` or ``tcp:<host>:<port>``."""

    address: str


@dataclass(frozen=True, slots=True)
class StateServing:
    """A cluster task serves its live state at ``tcp:<host>:<port>`` (``task.stateserver``)."""

    address: str


@dataclass(frozen=True, slots=True)
class StatusReport:
    status: WorkerStatus


@dataclass(frozen=True, slots=True)
class Finished:
    """Every input of the worker ended and the final watermark fired every window."""

    worker: int


@dataclass(frozen=True, slots=True)
class Failed:
    worker: int
    reason: str


@dataclass(frozen=True, slots=True)
class SplitPosition:
    """Where a split was at a checkpoint's barrier."""

    offset: int
    max_ts: int
    ended: bool


@dataclass(frozen=True, slots=True)
class OperatorMarks:
    watermark: int
    data_watermark: int


@dataclass(frozen=True, slots=True)
class WorkerSnapshot:
    """One worker's part of a checkpoint: an entry of ``_metadata``'s ``workers``."""

    index: int
    key_groups: tuple[int, int]
    sources: dict[str, SplitPosition]
    operators: dict[str, OperatorMarks]
    records_in: int
    flush_ms: float
    rocksdb_ms: float
    sync_ms: float
    files: tuple[FileRef, ...]
    size: int
    incremental_size: int
    async_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "key_groups": list(self.key_groups),
            "sources": {
                s: {"offset": p.offset, "max_ts": p.max_ts, "ended": p.ended}
                for s, p in self.sources.items()
            },
            "operators": {
                n: {"watermark": m.watermark, "data_watermark": m.data_watermark}
                for n, m in self.operators.items()
            },
            "records_in": self.records_in,
            "flush_ms": self.flush_ms,
            "rocksdb_ms": self.rocksdb_ms,
            "sync_ms": self.sync_ms,
            "files": [f.to_json() for f in self.files],
            "size": self.size,
            "incremental_size": self.incremental_size,
            "async_ms": self.async_ms,
        }


@dataclass(frozen=True, slots=True)
class CheckpointAck:
    checkpoint: int
    snapshot: WorkerSnapshot


@dataclass(frozen=True, slots=True)
class CheckpointDecline:
    checkpoint: int
    reason: str


@dataclass(frozen=True, slots=True)
class BackfillReply:
    request_id: int
    phase: BackfillPhase
    error: str | None  # why the worker refuses (None: it agrees, or it ingested)
    files: int = 0  # SST files checked (CHECK) or ingested (INGEST)
    # the window ends its checked files hold (CHECK; None: it has none), whatever was requested
    min_end: int | None = None
    max_end: int | None = None


ToWorker = (
    ExchangePeers
    | TriggerCheckpoint
    | CheckpointCompleted
    | CheckpointAborted
    | BackfillStep
    | Stop
)
FromWorker = (
    ExchangeListening
    | StateServing
    | StatusReport
    | Finished
    | Failed
    | CheckpointAck
    | CheckpointDecline
    | BackfillReply
)

TO_WORKER: Codec[ToWorker] = Codec(
    ExchangePeers, TriggerCheckpoint, CheckpointCompleted, CheckpointAborted, BackfillStep, Stop
)
FROM_WORKER: Codec[FromWorker] = Codec(
    ExchangeListening,
    StateServing,
    StatusReport,
    Finished,
    Failed,
    CheckpointAck,
    CheckpointDecline,
    BackfillReply,
)


class _Link(Generic[Out, In]):
    """One end of the pipe between the job manager and a worker: typed messages out and in,
    each side with its own codec. ``send`` may be called from several threads at once (a
    worker's loop and its upload thread; the job manager's monitor, API threads and ``stop``):
    a lock keeps frames whole."""

    def __init__(self, conn: Connection, out: Codec[Out], into: Codec[In]) -> None:
        self._conn = conn
        self._out = out
        self._in = into
        self._lock = threading.Lock()
        self._ended = False  # the other end closed (or this one): nothing more will come

    def send(self, msg: Out) -> None:
        raw = self._out.encode(msg)
        with self._lock:
            self._conn.send_bytes(raw)

    def poll(self, timeout: float = 0.0) -> bool:
        return self._conn.poll(timeout)

    def waitable(self) -> Connection | None:
        """What ``multiprocessing.connection.wait`` waits on for this link's next message;
        None once the link has ended (a closed end reads as ready for ever)."""
        return None if self._ended else self._conn

    def receive(self) -> In:
        try:
            raw = self._conn.recv_bytes()
        except (EOFError, OSError):
            self._ended = True
            raise
        return self._in.decode(raw)

    def close(self) -> None:
        self._ended = True
        self._conn.close()


class ManagerLink(_Link[FromWorker, ToWorker]):
    """A worker's end of its pipe to the job manager."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, FROM_WORKER, TO_WORKER)


class WorkerLink(_Link[ToWorker, FromWorker]):
    """The job manager's end of its pipe to one worker."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, TO_WORKER, FROM_WORKER)
