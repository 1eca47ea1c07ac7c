"""The JSONL field scanner against orjson, line by line, on both kernel implementations: the same
values (type for type, float bit for bit), the same rows dead with the chain's own reasons, and
never a line read that orjson refuses."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernel_impls import same_value
from weir.engine.kernels import Kernels
from weir.engine.kernels.scan import BLANK, MALFORMED, NOT_OBJECT, OK, Missing, scan_block

FIELDS = ("id", "event", "ts", "value")
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
EDGE_INTS = st.sampled_from(
    [0, -1, 1, (1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 63) - 1, (1 << 64) - 1, 1 << 64, 10**30]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    I64,
    EDGE_INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["impression", "click", "ad-1", "é", "\u2028", "\x7f", "𝄞", '"', "\\"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
keys = st.sampled_from(FIELDS) | st.text(max_size=5)
records = st.lists(st.tuples(keys, values), max_size=6)  # pairs: duplicate keys allowed
WS = st.sampled_from(["", " ", "\t", "  ", "\r", " \n "[:2]])


def _render(pairs: list[tuple[str, Any]], ws: str, ascii_only: bool) -> bytes:
    body = ("," + ws).join(
        json.dumps(k, ensure_ascii=ascii_only)
        + ws
        + ":"
        + ws
        + json.dumps(v, ensure_ascii=ascii_only)
        for k, v in pairs
    )
    return ("{" + ws + body + ws + "}").encode()


number_texts = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "9", "12", "00", "01"]) | st.integers(0, 10**25).map(str),
    st.sampled_from(["", ".", ".0", ".5", ".25", ".000001"])
    | st.integers(0, 10**20).map(lambda i: f".{i}"),
    st.sampled_from(["", "e", "e1", "E+2", "e-5", "e308", "e309", "e-324", "e-400", "E400", "e+"])
    | st.integers(-350, 350).map(lambda e: f"e{e}"),
)
MUTATIONS = [
    b"",
    b"{",
    b"}",
    b"\\",
    b'"',
    b",",
    b":",
    b"\x00",
    b"\x0b",
    b"\x0c",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\\u0069",
    b"\\ud800",
    b"\\n",
    b"[",
    b"]",
    b"true",
    b"nul",
    b"1e400",
    b"-",
    b" ",
]
mutated = st.builds(
    lambda line, at, piece, cut: (line[:at] + piece + line[at:])[: cut or None],
    st.builds(_render, records, WS, st.booleans()),
    st.integers(0, 80),
    st.sampled_from(MUTATIONS),
    st.integers(0, 80),
)
lines = st.one_of(
    st.builds(_render, records, WS, st.booleans()),
    number_texts.map(lambda n: b'{"value":' + n.encode() + b',"ts":' + n.encode() + b"}"),
    mutated,
    st.sampled_from(
        [b"", b" ", b"\t\x0b", b"[]", b"1", b'"x"', b"null", b'{"id":"a"} x', b'{"id":"a",}']
    ),
    st.binary(max_size=20),
)


def check_block(kernels: Kernels, raw_lines: list[bytes]) -> None:
    block = b"".join(line.replace(b"\n", b" ") + b"\n" for line in raw_lines)
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    assert len(scan) == len(raw_lines)
    dead = {row: (reason, item) for row, reason, item in scan.dead}
    for i, line in enumerate(raw_lines):
        text = line.replace(b"\n", b" ") + b"\n"
        if text.isspace():
            assert scan.status[i] == BLANK
            continue
        try:
            rec = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            assert scan.status[i] == MALFORMED, text
            assert dead[i] == (f"malformed JSON: {exc}", text)
            continue
        if not isinstance(rec, dict):
            assert scan.status[i] == NOT_OBJECT
            assert dead[i] == (f"expected a JSON object, got {type(rec).__name__}", rec)
            continue
        assert scan.status[i] == OK, text
        for j, name in enumerate(FIELDS):
            want = rec.get(name, Missing)
            got = scan.value(j, i)
            assert got is Missing if want is Missing else same_value(got, want), (
                text,
                name,
                got,
                want,
            )


@settings(max_examples=400)
@given(st.lists(lines, min_size=1, max_size=8))
def test_scanner_reads_every_line_as_orjson_does(kernels: Kernels, raw_lines: list[bytes]) -> None:
    check_block(kernels, raw_lines)


@settings(max_examples=300)
@given(st.lists(number_texts, min_size=1, max_size=10))
def test_numbers_read_bit_for_bit(kernels: Kernels, texts: list[str]) -> None:
    check_block(kernels, [b'{"value":' + t.encode() + b"}" for t in texts])


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_shortest_float_texts_round_trip(kernels: Kernels, x: float) -> None:
    check_block(kernels, [b'{"value":' + repr(x).encode() + b"}", orjson.dumps({"value": x})])


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":"ad-1","event":"impression","ts":1,"value":2}',
        b'{"id":"a","id":"b"}',  # the last duplicate wins
        b'{"\\u0069d":"escaped key"}',
        b'{"id":"a\\"b"}',
        b'{"ts":9223372036854775807,"value":-9223372036854775808}',
        b'{"ts":9223372036854775808,"value":-9223372036854775809}',
        b'{"ts":18446744073709551616}',
        b'{"value":1e400}',
        b'{"other":1e400}',
        b'{"value":-0}',
        b'{"value":-0.0,"ts":1E2}',
        b'{"value":2.2250738585072011e-308}',
        b'{"value":0.1e-22,"ts":123456789012345678901234567890e-10}',
        b'{"id":"\xed\xa0\x80"}',
        b'{"id":"\xf4\x90\x80\x80"}',
        b'{"id":"\xc0\xaf"}',
        b'{"id":"\x01"}',
        b'{"id":[1,{"a":[]}],"event":{"x":null}}',
        b'{"deep":' + b"[" * 70 + b"]" * 70 + b"}",
        b'{"id":"x"}\x0c',
        b"\x0c\x0b \t",
        b'{"id":"x"}\r',
        b'\xef\xbb\xbf{"id":"bom"}',
        b'{"id":tru}',
        b"{}",
        b"{ }",
    ],
)
def test_adversarial_lines(kernels: Kernels, line: bytes) -> None:
    check_block(kernels, [line])


def test_last_line_without_newline_and_empty_block(kernels: Kernels) -> None:
    scan = scan_block(kernels.scan_lines, b'{"id":"a"}\n{"id":"b"}', FIELDS)
    assert scan.column(0) == ["a", "b"]
    assert len(scan_block(kernels.scan_lines, b"", FIELDS)) == 0


def test_compiled_reads_plain_lines_itself() -> None:
    from weir.engine.kernels import load

    scan = scan_block(load("compiled").scan_lines, b'{"id":"a","value":1.5}\n' * 3, FIELDS)
    assert scan.fallbacks == 0 and math.isclose(scan.value(3, 2), 1.5)


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from([b"\n", b"\r\n", b"", b"x", b'{"id":"a"}', b"\xff", b"\n" * 70])).map(
        b"".join
    ),
    st.integers(0, 5000),
    st.sampled_from([10, 0, 255, ord("x")]),
)
def test_count_byte_is_bytes_count(kernels: Kernels, data: bytes, pad: int, byte: int) -> None:
    """``count_byte`` (the reader's line count) is ``bytes.count`` at any length, across the
    compiled count's 64-byte rounds and 16,320-byte chunks and their tails."""
    data = data + b"\n" * (pad % 3) + b"a" * pad + data
    assert kernels.count_byte(data, byte) == data.count(bytes((byte,)))
    assert kernels.count_byte(b"\n" * 16_320 * 2 + data, 10) == data.count(b"\n") + 32_640
