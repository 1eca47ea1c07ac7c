"""The JSONL field scanner: from a block of raw JSON lines, only the fields a job reads, as
columns, read exactly as ``orjson.loads`` would read them.

``scan_block(block, fields)`` is what callers use; ``scan_lines`` is the kernel (this module holds
its pure-Python twin, ``_scan.pyx`` the compiled one). A line is what ``readlines`` gives: up to
and including ``\\n``. Per field ``j`` and row ``i`` the result holds a type tag
(``tags[j, i]``: ``ABSENT``, ``NULL``, ``FALSE``, ``TRUE``, ``INT`` in ``i64``, ``FLOAT`` in
``f64``, ``STR`` as the span ``data[ss:ss + sl]`` of UTF-8 bytes, ``OTHER``: anything else, the
decoded object in ``objects``). A string column is a span ("string view") into the block, so
scanning copies no string.

The compiled kernel reads a line itself only when it can prove orjson reads it the same way
(``_scan_impl.h``); it answers ``FALLBACK`` for any other line, and ``scan_block`` decodes that
line with orjson. So a malformed line's reason is orjson's own message, as in the worker's chain
(``runtime.task.chain``): ``"malformed JSON: ..."``; a line that decodes to something other than
an object: ``"expected a JSON object, got <type>"``; a whitespace-only line is ``BLANK``
(skipped, as ``bytes.isspace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

Array = Any
# row status
OK, BLANK, FALLBACK, MALFORMED, NOT_OBJECT = 0, 1, 2, 3, 4
# field tags
ABSENT, NULL, FALSE, TRUE, INT, FLOAT, STR, OTHER = 0, 1, 2, 3, 4, 5, 6, 7
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
RawScan = tuple[Array, Array, Array, Array, Array, Array, Array, Array, bytes, dict[Any, Any]]


@dataclass
class Scan:
    """The scanned fields of one block (see the module docstring for the layout).

    ``status[i]`` is ``OK``, ``BLANK``, ``MALFORMED`` or ``NOT_OBJECT``; ``dead`` holds, for the
    last two, ``(row, reason, item)`` as the chain's dead-letter output takes them.
    """

    fields: tuple[str, ...]
    data: bytes
    status: Array
    starts: Array
    ends: Array
    tags: Array
    i64: Array
    f64: Array
    ss: Array
    sl: Array
    objects: dict[tuple[int, int], Any] = field(default_factory=dict)
    dead: list[tuple[int, str, Any]] = field(default_factory=list)
    fallbacks: int = 0

    def __len__(self) -> int:
        return len(self.status)

    def value(self, j: int, i: int) -> Any:
        """Field ``j`` of row ``i`` as orjson decodes it (``ABSENT``: the ``Missing`` marker)."""
        tag = int(self.tags[j, i])
        if tag == INT:
            return int(self.i64[j, i])
        if tag == FLOAT:
            return float(self.f64[j, i])
        if tag == STR:
            s = int(self.ss[j, i])
            return self.data[s : s + int(self.sl[j, i])].decode()
        if tag == OTHER:
            return self.objects[(j, i)]
        return _CONSTANTS[tag]

    def column(self, j: int) -> list[Any]:
        """Field ``j`` of every row, as ``value`` gives it (for tests and the rare paths)."""
        return [self.value(j, i) for i in range(len(self))]


class _Missing:
    def __repr__(self) -> str:
        return "Missing"


Missing = _Missing()
_CONSTANTS: dict[int, Any] = {ABSENT: Missing, NULL: None, FALSE: False, TRUE: True}


def _put(
    value: Any,
    j: int,
    i: int,
    out: tuple[Array, Array, Array, Array, Array],
    extra: bytearray,
    base: int,
    objects: dict[tuple[int, int], Any],
) -> None:
    """Field ``j`` of row ``i`` from a decoded value; strings go to ``extra`` (their spans
    count from ``base``, the block's length)."""
    tags, i64, f64, ss, sl = out
    t = type(value)
    if t is str:
        raw = value.encode()
        tags[j, i] = STR
        ss[j, i] = base + len(extra)
        sl[j, i] = len(raw)
        extra += raw
    elif t is int and I64_MIN <= value <= I64_MAX:
        tags[j, i], i64[j, i] = INT, value
    elif t is float:
        tags[j, i], f64[j, i] = FLOAT, value
    elif value is None:
        tags[j, i] = NULL
    elif value is True or value is False:
        tags[j, i] = TRUE if value else FALSE
    else:  # ints past int64, lists, objects
        tags[j, i] = OTHER
        objects[(j, i)] = value


def scan_lines(block: bytes, fields: tuple[bytes, ...]) -> RawScan:
    """The kernel's pure-Python twin: every line through orjson.

    Args:
        block: JSON lines, each ending in ``\\n`` (the last may not).
        fields: the field names, UTF-8.

    Returns:
        ``(status, starts, ends, tags, i64, f64, ss, sl, extra, objects)``: statuses ``OK``,
        ``BLANK`` or ``FALLBACK``, line bounds, the fields (``(len(fields), rows)`` arrays),
        the bytes the string spans past the block point into, the ``OTHER`` values.
    """
    lines = _split_newlines(block)
    n, nf = len(lines), len(fields)
    status = np.zeros(n, np.uint8)
    starts = np.zeros(n, np.int64)
    ends = np.zeros(n, np.int64)
    out = (
        np.zeros((nf, n), np.uint8),
        np.zeros((nf, n), np.int64),
        np.zeros((nf, n), np.float64),
        np.zeros((nf, n), np.int64),
        np.zeros((nf, n), np.int32),
    )
    names = [f.decode() for f in fields]
    extra = bytearray()
    objects: dict[tuple[int, int], Any] = {}
    pos = 0
    for i, line in enumerate(lines):
        starts[i], ends[i] = pos, pos + len(line)
        pos += len(line)
        if line.isspace():
            status[i] = BLANK
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            status[i] = FALLBACK
            continue
        if type(rec) is not dict:
            status[i] = FALLBACK
            continue
        for j, name in enumerate(names):
            if name in rec:
                _put(rec[name], j, i, out, extra, len(block), objects)
    return (status, starts, ends, *out, bytes(extra), objects)


def count_byte(data: bytes, byte: int) -> int:
    """The twin of the compiled count: how many bytes of ``data`` equal ``byte`` (0-255); the
    file reader counts a block's lines with it."""
    return data.count(byte)


def _split_newlines(block: bytes) -> list[bytes]:
    parts = block.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def scan_block(kernel: Any, block: bytes, fields: tuple[str, ...]) -> Scan:
    """Scan ``block`` with ``kernel`` (either twin's ``scan_lines``), then decode each line it
    left (``FALLBACK``) with orjson.

    Args:
        kernel: the ``scan_lines`` to use (``weir.engine.kernels.load().scan_lines``).
        block: JSON lines.
        fields: the fields to read.

    Returns:
        The ``Scan``: every row ``OK``, ``BLANK``, ``MALFORMED`` or ``NOT_OBJECT``.
    """
    raw = kernel(block, tuple(f.encode() for f in fields))
    status, starts, ends, tags, i64, f64, ss, sl, extra, objects = raw
    scan = Scan(fields, block, status, starts, ends, tags, i64, f64, ss, sl, dict(objects))
    todo = np.flatnonzero(status == FALLBACK)
    scan.fallbacks = len(todo)
    if not len(todo):
        if extra:
            scan.data = block + extra
        return scan
    more = bytearray(extra)
    out = (tags, i64, f64, ss, sl)
    for i in todo.tolist():
        line = block[int(starts[i]) : int(ends[i])]
        tags[:, i] = ABSENT
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            status[i] = MALFORMED
            scan.dead.append((i, f"malformed JSON: {exc}", line))
            continue
        if type(rec) is not dict:
            status[i] = NOT_OBJECT
            scan.dead.append((i, f"expected a JSON object, got {type(rec).__name__}", rec))
            continue
        status[i] = OK
        for j, name in enumerate(fields):
            if name in rec:
                _put(rec[name], j, i, out, more, len(block), scan.objects)
    scan.data = block + bytes(more)
    return scan
