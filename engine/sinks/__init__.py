"""Sinks: where window results, late records and dead letters go.

``sinks.jsonl(path)`` / ``file:///path/out.jsonl`` writes one JSON object per line (the file is
truncated when the job starts); ``sinks.stdout()`` / ``stdout://`` prints them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import orjson

from weir.engine.errors import ConfigError, SinkError

SCHEMES = ("file", "stdout", "kafka")


class SinkWriter(Protocol):
    def write(self, records: list[dict[str, Any]]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    def describe(self) -> str: ...

    def prepare(self) -> None:
        """Called once per run, before any worker opens the sink (a file is truncated here)."""
        ...

    def open(self) -> SinkWriter:
        """Called by each worker; writers append whole batches, one write() call each."""
        ...


class _LinesWriter:
    """Writes each batch with one ``os.write`` on an append-mode descriptor, so several workers
    can share one file (or stdout) without splitting each other's lines."""

    def __init__(self, fd: int, owned: bool) -> None:
        self._fd = fd
        self._owned = owned

    def write(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        dumps = orjson.dumps
        opt = orjson.OPT_NON_STR_KEYS
        data = memoryview(b"".join([dumps(r, default=str, option=opt) + b"\n" for r in records]))
        while data:
            data = data[os.write(self._fd, data) :]

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)


@dataclass(frozen=True, slots=True)
class JsonlSink:
    path: Path

    def describe(self) -> str:
        return f"file://{self.path}"

    def prepare(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(b"")
        except OSError as exc:
            raise SinkError(
                f"cannot write sink file {self.path}: {exc.strerror}; "
                "pass a writable path as file:///path/out.jsonl"
            ) from exc

    def open(self) -> SinkWriter:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            return _LinesWriter(fd, owned=True)
        except OSError as exc:
            raise SinkError(
                f"cannot write sink file {self.path}: {exc.strerror}; "
                "pass a writable path as file:///path/out.jsonl"
            ) from exc


@dataclass(frozen=True, slots=True)
class StdoutSink:
    def describe(self) -> str:
        return "stdout://"

    def prepare(self) -> None:
        return None

    def open(self) -> SinkWriter:
        sys.stdout.flush()
        return _LinesWriter(sys.stdout.fileno(), owned=False)


def jsonl(path: str | Path) -> JsonlSink:
    return JsonlSink(Path(path))


def stdout() -> StdoutSink:
    return StdoutSink()


def kafka(bootstrap: str, topic: str) -> Sink:
    """Window results (or side outputs) as JSON messages in a Kafka topic."""
    from weir.engine.sinks.kafka import KafkaSink

    return KafkaSink(bootstrap, topic)


def from_url(url: str) -> Sink:
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = unquote(parts.path)
        if not path:
            raise ConfigError(f"sink {url!r} has no path; use file:///absolute/path.jsonl")
        return jsonl(path)
    if parts.scheme == "stdout" or url == "-":
        return stdout()
    if parts.scheme == "kafka":
        from weir.engine.sinks.kafka import from_url_parts

        try:
            return from_url_parts(parts.netloc, unquote(parts.path), url)
        except SinkError as exc:
            raise ConfigError(str(exc)) from None
    raise ConfigError(
        f"unknown sink scheme {parts.scheme or '(none)'!r} in {url!r}; "
        f"use one of {', '.join(s + '://' for s in SCHEMES)}"
    )


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
