"""weir's public job API.

from weir import Job, WatermarkStrategy, agg, cep, evictors, joins, sinks, sources, windows
from weir import col, lit, when, coalesce   # expressions (``weir.engine.expressions``)

This package's ``__init__`` is the job API's façade: it loads the core (``job``, ``streams``,
``nodes``, windows, aggregates, sources, sinks) and ``sql``, which binds ``Job.sql`` (the
parser itself loads with the first query). The libraries ``cep`` and ``joins``, and
``evictors``, load on first use (PEP 562): a job that uses none of them does not pay for
their import. ``KeyedStream.pattern``, ``DataStream.join`` and
``KeyedStream.interval_join`` load their library when first called, and the library binds its
body in their place. It loads no runtime: ``weir.engine.runtime`` and ``weir.engine.spark``
load when a job runs (``docs/contributing/architecture.md``).
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import TYPE_CHECKING, Any

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
from weir.engine import agg, sinks, sources, triggers, windows
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

if TYPE_CHECKING:
    from weir.engine import cep, evictors, joins

# submodules loaded on first use: most jobs use none of them (issue 38)
_ON_FIRST_USE = ("cep", "evictors", "joins")

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


def __getattr__(name: str) -> Any:
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")  # and set here by the import system


def __dir__() -> list[str]:
    """The public API (loaded or not), the submodules loaded and the module's dunders: what
    ``dir`` showed when every name was imported up front."""
    names = globals()
    loaded = (n for n, v in names.items() if getattr(v, "__name__", None) == f"{__name__}.{n}")
    return sorted({*__all__, *loaded, *(n for n in names if n.startswith("__"))})


def _bound_on_first_call(cls: type, method: str, library: str) -> None:
    """``cls.method`` imports ``library`` when first called, which binds the method's body in
    its place (so this runs once); the declaration's signature and docstring are kept."""
    declared = getattr(cls, method)

    @functools.wraps(declared)
    def load_then_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        importlib.import_module(library)
        bound = getattr(cls, method)
        if bound is load_then_call:  # the library did not bind it: the declaration says why
            return declared(self, *args, **kwargs)
        return bound(self, *args, **kwargs)

    setattr(cls, method, load_then_call)


# the libraries' methods on the core's classes; a library loaded already has bound its own
for _cls, _method, _library in (
    (KeyedStream, "pattern", "weir.engine.cep"),
    (DataStream, "join", "weir.engine.joins"),
    (KeyedStream, "interval_join", "weir.engine.joins"),
):
    if _library not in sys.modules:
        _bound_on_first_call(_cls, _method, _library)
