"""Logging is configured once, here, in the ``weir`` process and again in each worker it spawns
(with the same ``RunConfig`` settings): ``key=value`` fields, lazy ``%s`` arguments.

``text`` writes one readable line a record. ``json`` writes one JSON object a line with
``time``, ``level``, ``logger``, ``process`` and ``message``, plus each ``key=%s`` of the
message as a field of its own (``log.info("worker=%d checkpoint=%d", 1, 3)`` gives
``"worker": 1, "checkpoint": 3``), so a log shipper needs no parsing rules. weir's own lines for
people (``weir: job … serving on …``, ``weir: error: …``) follow the same format.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from datetime import UTC, datetime
from typing import Any

from weir.base.redact import redact_text

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
_RESERVED = frozenset({"time", "level", "logger", "process", "message", "exception", "stack"})
# a printf conversion (group 1: its type); `%%` takes no argument, `*` widths take one more
_CONVERSION = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(.)")
_KEY_BEFORE = re.compile(r"([A-Za-z_][\w.-]*)=$")


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    quiet_clients()


def quiet_clients() -> None:
    """kafka-python logs every connection at INFO; weir logs what matters about them. Py4J logs
    Ctrl-C during a call into Spark's JVM as an error with a traceback on the root logger; the
    command then ends with its own line (exit 130), so that record is dropped."""
    logging.getLogger("kafka").setLevel(logging.ERROR)
    root = logging.getLogger()
    if not any(isinstance(f, _Py4JInterrupt) for f in root.filters):
        root.addFilter(_Py4JInterrupt())


class _Py4JInterrupt(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "KeyboardInterrupt while sending command."


def say(text: str, **fields: Any) -> None:
    """A line for the person running weir (shown at any log level): ``weir: <text>``."""
    _human(logging.INFO, text, f"weir: {text}", fields)


def error(text: str, **fields: Any) -> None:
    """The line a failing command ends with: ``weir: error: <what, and what to do>``."""
    _human(logging.ERROR, text, f"weir: error: {text}", fields)


def _human(level: int, text: str, line: str, fields: dict[str, Any]) -> None:
    handler = _json_handler()
    if handler is None:
        # one write, newline included: print's text and end are two, and a log record another
        # thread wrote between them tore the line (``…serving on http://127.0.0.1:39699<record>``)
        sys.stderr.write(redact_text(line) + "\n")
        sys.stderr.flush()
        return
    record = logging.LogRecord("weir", level, __file__, 0, text, None, None)
    record.__dict__["fields"] = fields
    handler.handle(record)


def _json_handler() -> logging.Handler | None:
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return handler
    return None


class TextFormatter(logging.Formatter):
    """The text format's line, without the secrets a message may quote (``redact_text``: a
    library's error naming a URL with its password, a ``password=`` setting)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object a line; the message's ``key=value`` pairs become fields. Secrets a
    message or field quotes are redacted as in the text format."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(self._line(record))

    def _line(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.processName,
            "message": record.getMessage(),
        }
        extra = record.__dict__.get("fields")
        pairs = {**key_value_fields(record), **(extra if isinstance(extra, dict) else {})}
        for key, value in pairs.items():
            if key not in _RESERVED:
                out[key] = _plain(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


def key_value_fields(record: logging.LogRecord) -> dict[str, Any]:
    """``{key: argument}`` for every ``key=%x`` in the message, with the argument's own type."""
    args = record.args
    if not isinstance(record.msg, str) or not isinstance(args, tuple):
        return {}
    out: dict[str, Any] = {}
    i = 0
    for m in _CONVERSION.finditer(record.msg):
        if m.group(1) == "%":
            continue
        if "*" in m.group(0) or "(" in m.group(0) or i >= len(args):
            break  # positions past here are not known
        key = _KEY_BEFORE.search(record.msg, 0, m.start())
        if key:
            out[key.group(1)] = args[i]
        i += 1
    return out


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)
