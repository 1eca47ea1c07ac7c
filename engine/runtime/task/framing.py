"""Exchange frames as data only: msgpack, never a pickle, so bytes from another worker can at
worst be refused, never run.

A frame is ``[0, [entry, ...]]`` (records) or ``[1, checkpoint, stop_sources]`` (a barrier). An
entry is ``[parts, trace, data_watermark, status, source]`` (the index of the source whose
watermark the trace is) and a part, one keyed sub-batch, is ``[node,
keys, records, timestamps, watermarks]``; the trace, timestamps and watermarks are packed int64
arrays (a memcpy each way, not one msgpack integer per record). A node whose operators fold
columns sends ``[node, arrow_batch, extra]`` instead (``colframes``: the rows as an Arrow record
batch, and the few records and values a receiver may need whole).

What a record may hold to cross: ``dict``, ``list``, ``str``, ``int`` (64-bit), ``float``,
``bool``, ``None``, ``bytes``, and ``tuple``, kept a tuple (an ext type). Anything else (a
``datetime``, a ``set``, a subclass of a carried type) is not encoded: ``encode_entries`` raises
``Unencodable`` and ``drop_unencodable`` takes such records out, each with the reason naming its
type, for the dead-letter output. ``decode_frame`` checks the frame's whole shape and raises
``MessageError`` for anything else: only an authenticated peer can send one, so a frame that
does not decode is a protocol violation and fails the worker.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import compress
from typing import TYPE_CHECKING, Any

import msgpack

from weir.base.errors import MessageError

if TYPE_CHECKING:  # chain checks records with this module: no import cycle at run time
    from weir.engine.runtime.outputs import DeadLetters
    from weir.engine.runtime.task.chain import Keyed, KeyedBatch

MAX_FRAME = 64 * 1024 * 1024  # a length over this fails the peer before anything is buffered
TUPLE_EXT = 1
_DATA, _BARRIER = 0, 1
_STATUSES = frozenset({0, 1, 2})  # routing's ACTIVE, IDLE, ENDED
# an entry of a frame: keyed sub-batches of one source batch, the sender's watermark of that
# source after each of its records (packed), its data watermark, the sender's input status of
# that source, and the source's index
Entry = tuple[list["Keyed"], bytes, int, int, int]


class Unencodable(Exception):
    """A record holds a value the exchange does not carry."""


def pack_ints(values: list[int]) -> bytes:
    return array("q", values).tobytes()


def unpack_ints(raw: bytes) -> list[int]:
    values = array("q")
    values.frombytes(raw)
    return values.tolist()


def _default(value: Any) -> Any:
    if type(value) is tuple:
        return msgpack.ExtType(TUPLE_EXT, _pack_nested(list(value)))
    if type(value) is int:
        raise Unencodable(f"the integer {value} does not fit in 64 bits")
    raise Unencodable(f"{type(value).__name__} is not a type the exchange carries")


def _pack_nested(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)  # type: ignore[no-any-return]


def _ext(code: int, data: bytes) -> Any:
    if code != TUPLE_EXT:
        raise MessageError(f"unknown msgpack ext type {code} in an exchange frame")
    return tuple(_unpack(data))


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, use_list=True, ext_hook=_ext, strict_map_key=False)


# one packer for the worker's loop (it is its only user): no set-up per frame
_PACKER = msgpack.Packer(default=_default, strict_types=True, use_bin_type=True, autoreset=True)
_ENCODE_ERRORS = (Unencodable, TypeError, ValueError, OverflowError)


def _encode_part(part: Keyed) -> list[Any]:
    if isinstance(part, tuple):
        n, k, r, t, w = part
        return [n, k, r, pack_ints(t), pack_ints(w)]
    from weir.engine.kernels import KERNELS  # pyarrow and the kernels: only for columnar jobs
    from weir.engine.runtime.task.colframes import encode_part

    return encode_part(part, KERNELS, _pack_nested)


def encode_entries(entries: list[Entry]) -> bytes:
    """A records frame; ``Unencodable`` when a record holds what the exchange does not carry."""
    frame = [
        _DATA,
        [
            [list(map(_encode_part, parts)), trace, dwm, st, src]
            for parts, trace, dwm, st, src in entries
        ],
    ]
    try:
        return _PACKER.pack(frame)  # type: ignore[no-any-return]
    except _ENCODE_ERRORS as exc:
        _PACKER.reset()
        raise Unencodable(str(exc)) from None


def encode_barrier(checkpoint: int, stop_sources: bool) -> bytes:
    return msgpack.packb([_BARRIER, checkpoint, stop_sources])  # type: ignore[no-any-return]


def unencodable_reason(record: Any) -> str | None:
    """Why ``record`` cannot cross to another worker (None: it can)."""
    try:
        _pack_nested(record)
    except _ENCODE_ERRORS as exc:
        return f"the record cannot cross to another worker: {exc}"
    return None


def drop_unencodable(entries: list[Entry], dead: Callable[[str, Any], None]) -> list[Entry]:
    """``entries`` without the records the exchange cannot carry; each of those goes to
    ``dead(reason, record)``."""
    kept: list[Entry] = []
    for parts, trace, dwm, st, src in entries:
        clean: list[Keyed] = []
        for part in parts:
            if not isinstance(part, tuple):  # columns: their records were checked in the chain
                clean.append(part)
                continue
            node, keys, recs, ts, wms = part
            if unencodable_reason(recs) is None:
                clean.append((node, keys, recs, ts, wms))
                continue
            reasons = [unencodable_reason(r) for r in recs]
            for r, why in zip(recs, reasons, strict=True):
                if why is not None:
                    dead(why, r)
            mask = [why is None for why in reasons]
            if any(mask):
                columns = keys, recs, ts, wms
                k, r, t, w = (list(compress(col, mask)) for col in columns)
                clean.append((node, k, r, t, w))
        kept.append((clean, trace, dwm, st, src))
    return kept


def decode_frame(
    payload: bytes, nodes: int, sources: int = 1, columns: dict[int, list[str]] | None = None
) -> list[Entry] | tuple[int, bool]:
    """A records frame's entries, or a barrier's ``(checkpoint, stop_sources)``; ``nodes``: how
    many keyed nodes the job has, ``sources`` how many sources, ``columns`` its nodes whose
    rows cross as columns, with their fields (``graph.column_nodes``). ``MessageError`` for
    anything weir did not send."""
    try:
        found = _unpack(payload)
    except MessageError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MessageError(
            f"an exchange frame of {len(payload)} bytes is not msgpack: {exc}"
        ) from None
    if type(found) is list and len(found) == 3 and found[0] == _BARRIER:
        if type(found[1]) is int and found[1] >= 0 and type(found[2]) is bool:
            return found[1], found[2]
    if type(found) is list and len(found) == 2 and found[0] == _DATA and type(found[1]) is list:
        return [_entry(e, nodes, sources, columns or {}) for e in found[1]]
    raise MessageError(f"an exchange frame is neither records nor a barrier: {_shown(found)}")


def _entry(raw: Any, nodes: int, sources: int, columns: dict[int, list[str]]) -> Entry:
    if not (type(raw) is list and len(raw) == 5):
        raise MessageError(
            f"an exchange entry is not [parts, trace, watermark, status, source]: {_shown(raw)}"
        )
    parts, trace, dwm, st, src = raw
    if type(parts) is not list or type(trace) is not bytes or not trace or len(trace) % 8:
        raise MessageError(f"an exchange entry has malformed parts or trace: {_shown(raw)}")
    if type(dwm) is not int or type(st) is not int or st not in _STATUSES:
        raise MessageError(f"an exchange entry has watermark {dwm!r} and status {st!r}")
    if type(src) is not int or not 0 <= src < sources:
        raise MessageError(f"an exchange entry names source {src!r}; the job has {sources}")
    return [_part(p, nodes, columns) for p in parts], trace, dwm, st, src


def _part(raw: Any, nodes: int, columns: dict[int, list[str]]) -> Keyed:
    if type(raw) is list and len(raw) == 3:
        from weir.engine.runtime.task.colframes import decode_part

        return decode_part(raw, columns, _unpack)
    return _rows(raw, nodes)


def _rows(raw: Any, nodes: int) -> KeyedBatch:
    if not (type(raw) is list and len(raw) == 5):
        raise MessageError(f"an exchange part is not [node, keys, records, ts, wms]: {_shown(raw)}")
    node, keys, recs, ts, wms = raw
    if type(node) is not int or not 0 <= node < nodes:
        raise MessageError(f"an exchange part names keyed node {node!r}; the job has {nodes}")
    if type(keys) is not list or type(recs) is not list or len(keys) != len(recs):
        raise MessageError(f"an exchange part's keys and records do not match: {_shown(raw)}")
    n = len(keys) * 8
    if type(ts) is not bytes or type(wms) is not bytes or len(ts) != n or len(wms) != n:
        raise MessageError(f"an exchange part's timestamps do not match its {len(keys)} records")
    if keys and set(map(type, keys)) != {str}:
        raise MessageError(f"an exchange part's keys are not all strings: {_shown(keys)}")
    return node, keys, recs, unpack_ints(ts), unpack_ints(wms)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def carried_mask(recs: list[Any], dead: DeadLetters) -> list[bool] | None:
    """None when the exchange can carry every record; else which it can (the others go to
    ``dead``)."""
    if unencodable_reason(recs) is None:  # one msgpack pass over the batch
        return None
    reasons = [unencodable_reason(r) for r in recs]
    for r, why in zip(recs, reasons, strict=True):
        if why is not None:
            dead.add("exchange", "unencodable", why, r)
    return [why is None for why in reasons]
