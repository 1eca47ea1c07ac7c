"""A source's raw JSON lines read straight into columns (issue 38, item 2: "read raw line
blocks, decode only the fields the job uses into columns").

A source qualifies when nothing between it and one columnar ``key_by`` runs Python: the event
time is a field, the filters are expressions (``filter(col("event") == "impression")``, or a SQL
``WHERE`` that ``sql.toir`` translated), a SQL table's check of its declared types may come
first (``checked``), the key is a field (or a SQL ``GROUP BY`` of one column), and the
``key_by``'s operators fold fields (``columnar.refusal`` said yes). Then a batch of lines (a
file's ``LineBlock`` as it was read) is one block for the kernels' scanner (``kernels.scan``:
only the fields the job reads, exactly as orjson reads them, orjson itself for any line the
scanner cannot prove it reads the same way), the filters run on the columns (``kernels.expr``,
the evaluator its tests pin to the per-record reference), and the rows they keep become the
``ColumnBatch`` the keyed side folds: no dict is built for a record unless a rare row needs it
(a late record is decoded from its line for the late output).

Exactness first: a batch is read this way only when it is *clean*, when the per-record path
would send none of its records to the dead letters before the keyed side and would read each
value as the scan does: every line one object (no blank, malformed or non-object line), every
event time an int within the time range, every declared column's value of its type without a
conversion (but an int in a DOUBLE column, converted on the columns), no filter error on a row
it reaches, every key a plain string (no NULL, no int, no leading backslash, within
``MAX_KEY_BYTES``), every aggregated value an int64, a float, NULL or absent. Any other batch
takes ``ColumnChain``'s path as before, which gives every dead letter its reason; ``scan_path``
answers False for it before it changes any state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from weir.engine.kernels import ir
from weir.engine.kernels.expr import filter_mask
from weir.engine.kernels.scan import (
    ABSENT,
    FALSE,
    FLOAT,
    INT,
    NULL,
    OK,
    OTHER,
    STR,
    TRUE,
    Scan,
    scan_block,
)
from weir.engine.nodes import ColumnType, KeyByNode, SourceNode, StatelessNode
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged
from weir.engine.sources.base import LineBlock
from weir.state.layout import MAX_KEY_BYTES

Array = Any
_BACKSLASH = 0x5C


Step = ir.Expr | tuple[ColumnType, ...]  # an expression filter, or a table's declared columns


@dataclass(frozen=True)
class ScanPlan:
    """What a qualifying source's lines are scanned for."""

    ts: str
    key: str
    fields: tuple[str, ...]  # the key_by's aggregated fields
    filters: tuple[ir.Expr, ...]  # expression filters, in the job's order
    node: KeyByNode
    read: tuple[str, ...]  # every field the scan extracts (ts, key, fields, steps' columns)
    # the steps in the job's order: filters and SQL tables' declared columns (``checks``)
    steps: tuple[Step, ...] = ()
    checks: tuple[Callable[[Any], Any], ...] = ()  # the checks' per-record functions


def scan_plan(
    source: SourceNode, columnar: dict[int, list[str]], keyby_index: dict[int, int]
) -> ScanPlan | None:
    """The plan of ``source`` when its lines can be read as columns (see the module), else
    None. ``columnar``: the aggregated fields of each columnar ``key_by``, by its index."""
    ts = source.timestamp
    if not isinstance(ts, str) or source.timestamp_expr is not None or len(source.children) != 1:
        return None
    node: Any = source.children[0]
    steps: list[Step] = []
    checks = []
    while isinstance(node, StatelessNode):
        if len(node.children) != 1:
            return None
        check = node.sql.check if node.sql is not None and node.kind == "map" else None
        if check is not None:
            steps.append(check)
            checks.append(node.fn)
        elif node.expr is not None and node.kind == "filter":
            steps.append(node.expr)
        else:
            return None
        node = node.children[0]
    key = key_field(node)
    if key is None:
        return None
    index = keyby_index.get(id(node))
    if index not in columnar or node.key_expr is not None:
        return None
    fields = tuple(columnar[index])
    read = [ts, key, *fields]
    if len(set(read)) != len(read):  # one field read as two things: the record path decides
        return None
    for step in steps:
        used = [c[0] for c in step] if isinstance(step, tuple) else ir.columns_of(step)
        read += [c for c in used if c not in read]
    filters = tuple(s for s in steps if not isinstance(s, tuple))
    return ScanPlan(ts, key, fields, filters, node, tuple(read), tuple(steps), tuple(checks))


def key_field(node: Any) -> str | None:
    """The field ``node`` (a ``key_by``) keys by: its field name, or the field a SQL ``GROUP
    BY`` of one column reads (``sql.keys.key_selector``'s ``weir_field``); None otherwise."""
    if not isinstance(node, KeyByNode):
        return None
    if isinstance(node.key, str):
        return node.key
    field = getattr(node.key, "weir_field", None)
    return field if isinstance(field, str) else None


def block_of(lines: Sequence[Any]) -> tuple[bytes, bool] | None:
    """The batch's items as one block, and whether they were joined by ``\\n``: a file's
    ``LineBlock`` is one already; lines that end in ``\\n`` (``readlines``'s, the last may
    not) are joined as they are; payloads (Kafka's values) are joined by one. The first item
    decides which, in one join: whatever the others hold, ``_one_line_each`` then finds
    whether the scan's lines are the items (a payload with a ``\\n`` in it is not). None when
    they are not all bytes-like."""
    if isinstance(lines, LineBlock):
        return lines.data, False
    try:
        if len(lines) > 1 and lines[0][-1:] != b"\n":
            return b"\n".join(lines), True
        return b"".join(lines), False
    except TypeError:  # a Kafka record without a value (None), or decoded items
        return None


def _one_line_each(scan: Scan, lines: Sequence[Any], block: bytes, joined: bool) -> bool:
    """Did the scan split the batch into its items, one line each? A file's ``LineBlock`` is
    whole lines split at ``\\n`` by construction, so its count and length say it; other items
    must end where the scan's lines end (after the ``\\n`` that joined them, if one did)."""
    if len(scan) != len(lines):
        return False
    if isinstance(lines, LineBlock):
        return not len(scan) or int(scan.ends[-1]) == len(lines.data)
    if joined and block[-1:] != b"\n":
        # n items joined by n - 1 newlines, with none after the last: the scan finds one
        # line more than the block's newlines, so n lines exactly when no item holds one
        return True
    ends = np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)) + int(joined))
    if joined:
        ends[-1] -= 1  # no \n after the last payload
    return bool(np.array_equal(scan.ends, ends))


def scan_rows(
    kernels: Any, plan: ScanPlan, lines: Sequence[Any], hi: int
) -> tuple[Scan, Array, Array] | None:
    """Scan the batch; None unless it is clean up to the keyed side (see the module).

    Returns:
        ``(scan, ts, keep)``: the scan, every line's event time (``int64``), the rows the
        filters keep (an index array).
    """
    found = block_of(lines)
    if found is None:
        return None
    block, joined = found
    scan = scan_block(kernels.scan_lines, block, plan.read)
    if not _one_line_each(scan, lines, block, joined):
        return None  # items that are not one line each (Kafka payloads with or without \n)
    if not bool((scan.status == OK).all()):
        return None  # blank, malformed or non-object lines
    if not bool((scan.tags[0] == INT).all()) or int(scan.i64[0].max()) > hi:
        return None
    alive = np.ones(len(scan), bool)
    for step in plan.steps:
        if isinstance(step, tuple):
            if not checked(scan, step, np.flatnonzero(alive)):
                return None  # a value the table's check converts or refuses: the record path
            continue
        mask, errors = filter_mask(kernels, step, scan)
        if errors and bool(alive[np.fromiter(errors, np.int64, len(errors))].any()):
            return None  # a row the filter reaches fails it: the record path's dead letter
        alive &= mask
    keep = np.flatnonzero(alive)
    if not _keys_plain(scan, keep) or not _values_plain(scan, plan, keep):
        return None
    return scan, scan.i64[0], keep


def _table(*tags: int) -> Array:
    """A lookup table over the scanner's tags: True for ``tags`` (``table[column]`` tests
    a whole column in one gather, where ``np.isin`` sorts)."""
    out = np.zeros(OTHER + 1, bool)
    out[list(tags)] = True
    return out


_TAKES = {"str": (STR,), "bool": (FALSE, TRUE), "float": (FLOAT, INT)}
_TAKES |= {f"int{b}": (INT,) for b in (8, 16, 32, 64)}
# a declared type's tags: (NOT NULL) or (NULL or absent allowed)
_ALLOWED = {k: (_table(*t), _table(*t, NULL, ABSENT)) for k, t in _TAKES.items()}


def checked(scan: Scan, columns: tuple[ColumnType, ...], rows: Array) -> bool:
    """Do ``rows`` hold values of their declared ``columns`` as ``sql.columns.checker`` takes
    them without a dead letter, and with no conversion but an int in a FLOAT or DOUBLE column?
    That conversion is made on the scan's columns (int64 to double, rounding to nearest as
    Python's ``float(int)`` does), so the steps after the check read what the record path's
    do. False leaves the scan as it was."""
    convert = []
    sel = slice(None) if len(rows) == len(scan) else rows  # every row: no gather
    for name, kind, not_null in columns:
        j = scan.fields.index(name)
        tags = scan.tags[j][sel]
        if not bool(_ALLOWED[kind][0 if not_null else 1][tags].all()):
            return False
        if kind.startswith("int") and kind != "int64" and len(rows):
            bits = int(kind[3:])
            values = scan.i64[j][sel][tags == INT]
            if len(values) and (
                int(values.min()) < -(1 << (bits - 1)) or int(values.max()) >= 1 << (bits - 1)
            ):
                return False
        if kind == "float":
            convert.append(j)
    for j in convert:
        ints = scan.tags[j] == INT
        scan.f64[j][ints] = scan.i64[j][ints].astype(np.float64)
        scan.tags[j][ints] = FLOAT
    return True


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
    index: int,
    plan: ScanPlan,
    scan: Scan,
    lines: Sequence[Any],
    ts: Array,
    wms: Array,
    keep: Array,
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
    items = _LineSpans(lines.data, scan) if isinstance(lines, LineBlock) else lines
    records = Records(items, keep, _decoder(plan.checks))
    return ColumnBatch(index, keys, ts[keep], wms[keep], values, records, numeric)


class _LineSpans(Sequence[bytes]):
    """A block's lines found by the scan's line starts and ends, sliced one at a time (for
    the rare rows that need a record: no list of every line)."""

    def __init__(self, data: bytes, scan: Scan) -> None:
        self._data, self._starts, self._ends = data, scan.starts, scan.ends

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._data[int(self._starts[i]) : int(self._ends[i])]


def _decoder(checks: tuple[Callable[[Any], Any], ...]) -> Callable[[bytes], Any]:
    """A rare row's record from its line: orjson, then the table's checks (which convert a
    DOUBLE column's int, so a late record reads as the record path's does)."""
    if not checks:
        return orjson.loads
    if len(checks) == 1:
        (check,) = checks
        return lambda line: check(orjson.loads(line))

    def decode(line: bytes) -> Any:
        rec = orjson.loads(line)
        for c in checks:
            rec = c(rec)
        return rec

    return decode


__all__ = ["ScanPlan", "checked", "column_batch", "key_field", "scan_plan", "scan_rows"]
