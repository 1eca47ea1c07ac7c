"""weir's exceptions: one root, one subclass per area.

    WeirError
    ├── JobDefinitionError     a job file or job graph that cannot run (names the fix)
    ├── ConfigError            a bad flag, URL or setting value
    │   └── PathRefused        a path (flag or request) that leaves the directory it must stay in
    ├── SourceError            a source that cannot be opened or read
    ├── SinkError              a sink that cannot be opened or written
    ├── StateError             RocksDB state that cannot be opened, read or written
    ├── MessageError           bytes from another process that are not a message weir sent
    └── WorkerFailed           a worker process died or reported a fatal error

Every message names the offending value and what to do about it.
"""

from __future__ import annotations


class WeirError(Exception):
    """Root of every error weir raises on purpose."""


class JobDefinitionError(WeirError):
    """The job file or the job graph is not something weir can run."""


class ConfigError(WeirError):
    """A flag, URL or setting has a value weir cannot use."""


class PathRefused(ConfigError):
    """A path from a flag, a request or a checkpoint's metadata points outside the directory it
    must stay in (``..``, a symlink out, an absolute path elsewhere)."""


class SourceError(WeirError):
    """A source cannot be opened or read."""


class SinkError(WeirError):
    """A sink cannot be opened or written."""


class StateError(WeirError):
    """RocksDB state cannot be opened, read or written."""


class MessageError(WeirError):
    """Bytes from another process that do not decode to a message this version of weir knows:
    an unknown message type, a missing or unknown field, or a value of the wrong type."""


class WorkerFailed(WeirError):
    """A worker process died or reported a fatal error."""

    def __init__(self, worker: int, reason: str) -> None:
        super().__init__(f"worker {worker} failed: {reason}")
        self.worker = worker
        self.reason = reason
