"""Stage 1 of a plain job's JSONL file read as columns: no Python object per record.

A job is plain when nothing between its source and the window operator runs Python: the event
time is a field (``timestamp="ts"``), the key a field (``key_by("id")``), no map, flat_map or
lambda filter (filters that are expressions are fine: ``filter(col("event") == "impression")``),
and built-in aggregates over fields on tumbling, sliding or cumulate windows. Its records are
then only the fields they name, so pyarrow's JSON reader reads a block of lines into those
columns (int64, string, int64) and numpy computes watermarks, windows and lateness
(``selector.Selector.arrow_columns``). The filters run on the block as columns too: the
kernels' scanner reads the fields they use exactly as orjson would, and the columnar evaluator
(``kernels.expr``, equal to the per-record path by its tests) gives the rows they keep, after
the watermarks (the chain's order); a block where an expression fails on a row it has not
dropped yet goes to the line path, which writes that row's dead letter.

The result must be the one the line path (orjson, the chain) gives, so a block is read as
columns only when it is *clean*, which the line path would take without a dead letter and
which pyarrow reads the same way; any other block goes through the line path, exactly as
before (its dead letters too). pyarrow's reader accepts some lines that orjson refuses, so a
block is clean only when:

- every line is one object on its own: it starts with ``{`` and ends with ``}`` (no blank
  line, no spaces or ``\\r`` around it), and the reader found as many records as lines (two
  objects on one line are two records to pyarrow, and malformed to orjson);
- it is valid UTF-8 (pyarrow passes invalid bytes in fields it skips);
- it holds no ``NaN`` or ``Inf`` (pyarrow reads ``NaN``, ``Inf`` and ``Infinity`` as numbers);
- no number overflows a double (orjson refuses ``1e400``, or 309 digits; pyarrow's skipped
  fields take them), and no line nests deeper than orjson's limit;
- every record has the three fields, of those types (an integer event time and aggregated
  field, a string key of at most ``MAX_KEY_BYTES`` with no ``\\N`` in it, which only the
  chain's ``canonical_key`` writes right): no null, no other type. An int key, a
  float value or a float event time make pyarrow fail the block, which the line path then
  reads (where that is the rule, columns are tried on few blocks: ``RETRY_EVERY``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.base.errors import SourceError
from weir.engine.agg import Builtin
from weir.engine.job import Job
from weir.engine.kernels import KERNELS, ir
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.scan import OK, scan_block
from weir.engine.nodes import KeyByNode, StatelessNode, WindowNode
from weir.engine.runtime.stored.fold import FoldPlan
from weir.engine.spark.plan import python_path
from weir.engine.watermarks import MIN_WATERMARK
from weir.engine.windows import SessionWindows
from weir.state.layout import MAX_KEY_BYTES

BLOCK_BYTES = 4 << 20  # lines read as one block (cut at a line end)
# after this many blocks in a row the line path had to read, columns are tried on one block in
# RETRY_EVERY only (a file whose records are rarely plain costs little more than the line path)
GIVE_UP_AFTER = 3
RETRY_EVERY = 16
_EXPONENT = re.compile(rb"[0-9][0-9.]*[eE][+-]?[0-9]+")
_LONG_DIGITS = re.compile(rb"[0-9]{300}")
_LONG_LINE = 300  # bytes: a line this short cannot hold 309 digits or orjson's depth limit
_MAX_DEPTH = 1000  # opening brackets a line may hold (orjson refuses past 1024)
KEEP = "__weir_keep"  # the column of a block's rows its expression filters keep


@dataclass(frozen=True)
class PlainJob:
    """The three kinds of field a plain job's records are read for."""

    ts: str
    key: str
    fields: tuple[str, ...]
    filters: tuple[ir.Expr, ...] = ()  # expression filters, in the job's order

    def schema(self) -> Any:
        import pyarrow as pa  # type: ignore[import-untyped]

        cols = [(self.ts, pa.int64()), (self.key, pa.string())]
        return pa.schema(cols + [(f, pa.int64()) for f in self.fields])


def plain_job(job: Job, op: WindowNode) -> PlainJob | None:
    """The job's fields when it is plain (see the module's docstring), else None."""
    source = job.sources[0]
    if python_path(op) or isinstance(op.assigner, SessionWindows):
        return None
    if any(isinstance(a, Builtin) and a.expr is not None for a in op.aggregates.values()):
        return None  # an expression's input is computed from the record (the line path)
    if not isinstance(source.timestamp, str) or len(source.children) != 1:
        return None
    node = source.children[0]
    filters: list[ir.Expr] = []
    while isinstance(node, StatelessNode) and node.expr is not None and len(node.children) == 1:
        filters.append(node.expr)  # a filter of an expression (only filters carry one)
        node = node.children[0]
    if not isinstance(node, KeyByNode) or not isinstance(node.key, str):
        return None
    if not any(c is op for c in node.children):
        return None
    fields = tuple(FoldPlan(op.aggregates).fields)
    names = [source.timestamp, node.key, *fields]
    if len(set(names)) != len(names):  # one field read as two types: the line path decides
        return None
    return PlainJob(source.timestamp, node.key, fields, tuple(filters))


def blocks(path: str, size: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The file in blocks of whole lines (the last one as the file ends)."""
    with open(path, "rb") as fh:
        rest = b""
        while True:
            chunk = fh.read(size)
            if not chunk:
                if rest:
                    yield rest
                return
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a block: read on
                rest = data
                continue
            rest = data[cut:]
            yield data[:cut]


def lines(block: bytes) -> list[bytes]:
    """A block's lines as ``readlines`` gives them (each with its ``\\n``, split only there)."""
    parts = block.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


class ColumnReader:
    """Reads clean blocks of one plain job's lines as columns; ``read`` answers None for a
    block the line path must read."""

    def __init__(self, plain: PlainJob) -> None:
        import pyarrow.json as pj  # type: ignore[import-untyped]

        self.plain = plain
        self._parse = pj.ParseOptions(
            explicit_schema=plain.schema(), unexpected_field_behavior="ignore"
        )
        self._misses = 0

    @property
    def active(self) -> bool:
        return self._misses < GIVE_UP_AFTER or self._misses % RETRY_EVERY == 0

    def read(self, block: bytes) -> Any:
        """The block's records as an Arrow record batch of the plain job's fields, or None."""
        table = self._table(block) if self.active else None
        self._misses = 0 if table is not None else self._misses + 1
        return table

    def _table(self, block: bytes) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc  # type: ignore[import-untyped]
        import pyarrow.json as pj

        n = clean_lines(block)
        if n is None:
            return None
        options = pj.ReadOptions(use_threads=False, block_size=len(block) + 1)
        try:
            table = pj.read_json(io.BytesIO(block), read_options=options, parse_options=self._parse)
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != n or any(c.null_count for c in table.columns):
            return None
        key = table.column(self.plain.key)
        if n and pc.max(pc.binary_length(key)).as_py() > MAX_KEY_BYTES:
            return None
        if n and pc.any(pc.match_substring(key, "\\N")).as_py():
            return None  # a key shaped like the NULL key's form: the chain's canonical_key
        if self.plain.filters:
            keep = kept_rows(self.plain.filters, block, n)
            if keep is None:
                return None
            table = table.append_column(KEEP, pa.array(keep))
        return table.combine_chunks().to_batches()[0]


def kept_rows(filters: tuple[ir.Expr, ...], block: bytes, n: int) -> Any:
    """The rows of a clean block of ``n`` lines that ``filters`` keep (a bool array), or None
    when one of them fails on a row an earlier one kept (the line path reports it)."""
    fields = tuple(dict.fromkeys(c for f in filters for c in ir.columns_of(f)))
    scan = scan_block(KERNELS.scan_lines, block, fields)
    if len(scan) != n or (scan.status != OK).any():
        return None
    keep = np.ones(n, dtype=np.bool_)
    for f in filters:
        mask, errors = filter_mask(KERNELS, f, scan)
        if any(keep[i] for i in errors):
            return None
        keep &= mask
    return keep


def clean_lines(block: bytes) -> int | None:
    """How many lines the block holds if each is one JSON object that orjson and pyarrow read
    alike (the module's list), else None. Cheap: whole-block scans, and a closer look only at
    the lines that could hold a large number."""
    if not block or b"NaN" in block or b"Inf" in block:
        return None
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    arr = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(arr == 0x0A)
    if block[-1:] != b"\n":
        ends = np.append(ends, len(arr))
    starts = np.concatenate(([0], ends[:-1] + 1))
    if (ends <= starts).any():  # a blank line
        return None
    if not ((arr[starts] == 0x7B).all() and (arr[ends - 1] == 0x7D).all()):  # { ... }
        return None
    for i in np.flatnonzero(ends - starts > _LONG_LINE).tolist():
        line = block[starts[i] : ends[i]]
        if _LONG_DIGITS.search(line) or line.count(b"[") + line.count(b"{") > _MAX_DEPTH:
            return None
    if not _exponents_fit(block, arr, starts, ends):
        return None
    return len(ends)


def _exponents_fit(block: bytes, arr: Any, starts: Any, ends: Any) -> bool:
    """No number with an exponent overflows a double (one that orjson would refuse). Only the
    lines with a digit before an ``e`` are looked at."""
    e = np.flatnonzero((arr[1:] | 0x20) == 0x65) + 1
    if not len(e):
        return True
    before = arr[e - 1]
    e = e[(before >= 0x30) & (before <= 0x39)]
    for i in np.unique(np.searchsorted(ends, e)).tolist():
        for token in _EXPONENT.findall(block[starts[i] : ends[i]]):
            try:
                if float(token) in (float("inf"), float("-inf")):
                    return False
            except ValueError:  # not a number (text in a string): it could hide one
                return False
    return True


def watermarks(t: Any, max_seen: int, bound_ms: int) -> tuple[Any, int]:
    """``watermarks.per_record_watermarks`` on an int64 array: the watermark each record
    arrives under (the split's max event time before it, less the bound and 1, never below
    ``MIN_WATERMARK``), and the split's new max event time."""
    running = np.maximum.accumulate(np.concatenate(([max_seen], t)))
    floor = MIN_WATERMARK + bound_ms + 1  # below it, the watermark is MIN_WATERMARK
    wms = np.maximum(running[:-1], floor) - (bound_ms + 1)
    return wms, int(running[-1])


def column_batches(path: str, plain: PlainJob, block_bytes: int = BLOCK_BYTES) -> Iterator[Any]:
    """The file's records in order: each clean block as an Arrow record batch of the plain job's
    fields, the others as the line path's batches of lines; then an end batch."""
    from weir.engine.sources.base import SourceBatch
    from weir.engine.spark.inputs import READ_BATCH

    reader = ColumnReader(plain)
    try:
        for block in blocks(path, block_bytes):
            table = reader.read(block)
            if table is not None:
                yield table
                continue
            found = lines(block)
            for i in range(0, len(found), READ_BATCH):
                yield SourceBatch(found[i : i + READ_BATCH], decoded=False)
    except FileNotFoundError:  # as the line path's reader says it (``sources.file``)
        raise SourceError(
            f"input file {path} does not exist; pass an existing JSONL file as file:///path"
        ) from None
    except OSError as exc:
        raise SourceError(
            f"`input` {path}: cannot read it as jsonl ({exc}); check the file or `format`"
        ) from None
    yield SourceBatch([], decoded=False, end=True)
