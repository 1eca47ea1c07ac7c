"""SQL's scalar functions as closures: string functions count characters from 1, numeric ones
keep an int an int, and every one gives NULL for a NULL argument (``COALESCE`` aside)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from weir.engine.agg import CastTo
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlUnsupported

if TYPE_CHECKING:
    from weir.engine.sql.scalar import Compiler, Fn


def _unary(op: Callable[[Any], Any]) -> Callable[[Compiler, Any], Fn]:
    def build(c: Compiler, node: exp.Func) -> Fn:
        f = c.compile(node.this)
        return lambda r: None if (v := f(r)) is None else op(v)

    return build


def _floor(v: Any) -> Any:
    return v if type(v) is int else float(math.floor(v))


def _ceil(v: Any) -> Any:
    return v if type(v) is int else float(math.ceil(v))


def _trim(c: Compiler, node: exp.Trim) -> Fn:
    if node.args.get("expression") is not None or node.args.get("position") is not None:
        raise SqlUnsupported(f"{node.sql(WeirFlink)}: weir's SQL has TRIM(s), which trims spaces")
    return _unary(str.strip)(c, node)


def _substring(c: Compiler, node: exp.Substring) -> Fn:
    f = c.compile(node.this)
    start = c.compile(node.args["start"]) if node.args.get("start") else (lambda r: 1)
    length = c.compile(node.args["length"]) if node.args.get("length") else None

    def apply(r: Any) -> Any:
        v, s = f(r), start(r)
        n = length(r) if length is not None else None
        if v is None or s is None or (length is not None and n is None):
            return None
        begin = max(s - 1, 0)  # SQL counts from 1; a start before 1 still counts its length
        end = len(v) if n is None else max(s - 1 + n, 0)
        return v[begin:end]

    return apply


def _concat(c: Compiler, node: exp.Concat) -> Fn:
    parts = [c.compile(e) for e in node.expressions]

    def apply(r: Any) -> Any:
        values = [p(r) for p in parts]
        if any(v is None for v in values):
            return None  # Flink's CONCAT: NULL if any argument is NULL
        return "".join(as_text(v) for v in values)

    return apply


def _coalesce(c: Compiler, node: exp.Coalesce) -> Fn:
    parts = [c.compile(node.this), *(c.compile(e) for e in node.expressions)]

    def apply(r: Any) -> Any:
        for p in parts:
            v = p(r)
            if v is not None:
                return v
        return None

    return apply


def as_text(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    return v if isinstance(v, str) else str(v)


def _to_int(v: Any) -> int:
    if isinstance(v, str):
        return int(v.strip())
    return int(v)  # a float truncates toward zero, as SQL's CAST does


def _to_bool(v: Any) -> bool:
    if isinstance(v, str):
        word = v.strip().upper()
        if word not in ("TRUE", "FALSE"):
            raise ValueError(f"cannot CAST {v!r} AS BOOLEAN")
        return word == "TRUE"
    return bool(v)


_CASTS: dict[exp.DType, Callable[[Any], Any]] = {
    **dict.fromkeys(
        (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT), _to_int
    ),
    **dict.fromkeys((exp.DType.FLOAT, exp.DType.DOUBLE), float),
    **dict.fromkeys((exp.DType.TEXT, exp.DType.VARCHAR, exp.DType.CHAR), as_text),
    exp.DType.BOOLEAN: _to_bool,
}


_CAST_NAMES: dict[Callable[[Any], Any], CastTo] = {
    _to_int: "int",
    float: "float",
    as_text: "str",
    _to_bool: "bool",
}


def _converter(node: exp.Cast) -> Callable[[Any], Any]:
    to = node.to
    convert = _CASTS.get(to.this) if isinstance(to, exp.DataType) else None
    if convert is None:
        raise SqlUnsupported(
            f"{node.sql(WeirFlink)}: weir's SQL casts to TINYINT, SMALLINT, INT, BIGINT, "
            "FLOAT, DOUBLE, STRING/VARCHAR/CHAR or BOOLEAN"
        )
    return convert


def cast_name(node: exp.Cast) -> CastTo:
    """The target of ``CAST(<aggregate> AS <type>)`` as ``agg.cast`` names it."""
    return _CAST_NAMES[_converter(node)]


def _cast(c: Compiler, node: exp.Cast) -> Fn:
    convert = _converter(node)
    f = c.compile(node.this)
    return lambda r: None if (v := f(r)) is None else convert(v)


FUNCTION_HANDLERS: dict[type[exp.Expr], Callable[[Compiler, Any], Fn]] = {
    exp.Upper: _unary(str.upper),
    exp.Lower: _unary(str.lower),
    exp.Length: _unary(len),
    exp.Trim: _trim,
    exp.Abs: _unary(abs),
    exp.Floor: _unary(_floor),
    exp.Ceil: _unary(_ceil),
    exp.Substring: _substring,
    exp.Concat: _concat,
    exp.Coalesce: _coalesce,
    exp.Cast: _cast,
}
