"""Key groups: the unit of state sharding (Flink's KeyGroupRangeAssignment).

A key's group is a stable hash of its canonical bytes modulo ``max_parallelism``; worker ``i`` of
``p`` owns the contiguous, inclusive range ``[ceil(i*m/p), ceil((i+1)*m/p) - 1]``. The engine, the
query router and the Spark backfill all call these functions, so a key lands in one place only.
Python's salted ``hash()`` is never used.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_KEY_GROUPS = 1 << 15  # key groups are stored as 2 big-endian bytes
# The NULL key (SQL's ``GROUP BY`` over a NULL, ``key_by`` of a ``None``) is stored, hashed and
# queried as ``\N`` (the NULL of PostgreSQL's COPY and Hive's text files). A string key made of
# backslashes and a final ``N`` (``\N``, ``\\N``, ...) takes one more backslash in front, so
# no string key is ever ``\N`` and ``key_value`` reverses every canonical key.
NULL_KEY = "\\N"
_SHIFTED = re.compile(r"\\+N")


def canonical_key(key: object) -> str:
    """The string form a key is stored and queried under: a string as itself (one shaped like
    ``\\N`` escaped, see ``NULL_KEY``), an int in decimal, ``None`` as ``NULL_KEY``; a bool, a
    float or anything else is refused (``TypeError``)."""
    if isinstance(key, str):
        if key[:1] == "\\" and _SHIFTED.fullmatch(key):
            return "\\" + key
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    if key is None:
        return NULL_KEY
    raise TypeError(f"key {key!r} has type {type(key).__name__}; keys must be str or int")


def needs_escape(keys: list[str]) -> bool:
    """Might a string key of ``keys`` differ from its canonical form? (One pass in C over the
    joined keys: a batch with no ``\\N`` anywhere is canonical as it is.)"""
    return "\\N" in "".join(keys)


def key_value(canonical: str) -> str | None:
    """The key a canonical key stands for: ``None`` for ``NULL_KEY``, a string otherwise (an
    int key's decimal form: ``canonical_key`` keeps no type)."""
    if canonical == NULL_KEY:
        return None
    if canonical[:2] == "\\\\" and _SHIFTED.fullmatch(canonical):
        return canonical[1:]
    return canonical


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
