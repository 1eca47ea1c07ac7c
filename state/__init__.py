"""State: key groups, the key layout, the backend contract and its RocksDB and in-memory
backends."""

from __future__ import annotations

from weir.state.backend import Batch, Snapshottable, StateBackend
from weir.state.keygroups import (
    KeyGroupRange,
    canonical_key,
    key_group,
    key_groups,
    operator_for_key_group,
    range_for_operator,
)
from weir.state.memory import MemoryState
from weir.state.rocksdb import RocksOptions, RocksState, SecondaryReader

__all__ = [
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
    "operator_for_key_group",
    "range_for_operator",
]
