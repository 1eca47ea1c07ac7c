"""One JSON encoding for what weir writes: result records in the sinks, and the HTTP API's
answers.

orjson writes ints up to 64 bits only; a sum past them (the folds keep Python's exact ints,
issue 38) would make a sink fail the job and a state answer fail with a 500. Such a value is
written by the standard library's ``json`` instead, which writes any int exactly; everything
else takes orjson's fast path.

Example:
    >>> dumps_json({"key": "a", "total": 1 << 70})
    b'{"key":"a","total":1180591620717411303424}'
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPT = orjson.OPT_NON_STR_KEYS


def dumps_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (no newline), keys in their order; a value JSON has no
    form for is written as its ``str``."""
    try:
        return orjson.dumps(value, default=str, option=_OPT)
    except orjson.JSONEncodeError:
        # an int past 64 bits (orjson's only refusal of a value its ``default`` cannot fix)
        text = json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False)
        return text.encode()


__all__ = ["dumps_json"]
