"""The stored form of operator state, one level under the operators: how a value under a state
key is encoded (``codec``), what an aggregate set's slots hold and how they fold, merge and turn
into a result (``fold``), what a triggered window keeps (``triggered``), and how top-N ranks
(``ranking``).

The operators write through it; the query API reads through this package's names only, and
imports no operator runtime nor task module (the import contract in ``pyproject.toml`` checks
it). The backfill writes the same form from Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.base.lazy import exports
from weir.engine.runtime.stored.codec import (
    compose_stored,
    decode_session,
    decode_state,
    decode_window,
    stores_cells,
    uses_panes,
)
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.runtime.stored.ranking import TOP_K, best, finite_number

if TYPE_CHECKING:
    from weir.engine.runtime.stored.triggered import query_windows

# what the API reads of a triggered window's state: loaded by the first such read
_HOMES = {"query_windows": "weir.engine.runtime.stored.triggered"}


__getattr__, __dir__ = exports(__name__, _HOMES)


__all__ = [
    "TOP_K",
    "FoldPlan",
    "best",
    "compose_stored",
    "decode_session",
    "decode_state",
    "decode_window",
    "finite_number",
    "query_windows",
    "stores_cells",
    "uses_panes",
]
