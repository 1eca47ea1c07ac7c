"""The JSON log format: a record's ``key=%x`` arguments become fields with their own types."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from weir.base import logs


def _record(msg: str, *args: Any, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("bad")
        except ValueError:
            info = sys.exc_info()
    return logging.LogRecord("weir.x", logging.INFO, __file__, 1, msg, args, info)


def _format(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(logs.JsonFormatter().format(record))
    return out


def test_key_value_arguments_become_typed_fields() -> None:
    out = _format(_record("job=%s worker=%d checkpoint=%d took %.1f ms", "t1", 1, 3, 2.5))
    assert out["message"] == "job=t1 worker=1 checkpoint=3 took 2.5 ms"
    assert (out["job"], out["worker"], out["checkpoint"]) == ("t1", 1, 3)
    assert "took" not in out and out["logger"] == "weir.x" and out["level"] == "INFO"


@pytest.mark.parametrize(
    ("msg", "args", "fields"),
    [
        ("ratio=%d%% done=%s", (50, True), {"ratio": 50, "done": True}),
        ("path=%s rate=%s", (Path("/a b"), float("inf")), {"path": "/a b", "rate": "inf"}),
        ("nothing to see", (), {}),
        ("restore copied key groups %d-%d from worker %s", (0, 63, 1), {}),
        ("a=%*d b=%s", (3, 7, "x"), {}),  # a width from the arguments: positions unknown
        ("message=%s level=%s", ("spoof", "x"), {}),  # the record's own fields stay its own
    ],
)
def test_which_arguments_become_fields(
    msg: str, args: tuple[Any, ...], fields: dict[str, Any]
) -> None:
    out = _format(_record(msg, *args))
    extra = {
        k: v for k, v in out.items() if k not in {"time", "level", "logger", "process", "message"}
    }
    assert extra == fields
    assert out["level"] == "INFO"


def test_an_exception_is_one_field_and_the_line_stays_one_line() -> None:
    line = logs.JsonFormatter().format(_record("op=%s failed", "savepoint", exc=True))
    assert "\n" not in line
    out = json.loads(line)
    assert out["op"] == "savepoint" and "ValueError: bad" in out["exception"]


def test_lines_for_people_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    logs.say("job t1 serving on http://127.0.0.1:1", url="http://127.0.0.1:1")
    logs.error("job t1 failed: worker 0 failed: boom")
    assert capsys.readouterr().err.splitlines() == [
        "weir: job t1 serving on http://127.0.0.1:1",
        "weir: error: job t1 failed: worker 0 failed: boom",
    ]
