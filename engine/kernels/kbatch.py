"""Pure-Python twin of the Kafka record-batch reader (``_kbatch.pyx``).

A fetch response's ``records`` field is Kafka's log format as bytes: record batches (magic 2,
``RecordBatch`` v2), each a header and varint-framed records. ``batch_values`` reads them into
the block the columnar scanner reads: each record's value followed by ``\\n`` (a ``LineBlock``
when no value is null or holds a ``\\n``), with each line's end and record offset, so a source
of Kafka payloads costs no Python object per record.

Both twins answer the same ``(block, ends, offsets, nulls, pos, next_offset, status, odd)``:

- ``block``: the values read, each followed by ``\\n`` (a null value: the ``\\n`` alone);
- ``ends``: each line's end in ``block`` (``int64``); ``offsets``: each record's offset;
- ``nulls``: the indexes of the records whose value is null (a tombstone);
- ``pos``: where in ``buf`` reading stopped (the start of the batch not read, else its end);
- ``next_offset``: the offset after what was read (past control batches and compaction's
  gaps; ``stop`` once it was reached);
- ``status``: ``DONE`` (the end of ``buf``, or a batch cut short by the fetch's size limit),
  ``STOPPED`` (``stop`` reached), ``COMPRESSED`` (the batch at ``pos`` is compressed: the
  caller decompresses its records and calls ``record_values``), ``OLD_MAGIC`` (the batch at
  ``pos`` is not magic 2);
- ``odd``: the indexes of the records whose value is empty or holds a ``\\n`` (with the nulls,
  the lines that are not one value each: the reader looks these up, never the block).

``batch_values``'s ``out``: a ``bytearray`` of the input's size at least, which the compiled
twin writes the block into (its ``block`` then is a ``memoryview`` of it, valid until ``out``
is written again: a reader that keeps one per partition faults in no new pages a fetch); the
Python twin makes a new ``bytes``.

Raises ``ValueError`` for a batch whose CRC-32C does not match, or records that run past
their batch (a corrupt log).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

Array = Any
DONE, STOPPED, COMPRESSED, OLD_MAGIC = 0, 1, 2, 3
HEADER = 61  # bytes of a v2 batch header, up to and with its record count
# a v2 batch header's fields: base offset, length, leader epoch, magic, CRC, attributes, last
# offset delta, first and max timestamp, producer id and epoch, base sequence, record count
BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")
CONTROL = 0x20


def _crc32c(data: Any) -> int:
    """CRC-32C of ``data``: crc32c comes with the kafka extra, so it is imported where a batch
    is checked (the kernels load in an installation without it)."""
    import crc32c

    return int(crc32c.crc32c(data))


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """A zigzag varint at ``i``: its value and the index after it."""
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a record's varint runs past its batch")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), i
        shift += 7


class _Out:
    def __init__(self) -> None:
        self.block = bytearray()
        self.ends: list[int] = []
        self.offsets: list[int] = []
        self.nulls: list[int] = []
        self.odd: list[int] = []

    def result(self, pos: int, next_offset: int, status: int) -> tuple[Any, ...]:
        return (
            bytes(self.block),
            np.array(self.ends, np.int64),
            np.array(self.offsets, np.int64),
            self.nulls,
            pos,
            next_offset,
            status,
            self.odd,
        )


def _records(
    out: _Out, data: bytes, pos: int, end: int, count: int, base: int, first: int, stop: int
) -> bool:
    """Append the values of ``count`` records in ``data[pos:end]`` at offsets from ``first``
    and before ``stop``; True when ``stop`` was reached."""
    for _ in range(count):
        length, pos = _varint(data, pos)
        after = pos + length
        if length < 0 or after > end:
            raise ValueError("a record runs past its batch")
        pos += 1  # attributes
        _, pos = _varint(data, pos)  # timestamp delta
        delta, pos = _varint(data, pos)
        klen, pos = _varint(data, pos)
        pos += max(klen, 0)
        vlen, pos = _varint(data, pos)
        offset = base + delta
        if offset >= stop:
            return True
        if offset >= first:
            if vlen < 0:
                out.nulls.append(len(out.ends))
            elif pos + vlen > after:
                raise ValueError("a record's value runs past the record")
            else:
                value = data[pos : pos + vlen]
                if not vlen or b"\n" in value:
                    out.odd.append(len(out.ends))
                out.block += value
            out.block += b"\n"
            out.ends.append(len(out.block))
            out.offsets.append(offset)
        pos = after
    return False


def batch_values(
    buf: bytes, start: int, first: int, stop: int, check_crc: bool, out: Any = None
) -> Any:
    """Read the batches of ``buf`` from ``start``: the values of records at offsets from
    ``first`` and before ``stop`` (see the module for what it answers; ``out`` is the
    compiled twin's)."""
    out = _Out()
    pos, nxt, n = start, first, len(buf)
    while pos + HEADER <= n:
        base, blen, _, magic, crc, attrs, last, *_, count = BATCH_HEAD.unpack_from(buf, pos)
        end = pos + 12 + blen
        if end > n:
            break  # cut short by the fetch's size limit: the next fetch starts at it
        if magic != 2:
            return out.result(pos, nxt, OLD_MAGIC)
        if check_crc and _crc32c(buf[pos + 21 : end]) != crc:
            raise ValueError(f"record batch at offset {base}: CRC-32C mismatch")
        if base + last < first:  # wholly before the fetch offset
            pos = end
            continue
        if base >= stop:
            return out.result(pos, stop, STOPPED)
        if attrs & 7 and not attrs & CONTROL:
            return out.result(pos, nxt, COMPRESSED)
        if not attrs & CONTROL and _records(out, buf, pos + HEADER, end, count, base, first, stop):
            return out.result(pos, stop, STOPPED)
        nxt = max(nxt, base + last + 1)
        pos = end
    return out.result(pos, nxt, DONE)


def record_values(records: bytes, count: int, base: int, first: int, stop: int) -> Any:
    """The values of a decompressed batch's ``count`` records (its base offset ``base``), as
    ``batch_values`` answers them (``pos`` is ``len(records)``, ``next_offset`` the offset
    after the last record read, or ``stop``; ``status`` DONE or STOPPED)."""
    out = _Out()
    hit = _records(out, records, 0, len(records), count, base, first, stop)
    if hit:
        return out.result(len(records), stop, STOPPED)
    return out.result(len(records), out.offsets[-1] + 1 if out.offsets else first, DONE)
