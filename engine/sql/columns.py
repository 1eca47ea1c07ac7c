"""A ``CREATE TABLE``'s declared column types, enforced where the table's records enter the job.

Each record is checked (and, where SQL converts, converted) column by column, once, right after
the source, so every query reads values of the declared types: a value that does not fit goes
to the dead letters, the reason naming the column, its type and the value. NULL (``None``, or a
record without the column, which reads as NULL) fits every column but a ``NOT NULL`` one.

=====================================  ===================================================
declared                               takes
=====================================  ===================================================
STRING, VARCHAR(n), CHAR(n)            a string; an int, a float or a boolean becomes its
                                       text (``5`` -> ``'5'``, ``true`` -> ``'true'``), as
                                       Flink's JSON format reads one (``n`` is not enforced)
BOOLEAN                                ``true`` / ``false``
TINYINT, SMALLINT, INT, BIGINT         an integer within the type's range; a float with no
                                       fraction becomes that integer (``3.0`` -> ``3``)
FLOAT, DOUBLE                          a number, as a float (``3`` -> ``3.0``), so SUM and AVG
                                       over the column are floating point, as in Flink
=====================================  ===================================================

Stricter than Flink's JSON format on purpose: a string is not parsed into a number or a
boolean, and a fraction is not truncated into an integer column (Flink reads ``"12"`` as 12 and
``1.5`` as 1); such a record is a dead letter that names what to fix. Columns of any other type
are refused when the table is declared (``check_type``).

The check is one generated function per table (straight-line code, no loop over columns): a
record whose values are all of their columns' types exactly costs one boolean expression (about
0.3 µs for four columns), one that needs a conversion a copy of the record (about 1 µs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from weir.engine.nodes import ColumnType
from weir.engine.sql.dialect import WeirFlink
from weir.engine.sql.errors import SqlUnsupported

Record = Any

_TEXT = (exp.DType.TEXT, exp.DType.VARCHAR, exp.DType.CHAR, exp.DType.NCHAR, exp.DType.NVARCHAR)
_INTEGERS = {
    exp.DType.TINYINT: 8,
    exp.DType.SMALLINT: 16,
    exp.DType.INT: 32,
    exp.DType.BIGINT: 64,
}
_FLOATS = (exp.DType.FLOAT, exp.DType.DOUBLE)
KNOWN = "STRING, VARCHAR, CHAR, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE"


class ColumnTypeError(ValueError):
    """A record's value does not fit its column's declared type (the dead letter's reason)."""


def check_type(column: str, kind: exp.DataType | None) -> exp.DType:
    """The declared type of ``column``, refused (``SqlUnsupported``) unless weir reads it."""
    if kind is None:
        raise SqlUnsupported(f"column {column} has no type; declare one of {KNOWN}")
    dtype: exp.DType = kind.this
    if dtype in _TEXT or dtype in _INTEGERS or dtype in _FLOATS or dtype == exp.DType.BOOLEAN:
        return dtype
    if kind.this in (exp.DType.DECIMAL, exp.DType.BIGDECIMAL):
        why = (
            "weir has no exact decimal type; declare DOUBLE (binary floating point) or a "
            "BIGINT of the smallest unit (cents)"
        )
    elif kind.this.name.startswith("TIMESTAMP") or kind.this in (exp.DType.DATE, exp.DType.TIME):
        why = "weir's times are epoch milliseconds: declare the column BIGINT"
    else:
        why = f"weir's SQL reads {KNOWN}"
    raise SqlUnsupported(f"column {column} {kind.sql(WeirFlink)}: {why}")


def _fail(column: str, declared: str, value: Any) -> ColumnTypeError:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return ColumnTypeError(
        f"column {column!r} is declared {declared} and the record holds "
        f"{type(value).__name__} {shown}"
    )


def _missing(column: str) -> ColumnTypeError:
    return ColumnTypeError(f"column {column!r} is declared NOT NULL and the record's is NULL")


def _text(v: Any) -> str:
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) in (int, float):
        return repr(v)
    raise TypeError


def _integer(v: Any, bits: int) -> int:
    if type(v) is float and v.is_integer():
        v = int(v)
    if type(v) is not int or not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise TypeError
    return v


def _statements(column: str, dtype: exp.DType, not_null: bool, i: int) -> list[str]:
    """The check of one column, on ``v`` read from the record (``fix``: the record, or its copy
    with the values converted so far)."""
    c = repr(column)
    lines = [f"v = get({c})", "if v is None:"]
    lines.append(f"    raise _missing({c})" if not_null else "    pass")
    if dtype in _TEXT:
        test, convert = "type(v) is not str", "_text(v)"
    elif dtype == exp.DType.BOOLEAN:
        test, convert = "type(v) is not bool", None
    elif dtype in _FLOATS:
        test, convert = "type(v) is not float", "float(v) if type(v) is int else _no()"
    else:
        bits = _INTEGERS[dtype]
        lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
        test, convert = f"type(v) is not int or not {lo} <= v < {hi}", f"_integer(v, {bits})"
    lines.append(f"elif {test}:")
    if convert is None:
        lines.append(f"    raise _fail({c}, {dtype.name!r}, v)")
        return lines
    lines += [
        "    if fix is r:",
        "        fix = r.copy()",
        "    try:",
        f"        fix[{c}] = {convert}",
        "    except TypeError:",
        f"        raise _fail({c}, {_declared_name(dtype)!r}, v) from None",
    ]
    return lines


def _declared_name(dtype: exp.DType) -> str:
    return "STRING" if dtype == exp.DType.TEXT else dtype.name


def _var(column: str) -> str:
    """A local variable's name for ``column`` in the generated check (any text is a column)."""
    return "v_" + "".join(ch if ch.isalnum() else f"_{ord(ch):x}_" for ch in column)


def _no() -> Any:
    raise TypeError


def _exact(column: str, dtype: exp.DType) -> str:
    """The test that ``column``'s value is of its type as most records hold it (a FLOAT or
    DOUBLE column's: a float, or an int the fast path converts)."""
    if dtype in _TEXT:
        kind = "str"
    elif dtype == exp.DType.BOOLEAN:
        kind = "bool"
    elif dtype in _FLOATS:
        return f"type({_var(column)} := get({column!r})) in _NUMBERS"
    else:
        bits = _INTEGERS[dtype]
        v = f"get({column!r})"
        return f"(type({v}) is int and {-(1 << (bits - 1))} <= {v} < {1 << (bits - 1)})"
    return f"type(get({column!r})) is {kind}"


def declared(columns: dict[str, tuple[exp.DType, bool]]) -> tuple[ColumnType, ...]:
    """``checker``'s columns as the job graph keeps them (``nodes.SqlStep.check``), so the
    columnar source can check scanned columns against them: ``(name, type, NOT NULL)``, the
    type one of ``nodes.ColumnType``'s."""
    out: list[ColumnType] = []
    for name, (dtype, not_null) in columns.items():
        if dtype in _TEXT:
            kind = "str"
        elif dtype == exp.DType.BOOLEAN:
            kind = "bool"
        elif dtype in _FLOATS:
            kind = "float"
        else:
            kind = f"int{_INTEGERS[dtype]}"
        out.append((name, kind, not_null))
    return tuple(out)


def checker(columns: dict[str, tuple[exp.DType, bool]], table: str) -> Callable[[Record], Record]:
    """The check of ``table``'s records: ``columns`` maps a column to ``(type, NOT NULL)``.
    Returns the record itself when every value fits as it is, a copy with the converted values
    otherwise; raises ``ColumnTypeError`` (the record becomes a dead letter). A record whose
    every value is of its column's type exactly takes one boolean expression; the others go
    column by column."""
    exact = " and ".join(_exact(name, dtype) for name, (dtype, _) in columns.items())
    body = ["def check(r):", "    get = r.get", "    fix = r  # copied before a value is converted"]
    body += [f"    if {exact or 'True'}:"]
    for name, (dtype, _) in columns.items():
        if dtype in _FLOATS:  # an int in a DOUBLE column: its float
            body += [
                f"        if type({_var(name)}) is int:",
                "            if fix is r:",
                "                fix = r.copy()",
                f"            fix[{name!r}] = float({_var(name)})",
            ]
    body += ["        return fix"]
    for i, (name, (dtype, not_null)) in enumerate(columns.items()):
        body += ["    " + line for line in _statements(name, dtype, not_null, i)]
    body += ["    return fix"]
    env: dict[str, Any] = {
        "_fail": _fail, "_missing": _missing, "_text": _text, "_integer": _integer, "_no": _no,
        "_NUMBERS": frozenset({int, float}),
    }  # fmt: skip
    exec(compile("\n".join(body) + "\n", f"<columns of {table}>", "exec"), env)  # noqa: S102
    check: Callable[[Record], Record] = env["check"]
    shown = ", ".join(f"{c} {_declared_name(t)}{' NOT NULL' * n}" for c, (t, n) in columns.items())
    check.__qualname__ = f"CHECK {table}({shown})"
    return check
