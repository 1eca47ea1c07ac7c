"""Broadcast state on one worker, driven directly on real RocksDB files: where it is stored
(outside every key group), what survives a snapshot and a new runtime, ``apply_to_keyed_state``
over keys in RocksDB and in memory, and the errors a function meets, each naming the value and
the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.broadcast_driver import Subtask, operator, restore_all, snapshot_all
from weir.base.errors import BroadcastStateError
from weir.state import layout
from weir.state.keygroups import MAX_KEY_GROUPS


class Rules:
    """Broadcast ``{"op": "put"|"remove"|"clear"|"bump"|..., ...}``; keyed records count per
    key and report the rule for their event and the whole map."""

    def process_broadcast_element(self, rule: dict[str, Any], ctx: Any) -> None:
        rules = ctx.broadcast_state("rules")
        if rule["op"] == "put":
            rules.put(rule["k"], rule["v"])
        elif rule["op"] == "remove":
            rules.remove(rule["k"])
        elif rule["op"] == "clear":
            rules.clear()
        elif rule["op"] == "bump":
            ctx.apply_to_keyed_state("n", lambda key, st: st.set(st.get() + rule["by"]))
        elif rule["op"] == "reset":
            ctx.apply_to_keyed_state("n", lambda key, st: st.clear())
        elif rule["op"] == "report":
            ctx.apply_to_keyed_state("n", lambda key, st: ctx.emit([key, st.get()]))

    def process_element(self, event: dict[str, Any], ctx: Any) -> None:
        n = ctx.value("n")
        n.set(n.get(0) + 1)
        rules = ctx.broadcast_state("rules")
        ctx.emit([ctx.key, n.get(), rules.get(event["e"]), sorted(rules.items(), key=repr)])


def _sub(tmp_path: Path, name: str = "db") -> Subtask:
    return Subtask(operator(Rules(), states=("rules",), key="id"), tmp_path / name)


def test_broadcast_entries_sit_outside_every_key_group_range() -> None:
    key = layout.broadcast_key(7, "rules", b"\xa1k")
    _, hi = layout.key_group_bounds(0, MAX_KEY_GROUPS - 1)
    assert key >= hi  # no key-group range (restore, rescale, bulk load) reaches it
    assert layout.decode_broadcast_key(key) == (7, "rules", b"\xa1k")
    with pytest.raises(Exception, match="malformed broadcast state key"):
        layout.decode_broadcast_key(layout.state_key(1, 7, b"k", 0))


def test_state_survives_a_snapshot_and_a_new_runtime(tmp_path: Path) -> None:
    sub = _sub(tmp_path)
    for rule in [
        {"op": "put", "k": "click", "v": {"limit": 3}},
        {"op": "put", "k": "view", "v": [1, 2]},
        {"op": "put", "k": ("a", 1), "v": None},
        {"op": "remove", "k": "view"},
    ]:
        sub.broadcast(rule, 1)
    sub.element({"id": "a", "e": "click"}, 2)
    assert sub.output[-1][:3] == ["a", 1, {"limit": 3}]
    sub.rt.flush()
    prefix = layout.broadcast_prefix(sub.op.state_id)
    stored = list(sub.state.scan(prefix, layout.prefix_upper_bound(prefix)))
    assert len(stored) == 2  # the removed entry is deleted, not left behind
    sub.close()
    again = _sub(tmp_path)
    again.element({"id": "a", "e": "click"}, 3)
    assert again.output == [["a", 2, {"limit": 3}, [("click", {"limit": 3}), (("a", 1), None)]]]
    again.broadcast({"op": "clear"}, 4)
    again.rt.flush()
    assert list(again.state.scan(prefix, layout.prefix_upper_bound(prefix))) == []
    again.close()


def test_apply_to_keyed_state_reaches_keys_in_rocksdb_and_in_memory(tmp_path: Path) -> None:
    sub = _sub(tmp_path)
    sub.element({"id": "a", "e": "x"}, 1)
    sub.element({"id": "b", "e": "x"}, 1)
    sub.rt.flush()
    sub.close()
    sub = _sub(tmp_path)  # a and b are in RocksDB only now
    sub.element({"id": "c", "e": "x"}, 2)  # c in memory only
    sub.broadcast({"op": "bump", "by": 10}, 3)
    sub.output.clear()
    sub.broadcast({"op": "report"}, 4)
    assert sub.output == [["a", 11], ["b", 11], ["c", 11]]
    sub.broadcast({"op": "reset"}, 5)  # cleared keys hold nothing: no longer visited
    sub.output.clear()
    sub.broadcast({"op": "report"}, 6)
    assert sub.output == []
    sub.rt.flush()
    sub.close()
    sub = _sub(tmp_path)
    sub.broadcast({"op": "report"}, 7)
    assert sub.output == []
    assert sub.dead_letters() == []
    sub.close()


class Capture:
    """Keeps each side's context and broadcast state for the test to call."""

    def __init__(self) -> None:
        self.keyed: Any = None
        self.broadcast: Any = None

    def process_element(self, event: Any, ctx: Any) -> None:
        self.keyed = ctx

    def process_broadcast_element(self, event: Any, ctx: Any) -> None:
        self.broadcast = ctx


@pytest.fixture
def captured(tmp_path: Path) -> Any:
    fn = Capture()
    sub = Subtask(operator(fn, states=("rules", "limits")), tmp_path / "db")
    sub.element("k", 1)
    sub.broadcast("r", 1)
    yield fn
    sub.close()


def test_the_keyed_side_cannot_write_broadcast_state(captured: Capture) -> None:
    rules = captured.keyed.broadcast_state("rules")
    message = (
        r"'rules' is read-only here \(put\('a', \.\.\.\)\): process_element and on_timer "
        r"only read it; change it in process_broadcast_element"
    )
    with pytest.raises(BroadcastStateError, match=message):
        rules.put("a", 1)
    for call in (lambda: rules.remove("a"), rules.clear, lambda: rules.put_all({"a": 1})):
        with pytest.raises(BroadcastStateError, match="is read-only here"):
            call()


def test_an_undeclared_state_name_names_the_declared_ones_and_the_fix(captured: Capture) -> None:
    with pytest.raises(BroadcastStateError, match=r"broadcast state 'rulez' is not declared for "
                       r"'op' \(declared: rules, limits\); add it to the stream's "
                       r"broadcast\('rules', 'limits', 'rulez'\)"):  # fmt: skip
        captured.keyed.broadcast_state("rulez")
    with pytest.raises(BroadcastStateError, match=r"broadcast_state\(3\) in 'op': name"):
        captured.broadcast.broadcast_state(3)
    with pytest.raises(BroadcastStateError, match=r"broadcast_state\(\[.rules.\]\) in .op.: name"):
        captured.keyed.broadcast_state(["rules"])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("a", {1, 2}, r"broadcast state 'rules': the value of 'a' cannot be stored: .*msgpack "
                      r"encodes \(str, int"),
        (1.5, 1, r"key 1.5 has type float; use a str, int, bytes or None, or a tuple of them"),
        (True, 1, r"key True has type bool"),
        (("a", [1]), 1, r"key \('a', \[1\]\) has type tuple"),
    ],
    ids=["set-value", "float-key", "bool-key", "list-in-key"],
)  # fmt: skip
def test_what_cannot_be_stored_is_refused_where_it_is_put(
    captured: Capture, key: Any, value: Any, message: str
) -> None:
    with pytest.raises(BroadcastStateError, match=message):
        captured.broadcast.broadcast_state("rules").put(key, value)
    assert captured.broadcast.broadcast_state("rules").keys() == []


def test_apply_to_keyed_state_wants_a_name_and_a_function(captured: Capture) -> None:
    with pytest.raises(BroadcastStateError, match=r"apply_to_keyed_state\('n', 3\): pass a"):
        captured.broadcast.apply_to_keyed_state("n", 3)


def test_a_failing_broadcast_record_goes_to_the_dead_letters_and_the_job_goes_on(
    tmp_path: Path,
) -> None:
    sub = _sub(tmp_path)
    sub.broadcast({"op": "put", "k": "a", "v": {1}}, 1)
    sub.broadcast({"op": "put", "k": "a", "v": 1}, 2)
    dead = sub.dead_letters()
    assert [d["stage"] for d in dead] == ["broadcast:op"]
    assert dead[0]["reason"].startswith("BroadcastStateError: broadcast state 'rules'")
    sub.element({"id": "x", "e": "a"}, 3)
    assert sub.output == [["x", 1, 1, [("a", 1)]]]
    sub.close()


@pytest.mark.parametrize(("after", "expected"), [(3, [0, 0, 0]), (1, [0]), (2, [0, 1])])
def test_a_rescale_gives_every_new_worker_old_worker_0s_copy(
    tmp_path: Path, after: int, expected: list[int]
) -> None:
    """Copies can differ (broadcast records of several splits reach workers in different
    orders): on a rescale every new worker takes old worker 0's, so they are equal again; at
    the same parallelism each worker keeps its own."""
    op = operator(Rules(), states=("rules",), key="id")
    old = [Subtask(op, tmp_path / f"w{i}", parallelism=2, index=i) for i in range(2)]
    for i, sub in enumerate(old):
        sub.broadcast({"op": "put", "k": "a", "v": i}, 1)
    storage, meta = snapshot_all(old, tmp_path)
    for sub in old:
        sub.close()
    new = restore_all(op, storage, meta, after, tmp_path)
    assert [sub.rt.broadcast_states.read_only("rules").get("a") for sub in new] == expected
    for sub in new:
        sub.close()
