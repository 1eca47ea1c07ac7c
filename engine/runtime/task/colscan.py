"""A source's raw JSON lines read straight into columns (issue 38, item 2: "read raw line
blocks, decode only the fields the job uses into columns").

A source qualifies when nothing between it and one columnar ``key_by`` runs Python: the event
time is a field, the filters are expressions (``filter(col("event") == "impression")``), the
key is a field, and the ``key_by``'s operators fold fields (``columnar.refusal`` said yes).
Then a batch of lines is one block for the kernels' scanner (``kernels.scan``: only the fields
the job reads, exactly as orjson reads them, orjson itself for any line the scanner cannot prove
it reads the same way), the filters run on the columns (``kernels.expr``, the evaluator its
tests pin to the per-record reference), and the rows they keep become the ``ColumnBatch`` the
keyed side folds: no dict is built for a record unless a rare row needs it (a late record is
decoded from its line for the late output).

Exactness first: a batch is read this way only when it is *clean*, when the per-record path
would send none of its records to the dead letters before the keyed side and would read each
value as the scan does: every line one object (no blank, malformed or non-object line), every
event time an int within the time range, no filter error on a row it reaches, every key a plain
string (no NULL, no int, no leading backslash, within ``MAX_KEY_BYTES``), every aggregated value
an int64, a float, NULL or absent. Any other batch takes ``ColumnChain``'s path as before,
which gives every dead letter its reason; ``scan_path`` answers False for it before it changes
any state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from weir.engine.kernels import ir
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.scan import ABSENT, FLOAT, INT, NULL, OK, STR, Scan, scan_block
from weir.engine.nodes import KeyByNode, SourceNode, StatelessNode
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged
from weir.state.layout import MAX_KEY_BYTES

Array = Any
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class ScanPlan:
    """What a qualifying source's lines are scanned for."""

    ts: str
    key: str
    fields: tuple[str, ...]  # the key_by's aggregated fields
    filters: tuple[ir.Expr, ...]  # expression filters, in the job's order
    node: KeyByNode
    read: tuple[str, ...]  # every field the scan extracts (ts, key, fields, filters' columns)


def scan_plan(
    source: SourceNode, columnar: dict[int, list[str]], keyby_index: dict[int, int]
) -> ScanPlan | None:
    """The plan of ``source`` when its lines can be read as columns (see the module), else
    None. ``columnar``: the aggregated fields of each columnar ``key_by``, by its index."""
    ts = source.timestamp
    if not isinstance(ts, str) or source.timestamp_expr is not None or len(source.children) != 1:
        return None
    node: Any = source.children[0]
    filters: list[ir.Expr] = []
    while isinstance(node, StatelessNode):
        if node.expr is None or node.kind != "filter" or len(node.children) != 1:
            return None
        filters.append(node.expr)
        node = node.children[0]
    if not isinstance(node, KeyByNode) or not isinstance(node.key, str):
        return None
    index = keyby_index.get(id(node))
    if index not in columnar or node.key_expr is not None:
        return None
    fields = tuple(columnar[index])
    read = [ts, node.key, *fields]
    if len(set(read)) != len(read):  # one field read as two things: the record path decides
        return None
    for f in filters:
        read += [c for c in ir.columns_of(f) if c not in read]
    return ScanPlan(ts, node.key, fields, tuple(filters), node, tuple(read))


def block_of(lines: list[Any]) -> bytes | None:
    """The batch's lines as one block (each ``readlines`` line ends in ``\\n``, the last may
    not); None when they are not all bytes-like."""
    try:
        return b"".join(lines)
    except TypeError:  # a Kafka record without a value (None), or decoded items
        return None


def scan_rows(
    kernels: Any, plan: ScanPlan, lines: list[bytes], hi: int
) -> tuple[Scan, Array, Array] | None:
    """Scan the batch; None unless it is clean up to the keyed side (see the module).

    Returns:
        ``(scan, ts, keep)``: the scan, every line's event time (``int64``), the rows the
        filters keep (an index array).
    """
    block = block_of(lines)
    if block is None:
        return None
    scan = scan_block(kernels.scan_lines, block, plan.read)
    ends = np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)))
    if len(scan) != len(lines) or not np.array_equal(scan.ends, ends):
        return None  # items that are not one line each (Kafka payloads with or without \n)
    if not bool((scan.status == OK).all()):
        return None  # blank, malformed or non-object lines
    if not bool((scan.tags[0] == INT).all()) or int(scan.i64[0].max()) > hi:
        return None
    alive = np.ones(len(scan), bool)
    for f in plan.filters:
        mask, errors = filter_mask(kernels, f, scan)
        if errors and bool(alive[np.fromiter(errors, np.int64, len(errors))].any()):
            return None  # a row the filter reaches fails it: the record path's dead letter
        alive &= mask
    keep = np.flatnonzero(alive)
    if not _keys_plain(scan, keep) or not _values_plain(scan, plan, keep):
        return None
    return scan, scan.i64[0], keep


def _keys_plain(scan: Scan, keep: Array) -> bool:
    """Is every kept row's key a string the exchange and the state take as it is?"""
    if not len(keep):
        return True
    tags, ss, sl = scan.tags[1][keep], scan.ss[1][keep], scan.sl[1][keep]
    if not bool((tags == STR).all()) or int(sl.max()) > MAX_KEY_BYTES:
        return False
    data = np.frombuffer(scan.data, np.uint8)
    firsts = data[np.minimum(ss, len(data) - 1)]
    return not bool(((firsts == _BACKSLASH) & (sl > 0)).any())  # "\N" is the NULL key's form


def _values_plain(scan: Scan, plan: ScanPlan, keep: Array) -> bool:
    """Is every kept row's aggregated value an int64, a float, NULL or absent?"""
    for j in range(2, 2 + len(plan.fields)):
        tags = scan.tags[j][keep]
        if not bool(((tags == INT) | (tags == FLOAT) | (tags == NULL) | (tags == ABSENT)).all()):
            return False
    return True


def column_batch(
    index: int, plan: ScanPlan, scan: Scan, lines: list[bytes], ts: Array, wms: Array, keep: Array
) -> ColumnBatch:
    """The kept rows as the ``key_by``'s batch: keys as spans into the block, the values as
    the scan read them, the records decoded from their lines only when a row needs one."""
    values: dict[str, Tagged] = {}
    numeric = True
    for j, f in enumerate(plan.fields, start=2):
        tags = scan.tags[j][keep]
        values[f] = Tagged(tags, scan.i64[j][keep], scan.f64[j][keep])
        numeric = numeric and bool(((tags == INT) | (tags == FLOAT)).all())
    keys = Keys(None, scan.data, scan.ss[1][keep], scan.sl[1][keep])
    records = Records(lines, keep, orjson.loads)
    return ColumnBatch(index, keys, ts[keep], wms[keep], values, records, numeric)


__all__ = ["ScanPlan", "column_batch", "scan_plan", "scan_rows"]
