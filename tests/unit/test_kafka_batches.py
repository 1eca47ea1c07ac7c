"""The Kafka record-batch reader (``kernels.kbatch``, both twins) and the raw source's fetch
buffer (``sources.kafka_raw.Fetched``): batches a real producer's encoder built (kafka-python's
``DefaultRecordBatchBuilder``, gzip too) and hand-built ones (control batches, compaction's
gaps, a cut-short batch, a bad CRC, an old magic)."""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from weir.engine.kernels import load
from weir.engine.sources.base import LineBlock
from weir.engine.sources.kafka_raw import NO_STOP, Fetched, decompress

DONE, STOPPED, COMPRESSED, OLD_MAGIC = 0, 1, 2, 3
IMPLS = ("python", "compiled")


def produced(base: int, values: list[bytes | None], codec: int = 0) -> bytes:
    """A batch as kafka-python's producer encodes it, at ``base`` (the broker's job)."""
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i, v in enumerate(values):
        b.append(i, 1_700_000_000_000 + i, b"k%d" % i, v, [("h", b"x")])
    out = bytearray(b.build())
    out[:8] = struct.pack(">q", base)
    return bytes(out)


def _varint(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while True:
        if z < 0x80:
            return bytes(out + bytes([z]))
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def hand_built(base: int, deltas: list[int], values: list[bytes], attrs: int = 0,
               magic: int = 2, last: int | None = None) -> bytes:  # fmt: skip
    """A batch built here byte by byte: records at ``base`` + ``deltas``."""
    recs = b""
    for d, v in zip(deltas, values, strict=True):
        body = b"\0" + _varint(0) + _varint(d) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        recs += _varint(len(body)) + body
    last = deltas[-1] if last is None else last
    tail = struct.pack(">hiqqqhii", attrs, last, 0, 0, -1, -1, -1, len(deltas)) + recs
    head = struct.pack(">qiib", base, 9 + len(tail), -1, magic)
    return head + struct.pack(">I", crc32c.crc32c(tail)) + tail


@pytest.fixture(params=IMPLS)
def k(request: pytest.FixtureRequest) -> Any:
    return load(request.param)


def test_a_producers_batches_become_one_block(k: Any) -> None:
    buf = produced(10, [b'{"a":1}', b'{"a":2}']) + produced(12, [b'{"a":3}'])
    block, ends, offsets, nulls, pos, nxt, status, odd = k.batch_values(buf, 0, 10, NO_STOP, True)
    assert block == b'{"a":1}\n{"a":2}\n{"a":3}\n'
    assert ends.tolist() == [8, 16, 24] and offsets.tolist() == [10, 11, 12]
    assert (nulls, pos, nxt, status, odd) == ([], len(buf), 13, DONE, [])


def test_records_before_the_fetch_offset_and_from_stop_are_left(k: Any) -> None:
    buf = produced(10, [b"a", b"b", b"c", b"d"])
    block, _, offsets, _, pos, nxt, status, _ = k.batch_values(buf, 0, 11, 13, True)
    assert (block, offsets.tolist(), nxt, status) == (b"b\nc\n", [11, 12], 13, STOPPED)
    assert pos == 0  # the batch that holds stop is where reading stopped


def test_a_null_value_is_a_null_and_its_newline(k: Any) -> None:
    block, ends, _, nulls, *_ = k.batch_values(produced(0, [b"x", None, b"y"]), 0, 0, NO_STOP,
                                               True)  # fmt: skip
    assert (block, ends.tolist(), nulls) == (b"x\n\ny\n", [2, 3, 5], [1])


def test_empty_values_and_values_holding_a_newline_are_named(k: Any) -> None:
    buf = hand_built(0, [0, 1, 2, 3], [b"a", b"", b"b\nc", b'{"d":1}'])
    block, _, _, nulls, *_, odd = k.batch_values(buf, 0, 0, NO_STOP, True)
    assert (block, nulls, odd) == (b'a\n\nb\nc\n{"d":1}\n', [], [1, 2])
    assert k.batch_values(buf, 0, 2, NO_STOP, True)[7] == [0]  # indexes of what was read
    longer = hand_built(0, [0], [b"abc"]).replace(b"\x06abc", b"\x64abc")  # 50 bytes, not 3
    with pytest.raises(ValueError, match="runs past"):
        k.batch_values(longer, 0, 0, NO_STOP, False)


def test_a_compressed_batch_is_handed_back_then_read_decompressed(k: Any) -> None:
    plain = produced(0, [b"p"])
    gz = produced(1, [b'{"v":%d}' % i for i in range(50)], codec=1)
    got = k.batch_values(plain + gz, 0, 0, NO_STOP, True)
    assert got[0] == b"p\n" and (got[4], got[5], got[6]) == (len(plain), 1, COMPRESSED)
    head = gz[:61]
    inner = decompress(head[22] & 7, gz[61:])
    count = int.from_bytes(head[57:61], "big")
    block, _, offsets, _, pos, nxt, status, _ = k.record_values(inner, count, 1, 1, NO_STOP)
    assert block.count(b"\n") == 50 and offsets.tolist() == list(range(1, 51))
    assert (pos, nxt, status) == (len(inner), 51, DONE)


def test_control_batches_and_gaps_move_the_offset_past_them(k: Any) -> None:
    data = hand_built(0, [0, 2, 5], [b"a", b"b", b"c"])  # compacted: 1, 3, 4 are gone
    marker = hand_built(6, [0], [b"\0\0\0\0\0\0"], attrs=0x30)  # a transaction's commit
    block, _, offsets, _, _, nxt, status, _ = k.batch_values(data + marker, 0, 0, NO_STOP, True)
    assert (block, offsets.tolist(), nxt, status) == (b"a\nb\nc\n", [0, 2, 5], 7, DONE)
    assert k.batch_values(hand_built(0, [0], [b"a"], last=9), 0, 0, NO_STOP, True)[5] == 10


def test_a_batch_cut_short_by_the_fetch_size_is_left_for_the_next_fetch(k: Any) -> None:
    one, two = produced(0, [b"a"]), produced(1, [b"b"])
    block, _, _, _, pos, nxt, status, _ = k.batch_values(one + two[:-3], 0, 0, NO_STOP, True)
    assert (block, pos, nxt, status) == (b"a\n", len(one), 1, DONE)


def test_a_bad_crc_fails_and_an_old_magic_is_handed_back(k: Any) -> None:
    bad = bytearray(produced(0, [b"abc"]))
    bad[-5] ^= 1
    with pytest.raises(ValueError, match="CRC-32C"):
        k.batch_values(bytes(bad), 0, 0, NO_STOP, True)
    assert k.batch_values(bytes(bad), 0, 0, NO_STOP, False)[0] != b""  # unchecked: read
    old = hand_built(0, [0], [b"a"], magic=1)
    assert k.batch_values(old, 0, 0, NO_STOP, True)[6] == OLD_MAGIC


def test_the_twins_agree_on_a_mixed_log() -> None:
    buf = b"".join(produced(i * 7, [b'{"i":%d}' % j for j in range(7)]) for i in range(20))
    buf += hand_built(140, [0, 3], [b"\n", b""]) + produced(144, [None, b"z"])
    a = load("python").batch_values(buf, 0, 3, 145, True)
    b = load("compiled").batch_values(buf, 0, 3, 145, True)
    assert a[0] == b[0] and a[1].tolist() == b[1].tolist() and a[2].tolist() == b[2].tolist()
    assert a[3:] == b[3:]


def test_the_fetch_buffer_hands_out_line_blocks_and_values_where_lines_would_lie() -> None:
    k = load("python")
    clean = Fetched([k.batch_values(produced(0, [b"a", b"b", b"c"]), 0, 0, NO_STOP, True)], 3)
    got, after = clean.take(2, None)
    assert isinstance(got, LineBlock) and got == [b"a\n", b"b\n"] and after == 2
    assert clean.take(5, 2) == ([], -1) and clean.left() == 1
    dirty = hand_built(0, [0, 1, 2], [b"x\ny", b"", b"z"])
    messy = Fetched([k.batch_values(dirty, 0, 0, NO_STOP, True)], 3)
    assert messy.take(9, None) == ([b"x\ny", b"", b"z"], 3)
    parts = [k.batch_values(produced(0, [b"a", None]), 0, 0, NO_STOP, True),
             k.batch_values(produced(2, [b"c"]), 0, 2, NO_STOP, True)]  # fmt: skip
    assert Fetched(parts, 3).take(9, None) == ([b"a", None, b"c"], 3)
