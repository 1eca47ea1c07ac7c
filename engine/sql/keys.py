"""The key of a SQL query grouped by several columns: one string, reversible and unambiguous.

Each column's value takes its canonical form (a string as itself, an int in decimal, as
``state.keygroups.canonical_key`` has it), ``\\`` and ``|`` in it are escaped with ``\\``, and the
forms are joined with ``|``: ``GROUP BY id, event`` over ``{"id": "ad-1", "event": "click"}`` is
keyed ``ad-1|click``, and is queried at ``/{job}/{op}/state/ad-1%7Cclick``. A query grouped by
one column keys by that column's value itself, as the Python API's ``key_by("id")`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weir.state.keygroups import canonical_key

SEPARATOR = "|"


def _escape(part: str) -> str:
    return part.replace("\\", "\\\\").replace(SEPARATOR, "\\" + SEPARATOR)


def composite_key(*values: object) -> str:
    """The key of a record whose GROUP BY columns hold ``values`` (each a str or an int; None,
    a float or a bool raises TypeError, and the record goes to the dead letters)."""
    return SEPARATOR.join(_escape(canonical_key(v)) for v in values)


def split_key(key: str) -> list[str]:
    """The canonical forms a composite key joins, in GROUP BY order."""
    parts: list[str] = []
    current: list[str] = []
    chars = iter(key)
    for ch in chars:
        if ch == "\\":
            current.append(next(chars, "\\"))
        elif ch == SEPARATOR:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def key_selector(fields: Sequence[str]) -> str | Callable[[Any], str]:
    """The ``key_by`` of a query grouped by ``fields``: the field itself for one column."""
    if len(fields) == 1:
        return fields[0]
    names = tuple(fields)
    if len(names) == 2:
        a, b = names
        return lambda r: composite_key(r[a], r[b])
    return lambda r: composite_key(*(r[n] for n in names))
