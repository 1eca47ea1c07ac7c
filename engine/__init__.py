"""weir's public job API.

from engine import Job, WatermarkStrategy, agg, sinks, sources, windows
"""

from __future__ import annotations

from engine import agg, sinks, sources, windows
from engine.errors import (
    ConfigError,
    JobDefinitionError,
    SinkError,
    SourceError,
    StateError,
    WeirError,
    WorkerFailed,
)
from engine.job import DataStream, Job, KeyedStream, ResultStream, WindowedStream
from engine.watermarks import WatermarkStrategy

__all__ = [
    "ConfigError",
    "DataStream",
    "Job",
    "JobDefinitionError",
    "KeyedStream",
    "ResultStream",
    "SinkError",
    "SourceError",
    "StateError",
    "WatermarkStrategy",
    "WeirError",
    "WindowedStream",
    "WorkerFailed",
    "agg",
    "sinks",
    "sources",
    "windows",
]
