"""Sinks: where window results, late records and dead letters go.

``sinks.jsonl(path)`` / ``file:///path/out.jsonl`` writes one JSON object per line (the file is
truncated when the job starts); ``sinks.stdout()`` / ``stdout://`` prints them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import unquote, urlsplit

import orjson

from engine.errors import ConfigError, SinkError

SCHEMES = ("file", "stdout")


class SinkWriter(Protocol):
    def write(self, records: list[dict[str, Any]]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    def describe(self) -> str: ...

    def open(self) -> SinkWriter: ...


class _LinesWriter:
    def __init__(self, fh: IO[bytes], owned: bool) -> None:
        self._fh = fh
        self._owned = owned

    def write(self, records: list[dict[str, Any]]) -> None:
        if records:
            dumps = orjson.dumps
            opt = orjson.OPT_NON_STR_KEYS
            self._fh.write(b"".join([dumps(r, default=str, option=opt) + b"\n" for r in records]))

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        self._fh.flush()
        if self._owned:
            self._fh.close()


@dataclass(frozen=True, slots=True)
class JsonlSink:
    path: Path

    def describe(self) -> str:
        return f"file://{self.path}"

    def open(self) -> SinkWriter:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return _LinesWriter(open(self.path, "wb"), owned=True)  # noqa: SIM115
        except OSError as exc:
            raise SinkError(
                f"cannot write sink file {self.path}: {exc.strerror}; "
                "pass a writable path as file:///path/out.jsonl"
            ) from exc


@dataclass(frozen=True, slots=True)
class StdoutSink:
    def describe(self) -> str:
        return "stdout://"

    def open(self) -> SinkWriter:
        return _LinesWriter(sys.stdout.buffer, owned=False)


def jsonl(path: str | Path) -> JsonlSink:
    return JsonlSink(Path(path))


def stdout() -> StdoutSink:
    return StdoutSink()


def from_url(url: str) -> Sink:
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = unquote(parts.path)
        if not path:
            raise ConfigError(f"sink {url!r} has no path; use file:///absolute/path.jsonl")
        return jsonl(path)
    if parts.scheme == "stdout" or url == "-":
        return stdout()
    raise ConfigError(
        f"unknown sink scheme {parts.scheme or '(none)'!r} in {url!r}; "
        f"use one of {', '.join(s + '://' for s in SCHEMES)}"
    )


__all__ = ["JsonlSink", "Sink", "SinkWriter", "StdoutSink", "from_url", "jsonl", "stdout"]
