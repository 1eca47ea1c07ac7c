"""The RocksDB key layout (DESIGN.md, "Key groups and state layout").

    state key = key_group (2 bytes BE) | state id (2 bytes BE) | key length (2 bytes BE) | key
                | namespace (8 bytes, offset-binary BE: the window end, so windows sort by time)

All of a key's windows are one prefix scan (``key_prefix``) and all of a key group is one range
(``key_group_bounds``): restore, rescale and bulk load work by range. Timers live in their own
state id with the time first (``timer_key``), so "everything due by T" in a key group is one range
too.
"""

from __future__ import annotations

import struct
from itertools import repeat
from operator import add

from weir.base.errors import StateError

MAX_KEY_BYTES = 0xFFFF
# The state format: 1 kept every window as a row (a key's slots under ``state_key``); 2 keeps
# the windows of tumbling and sliding operators as cells (``state/cells.py``); 3 adds coarse
# cells (a weir that reads format 2 only would miss them; format 2 state is format 3 state as
# it is). ``_metadata`` carries it, and so does each RocksDB instance, under ``FORMAT_KEY``: a
# first two bytes no key group takes and that broadcast state (0xFFFF) does not use, so no
# key-group range holds it.
STATE_FORMAT = 3
CELLS_FORMAT = 2  # the first format that keeps cells: older state is migrated to them
FORMAT_KEY = b"\xff\xfeweir-state-format"
_SIGN = 1 << 63
_HH = struct.Struct(">HH")
_HHH = struct.Struct(">HHH")
_Q = struct.Struct(">Q")
NAMESPACE_BYTES = 8


def format_of(meta: dict[str, object]) -> int:
    """The state format a checkpoint's ``_metadata`` was written in (1 before it said)."""
    raw = meta.get("state_format", 1)
    if not isinstance(raw, int) or not 1 <= raw <= STATE_FORMAT:
        raise StateError(
            f"the checkpoint's state format {raw!r} is not one this weir reads (1 to "
            f"{STATE_FORMAT}); restore it with the weir version that wrote it"
        )
    return raw


def encode_namespace(value: int) -> bytes:
    """A signed 64-bit integer as 8 bytes that sort in numeric order (event times and every
    time derived from them are kept in that range: ``engine.windows.base``)."""
    try:
        return _Q.pack(value + _SIGN)
    except struct.error:
        raise StateError(
            f"namespace {value} is outside the signed 64-bit range; times derived from event "
            "times must be clamped to [-2**63, 2**63 - 1] (engine.windows.base)"
        ) from None


def namespace_upper_bound(prefix: bytes, value: int) -> bytes:
    """The exclusive upper bound of ``prefix`` + every namespace up to ``value`` inclusive
    (``value + 1`` has no encoding when ``value`` is the largest 64-bit integer)."""
    if value < _SIGN - 1:
        return prefix + encode_namespace(value + 1)
    return prefix_upper_bound(prefix)


def decode_namespace(raw: bytes) -> int:
    return int(_Q.unpack(raw)[0]) - _SIGN


def key_prefix(key_group: int, state_id: int, key: bytes) -> bytes:
    """Prefix shared by every namespace (window) of one key in one state."""
    if len(key) > MAX_KEY_BYTES:
        raise StateError(f"key of {len(key)} bytes is longer than the {MAX_KEY_BYTES}-byte limit")
    return _HHH.pack(key_group, state_id, len(key)) + key


def key_prefixes(key_groups: list[int], state_id: int, keys: list[bytes]) -> list[bytes]:
    """``key_prefix`` of many keys at once (a loop in C when no key is too long)."""
    if keys and max(map(len, keys)) > MAX_KEY_BYTES:
        return [key_prefix(g, state_id, k) for g, k in zip(key_groups, keys, strict=True)]
    heads = map(_HHH.pack, key_groups, repeat(state_id), map(len, keys))
    return list(map(add, heads, keys))


def state_key(key_group: int, state_id: int, key: bytes, namespace: int) -> bytes:
    return key_prefix(key_group, state_id, key) + encode_namespace(namespace)


def decode_state_key(raw: bytes) -> tuple[int, int, bytes, int]:
    """Inverse of ``state_key``: ``(key_group, state_id, key, namespace)``."""
    kg, sid, n = _HHH.unpack_from(raw)
    key = raw[6 : 6 + n]
    if len(raw) != 6 + n + NAMESPACE_BYTES:
        raise StateError(f"malformed state key {raw!r}: expected {6 + n + 8} bytes")
    return kg, sid, key, decode_namespace(raw[6 + n :])


def state_prefix(key_group: int, state_id: int) -> bytes:
    """Prefix of every entry of one state in one key group."""
    return _HH.pack(key_group, state_id)


def timer_key(key_group: int, state_id: int, time: int, seq: int) -> bytes:
    """A timer entry: time first, so due timers are one range per key group. One entry holds
    the keys of every window with that end created in one flush (``seq`` tells flushes apart),
    so a window costs no write of its own for its cleanup."""
    return _HH.pack(key_group, state_id) + encode_namespace(time) + _Q.pack(seq)


def decode_timer_key(raw: bytes) -> tuple[int, int, int, int]:
    kg, sid = _HH.unpack_from(raw)
    return kg, sid, decode_namespace(raw[4:12]), int(_Q.unpack_from(raw, 12)[0])


def key_group_bounds(first: int, last: int) -> tuple[bytes, bytes]:
    """``[lo, hi)`` byte bounds covering key groups ``first..last`` inclusive."""
    lo = struct.pack(">H", first)
    hi = struct.pack(">H", last + 1) if last + 1 <= 0xFFFF else b"\xff\xff\xff"
    return lo, hi


def prefix_upper_bound(prefix: bytes) -> bytes:
    """The smallest byte string greater than every string starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of only 0xff bytes has no upper bound")
    return stripped[:-1] + bytes([stripped[-1] + 1])


# -- broadcast state -----------------------------------------------------------------------------
# Broadcast state belongs to no key: every worker holds a whole copy. Its entries live under a
# first two bytes that no key group takes (key groups are < MAX_KEY_GROUPS = 0x8000), so the
# key-group ranges that restore, rescale and bulk load cut and copy never include it, while a
# worker's RocksDB checkpoint carries it like any other entry.
#
#   broadcast key = 0xFFFF | state id (2 bytes BE) | name length (1 byte) | name | map key

BROADCAST_GROUP = 0xFFFF
_NAME_BYTES = 0xFF
# every broadcast entry of every operator (state ids stay below 0x4000: ``job.operator_state_id``)
BROADCAST_BOUNDS = (b"\xff\xff", b"\xff\xff\xff\xff")


def broadcast_prefix(state_id: int) -> bytes:
    """Prefix of every broadcast-state entry of one operator."""
    return _HH.pack(BROADCAST_GROUP, state_id)


def broadcast_key(state_id: int, name: str, key: bytes) -> bytes:
    """The entry of map key ``key`` (encoded) in broadcast state ``name`` of one operator."""
    raw = name.encode()
    if len(raw) > _NAME_BYTES:
        raise StateError(
            f"broadcast state name of {len(raw)} bytes is longer than the {_NAME_BYTES}-byte limit"
        )
    return broadcast_prefix(state_id) + bytes([len(raw)]) + raw + key


def decode_broadcast_key(raw: bytes) -> tuple[int, str, bytes]:
    """Inverse of ``broadcast_key``: ``(state_id, name, key)``."""
    group, sid = _HH.unpack_from(raw)
    if group != BROADCAST_GROUP or len(raw) < 5 or len(raw) < 5 + raw[4]:
        raise StateError(f"malformed broadcast state key {raw[:40]!r}")
    n = raw[4]
    return sid, raw[5 : 5 + n].decode(), raw[5 + n :]
