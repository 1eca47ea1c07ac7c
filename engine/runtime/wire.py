"""A data-only codec for messages between processes: frozen dataclasses to msgpack bytes and back.

A frame is msgpack's ``[tag, {field: value, ...}]``, the tag being the message's class name.
Only data crosses (integers, floats, strings, bytes, lists, maps, None), so decoding never runs
code the way unpickling can, and the same bytes can travel over a pipe or a TCP connection.
``Codec.decode`` rebuilds the class its tag names and checks every field against the class's
own annotations: an unknown tag, a missing or unknown field, or a value of the wrong type raises
``MessageError`` naming the message, the field and the value.

``to_plain`` / ``from_plain`` are the same mapping without msgpack, for JSON documents read by
another process (``jobmanager.json``).

Annotations understood: ``int`` (not bool), ``float`` (an int is taken as a float), ``bool``,
``str``, ``bytes``, ``None``, unions (the first member that fits: ``int | float`` keeps ints
ints), ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``dict[K, V]``, enums (by value),
nested dataclasses and TypedDicts (maps by field name), and ``Any``: any data, unchecked, for
JSON documents carried as they are.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar, Union

import msgpack

from weir.engine.errors import MessageError

M = TypeVar("M")
T = TypeVar("T")
Check = Callable[[Any, str], Any]  # (plain value, where it is) -> the typed value

_SHOWN = 60  # characters of an offending value quoted in an error


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
    built: T = _checker(key)(value, where or tp.__name__)
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
        packed: bytes = msgpack.packb([tag, to_plain(msg)], use_bin_type=True)
        return packed

    def decode(self, raw: bytes) -> M:
        try:
            frame = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except (ValueError, TypeError) as exc:
            why = str(exc) or type(exc).__name__
            raise MessageError(f"{len(raw)} bytes are not a msgpack message frame: {why}") from None
        if not (isinstance(frame, list) and len(frame) == 2 and isinstance(frame[0], str)):
            raise MessageError(f"a message frame is [tag, fields], not {_show(frame)}")
        cls = self._by_tag.get(frame[0])
        if cls is None:
            raise MessageError(
                f"unknown message type {frame[0]!r}; this side reads {self._known()}"
            )
        return from_plain(cls, frame[1], frame[0])

    def _known(self) -> str:
        return ", ".join(sorted(self._by_tag))


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= _SHOWN else text[:_SHOWN] + '...'}"


def _fail(where: str, expected: str, value: Any) -> MessageError:
    return MessageError(f"{where}: expected {expected}, got {_show(value)}")


@functools.cache
def _checker(tp: Any) -> Check:
    """The check for values of type ``tp`` (built once per type)."""
    if tp is Any:
        return lambda v, where: v
    if tp is None or tp is type(None):
        return _exact(type(None), "None")
    if tp in (bool, str, bytes):
        return _exact(tp, tp.__name__)
    if tp is int:
        return _exact(int, "int")  # exact: a bool is not an int here
    if tp is float:
        return _float
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return _union([_checker(a) for a in args], " | ".join(_name(a) for a in args))
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


def _exact(tp: type, name: str) -> Check:
    def check(v: Any, where: str) -> Any:
        if type(v) is not tp:
            raise _fail(where, name, v)
        return v

    return check


def _float(v: Any, where: str) -> float:
    if type(v) is float:
        return v
    if type(v) is int:
        return float(v)
    raise _fail(where, "float", v)


def _union(checks: list[Check], name: str) -> Check:
    def check(v: Any, where: str) -> Any:
        for c in checks:
            try:
                return c(v, where)
            except MessageError:
                continue
        raise _fail(where, name, v)

    return check


def _list(item: Check) -> Check:
    def check(v: Any, where: str) -> list[Any]:
        if not isinstance(v, list | tuple):
            raise _fail(where, "a list", v)
        return [item(x, f"{where}[{i}]") for i, x in enumerate(v)]

    return check


def _tuple_of(item: Check) -> Check:
    def check(v: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(v, list | tuple):
            raise _fail(where, "a list", v)
        return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(v))

    return check


def _fixed_tuple(items: list[Check]) -> Check:
    def check(v: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(v, list | tuple) or len(v) != len(items):
            raise _fail(where, f"a list of {len(items)}", v)
        return tuple(c(x, f"{where}[{i}]") for i, (c, x) in enumerate(zip(items, v, strict=True)))

    return check


def _dict(key: Check, value: Check) -> Check:
    def check(v: Any, where: str) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise _fail(where, "a map", v)
        return {key(k, f"{where} key"): value(x, f"{where}[{k!r}]") for k, x in v.items()}

    return check


def _enum(tp: type[enum.Enum]) -> Check:
    def check(v: Any, where: str) -> enum.Enum:
        try:
            return tp(v)
        except ValueError:
            known = ", ".join(repr(m.value) for m in tp)
            raise _fail(where, f"one of {known}", v) from None

    return check


def _record(tp: Any) -> Check:
    """A dataclass or TypedDict from a map holding exactly its fields."""
    hints = typing.get_type_hints(tp)
    typed_dict = typing.is_typeddict(tp)
    names = list(hints) if typed_dict else [f.name for f in dataclasses.fields(tp)]
    build: Callable[..., Any] = dict if typed_dict else tp
    fields = {n: _checker(hints[n]) for n in names}

    def check(v: Any, where: str) -> Any:
        if not isinstance(v, dict):
            raise _fail(where, f"a map of {tp.__name__}'s fields", v)
        missing = [n for n in fields if n not in v]
        unknown = [str(k) for k in v if k not in fields]
        if missing or unknown:
            raise MessageError(
                f"{where}: {tp.__name__} has fields {', '.join(fields)}; missing "
                f"{missing or 'none'}, unknown {unknown or 'none'} (a weir of another version?)"
            )
        return build(**{n: c(v[n], f"{where}.{n}") for n, c in fields.items()})

    return check


__all__ = ["Codec", "from_plain", "to_plain"]
