"""msgpack for stored accumulator slots, with ints of any size (issue 38: "int64 overflow
handled exactly").

msgpack holds ints from -2**63 to 2**64 - 1; a sum past that (the folds keep Python's
unbounded ints) would make the state writer fail with ``OverflowError`` and the window could
never be flushed. Such an int is stored as an extension value (``BIG_INT_EXT``: its two's
complement bytes, big-endian), and every reader of stored slots decodes it back with
``unpackb``. Every other value packs exactly as plain msgpack packs it, so state written
before this is read unchanged.

Example:
    >>> unpackb(packer().pack([1 << 70, -(1 << 64) - 1, 5]))
    [1180591620717411303424, -18446744073709551617, 5]
"""

from __future__ import annotations

from typing import Any

import msgpack

BIG_INT_EXT = 66  # an application extension code; the exchange's frames use their own


def big_int(value: int) -> msgpack.ExtType:
    """``value`` as ``BIG_INT_EXT``: for a packer's ``default`` hook, which msgpack calls with an
    int past its range (other codecs of weir's, the messages between processes, use it too)."""
    size = (value.bit_length() + 8) // 8  # room for the sign bit
    return msgpack.ExtType(BIG_INT_EXT, value.to_bytes(size, "big", signed=True))


def _default(value: Any) -> Any:
    """An int msgpack cannot hold as one, as ``BIG_INT_EXT`` (msgpack calls this on overflow)."""
    if type(value) is int:
        return big_int(value)
    raise TypeError(f"cannot store {type(value).__name__} {value!r} in msgpack")


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack's ``ext_hook`` reading ``BIG_INT_EXT`` back as an int (any other code stays an
    ``ExtType``)."""
    if code == BIG_INT_EXT:
        return int.from_bytes(data, "big", signed=True)
    return msgpack.ExtType(code, data)


def packer() -> msgpack.Packer:
    """A packer for stored slots (reuse it: building one per call costs more than packing)."""
    return msgpack.Packer(default=_default)


def unpackb(data: bytes | memoryview, /, **kwargs: Any) -> Any:
    """``msgpack.unpackb`` that reads ``BIG_INT_EXT`` back as an int (``kwargs``: msgpack's)."""
    return msgpack.unpackb(data, ext_hook=ext_hook, **kwargs)


__all__ = ["BIG_INT_EXT", "big_int", "ext_hook", "packer", "unpackb"]
