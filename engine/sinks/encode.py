"""A result record as one JSON line, for the sinks.

orjson writes ints up to 64 bits only; a sum past them (the folds keep Python's exact ints,
issue 38) would make the sink fail the job. Such a record is written by the standard library's
``json`` instead, which writes any int exactly; every other record takes orjson's fast path.

Example:
    >>> dumps_record({"key": "a", "total": 1 << 70})
    b'{"key":"a","total":1180591620717411303424}'
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPT = orjson.OPT_NON_STR_KEYS


def dumps_record(record: Any) -> bytes:
    """``record`` as compact JSON (no newline); a value JSON has no form for as its ``str``."""
    try:
        return orjson.dumps(record, default=str, option=_OPT)
    except orjson.JSONEncodeError:
        # an int past 64 bits (orjson's only refusal of a value its ``default`` cannot fix)
        text = json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False)
        return text.encode()


__all__ = ["dumps_record"]
