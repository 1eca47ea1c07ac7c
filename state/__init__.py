"""State: key groups, the key layout, the backend contract and its RocksDB and in-memory
backends, checkpoint storage, restore and bulk load.

Its names load on first use (PEP 562), so a module that needs key groups or the key layout
(``weir.state.keygroups``, ``weir.state.layout``) does not load RocksDB.
"""

from __future__ import annotations

if __name__ != "weir.state":  # the checkout's root on sys.path makes `state` importable too
    raise ImportError(f"import weir.state, not {__name__}: this folder installs as weir.state")

from typing import TYPE_CHECKING

from weir.base.lazy import exports

if TYPE_CHECKING:
    from weir.state.backend import Batch, Snapshottable, StateBackend
    from weir.state.keygroups import (
        NULL_KEY,
        KeyGroupRange,
        canonical_key,
        key_group,
        key_groups,
        key_value,
        operator_for_key_group,
        range_for_operator,
    )
    from weir.state.memory import MemoryState
    from weir.state.rocksdb import RocksState
    from weir.state.rocksopts import RocksOptions
    from weir.state.secondary import SecondaryReader

_HOMES = {
    "NULL_KEY": "weir.state.keygroups",
    "Batch": "weir.state.backend",
    "KeyGroupRange": "weir.state.keygroups",
    "MemoryState": "weir.state.memory",
    "RocksOptions": "weir.state.rocksopts",
    "RocksState": "weir.state.rocksdb",
    "SecondaryReader": "weir.state.secondary",
    "Snapshottable": "weir.state.backend",
    "StateBackend": "weir.state.backend",
    "canonical_key": "weir.state.keygroups",
    "key_group": "weir.state.keygroups",
    "key_groups": "weir.state.keygroups",
    "key_value": "weir.state.keygroups",
    "operator_for_key_group": "weir.state.keygroups",
    "range_for_operator": "weir.state.keygroups",
}

__all__ = [
    "NULL_KEY",
    "Batch",
    "KeyGroupRange",
    "MemoryState",
    "RocksOptions",
    "RocksState",
    "SecondaryReader",
    "Snapshottable",
    "StateBackend",
    "canonical_key",
    "key_group",
    "key_groups",
    "key_value",
    "operator_for_key_group",
    "range_for_operator",
]


__getattr__, __dir__ = exports(__name__, _HOMES)
