"""weir's public job API.

from weir import Job, WatermarkStrategy, agg, evictors, joins, sinks, sources, triggers, windows
"""

from __future__ import annotations

from weir.base.errors import (
    BroadcastStateError,
    ConfigError,
    JobDefinitionError,
    SinkError,
    SourceError,
    StateError,
    WeirError,
    WorkerFailed,
)
from weir.engine import agg, evictors, joins, sinks, sources, triggers, windows
from weir.engine.broadcast import BroadcastProcessFunction, KeyedBroadcastProcessFunction
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
    "evictors",
    "joins",
    "sinks",
    "sources",
    "triggers",
    "windows",
]
