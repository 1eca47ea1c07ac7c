"""The key of a SQL query grouped by several columns: one string, reversible and unambiguous.

Each column's value takes its string form (a string as itself, an int in decimal, as
``state.keygroups.canonical_key`` has it), ``\\`` and ``|`` in it are escaped with ``\\``, a NULL
is ``\\N`` (which no escaped value can be), and the forms are joined with ``|``: ``GROUP BY id,
event`` over ``{"id": "ad-1", "event": "click"}`` is keyed ``ad-1|click``, over ``{"id": "ad-1",
"event": None}`` ``ad-1|\\N``, and is queried at ``/{job}/{op}/state/ad-1%7Cclick``. A query
grouped by one column keys by that column's value itself, as the Python API's ``key_by("id")``
does (a NULL is the NULL key, ``keygroups.NULL_KEY``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weir.state.keygroups import NULL_KEY

SEPARATOR = "|"


def _part(value: object) -> str:
    if value is None:
        return NULL_KEY
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace(SEPARATOR, "\\" + SEPARATOR)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(
        f"key {value!r} has type {type(value).__name__}; GROUP BY columns must be str, int or "
        "NULL (CAST a column to STRING or BIGINT to group by it)"
    )


def composite_key(*values: object) -> str:
    """The key of a record whose GROUP BY columns hold ``values`` (each a str, an int or None;
    a float or a bool raises TypeError, and the record goes to the dead letters)."""
    return SEPARATOR.join(map(_part, values))


def split_key(key: str) -> list[str | None]:
    """The values a composite key joins, in GROUP BY order: each column's string form, None for
    a NULL."""
    parts: list[str | None] = []
    current: list[str] = []
    null = False
    chars = iter(key)
    for ch in chars:
        if ch == "\\":
            escaped = next(chars, "\\")
            if escaped == "N" and not current:
                null = True
            else:
                current.append(escaped)
        elif ch == SEPARATOR:
            parts.append(None if null else "".join(current))
            current, null = [], False
        else:
            current.append(ch)
    parts.append(None if null else "".join(current))
    return parts


def key_selector(fields: Sequence[str]) -> Callable[[Any], Any]:
    """The ``key_by`` of a query grouped by ``fields``: one column's value itself (a record
    without it is NULL, as SQL reads a missing column), several columns' composite key."""
    if len(fields) == 1:
        (field,) = fields

        def one(r: Any) -> Any:
            return r.get(field)

        one.weir_field = field  # type: ignore[attr-defined]  # the columnar chain reads it
        return one
    names = tuple(fields)
    if len(names) == 2:
        a, b = names
        return lambda r: composite_key(r.get(a), r.get(b))
    return lambda r: composite_key(*(r.get(n) for n in names))
