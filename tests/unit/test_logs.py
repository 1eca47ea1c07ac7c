"""The JSON log format: a record's ``key=%x`` arguments become fields with their own types."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
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


def test_a_line_for_people_is_never_torn_by_another_threads_log_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``serving on`` line is what scripts (and the tests) read the API's port from: a log
    record another thread wrote between its text and its newline made it ``…:39699<record>``.
    stderr here is a process's own under PYTHONUNBUFFERED=1 (as the tests and many containers
    run weir): each write a system call, which lets another thread run."""
    err = tmp_path / "stderr"
    raw = open(err, "wb", buffering=0)  # noqa: SIM115 - closed with the stream below
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "stderr", stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.TextFormatter(logs.FORMAT))
    noisy = logging.getLogger("weir.noise")
    noisy.addHandler(handler)
    noisy.setLevel(logging.INFO)
    noisy.propagate = False
    done = threading.Event()

    def noise() -> None:
        while not done.is_set():
            noisy.info("worker=1 reached the end of its input")

    thread = threading.Thread(target=noise)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch at any point, as on a loaded host
    thread.start()
    try:
        for i in range(3000):
            logs.say(f"job j serving on http://127.0.0.1:{10000 + i}")
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
        noisy.removeHandler(handler)
        noisy.propagate = True
        stream.close()
    lines = err.read_text().splitlines()
    said = [line for line in lines if line.startswith("weir: ")]
    assert said == [f"weir: job j serving on http://127.0.0.1:{10000 + i}" for i in range(3000)]
    assert all(line.startswith("weir: ") or line.endswith(" end of its input") for line in lines)
