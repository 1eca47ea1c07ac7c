"""A data-only codec for messages between processes: frozen dataclasses to msgpack bytes and back.

A frame is msgpack's ``[tag, {field: value, ...}]``, the tag being the message's class name.
Only data crosses (integers of any size, floats, strings, bytes, lists, maps, None), so decoding
never runs code the way unpickling can, and the same bytes can travel over a pipe or a TCP
connection.
``Codec.decode`` rebuilds the class its tag names and checks every field against the class's
own annotations: an unknown tag, a missing or unknown field, or a value of the wrong type raises
``MessageError`` naming the message, the field's path and the value.

``to_plain`` / ``from_plain`` are the same mapping without msgpack, for JSON documents read by
another process (``jobmanager.json``).

Annotations understood: ``int`` (not bool), ``float`` (an int is taken as a float), ``bool``,
``str``, ``bytes``, ``None``, unions (the first member that fits: ``int | float`` keeps ints
ints), ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``dict[K, V]``, enums (by value),
nested dataclasses and TypedDicts (maps by field name), and ``Any``: any data, unchecked, for
JSON documents carried as they are.

Checks run on every status a worker sends, so the path to a wrong value is only spelled out
when there is one: containers add their step to the error as it passes them.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar, Union

import msgpack

from weir.base.errors import MessageError
from weir.state import slotpack

M = TypeVar("M")
T = TypeVar("T")
Check = Callable[[Any], Any]  # plain value -> the typed value, or raises _Wrong

_SHOWN = 60  # characters of an offending value quoted in an error


class _Wrong(Exception):
    """A value that does not fit; ``path`` grows (innermost first) on its way out."""

    def __init__(self, expected: str, value: Any, why: str | None = None) -> None:
        self.expected = expected
        self.value = value
        self.why = why  # said instead of "expected ..., got ..."
        self.path: list[str] = []

    def text(self) -> str:
        if self.why is not None:
            return self.why
        shown = repr(self.value)
        if len(shown) > _SHOWN:
            shown = shown[:_SHOWN] + "..."
        return f"expected {self.expected}, got {type(self.value).__name__} {shown}"


def _fields(value: Any) -> Any:
    """msgpack's hook for what it cannot pack itself: dataclasses, enums, and ints past 64 bits
    (a window's exact sum in a status: ``slotpack``'s extension, read back as an int)."""
    if type(value) is int:
        return slotpack.big_int(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not data a message can carry")


def to_plain(value: Any) -> Any:
    """Dataclasses as maps by field name, enums as their values, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def from_plain(tp: type[T], value: Any, where: str = "") -> T:
    """``value`` (as msgpack or JSON decoded it) checked against ``tp`` and built into it."""
    key: Any = tp  # any annotation, not only a class: checked by ``_checker``
    try:
        built: T = _checker(key)(value)
    except _Wrong as exc:
        path = (where or tp.__name__) + "".join(reversed(exc.path))
        raise MessageError(f"{path}: {exc.text()}") from None
    return built


class Codec(Generic[M]):
    """Encodes and decodes the message classes it is built with (frozen dataclasses)."""

    def __init__(self, *classes: type[M]) -> None:
        self._by_tag: dict[str, type[M]] = {}
        for cls in classes:
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{cls!r} is not a dataclass; only dataclasses are messages")
            _checker(cls)  # an annotation the codec cannot check fails here, at import
            self._by_tag[cls.__name__] = cls

    def encode(self, msg: M) -> bytes:
        tag = type(msg).__name__
        if self._by_tag.get(tag) is not type(msg):
            raise MessageError(f"{tag} is not one of this codec's messages ({self._known()})")
        packed: bytes = msgpack.packb([tag, _fields(msg)], default=_fields, use_bin_type=True)
        return packed

    def decode(self, raw: bytes) -> M:
        try:
            frame = slotpack.unpackb(raw, raw=False, strict_map_key=False)
        except (ValueError, TypeError) as exc:
            why = str(exc) or type(exc).__name__
            raise MessageError(f"{len(raw)} bytes are not a msgpack message frame: {why}") from None
        if not (isinstance(frame, list) and len(frame) == 2 and isinstance(frame[0], str)):
            raise MessageError(f"a message frame is [tag, fields], not {type(frame).__name__}")
        cls = self._by_tag.get(frame[0])
        if cls is None:
            raise MessageError(
                f"unknown message type {frame[0]!r}; this side reads {self._known()}"
            )
        return from_plain(cls, frame[1], frame[0])

    def _known(self) -> str:
        return ", ".join(sorted(self._by_tag))


@functools.cache
def _checker(tp: Any) -> Check:
    """The check for values of type ``tp`` (built once per type)."""
    if tp is Any:
        return lambda v: v
    if tp is None or tp is type(None):
        return _exact(type(None), "None")
    if tp in (bool, int, str, bytes):
        return _exact(tp, tp.__name__)  # exact: a bool is not an int here
    if tp is float:
        return _float
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return _union(args)
    if origin is list:
        return _list(_checker(args[0]))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _tuple_of(_checker(args[0]))
        return _fixed_tuple([_checker(a) for a in args])
    if origin is dict:
        return _dict(_checker(args[0]), _checker(args[1]))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        return _record(tp)
    raise TypeError(f"the wire codec cannot check values of type {tp!r}")


def _name(tp: Any) -> str:
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


# the types a check passes unchanged, where it is that simple: a tuple of such checks is
# checked in one pass (a status message's top-N lists hold hundreds of ``(key, value)`` pairs)
_PLAIN: dict[Check, tuple[type, ...]] = {}
# the fixed-tuple checks made only of such checks: their length and each member's types (a list
# of them is checked in bulk, ``_list_of_plain_tuples``)
_PLAIN_TUPLES: dict[Check, tuple[int, list[tuple[type, ...]]]] = {}


def _exact(tp: type, name: str) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not tp:
            raise _Wrong(name, v)
        return v

    _PLAIN[check] = (tp,)
    return check


def _float(v: Any) -> float:
    if type(v) is float:
        return v
    if type(v) is int:
        return float(v)
    raise _Wrong("float", v)


def _union(args: tuple[Any, ...]) -> Check:
    name = " | ".join(_name(a) for a in args)
    if set(args) == {int, float}:  # a number kept as it is (ints stay ints)

        def number(v: Any) -> Any:
            if type(v) is int or type(v) is float:
                return v
            raise _Wrong(name, v)

        _PLAIN[number] = (int, float)
        return number
    if len(args) == 2 and type(None) in args:  # X | None
        inner = _checker(args[0] if args[1] is type(None) else args[1])

        def optional(v: Any) -> Any:
            return None if v is None else inner(v)

        return optional
    checks = [_checker(a) for a in args]

    def check(v: Any) -> Any:
        for c in checks:
            try:
                return c(v)
            except _Wrong:
                continue
        raise _Wrong(name, v)

    return check


def _first_wrong(item: Check, values: Any) -> str:
    """Where in ``values`` the first value that fails ``item`` is (the slow path, on error)."""
    for i, x in enumerate(values):
        try:
            item(x)
        except _Wrong:
            return f"[{i}]"
    return ""


def _list(item: Check) -> Check:
    def check(v: Any) -> list[Any]:
        if not isinstance(v, list | tuple):
            raise _Wrong("a list", v)
        try:
            return [item(x) for x in v]
        except _Wrong as exc:
            exc.path.append(_first_wrong(item, v))
            raise

    shape = _PLAIN_TUPLES.get(item)
    return check if shape is None else _list_of_plain_tuples(*shape, check)


def _list_of_plain_tuples(n: int, kinds: list[tuple[type, ...]], slow: Check) -> Check:
    """A list of ``n``-tuples of plain values, checked column by column in C loops (``map``,
    ``set``) rather than a Python call per tuple: a worker's status carries hundreds of top-N
    ``(key, value)`` pairs ten times a second, and checking them one by one cost the job
    manager's process ~1 ms a status. Anything it does not pass goes through ``slow``, which
    names what is wrong."""
    sequences = frozenset((list, tuple))
    length = frozenset((n,))
    columns = [(operator.itemgetter(i), frozenset(k)) for i, k in enumerate(kinds)]

    def check(v: Any) -> list[Any]:
        if (
            (type(v) is list or type(v) is tuple)
            and set(map(type, v)) <= sequences
            and set(map(len, v)) <= length
            and all(set(map(type, map(get, v))) <= allowed for get, allowed in columns)
        ):
            return list(map(tuple, v))
        checked: list[Any] = slow(v)
        return checked

    return check


def _tuple_of(item: Check) -> Check:
    as_list = _list(item)
    return lambda v: tuple(as_list(v))


def _fixed_tuple(items: list[Check]) -> Check:
    slow = _checked_tuple(items)
    kinds = [t for c in items if (t := _PLAIN.get(c)) is not None]
    if len(kinds) != len(items):
        return slow
    n = len(items)

    def fast(v: Any) -> tuple[Any, ...]:
        if type(v) in (list, tuple) and len(v) == n:
            if all(type(x) in t for x, t in zip(v, kinds, strict=True)):
                return tuple(v)
        checked: tuple[Any, ...] = slow(v)  # raises, naming what is wrong
        return checked

    _PLAIN_TUPLES[fast] = (n, kinds)
    return fast


def _checked_tuple(items: list[Check]) -> Check:
    def check(v: Any) -> tuple[Any, ...]:
        if not isinstance(v, list | tuple) or len(v) != len(items):
            raise _Wrong(f"a list of {len(items)}", v)
        try:
            return tuple([c(x) for c, x in zip(items, v, strict=True)])
        except _Wrong as exc:
            for i, (c, x) in enumerate(zip(items, v, strict=True)):
                try:
                    c(x)
                except _Wrong:
                    exc.path.append(f"[{i}]")
                    break
            raise

    return check


def _dict(key: Check, value: Check) -> Check:
    def check(v: Any) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise _Wrong("a map", v)
        try:
            return {key(k): value(x) for k, x in v.items()}
        except _Wrong as exc:
            for k, x in v.items():
                try:
                    key(k)
                except _Wrong:
                    exc.path.append(" key")
                    raise exc from None
                try:
                    value(x)
                except _Wrong:
                    exc.path.append(f"[{k!r}]")
                    raise exc from None
            raise

    return check


def _enum(tp: type[enum.Enum]) -> Check:
    known = ", ".join(repr(m.value) for m in tp)

    def check(v: Any) -> enum.Enum:
        try:
            return tp(v)
        except ValueError:
            raise _Wrong(f"one of {known}", v) from None

    return check


def _record(tp: Any) -> Check:
    """A dataclass or TypedDict from a map holding exactly its fields."""
    hints = typing.get_type_hints(tp)
    typed_dict = typing.is_typeddict(tp)
    names = list(hints) if typed_dict else [f.name for f in dataclasses.fields(tp)]
    build: Callable[..., Any] = dict if typed_dict else tp
    fields = {n: _checker(hints[n]) for n in names}
    expected = f"a map of {tp.__name__}'s fields {', '.join(fields)}"

    def check(v: Any) -> Any:
        if not isinstance(v, dict):
            raise _Wrong(expected, v)
        if v.keys() != fields.keys():
            missing = [n for n in fields if n not in v]
            unknown = [str(k) for k in v if k not in fields]
            raise _Wrong(
                expected,
                v,
                f"{tp.__name__} has fields {', '.join(fields)}; missing {missing or 'none'}, "
                f"unknown {unknown or 'none'} (a weir of another version?)",
            )
        try:
            return build(**{n: c(v[n]) for n, c in fields.items()})
        except _Wrong as exc:
            for n, c in fields.items():
                try:
                    c(v[n])
                except _Wrong:
                    exc.path.append(f".{n}")
                    break
            raise

    return check


__all__ = ["Codec", "from_plain", "to_plain"]
