"""State: key groups, the RocksDB key layout and backend."""

from __future__ import annotations

from weir.state.keygroups import (
    KeyGroupRange,
    canonical_key,
    key_group,
    key_groups,
    operator_for_key_group,
    range_for_operator,
)
from weir.state.rocksdb import RocksOptions, RocksState, SecondaryReader

__all__ = [
    "KeyGroupRange",
    "RocksOptions",
    "RocksState",
    "SecondaryReader",
    "canonical_key",
    "key_group",
    "key_groups",
    "operator_for_key_group",
    "range_for_operator",
]
