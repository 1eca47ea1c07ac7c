"""weir: a queryable-state stream processor.

    from weir import Job, WatermarkStrategy, agg, sinks, sources, windows

The repository's folders install under this one namespace: ``weir.engine`` (the job API and
the runtimes), ``weir.state`` (key groups, RocksDB, checkpoints), ``weir.api`` (the HTTP query
layer) and ``weir.app`` (the command line). The job API is ``weir.engine``'s, re-exported here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from weir import engine as _engine
from weir.engine import *  # noqa: F403 - the job API, named once in weir.engine.__all__

try:
    __version__ = version("weir")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [*_engine.__all__, "__version__"]
