"""The source contract: a source has splits; a split reader reads batches and knows its offset.

A batch holds either raw ``bytes`` lines (decoded as JSON by the pipeline, so malformed input takes
the same dead-letter path for every source) or already-decoded records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)
class SourceBatch:
    """One batch a split reader read: raw JSON lines or decoded records (``decoded``), whether
    the split has ended (``end``), the offsets after it, and ``first_line``: the line number
    (from 1) of the first item in its file, for sources of lines (a dead letter's warning
    names its line); None for others."""

    items: list[Any]
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
