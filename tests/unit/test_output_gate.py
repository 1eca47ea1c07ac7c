"""A worker's output gate: file outputs written after a checkpoint's barrier wait until the
checkpoint is settled; other sinks are not held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weir import sinks
from weir.engine.runtime.outputs import DeadLetters, OutputGate


class Recorder:
    """A sink that is not a file: never held."""

    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    def describe(self) -> str:
        return "recorder://"

    def prepare(self) -> None:
        return None

    def open(self) -> Recorder:
        return self

    def write(self, records: list[dict[str, Any]]) -> None:
        self.written.extend(records)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_file_writes_after_a_snapshot_wait_for_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    gate, other = OutputGate(), Recorder()
    w, o = gate.open(sinks.jsonl(path)), gate.open(other)
    w.write([{"n": 1}])
    gate.hold(3)
    w.write([{"n": 2}])
    w.write([{"n": 3}])
    w.flush()
    o.write([{"n": 9}])
    assert _lines(path) == ['{"n":1}'] and other.written == [{"n": 9}]
    gate.settled(2)  # an older checkpoint's word, read late: still held
    assert _lines(path) == ['{"n":1}']
    gate.settled(3)
    assert _lines(path) == ['{"n":1}', '{"n":2}', '{"n":3}'] and gate.holding is None
    w.write([{"n": 4}])
    assert _lines(path)[-1] == '{"n":4}'
    w.close()


def test_a_checkpoint_aborted_before_the_snapshot_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    gate = OutputGate()
    w = gate.open(sinks.jsonl(path))
    gate.settled(5)  # aborted while this worker was still aligning
    gate.hold(5)
    w.write([{"n": 1}])
    assert _lines(path) == ['{"n":1}']


def test_side_outputs_and_writers_opened_while_holding_are_held(tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    gate = OutputGate()
    gate.hold(1)
    dead = DeadLetters(sinks.jsonl(path), gate)
    dead.add("decode", "malformed-json", "not JSON", b"oops\n")
    dead.flush()
    assert _lines(path) == []
    dead.close()  # a stop writes what was held: a restore cuts it off again
    assert len(_lines(path)) == 1
