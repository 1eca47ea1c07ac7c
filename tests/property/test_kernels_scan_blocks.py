"""The JSONL field scanner over whole blocks, against its pure-Python twin (``scan.scan_lines``
through orjson): the same lines, split where ``readlines`` splits them (``\\r\\n``, blank lines,
a last line without ``\\n``), and the same values, when the lines repeat one key order (the
compiled scanner tries the field the same key was last time first) or change it, repeat a key,
or hold keys that are a wanted name's prefix or extension, escaped or not.

The field names are 1 to 17 bytes: the compiled scanner compares a key with a name of up to 16
bytes as two 8-byte words when the block holds 16 bytes from the key on, else byte by byte."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernel_impls import same_value
from weir.engine.kernels import Kernels
from weir.engine.kernels import scan as twin
from weir.engine.kernels.scan import Missing, scan_block

FIELDS = ("id", "event", "ts", "value", "v", "abcdefgh", "abcdefghi", "a" * 16, "a" * 17)
# raw JSON texts of keys: the wanted names; their prefixes and extensions; keys as long as a
# name with another byte in its first or second 8; keys with escapes (orjson reads "\u0069d"
# as "id", the compiled scanner leaves such a line to it)
OTHERS = ("", "i", "idd", "even", "events", "t", "tss", "valu", "abcdefg", "a" * 15, "é")
NEAR = ("ie", "evenx", "abcdefgx", "abcdefghj", "a" * 15 + "b", "b" + "a" * 16)
KEYS = [json.dumps(k) for k in FIELDS + OTHERS + NEAR]
KEYS += ['"\\u0069d"', '"ev\\u0065nt"', '"a\\"b"']
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.sampled_from([1 << 63, 10**30, 0.0, -0.0, 1.5, 1e300, 25, 1699999999850]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.sampled_from(["ad-98257", "impression", 'a"b', "\\", "é𝄞", "\u2028", "\x7f", ""]),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=2),
    st.dictionaries(st.text(max_size=3), scalars, max_size=2),
)
pairs = st.lists(st.tuples(st.sampled_from(KEYS), values), max_size=6)
# between lines: a line end, with whitespace before it, or blank lines after it
ENDS = st.sampled_from(["\n", "\r\n", " \n", "\t\r\n", "\n\n", "\n \t\x0b\x0c\n", "\r\n\r\n"])


def _render(keys: list[str], vals: list[Any], ws: str) -> str:
    body = ("," + ws).join(
        k + ws + ":" + ws + json.dumps(v, ensure_ascii=False)
        for k, v in zip(keys, vals, strict=True)
    )
    return "{" + ws + body + ws + "}"


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    """Lines that mostly keep one key order, then change it, joined by various line ends."""
    order = [k for k, _ in draw(pairs)]
    text = draw(st.sampled_from(["", "\n", " \n"]))
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 3)) == 0:  # a new order (or another key set) from here on
            order = [k for k, _ in draw(pairs)]
        vals = [draw(values) for _ in order]
        text += _render(order, vals, draw(st.sampled_from(["", " ", "\r"]))) + draw(ENDS)
    if draw(st.booleans()):
        text = text.rstrip("\n")  # the block's last line without its \n
    if draw(st.booleans()):
        text += draw(st.sampled_from(["{}", "[1]", '{"id":"x"', "   ", "x"]))
    return text.encode()


def check(kernels: Kernels, block: bytes) -> None:
    """The kernel's scan of ``block`` is the twin's, row for row and value for value."""
    got = scan_block(kernels.scan_lines, block, FIELDS)
    want = scan_block(twin.scan_lines, block, FIELDS)
    lines = block.count(b"\n") + (not block.endswith(b"\n") and bool(block))
    assert len(got) == len(want) == lines
    assert got.status.tolist() == want.status.tolist()
    assert got.starts.tolist() == want.starts.tolist() and got.ends.tolist() == want.ends.tolist()
    assert got.tags.tolist() == want.tags.tolist()
    assert got.dead == want.dead
    for j in range(len(FIELDS)):
        for i in range(len(got)):
            assert same_value(got.value(j, i), want.value(j, i)), (block, FIELDS[j], i)


@settings(max_examples=500)
@given(blocks())
def test_a_block_scans_as_the_twin_reads_it(kernels: Kernels, block: bytes) -> None:
    check(kernels, block)


def test_a_changed_key_order_and_a_repeated_key_are_read_as_written(kernels: Kernels) -> None:
    """Rows that keep the first row's order, change it, repeat a key (the last wins) or drop one:
    each row's own values (the compiled scanner's guess of a key's field is only a guess)."""
    block = (
        b'{"id":"a","event":"imp","ts":1,"value":2}\n'
        b'{"id":"b","event":"imp","ts":3,"value":4}\r\n'
        b'{"ts":5,"value":6,"id":"c","event":"clk"}\n'
        b'{"id":"d","id":"e","ts":7,"ts":8}\n'
        b'{"idd":1,"i":2,"even":3,"valu":4,"value":9}\n'
        b"\n"
        b'{"id":"f","event":"imp","ts":1,"value":2}'
    )
    scan = scan_block(kernels.scan_lines, block, FIELDS)
    assert scan.fallbacks == 0  # the compiled scanner read every line itself
    assert scan.column(0) == ["a", "b", "c", "e", Missing, Missing, "f"]
    assert scan.column(2) == [1, 3, 5, 8, Missing, Missing, 1]
    assert scan.column(3) == [2, 4, 6, Missing, 9, Missing, 2]
    assert scan.ends.tolist() == [i + 1 for i, c in enumerate(block) if c == 10] + [len(block)]
    check(kernels, block)
