"""The values operators store in RocksDB, encoded and decoded in one place: the operators write
them, the query API and the backfill read (or write) them without importing any operator.
State keys are ``state/layout.py``'s; these are the values under them, all msgpack.

- A window (tumbling, a fired sliding window, a pane): its accumulator slots. Its start derives
  from its end, the key's namespace.
- A session: ``[start, *slots]`` (a session's start does not derive from its end).
- A process function's state: ``[name, kind, data]``, under a namespace hashed from the name.
- Cleanup and process timers: the keys of one key group due at one time.

Sliding windows are stored as panes of ``gcd(size, slide)`` while any window holding them is
open, and as windows once fired; ``compose_stored`` gives what a key's windows hold from both.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from weir.engine.nodes import WindowNode
from weir.engine.windows import SessionWindows, SlidingWindows
from weir.state import slotpack

_packer = slotpack.packer()  # reused: msgpack.packb builds a packer per call


def decode_window(raw: bytes) -> list[Any]:
    slots: list[Any] = slotpack.unpackb(raw)
    return slots


def encode_session(start: int, slots: list[Any]) -> bytes:
    return bytes(_packer.pack([start, *slots]))


def decode_session(raw: bytes) -> tuple[int, list[Any]]:
    values = slotpack.unpackb(raw)
    return int(values[0]), list(values[1:])


def state_namespace(name: str) -> int:
    """A process function state's namespace: a stable hash of its name."""
    return zlib.crc32(name.encode())


def encode_state(name: str, kind: str, data: Any) -> bytes:
    return bytes(_packer.pack([name, kind, data]))


def decode_state(raw: bytes) -> tuple[str, str, Any]:
    name, kind, data = slotpack.unpackb(raw, strict_map_key=False)
    return str(name), str(kind), data


def encode_keys(keys: list[str]) -> bytes:
    return bytes(_packer.pack(keys))


def decode_keys(raw: bytes) -> list[str]:
    keys: list[str] = msgpack.unpackb(raw)
    return keys


# a cleanup timer that names the cell buckets holding a window's keys of one key group, and how
# many keys, instead of listing them (a column window's; 0xc1 is a byte msgpack never uses, so
# a list of keys, as older versions and the backfill write, is told apart by its first byte)
BUCKET_TIMER = b"\xc1"


def encode_bucket_timer(count: int, buckets: np.ndarray) -> bytes:
    """``count`` keys in the buckets where ``buckets`` (bool, one per bucket) is true.

    Example:
        >>> raw = encode_bucket_timer(3, np.array([True, False, True] + [False] * 5))
        >>> decode_bucket_timer(raw)
        (3, [0, 2])
    """
    bits = np.packbits(buckets, bitorder="little").tobytes()
    return BUCKET_TIMER + count.to_bytes(4, "little") + bits


def decode_bucket_timer(raw: bytes) -> tuple[int, list[int]]:
    """The key count and the buckets of a bucket timer (``raw`` starts with ``BUCKET_TIMER``)."""
    bits = np.unpackbits(np.frombuffer(raw, np.uint8, offset=5), bitorder="little")
    return int.from_bytes(raw[1:5], "little"), np.flatnonzero(bits).tolist()


# -- sliding windows' stored form ----------------------------------------------------------------


def stores_cells(op: WindowNode) -> bool:
    """Does ``op`` keep its windows (and panes) as cells (``state/cells.py``)? Every window
    operator does but sessions (a session stores its start with it) and triggered windows
    (their own form: ``stored/triggered.py``)."""
    return not op.triggered and not isinstance(op.assigner, SessionWindows)


def uses_panes(assigner: object) -> bool:
    """Sliding windows run on panes unless they slide by their whole size (tumbling)."""
    return isinstance(assigner, SlidingWindows) and assigner.slide_ms < assigner.size_ms


def compose_stored(
    assigner: SlidingWindows,
    merge: Callable[[list[Any], list[Any]], list[Any]],
    windows: dict[int, list[Any]],
    panes: dict[int, list[Any]],
) -> dict[int, list[Any]]:
    """What a key's sliding windows hold, from what RocksDB stores: fired windows as they were
    materialised (``windows``, by end), open ones composed from the stored panes."""
    out = dict(windows)
    composed: dict[int, list[Any]] = {}
    for p, slots in sorted(panes.items()):
        for e in assigner.ends_holding_pane(p):
            if e not in windows:
                have = composed.get(e)
                composed[e] = list(slots) if have is None else merge(have, slots)
    out.update(composed)
    return out
