"""Key groups: the unit of state sharding (Flink's KeyGroupRangeAssignment).

A key's group is a stable hash of its canonical bytes modulo ``max_parallelism``; worker ``i`` of
``p`` owns the contiguous, inclusive range ``[ceil(i*m/p), ceil((i+1)*m/p) - 1]``. The engine, the
query router and the Spark backfill all call these functions, so a key lands in one place only.
Python's salted ``hash()`` is never used.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_KEY_GROUPS = 1 << 15  # key groups are stored as 2 big-endian bytes


def canonical_key(key: object) -> str:
    """The string form a key is stored and queried under (ints as decimal, bools refused)."""
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise TypeError(f"key {key!r} has type {type(key).__name__}; keys must be str or int")


def key_group(key: str, max_parallelism: int) -> int:
    """Key group of a canonical key."""
    return zlib.crc32(key.encode()) % max_parallelism


def key_groups(keys: Iterable[str], max_parallelism: int) -> list[int]:
    """Key groups of many canonical keys (the batch form the hot path uses)."""
    return key_groups_of_stored(map(str.encode, keys), max_parallelism)


def key_groups_of_stored(keys: Iterable[bytes], max_parallelism: int) -> list[int]:
    """Key groups of many keys as state stores them (their canonical form, encoded)."""
    m = max_parallelism
    return [g % m for g in map(zlib.crc32, keys)]


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """An inclusive range of key groups; empty when ``end < start``."""

    start: int
    end: int

    def __contains__(self, kg: object) -> bool:
        return isinstance(kg, int) and self.start <= kg <= self.end

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def to_json(self) -> list[int]:
        return [self.start, self.end]


def validate_parallelism(parallelism: int, max_parallelism: int) -> None:
    if not 1 <= max_parallelism <= MAX_KEY_GROUPS:
        raise ValueError(
            f"max_parallelism={max_parallelism} is out of range; use 1..{MAX_KEY_GROUPS}"
        )
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism={parallelism} must be between 1 and max_parallelism={max_parallelism}"
        )


def range_for_operator(max_parallelism: int, parallelism: int, index: int) -> KeyGroupRange:
    """The key groups worker ``index`` of ``parallelism`` owns (Flink's formula)."""
    validate_parallelism(parallelism, max_parallelism)
    if not 0 <= index < parallelism:
        raise ValueError(f"worker index {index} is out of range for parallelism {parallelism}")
    start = -(-index * max_parallelism // parallelism)
    end = -(-(index + 1) * max_parallelism // parallelism) - 1
    return KeyGroupRange(start, end)


def operator_for_key_group(max_parallelism: int, parallelism: int, kg: int) -> int:
    """The worker index that owns key group ``kg`` (inverse of ``range_for_operator``)."""
    return kg * parallelism // max_parallelism
