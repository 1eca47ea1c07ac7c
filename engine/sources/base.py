"""The source contract: a source has splits; a split reader reads batches and knows its offset.

A batch holds either raw ``bytes`` lines (decoded as JSON by the pipeline, so malformed input takes
the same dead-letter path for every source) or already-decoded records.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload


class LineBlock(Sequence[bytes]):
    """A batch of raw JSON lines kept as the one block of bytes they were read as: whole lines,
    split at ``\n`` only, each with its ``\n`` (the file's last may lack it). The columnar
    source hands ``data`` to the scanner as it is (issue 38: no Python object per line); any
    other reader sees a sequence of lines, split once, when it first asks for one.

    Example:
        >>> block = LineBlock(b'{"a":1}\n{"a":2}\n', 2)
        >>> len(block), block[1]
        (2, b'{"a":2}\n')
    """

    __slots__ = ("data", "_count", "_lines")

    def __init__(self, data: bytes, count: int) -> None:
        self.data = data
        self._count = count
        self._lines: list[bytes] | None = None

    def lines(self) -> list[bytes]:
        """The lines, as ``readlines`` gives them."""
        if self._lines is None:  # binary readlines splits at b"\n" only, as the file's did
            self._lines = io.BytesIO(self.data).readlines()
        return self._lines

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        return self.lines()[i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.lines())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LineBlock):
            return self.data == other.data
        if isinstance(other, list):
            return self.lines() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as one

    def __repr__(self) -> str:
        return f"LineBlock({self._count} lines, {len(self.data)} bytes)"


@dataclass(slots=True)
class SourceBatch:
    """One batch a split reader read: raw JSON lines or decoded records (``decoded``), whether
    the split has ended (``end``), the offsets after it, and ``first_line``: the line number
    (from 1) of the first item in its file, for sources of lines (a dead letter's warning
    names its line); None for others."""

    items: Sequence[Any]  # a list, or a file's ``LineBlock``
    decoded: bool
    end: bool = False
    offsets: dict[str, Any] = field(default_factory=dict)
    first_line: int | None = None


class SplitReader(Protocol):
    """Reads one split of a source, a batch at a time, from an offset (``Source.open``)."""

    def read_batch(self, max_records: int) -> SourceBatch:
        """Up to ``max_records`` records; an empty batch when none are ready yet."""
        ...

    def offset(self) -> int:
        """Where the next batch starts: what a checkpoint stores and ``Source.open`` takes."""
        ...

    def lag(self) -> int | None:
        """Records not read yet, when the source knows (None: it does not)."""
        ...

    def commit(self, offset: int) -> None:
        """A checkpoint that holds ``offset`` completed (a Kafka group's offset, for
        monitoring; most sources have nothing to do)."""
        ...

    def close(self) -> None:
        """Release the split's file or connection."""
        ...


class Source(Protocol):
    """A short contract: splits, open a split at an offset, read batches."""

    @property
    def bounded(self) -> bool:
        """Whether the source ends (a file) or not (a generator, Kafka without ``end``)."""
        ...

    def describe(self) -> str:
        """The source as a URL, for ``weir explain``, ``GET /jobs/{job}`` and logs."""
        ...

    def splits(self, parallelism: int) -> list[str]:
        """The source's splits; ``parallelism`` is a hint for sources that can fan out."""
        ...

    def open(self, split: str, offset: Any = None) -> SplitReader:
        """A reader of ``split`` from ``offset`` (None: the start; else a checkpoint's)."""
        ...
