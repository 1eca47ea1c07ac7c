"""weir's public job API.

from weir import Job, WatermarkStrategy, agg, cep, evictors, joins, sinks, sources, windows
from weir import col, lit, when, coalesce   # expressions (``weir.engine.expressions``)

This package's ``__init__`` is the job API's façade: it loads the core (``job``, ``streams``,
``nodes``, windows, aggregates, sources, sinks) and the libraries built over it, whose import
binds their methods to the core's classes: ``joins`` (``DataStream.join``,
``KeyedStream.interval_join``), ``cep`` (``KeyedStream.pattern``) and ``sql`` (``Job.sql``;
the parser itself loads with the first query). It loads no runtime: ``weir.engine.runtime``
and ``weir.engine.spark`` load when a job runs (``docs/contributing/architecture.md``).
"""

from __future__ import annotations

if __name__ != "weir.engine":  # the checkout's root on sys.path makes `engine` importable too
    raise ImportError(f"import weir.engine, not {__name__}: this folder installs as weir.engine")

from weir.base.errors import (
    BroadcastStateError,
    ConfigError,
    ExpressionError,
    JobDefinitionError,
    SinkError,
    SourceError,
    StateError,
    WeirError,
    WorkerFailed,
)
from weir.engine import agg, cep, evictors, joins, sinks, sources, triggers, windows
from weir.engine import sql as _sql  # noqa: F401 - binds Job.sql
from weir.engine.broadcast import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from weir.engine.expressions import Expr, coalesce, col, lit, when
from weir.engine.job import (
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedKeyedStreams,
    ConnectedStreams,
    DataStream,
    Job,
    KeyedStream,
    OutputTag,
    ResultStream,
    SideOutputStream,
    WindowedStream,
)
from weir.engine.watermarks import WatermarkStrategy

__all__ = [
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStateError",
    "BroadcastStream",
    "ConfigError",
    "ConnectedKeyedStreams",
    "ConnectedStreams",
    "DataStream",
    "Expr",
    "ExpressionError",
    "Job",
    "JobDefinitionError",
    "KeyedBroadcastProcessFunction",
    "KeyedStream",
    "OutputTag",
    "ResultStream",
    "SideOutputStream",
    "SinkError",
    "SourceError",
    "StateError",
    "WatermarkStrategy",
    "WeirError",
    "WindowedStream",
    "WorkerFailed",
    "agg",
    "cep",
    "coalesce",
    "col",
    "evictors",
    "joins",
    "lit",
    "sinks",
    "sources",
    "triggers",
    "when",
    "windows",
]
