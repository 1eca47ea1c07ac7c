"""Flink's ``CoBroadcastWithKeyedOperatorTest``, ported case by case (the Flink test's name is
in each test's name and docstring): a keyed broadcast process function driven directly, on
real RocksDB files, snapshotted into checkpoint storage and restored at another parallelism as
workers restore. Flink asserts inside its functions; an exception in a weir function goes to
the dead letters, so these functions emit what they saw and the tests assert on that (and on
there being no dead letters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.broadcast_driver import Subtask, key_for, operator, restore_all, snapshot_all
from weir import OutputTag
from weir.base.errors import BroadcastStateError

STATE = "broadcast-state"  # Flink's STATE_DESCRIPTOR


def _entries(state: Any) -> str:
    """Flink's ``mapToString``: `` key=value`` for each entry, sorted."""
    return "".join(f" {k}={v}" for k, v in sorted(state.items()))


def test_key_querying(tmp_path: Path) -> None:
    """testKeyQuerying: the keyed side's current key is the record's."""

    class KeyQuerying:
        def process_element(self, value: list[Any], ctx: Any) -> None:
            ctx.emit([ctx.key == str(value[0]), value[1]])

        def process_broadcast_element(self, value: Any, ctx: Any) -> None:
            pass

    sub = Subtask(operator(KeyQuerying(), key=lambda r: r[0]), tmp_path / "db")
    sub.element([5, "5"], 12)
    sub.element([42, "42"], 13)
    assert sub.output == [[True, "5"], [True, "42"]]
    sub.close()


class ListOnKeyedSide:
    """StatefulFunctionWithKeyedStateAccessedOnBroadcast: keyed records are appended to a list
    state; a broadcast record reports every key's list through ``apply_to_keyed_state``."""

    def process_element(self, value: str, ctx: Any) -> None:
        ctx.list("listStateTest").append(value)

    def process_broadcast_element(self, value: int, ctx: Any) -> None:
        ctx.apply_to_keyed_state("listStateTest", lambda key, state: ctx.emit({key: state.get()}))


def test_access_to_keyed_state_it(tmp_path: Path) -> None:
    """testAccessToKeyedStateIt: the broadcast side iterates every key's keyed state."""
    sub = Subtask(operator(ListOnKeyedSide()), tmp_path / "db")
    for value, ts in [("test1", 12)] * 2 + [("test2", 13)] * 3 + [("test3", 14)] * 3:
        sub.element(value, ts)
    sub.element("test2", 13)
    sub.broadcast(1, 13)
    assert sub.output == [
        {"test1": ["test1"] * 2},
        {"test2": ["test2"] * 4},
        {"test3": ["test3"] * 3},
    ]
    assert sub.dead_letters() == []
    sub.close()


class WithTimer:
    """FunctionWithTimerOnKeyed: every record reports the watermark and its timestamp; the
    keyed side registers an event-time timer at 41."""

    def process_broadcast_element(self, value: int, ctx: Any) -> None:
        ctx.emit(f"BR:{value} WM:{ctx.watermark} TS:{ctx.timestamp}")

    def process_element(self, value: str, ctx: Any) -> None:
        ctx.register_event_time_timer(41)
        ctx.emit(f"NON-BR:{value} WM:{ctx.watermark} TS:{ctx.timestamp}")

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit(f"TIMER:{timestamp} KEY:{ctx.key}")


def test_function_with_timer(tmp_path: Path) -> None:
    """testFunctionWithTimer: timers of the keyed side fire on the operator's watermark."""
    sub = Subtask(operator(WithTimer()), tmp_path / "db")
    sub.advance(10)
    sub.broadcast(5, 12)
    sub.advance(40)
    sub.element("6", 13)
    sub.element("6", 15)
    sub.advance(50)
    assert sub.output == [
        "BR:5 WM:10 TS:12",
        "NON-BR:6 WM:40 TS:13",
        "NON-BR:6 WM:40 TS:15",
        "TIMER:41 KEY:6",
    ]
    sub.close()


BROADCAST_TAG, NON_BROADCAST_TAG = OutputTag("br-out"), OutputTag("non-br-out")


class WithSideOutput:
    """FunctionWithSideOutput: each side writes to its own side output."""

    def process_broadcast_element(self, value: int, ctx: Any) -> None:
        ctx.output(BROADCAST_TAG, f"BR:{value} WM:{ctx.watermark} TS:{ctx.timestamp}")

    def process_element(self, value: str, ctx: Any) -> None:
        ctx.output(NON_BROADCAST_TAG, f"NON-BR:{value} WM:{ctx.watermark} TS:{ctx.timestamp}")


def test_side_output(tmp_path: Path) -> None:
    """testSideOutput: both sides write side outputs."""
    op = operator(WithSideOutput(), side_outputs=("br-out", "non-br-out"))
    sub = Subtask(op, tmp_path / "db")
    sub.advance(10)
    sub.broadcast(5, 12)
    sub.advance(40)
    sub.element("6", 13)
    sub.element("6", 15)
    sub.advance(50)
    assert sub.side == {
        "br-out": ["BR:5 WM:10 TS:12"],
        "non-br-out": ["NON-BR:6 WM:40 TS:13", "NON-BR:6 WM:40 TS:15"],
    }
    assert sub.output == []
    sub.close()


class WithBroadcastState:
    """FunctionWithBroadcastState: the broadcast side puts ``<value>.key -> value``; the keyed
    side reads the entries (and registers a timer at 41), the timer reports them."""

    def process_broadcast_element(self, value: int, ctx: Any) -> None:
        ctx.broadcast_state(STATE).put(f"{value}.key", value)

    def process_element(self, value: str, ctx: Any) -> None:
        ctx.emit(f"SEEN:{_entries(ctx.broadcast_state(STATE))}")
        ctx.register_event_time_timer(41)

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        ctx.emit(f"TS:{timestamp} KEY:{ctx.key}{_entries(ctx.broadcast_state(STATE))}")


def test_function_with_broadcast_state(tmp_path: Path) -> None:
    """testFunctionWithBroadcastState: the keyed side and the timer read what the broadcast
    side put, as of when they run."""
    sub = Subtask(operator(WithBroadcastState()), tmp_path / "db")
    sub.advance(10)
    for value, ts in [(5, 10), (34, 12), (53, 15), (12, 16), (98, 19)]:
        sub.broadcast(value, ts)
    sub.element("trigger", 13)
    sub.broadcast(51, 21)
    sub.advance(50)
    before = {f"{v}.key": v for v in (5, 34, 53, 12, 98)}
    after = {**before, "51.key": 51}
    assert sub.output == [f"SEEN:{_entries(before)}", f"TS:41 KEY:trigger{_entries(after)}"]
    sub.close()


class WithOutput:
    """TestFunctionWithOutput: the broadcast side puts ``key -> value`` for three keys; a
    keyed record reports every entry."""

    KEYS = ("test1", "test2", "test3")

    def process_broadcast_element(self, value: int, ctx: Any) -> None:
        for k in self.KEYS:
            ctx.broadcast_state(STATE).put(k, value)

    def process_element(self, value: str, ctx: Any) -> None:
        for k, v in ctx.broadcast_state(STATE).items():
            ctx.emit(f"{k}={v}")


@pytest.mark.parametrize(
    ("before", "after"), [(2, 3), (3, 2)], ids=["testScaleUp", "testScaleDown"]
)
def test_scale_up_and_down(tmp_path: Path, before: int, after: int) -> None:
    """testScaleUp / testScaleDown: every worker of the new parallelism has the broadcast
    state (max parallelism 10, as Flink's test)."""
    op = operator(WithOutput())
    old = [
        Subtask(op, tmp_path / f"w{i}", max_parallelism=10, parallelism=before, index=i)
        for i in range(before)
    ]
    for sub in old:
        sub.broadcast(3, 0)  # every worker gets every broadcast record
    storage, meta = snapshot_all(old, tmp_path)
    for sub in old:
        sub.close()
    new = restore_all(op, storage, meta, after, tmp_path)
    assert len(new) == after
    for sub in new:
        sub.element(key_for(sub), 1)
        assert sorted(sub.output) == ["test1=3", "test2=3", "test3=3"], sub.index
        sub.close()


def test_no_keyed_state_on_broadcast_side(tmp_path: Path) -> None:
    """testNoKeyedStateOnBroadcastSide: keyed state on the broadcast side is refused (Flink:
    "No key set"); the record goes to the dead letters with the reason."""
    seen: list[Any] = []

    class NoKeyedState:
        def process_broadcast_element(self, value: int, ctx: Any) -> None:
            seen.append(ctx)
            ctx.value("any").get()

        def process_element(self, value: str, ctx: Any) -> None:
            pass

    sub = Subtask(operator(NoKeyedState()), tmp_path / "db")
    sub.advance(10)
    sub.broadcast(5, 12)
    dead = sub.dead_letters()
    assert [d["stage"] for d in dead] == ["broadcast:op"]
    assert "the broadcast side has no current key" in dead[0]["reason"]
    with pytest.raises(BroadcastStateError, match=r"ctx.value\('any'\) in process_broadcast"):
        seen[0].value("any")
    with pytest.raises(BroadcastStateError, match=r"register timers in process_element"):
        seen[0].register_event_time_timer(5)
    sub.close()
