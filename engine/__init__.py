"""weir's public job API.

from weir import Job, WatermarkStrategy, agg, evictors, sinks, sources, triggers, windows
"""

from __future__ import annotations

from weir.engine import agg, evictors, sinks, sources, triggers, windows
from weir.engine.errors import (
    ConfigError,
    JobDefinitionError,
    SinkError,
    SourceError,
    StateError,
    WeirError,
    WorkerFailed,
)
from weir.engine.job import (
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
    "ConfigError",
    "DataStream",
    "Job",
    "JobDefinitionError",
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
    "sinks",
    "sources",
    "triggers",
    "windows",
]
