"""weir's exceptions: one root, one subclass per area.

    WeirError                  (exit code of the weir command)
    ├── JobDefinitionError     a job file or job graph that cannot run (2)
    │   ├── BroadcastStateError  a function using broadcast state as the pattern forbids
    │   ├── MalformedPatternError  a CEP pattern that cannot be compiled (Flink's
    │                              MalformedPatternException)
    │   └── ExpressionError    an expression built wrongly (also a TypeError: ``and``/``or``/
    │                          ``not``/``in`` on an expression, a literal weir cannot hold)
    ├── ConfigError            a bad flag, URL or setting value (2)
    │   ├── PathRefused        a path (flag or request) that leaves its directory (2)
    │   └── MissingExtra       an optional part whose extra is not installed (2)
    ├── SourceError            a source that cannot be opened or read (1)
    ├── SinkError              a sink that cannot be opened or written (1)
    ├── StateError             RocksDB state that cannot be opened, read or written (1)
    │   └── StorageError       checkpoint storage (a directory or S3) that cannot be reached,
    │       │                  read or written (1)
    │       └── StorageConflict  a conditional write that found the object created or changed
    │                          by someone else (1)
    ├── MessageError           bytes from another process that are not a message weir sent (1)
    ├── ControlError           a job manager that cannot do what it was asked: its control
    │                          channel cannot be reached, refuses or times out, the job is not
    │                          running, or a stop's savepoint failed and the job goes on (1)
    ├── DeadLetterLimit        more of a job's records went to the dead letters than the
    │                          run's `max_dead_letter_ratio` allows (1)
    ├── WorkerFailed           a worker process died or reported a fatal error (1)
    └── LeaseLost              a job manager that lost its lease on the job (another one may
                               run it): it stopped without committing (1)

Every message names the offending value and what to do about it. ``usage`` sorts them for the
command line: a usage error is fixed by changing what was typed (a flag, a variable, the job
file) and exits 2; any other error happened while doing the work and exits 1.
"""

from __future__ import annotations

from typing import ClassVar


class WeirError(Exception):
    """Root of every error weir raises on purpose."""

    usage: ClassVar[bool] = False

    @property
    def exit_code(self) -> int:
        """The ``weir`` command's exit status for this error: 2 for usage, 1 otherwise."""
        return 2 if self.usage else 1


class JobDefinitionError(WeirError):
    """The job file or the job graph is not something weir can run."""

    usage = True


class BroadcastStateError(JobDefinitionError):
    """A broadcast process function used broadcast state as the pattern forbids: it wrote it
    from the keyed side, named a state its broadcast stream did not declare, stored a value
    that cannot be encoded, or asked for a key's state on the broadcast side."""


class ExpressionError(JobDefinitionError, TypeError):
    """An expression (``weir.col(...)``) built in a way weir cannot run: Python's ``and``,
    ``or``, ``not``, ``in`` or a chained comparison on an expression (use ``&``, ``|``, ``~``,
    ``.is_in``), a literal of a type or size weir does not hold, an unknown cast. A
    ``TypeError`` too, as the same mistakes are in Polars and pandas."""


class MalformedPatternError(JobDefinitionError):
    """A CEP pattern (``weir.engine.cep``) or a ``MATCH_RECOGNIZE`` clause that cannot be
    compiled: a quantifier applied twice, a name used twice, a NOT pattern at the end without
    ``within``, a skip strategy naming no pattern (Flink's ``MalformedPatternException``)."""


class ConfigError(WeirError):
    """A flag, URL or setting has a value weir cannot use."""

    usage = True


class PathRefused(ConfigError):
    """A path from a flag, a request or a checkpoint's metadata points outside the directory it
    must stay in (``..``, a symlink out, an absolute path elsewhere)."""


class MissingExtra(ConfigError):
    """An optional part of weir (Kafka, S3, SQL, Spark) whose extra is not installed; the
    message names the extra and the ``pip install`` that adds it (``weir.base.extras``)."""


class SourceError(WeirError):
    """A source cannot be opened or read."""


class SinkError(WeirError):
    """A sink cannot be opened or written."""


class StateError(WeirError):
    """RocksDB state cannot be opened, read or written."""


class StorageError(StateError):
    """Checkpoint storage (a local directory or an S3 bucket) cannot be reached, read or written;
    the message names the storage URL (never a secret) and what to check."""


class StorageConflict(StorageError):
    """A conditional write (create-only, or replace-if-unchanged) found the object created or
    changed by someone else since it was read: nothing was written."""


class MessageError(WeirError):
    """Bytes from another process that do not decode to a message this version of weir knows:
    an unknown message type, a missing or unknown field, or a value of the wrong type."""


class ControlError(WeirError):
    """A job manager cannot do what its control channel (or its API) asked: the channel cannot
    be reached, is not weir's, refuses the key, closes or does not answer in time; the job is
    not running (any more); or a savepoint failed. The job is left as it was."""


class DeadLetterLimit(WeirError):
    """More of a job's records went to the dead letters than the run's
    ``max_dead_letter_ratio`` allows: the job fails for good (a restart would read the same
    records again). The message names the share, the limit and the first record's reason."""


class WorkerFailed(WeirError):
    """A worker process died or reported a fatal error."""

    def __init__(self, worker: int, reason: str) -> None:
        super().__init__(f"worker {worker} failed: {reason}")
        self.worker = worker
        self.reason = reason


class LeaseLost(WeirError):
    """This job manager lost its lease on the job (``<checkpoint-dir>/<job>/leader``), or could
    not renew it in time: another job manager may run the job now, so this one committed
    nothing more, killed its workers and stopped."""
