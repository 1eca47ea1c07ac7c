"""weir: a queryable-state stream processor.

    from weir import Job, WatermarkStrategy, agg, sinks, sources, windows

The repository's folders install under this one namespace: ``weir.engine`` (the job API and
the runtimes), ``weir.state`` (key groups, RocksDB, checkpoints), ``weir.api`` (the HTTP query
layer), ``weir.app`` (the command line) and ``weir.base`` (errors, paths, files, logging). The
job API is ``weir.engine``'s, re-exported here.

The names load on first use (PEP 562): ``import weir.client`` in a notebook, which runs this
module first, then loads neither the job API nor the runtime (``docs/contributing/
architecture.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weir.engine import *  # noqa: F403 - the job API, named once in weir.engine.__all__

    __version__: str


# this package's own modules: ``from weir import client`` must import the submodule, not load
# the job API to find out that ``client`` is not one of its names
_SUBMODULES = frozenset({"api", "app", "base", "client", "state", "testing"})


def __dir__() -> list[str]:
    """The public API (``weir.engine.__all__``) and ``__version__``; no module's own names."""
    return sorted([*importlib.import_module("weir.engine").__all__, "__version__"])


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    if name == "engine":
        return importlib.import_module("weir.engine")
    if name in _SUBMODULES or (name.startswith("__") and name != "__all__"):
        raise AttributeError(f"module 'weir' has no attribute {name!r}")
    engine = importlib.import_module("weir.engine")
    if name == "__all__":  # ``from weir import *``
        return [*engine.__all__, "__version__"]
    if name not in engine.__all__:
        raise AttributeError(f"module 'weir' has no attribute {name!r}")
    return getattr(engine, name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from weir.base.extras import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
