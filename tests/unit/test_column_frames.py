"""Column batches across the exchange (``colframes``, inside ``framing``'s frames): the rows come
back as they went, keys given as strs or as spans of a block alike, with the records of the rows
that may be late and the values that are not numbers; anything a peer could send that this
job's node would not is a ``MessageError``."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest

from weir.base.errors import MessageError
from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import FLOAT, INT, OTHER, STR
from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged
from weir.engine.runtime.task.framing import decode_frame, encode_entries
from weir.engine.runtime.task.routing import rows_of

FIELDS = {1: ["v", "w"]}


def _batch(keys: Keys) -> ColumnBatch:
    recs = [{"k": "a", "v": 1}, {"k": "ü", "v": 2.5}, {"k": "", "v": "7"}]
    v = Tagged(
        np.array([INT, FLOAT, STR], np.uint8),
        np.array([1, 0, 0], np.int64),
        np.array([0.0, 2.5, 0.0]),
        {2: "7"},
    )
    w = Tagged(np.full(3, INT, np.uint8), np.array([-(1 << 63), 0, (1 << 63) - 1]), np.zeros(3))
    ts = np.array([10, 3, 20], np.int64)
    wms = np.array([4, 4, 5], np.int64)  # row 1 (3 <= 4) may be late: its record crosses
    return ColumnBatch(1, keys, ts, wms, {"v": v, "w": w}, Records(recs), numeric=False)


def _frame(batch: ColumnBatch) -> bytes:
    trace = np.array([4, 5], np.int64).tobytes()
    return encode_entries([([batch], trace, 5, 0, 0)])


@pytest.mark.parametrize("form", ["strs", "spans"])
def test_a_column_batch_crosses_with_its_rare_records(kernels: Kernels, form: str) -> None:
    block = b"xx" + "aü".encode() + b"yy"
    keys = (
        Keys(["a", "ü", ""])
        if form == "strs"
        else Keys(None, block, np.array([2, 3, 5], np.int64), np.array([1, 2, 0], np.int32))
    )
    sent = _batch(keys)
    entries = decode_frame(_frame(sent), 2, 1, FIELDS)
    assert isinstance(entries, list) and len(entries) == 1
    (part,), trace, dwm, status, source = entries[0]
    assert isinstance(part, ColumnBatch) and rows_of([part]) == 3
    assert (trace, dwm, status, source) == (np.array([4, 5]).tobytes(), 5, 0, 0)
    assert [part.keys.key(i) for i in range(3)] == ["a", "ü", ""]
    assert part.keys.intern(kernels.Interner(128)).tolist() == [0, 1, 2]
    assert part.ts.tolist() == [10, 3, 20] and part.wms.tolist() == [4, 4, 5]
    assert [part.values["v"].value(i) for i in range(3)] == [1, 2.5, "7"]
    assert part.values["w"].i64.tolist() == [-(1 << 63), 0, (1 << 63) - 1]
    assert not part.numeric
    # rows that may be late, and those with a value that is not a number, keep their record
    assert part.records.get(1) == {"k": "ü", "v": 2.5}
    assert part.records.get(2) == {"k": "", "v": "7"}
    assert part.records.get(0) is None


def _part(**change: Any) -> bytes:
    """A frame whose one part is a valid columnar part with ``change`` applied."""
    frame = msgpack.unpackb(_frame(_batch(Keys(["a", "b", "c"]))))
    part = frame[1][0][0][0]
    if "node" in change:
        part[0] = change["node"]
    if "body" in change:
        part[1] = change["body"]
    if "extra" in change:
        part[2] = change["extra"]
    return msgpack.packb(frame)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"node": 0}, "not a columnar one"),
        ({"node": "1"}, "not a columnar one"),
        ({"body": b"\x00" * 40}, "not a column batch"),
        ({"body": b"WCB1"}, "not a column batch"),
        ({"body": 7}, "not a columnar one"),
        ({"extra": b"\xc1"}, "not msgpack"),
        ({"extra": msgpack.packb([{}, {9: {}}])}, "row 9 of 3"),
        ({"extra": msgpack.packb([{5: {0: 1}}, {}])}, "values of field 5"),
        ({"extra": msgpack.packb({})}, r"not \[objects, records\]"),
    ],
)
def test_a_malformed_columnar_part_is_refused(change: dict[str, Any], match: str) -> None:
    with pytest.raises(MessageError, match=match):
        decode_frame(_part(**change), 2, 1, FIELDS)


def _body(batch: ColumnBatch) -> bytearray:
    frame = msgpack.unpackb(_frame(batch))
    return bytearray(frame[1][0][0][0][1])


def _with_body(body: bytes) -> bytes:
    frame = msgpack.unpackb(_frame(_batch(Keys(["a", "b", "c"]))))
    frame[1][0][0][0][1] = bytes(body)
    return msgpack.packb(frame)  # type: ignore[no-any-return]


# the body of a 3-row, 2-field batch: header 16, ts/wm 48, values 96, offsets 16, tags 6, keys
OFFSETS_AT, KEYS_AT = 16 + 48 + 96, 16 + 48 + 96 + 16 + 6


def _offsets(body: bytearray, values: list[int]) -> bytearray:
    body[OFFSETS_AT : OFFSETS_AT + 16] = np.array(values, "<i4").tobytes()
    return body


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda b: b + b"x", "holds 3 rows in"),
        (lambda b: b[:-1], "holds 3 rows in"),
        (lambda b: b"WCB2" + b[4:], "it starts b'WCB2'"),
        (lambda b: b[:8] + (1).to_bytes(4, "little") + b[12:], "1 fields where its node has 2"),
        (lambda b: _offsets(b, [0, 2, 1, 3]), "do not cover its keys in order"),
        (lambda b: _offsets(b, [1, 1, 2, 3]), "do not cover its keys in order"),
        (lambda b: _offsets(b, [0, 1, 2, 2]), "do not cover its keys in order"),
        (lambda b: b[:KEYS_AT] + b"\xff" + b[KEYS_AT + 1 :], "not UTF-8"),
    ],
)
def test_a_damaged_column_body_is_refused(damage: Any, match: str) -> None:
    body = damage(_body(_batch(Keys(["a", "b", "c"]))))
    with pytest.raises(MessageError, match=match):
        decode_frame(_with_body(body), 2, 1, FIELDS)


def test_keys_whose_offsets_split_a_character_are_refused() -> None:
    """ "ü" is two bytes: a key boundary between them leaves each half invalid alone, though
    the bytes end to end are UTF-8."""
    body = _body(_batch(Keys(["", "ü", ""])))
    with pytest.raises(MessageError, match="split a character"):
        decode_frame(_with_body(_offsets(body, [0, 1, 2, 2])), 2, 1, FIELDS)


def test_an_unknown_value_tag_is_refused() -> None:
    batch = _batch(Keys(["a", "b", "c"]))
    batch.values["w"].tags[0] = OTHER + 1
    with pytest.raises(MessageError, match="unknown value tag"):
        decode_frame(_frame(batch), 2, 1, FIELDS)
