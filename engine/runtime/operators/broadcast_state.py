"""Broadcast state (Flink's ``BroadcastState``): named maps that every worker holds whole, the
same on each, written only by the broadcast side of a broadcast process function and read by
its keyed side.

Storage: one RocksDB entry per map entry, under the worker's reserved broadcast prefix
(``state/layout.py``: outside every key group), the map key msgpack-encoded in the state key and
the value msgpack-encoded as the entry's value. So a worker's checkpoint holds its copy with
everything else, barrier-aligned; a restore at the same parallelism gets each worker its own
copy back, and a rescale gets every new worker old worker 0's copy (``state/restore.py``), as
Flink hands each new task one old task's broadcast state. The copies are equal when the function
changes them only from what it is given (the broadcast record and the state), as Flink requires
too, and the broadcast records reach every worker in one order (one split, or records whose
order does not matter).

An entry is encoded when it is put, so a value that cannot be stored fails where it is put
(``BroadcastStateError``), and a value changed in place afterwards is not what is stored: put it
again. The changes since the last snapshot are one generation (``StateDelta``) for the state
writer, like the keyed state's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack

from weir.base.errors import BroadcastStateError
from weir.engine.runtime.operators.delta import StateDelta
from weir.state import layout
from weir.state.backend import StateBackend

_packer = msgpack.Packer()


def _encode(what: str, value: Any) -> bytes:
    try:
        return bytes(_packer.pack(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise BroadcastStateError(
            f"{what} cannot be stored: {exc}; broadcast state holds what msgpack encodes "
            "(str, int, float, bool, None, bytes, and lists, tuples and dicts of them)"
        ) from None


def _plain_key(key: object) -> bool:
    if isinstance(key, tuple):
        return all(_plain_key(k) for k in key)
    return key is None or isinstance(key, str | bytes) or type(key) is int


class BroadcastStates:
    """One operator's broadcast states on one worker, loaded from ``backend`` when built."""

    def __init__(
        self, op_name: str, state_id: int, declared: tuple[str, ...], backend: StateBackend
    ) -> None:
        self._op = op_name
        self._sid = state_id
        self._declared = declared  # empty: any name
        self._backend = backend
        self._maps: dict[str, dict[Any, Any]] = {}
        self._pending: dict[bytes, bytes | None] = {}  # state key -> value (None: delete)
        self._read_only: dict[object, ReadOnlyBroadcastState] = {}  # by name
        self._writable: dict[object, BroadcastState] = {}
        self._load()

    def _load(self) -> None:
        prefix = layout.broadcast_prefix(self._sid)
        for raw, value in self._backend.scan(prefix, layout.prefix_upper_bound(prefix)):
            _, name, key = layout.decode_broadcast_key(raw)
            decoded_key = msgpack.unpackb(key, use_list=False, strict_map_key=False)
            self._maps.setdefault(name, {})[decoded_key] = msgpack.unpackb(
                value, strict_map_key=False
            )

    def check_name(self, name: object) -> str:
        if not isinstance(name, str) or not name:
            raise BroadcastStateError(
                f"broadcast_state({name!r}) in {self._op!r}: name a broadcast state with a "
                "non-empty string, e.g. ctx.broadcast_state('rules')"
            )
        if self._declared and name not in self._declared:
            raise BroadcastStateError(
                f"broadcast state {name!r} is not declared for {self._op!r} (declared: "
                f"{', '.join(self._declared)}); add it to the stream's broadcast("
                f"{', '.join(repr(n) for n in (*self._declared, name))})"
            )
        return name

    def read_only(self, name: object) -> ReadOnlyBroadcastState:
        # the keyed side asks for every record: one view per name, made once (a view holds
        # no state of its own; its map is the one ``put`` fills)
        try:
            return self._read_only[name]  # an unhashable name: the TypeError
        except (KeyError, TypeError):
            checked = self.check_name(name)
            view = ReadOnlyBroadcastState(self, checked, self._maps.setdefault(checked, {}))
            self._read_only[checked] = view
            return view

    def writable(self, name: object) -> BroadcastState:
        try:
            return self._writable[name]
        except (KeyError, TypeError):
            checked = self.check_name(name)
            view = BroadcastState(self, checked, self._maps.setdefault(checked, {}))
            self._writable[checked] = view
            return view

    def _key(self, name: str, key: Any) -> bytes:
        if not _plain_key(key):
            raise BroadcastStateError(
                f"broadcast state {name!r}: key {key!r} has type {type(key).__name__}; use a "
                "str, int, bytes or None, or a tuple of them (keys that compare equal must "
                "encode alike, which 1, 1.0 and True do not)"
            )
        return layout.broadcast_key(self._sid, name, _encode(f"broadcast state key {key!r}", key))

    def put(self, name: str, key: Any, value: Any) -> None:
        skey = self._key(name, key)
        self._pending[skey] = _encode(f"broadcast state {name!r}: the value of {key!r}", value)
        self._maps.setdefault(name, {})[key] = value

    def remove(self, name: str, key: Any) -> None:
        found = self._maps.get(name)
        if found is not None and key in found:
            self._pending[self._key(name, key)] = None
            del found[key]

    def clear(self, name: str) -> None:
        for key in list(self._maps.get(name, {})):
            self.remove(name, key)

    def snapshot(self) -> StateDelta:
        """What changed since the last snapshot, as one generation for the state writer."""
        puts = {k: v for k, v in self._pending.items() if v is not None}
        deletes = [k for k, v in self._pending.items() if v is None]
        self._pending = {}
        return StateDelta(puts, [], deletes)


class ReadOnlyBroadcastState:
    """A broadcast state as the keyed side sees it (Flink's ``ReadOnlyBroadcastState``):
    reading only, since a change made on one worker's keyed side would make the copies differ.
    Values are the state's own: do not change them in place."""

    def __init__(self, owner: BroadcastStates, name: str, data: dict[Any, Any]) -> None:
        self._owner = owner
        self.name = name
        self._data = data

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def contains(self, key: Any) -> bool:
        return key in self._data

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._data))

    def keys(self) -> list[Any]:
        return list(self._data)

    def values(self) -> list[Any]:
        return list(self._data.values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._data.items())

    def _refuse(self, verb: str) -> BroadcastStateError:
        return BroadcastStateError(
            f"broadcast state {self.name!r} is read-only here ({verb}): process_element and "
            "on_timer only read it; change it in process_broadcast_element, which every worker "
            "runs alike, so the copies stay equal"
        )

    def put(self, key: Any, value: Any) -> None:
        raise self._refuse(f"put({key!r}, ...)")

    def put_all(self, entries: dict[Any, Any]) -> None:
        raise self._refuse("put_all(...)")

    def remove(self, key: Any) -> None:
        raise self._refuse(f"remove({key!r})")

    def clear(self) -> None:
        raise self._refuse("clear()")


class BroadcastState(ReadOnlyBroadcastState):
    """A broadcast state as the broadcast side sees it (Flink's ``BroadcastState``)."""

    def put(self, key: Any, value: Any) -> None:
        self._owner.put(self.name, key, value)

    def put_all(self, entries: dict[Any, Any]) -> None:
        for key, value in entries.items():
            self._owner.put(self.name, key, value)

    def remove(self, key: Any) -> None:
        self._owner.remove(self.name, key)

    def clear(self) -> None:
        self._owner.clear(self.name)
