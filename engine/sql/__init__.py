"""Stream SQL: Flink's windowed ``GROUP BY`` queries compiled to the job API's operators.

A ``.sql`` job file (``load_script``) declares its table, functions and views; a Python job
calls ``job.sql(name, query, tables={...})`` (``add_view``). Either way each view is one window
operator, queryable at ``/{job}/{view}/state/{key}``; a composite key's string form is
``composite_key`` (``keys.py``).
"""

from __future__ import annotations

from weir.engine.sql.build import add_view
from weir.engine.sql.dialect import parse
from weir.engine.sql.errors import SqlError, SqlSyntaxError, SqlUnsupported
from weir.engine.sql.keys import composite_key, split_key
from weir.engine.sql.script import load_script

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
