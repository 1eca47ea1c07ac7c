"""Sinks: where window results, late records and dead letters go.

``sinks.jsonl(path)`` / ``file:///path/out.jsonl`` writes one JSON object per line; the file is
created private to the user (0600) and truncated when a job starts from nothing. A file is
exactly-once across failures: each checkpoint records its size (``position``), and a restore
cuts it back to that size (``rewind``) before the replay writes the rest again, while workers
hold what they emit after a checkpoint's barrier until the checkpoint completes
(``runtime.outputs.OutputGate``). ``sinks.stdout()`` / ``stdout://`` prints them
(at-least-once: a stream cannot be cut back).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from weir.base.errors import ConfigError, SinkError
from weir.base.files import FILE_MODE, private_dir
from weir.base.jsonenc import dumps_json
from weir.base.lazy import exports, keep_functions
from weir.base.paths import file_path
from weir.base.redact import redact_url

if TYPE_CHECKING:
    from weir.engine.kafka_security import KafkaSecurity

# Kafka's sink loads with the first sink of its (a file job needs none): each name's module
_HOMES = {
    "KafkaSecurity": "weir.engine.kafka_security",
    "KafkaSink": "weir.engine.sinks.kafka",
    "from_url_parts": "weir.engine.sinks.kafka",
}

log = logging.getLogger(__name__)

SCHEMES = ("file", "stdout", "kafka")


class SinkWriter(Protocol):
    """What a worker writes a sink's records through (``Sink.open``)."""

    def write(self, records: list[dict[str, Any]]) -> None:
        """Write one batch of records, whole (one call, so workers never interleave)."""
        ...

    def flush(self) -> None:
        """Push what was written to its destination."""
        ...

    def close(self) -> None:
        """Flush and release the writer; it is not used again."""
        ...


class Sink(Protocol):
    """Where records go: ``sinks.jsonl(path)``, ``sinks.stdout()``, ``sinks.kafka(...)``, or an
    object of your own with these three methods."""

    def describe(self) -> str:
        """The sink as a URL, for ``weir explain``, ``GET /jobs/{job}`` and logs."""
        ...

    def prepare(self) -> None:
        """Called once per run, before any worker opens the sink (a file is truncated here)."""
        ...

    def open(self) -> SinkWriter:
        """Called by each worker; writers append whole batches, one write() call each."""
        ...


class _LinesWriter:
    """Appends each batch as whole lines on an append-mode descriptor shared by several workers.
    ``locked``: a file; the batch's write loop holds an exclusive ``flock``, so a write split by
    the kernel (a large batch) is never interleaved with another worker's batch."""

    def __init__(self, fd: int, owned: bool, locked: bool = False) -> None:
        self._fd = fd
        self._owned = owned
        self._locked = locked

    def write(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        data = memoryview(b"".join([dumps_json(r) + b"\n" for r in records]))
        if self._locked:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        finally:
            if self._locked:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)


@dataclass(frozen=True, slots=True)
class JsonlSink:
    """A file of JSON lines (``sinks.jsonl``): exactly-once through checkpoints."""

    path: Path

    def describe(self) -> str:
        """``file://`` and the path."""
        return f"file://{self.path}"

    @property
    def key(self) -> str:
        """How a checkpoint names this file: its absolute path."""
        return os.path.abspath(self.path)

    def prepare(self) -> None:
        """Empty the file (creating it) before a run from nothing."""
        os.close(self._open(os.O_WRONLY | os.O_TRUNC))

    def open(self) -> SinkWriter:
        """A writer appending whole batches under an exclusive lock."""
        return _LinesWriter(self._open(os.O_WRONLY | os.O_APPEND), owned=True, locked=True)

    def position(self) -> int:
        """The file's size: everything every worker wrote so far (0 when it does not exist)."""
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise self._error(exc) from exc

    def rewind(self, offset: int) -> int:
        """Cut the file back to ``offset`` bytes (a checkpoint's ``position``); returns the bytes
        removed. A file shorter than ``offset`` was changed by someone else: it is left as it
        is, with a warning, and the replay appends to it."""
        fd = self._open(os.O_WRONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size < offset:
                log.warning(
                    "sink=%s size=%d is shorter than the checkpoint's offset=%d; it was changed "
                    "outside weir, appending to it",
                    self.describe(),
                    size,
                    offset,
                )
                return 0
            os.ftruncate(fd, offset)
            return size - offset
        except OSError as exc:
            raise self._error(exc) from exc
        finally:
            os.close(fd)

    def cut_torn_line(self) -> int:
        """Cut a last line that has no newline (a writer killed in the middle of it); returns
        the bytes removed."""
        fd = self._open(os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = end = os.fstat(fd).st_size
            while end > 0:
                chunk = os.pread(fd, min(end, 65_536), end - min(end, 65_536))
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    end = end - len(chunk) + newline + 1
                    break
                end -= len(chunk)
            os.ftruncate(fd, end)
            return size - end
        except OSError as exc:
            raise self._error(exc) from exc
        finally:
            os.close(fd)

    def _open(self, flags: int) -> int:
        try:
            # results and side outputs are the job's data: private to its user, as are the
            # directories made for them (an existing one is the user's and keeps its mode)
            private_dir(self.path.parent)
            return os.open(self.path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: OSError) -> SinkError:
        return SinkError(
            f"cannot write sink file {self.path}: {exc.strerror}; "
            "pass a writable path as file:///path/out.jsonl"
        )


@dataclass(frozen=True, slots=True)
class StdoutSink:
    """JSON lines on standard output (``sinks.stdout``): at-least-once across a recovery."""

    def describe(self) -> str:
        """``stdout://``."""
        return "stdout://"

    def prepare(self) -> None:
        """Nothing to prepare."""
        return None

    def open(self) -> SinkWriter:
        """A writer on the process's standard output."""
        sys.stdout.flush()
        return _LinesWriter(sys.stdout.fileno(), owned=False)


def jsonl(path: str | Path) -> JsonlSink:
    """A file of JSON lines, one a record; exactly-once through checkpoints.

    Args:
        path: the file. A run from nothing starts it empty; a run restored from a checkpoint
            cuts it back to the size the checkpoint recorded and writes the rest once.

    Example:
        ``result.sink(sinks.jsonl("/tmp/impressions.jsonl"))``
    """
    return JsonlSink(Path(path))


def stdout() -> StdoutSink:
    """JSON lines on standard output (at-least-once across a recovery)."""
    return StdoutSink()


def kafka(bootstrap: str, topic: str, security: KafkaSecurity | None = None) -> Sink:
    """Window results (or side outputs) as JSON messages in a Kafka topic; ``security``
    defaults to the ``WEIR_KAFKA_*`` settings."""
    from weir.engine.kafka_security import KafkaSecurity  # loaded by the jobs that use Kafka
    from weir.engine.sinks.kafka import KafkaSink

    sec = KafkaSecurity.from_env() if security is None else security
    return KafkaSink(bootstrap, topic, security=sec)


def from_url(url: str) -> Sink:
    """Parse a sink URL or a path (a JSONL file); the error names the bad part and the
    accepted forms."""
    if url == "-":
        return stdout()
    path = file_path(url, "sink")
    if path is not None:
        return jsonl(path)
    parts = urlsplit(url)
    if parts.scheme == "stdout":
        return stdout()
    if parts.scheme == "kafka":
        from weir.engine.sinks.kafka import from_url_parts

        try:
            options = dict(parse_qsl(parts.query, keep_blank_values=True))
            return from_url_parts(parts.netloc, unquote(parts.path), url, options)
        except SinkError as exc:
            raise ConfigError(str(exc)) from None
    raise ConfigError(
        f"unknown sink scheme {parts.scheme or '(none)'!r} in {redact_url(url)!r}; "
        f"use one of {', '.join(s + '://' for s in SCHEMES)}"
    )


__getattr__, __dir__ = exports(__name__, _HOMES)


# ``kafka()`` shares its name with the submodule, imported late above
keep_functions(__name__)

__all__ = [
    "JsonlSink",
    "Sink",
    "SinkWriter",
    "StdoutSink",
    "from_url",
    "jsonl",
    "kafka",
    "stdout",
]
