"""Stream SQL: Flink's windowed ``GROUP BY`` queries compiled to the job API's operators.

A ``.sql`` job file (``load_script``) declares its table, functions and views; a Python job
calls ``job.sql(name, query, tables={...})`` (``add_view``). Either way each view is one window
operator, queryable at ``/{job}/{view}/state/{key}``; a composite key's string form is
``composite_key`` (``keys.py``).

A library over the job API: it builds jobs with the core's streams and never the reverse.
Importing this package binds ``Job.sql`` (``weir.engine`` imports it, so every job has the
method) and loads nothing else: its names, and sqlglot under them, load on first use (PEP 562),
so a job without SQL never pays for the parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from weir.base.extras import require
from weir.engine.job import Job

if TYPE_CHECKING:
    from weir.engine import agg
    from weir.engine.results import ResultStream
    from weir.engine.sql.build import add_view
    from weir.engine.sql.dialect import parse
    from weir.engine.sql.errors import SqlError, SqlSyntaxError, SqlUnsupported
    from weir.engine.sql.keys import composite_key, split_key
    from weir.engine.sql.script import load_script
    from weir.engine.streams import DataStream

__all__ = [
    "SqlError",
    "SqlSyntaxError",
    "SqlUnsupported",
    "add_view",
    "composite_key",
    "load_script",
    "parse",
    "split_key",
]

_HOMES = {
    "SqlError": "weir.engine.sql.errors",
    "SqlSyntaxError": "weir.engine.sql.errors",
    "SqlUnsupported": "weir.engine.sql.errors",
    "add_view": "weir.engine.sql.build",
    "composite_key": "weir.engine.sql.keys",
    "load_script": "weir.engine.sql.script",
    "parse": "weir.engine.sql.dialect",
    "split_key": "weir.engine.sql.keys",
}


_NO_PARSER = ("weir.engine.sql.errors", "weir.engine.sql.keys")  # load without sqlglot


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'weir.engine.sql' has no attribute {name!r}")
    if home not in _NO_PARSER:
        require("sql", "SQL (a .sql job file, job.sql)")
    return getattr(importlib.import_module(home), name)


def _job_sql(
    self: Job,
    name: str,
    query: str,
    *,
    tables: dict[str, DataStream],
    functions: dict[str, agg.AggregateFunction] | None = None,
    allowed_lateness_ms: int = 0,
    state_ttl_ms: int | None = None,
    primary_keys: dict[str, tuple[str, ...]] | None = None,
) -> ResultStream:
    require("sql", f"job.sql({name!r}, …)")
    from weir.engine.sql.build import add_view  # the parser loads with the first query

    return add_view(
        self, name, query, tables=tables, functions=functions,
        allowed_lateness_ms=allowed_lateness_ms, state_ttl_ms=state_ttl_ms,
        primary_keys=primary_keys,
    )  # fmt: skip


_job_sql.__doc__ = Job.sql.__doc__
Job.sql = _job_sql  # type: ignore[method-assign]
