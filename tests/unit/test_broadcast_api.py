"""The broadcast job API: ``stream.broadcast(*states)``, ``keyed.connect(broadcast)``,
``.process(fn, name=...)``; its errors, each naming the value and the fix; ``weir explain``
showing the broadcast input; the backfill refusing a job that has one (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weir import (
    BroadcastProcessFunction,
    BroadcastStateError,
    Job,
    KeyedBroadcastProcessFunction,
    sources,
    testing,
)
from weir.app.cli import main
from weir.base.errors import JobDefinitionError
from weir.engine.job import KeyedBroadcastNode

JOB = """
from weir import (
    BroadcastProcessFunction,
    BroadcastStateError,
    Job,
    KeyedBroadcastProcessFunction,
    sources,
    testing,
)

class Limits(KeyedBroadcastProcessFunction):
    def process_element(self, event, ctx):
        ctx.emit(event)

    def process_broadcast_element(self, rule, ctx):
        ctx.broadcast_state("limits").put(rule["id"], rule["value"])

job = Job("limits")
events = job.source(sources.jsonl({path!r}))
rules = events.filter(lambda e: e.get("event") == "rule").broadcast("limits")
events.key_by("id").connect(rules).process(Limits(), name="checked")
"""


class Noop(KeyedBroadcastProcessFunction):
    def process_element(self, event: Any, ctx: Any) -> None:
        pass

    def process_broadcast_element(self, event: Any, ctx: Any) -> None:
        pass


def _streams() -> tuple[Job, Any, Any]:
    job = Job("j")
    events = job.source(sources.jsonl("/unused.jsonl"))
    return job, events, events.filter(lambda e: e.get("rule")).broadcast("rules", "limits")


def test_connect_and_process_build_a_keyed_broadcast_operator() -> None:
    job, events, rules = _streams()
    result = events.key_by("id").connect(rules).process(Noop(), name="checked")
    op = job.operators["checked"]
    assert isinstance(op, KeyedBroadcastNode) and result.operator is op
    assert op.state_names == ("rules", "limits")
    assert op.describe()["type"] == "keyed_broadcast"
    assert op.describe()["broadcast_states"] == ["rules", "limits"]
    # one broadcast node however many operators read it
    events.key_by("user").connect(rules).process(Noop(), name="second")
    assert job.operators["second"].broadcast is op.broadcast  # type: ignore[union-attr]
    assert [o.name for o in op.broadcast.children] == ["checked", "second"]  # type: ignore[union-attr]


def test_connect_wants_a_broadcast_stream() -> None:
    _, events, _ = _streams()
    message = (
        r"connect\(.*\): pass a keyed stream of the same job, .*, or a broadcast stream of "
        r"it, e.g. events.key_by\('id'\).connect\(rules.broadcast\('rules'\)\)"
    )
    with pytest.raises(JobDefinitionError, match=message):
        events.key_by("id").connect(events)
    other, _, foreign = _streams()
    with pytest.raises(JobDefinitionError, match="or a broadcast stream of it"):
        events.key_by("id").connect(foreign)


def test_process_wants_both_entry_points() -> None:
    _, events, rules = _streams()

    class OnlyElements:
        def process_element(self, event: Any, ctx: Any) -> None:
            pass

    for fn in (OnlyElements(), lambda e, ctx: None):
        with pytest.raises(JobDefinitionError, match=r"pass an object with process_element\("
                           r"event, ctx\), process_broadcast_element\(event, ctx\)"):  # fmt: skip
            events.key_by("id").connect(rules).process(fn, name="x")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("ok", "bad name"), r"broadcast state name 'bad name' is not allowed; use 1-64"),
        (("rules", "rules"), r"broadcast\('rules', 'rules'\) names a broadcast state twice"),
    ],
    ids=["bad-name", "twice"],
)
def test_broadcast_state_names_are_checked(names: tuple[str, ...], message: str) -> None:
    _, events, _ = _streams()
    with pytest.raises(JobDefinitionError, match=message):
        events.broadcast(*names)


def test_the_base_classes_say_what_to_override() -> None:
    with pytest.raises(NotImplementedError, match="override process_broadcast_element"):
        KeyedBroadcastProcessFunction().process_broadcast_element({}, None)
    with pytest.raises(NotImplementedError, match="override process_element"):
        KeyedBroadcastProcessFunction().process_element({}, None)


def test_explain_shows_the_broadcast_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB.format(path=str(tmp_path / "in.jsonl")))
    assert main(["explain", str(job_file)]) == 0
    text = capsys.readouterr().out
    assert "broadcast to every worker (states: limits)" in text
    assert "-> broadcast input of checked" in text
    assert "keyed broadcast operator checked: Limits (broadcast states: limits)" in text
    assert main(["explain", str(job_file), "--json"]) == 0
    (source,) = json.loads(capsys.readouterr().out)["sources"]
    filtered, keyed = source["children"]
    assert keyed["type"] == "key_by"
    assert filtered["children"] == [
        {"type": "broadcast", "states": ["limits"], "operators": ["checked"]}
    ]


def test_the_backfill_refuses_a_job_with_a_broadcast_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB.format(path=str(tmp_path / "in.jsonl")))
    (tmp_path / "in.jsonl").write_text('{"id": "a", "ts": 1}\n')
    argv = ["backfill", str(job_file), "--input", str(tmp_path / "in.jsonl")]
    assert main([*argv, "--into-savepoint", str(tmp_path / "sp")]) == 2
    err = capsys.readouterr().err
    assert "job 'limits' has a broadcast input (read by 'checked'); a backfill does not run" in err
    assert "Backfill a job file without the broadcast input" in err
    assert not (tmp_path / "sp").exists()


def test_testing_run_feeds_the_broadcast_side_from_the_same_source() -> None:
    """``weir.testing.run`` runs a broadcast stream cut from the job's one source: rule records
    reach process_broadcast_element (once: one worker), events process_element."""

    class Limits(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, rule: Any, ctx: Any) -> None:
            ctx.broadcast_state("limits").put(rule["kind"], rule["limit"])

        def process_element(self, event: Any, ctx: Any) -> None:
            limit = ctx.broadcast_state("limits").get(event["kind"])
            ctx.emit([ctx.key, event["value"], limit])

    job = Job("t")
    stream = job.source(sources.jsonl("/unused.jsonl"))
    rules = stream.filter(lambda e: "limit" in e).broadcast("limits")
    events = stream.filter(lambda e: "limit" not in e)
    events.key_by("id").connect(rules).process(Limits(), name="checked")
    out = testing.run(
        job,
        [
            {"kind": "a", "limit": 5, "ts": 1},
            {"id": "x", "kind": "a", "value": 7, "ts": 2},
            {"id": "y", "kind": "b", "value": 1, "ts": 3},
            {"kind": "a", "limit": 9, "ts": 4},
            {"id": "x", "kind": "a", "value": 8, "ts": 5},
        ],
        batch_size=2,
    )
    assert out.results == [["x", 7, 5], ["y", 1, None], ["x", 8, 9]]
    assert out.dead == []


class Enrich(BroadcastProcessFunction):
    """A non-keyed broadcast function: each event gets the limit of its kind as of now."""

    def __init__(self) -> None:
        self.contexts: list[Any] = []

    def process_broadcast_element(self, rule: Any, ctx: Any) -> None:
        ctx.broadcast_state("limits").put(rule["kind"], rule["limit"])
        self.contexts.append(ctx)

    def process_element(self, event: Any, ctx: Any) -> None:
        ctx.emit([event["id"], ctx.timestamp, ctx.broadcast_state("limits").get(event["kind"])])
        self.contexts.append(ctx)


def _non_keyed(fn: Any) -> Job:
    job = Job("n")
    stream = job.source(sources.jsonl("/unused.jsonl"))
    rules = stream.filter(lambda e: "limit" in e).broadcast("limits")
    stream.filter(lambda e: "limit" not in e).connect(rules).process(fn, name="enriched")
    return job


def test_a_non_keyed_stream_connects_to_a_broadcast_stream() -> None:
    fn = Enrich()
    job = _non_keyed(fn)
    op = job.operators["enriched"]
    assert op.describe()["type"] == "broadcast"
    out = testing.run(
        job,
        [
            {"kind": "a", "limit": 5, "ts": 1},
            {"id": "x", "kind": "a", "ts": 2},
            {"kind": "a", "limit": 9, "ts": 3},
            {"id": "y", "kind": "a", "ts": 4},
        ],
        batch_size=1,
    )
    assert out.results == [["x", 2, 5], ["y", 4, 9]]
    keyed_side, broadcast_side = fn.contexts[1], fn.contexts[0]
    with pytest.raises(BroadcastStateError, match=r"ctx.value\('n'\) in a broadcast process "
                       r"function on a non-keyed stream: .* key the stream first"):  # fmt: skip
        keyed_side.value("n")
    with pytest.raises(BroadcastStateError, match=r"register_event_time_timer\(5\) in a broadcast"):
        keyed_side.register_event_time_timer(5)
    with pytest.raises(BroadcastStateError, match="is read-only here"):
        keyed_side.broadcast_state("limits").put("a", 1)
    with pytest.raises(BroadcastStateError, match=r"apply_to_keyed_state\('n', ...\) in a "
                       r"broadcast process function on a non-keyed stream"):  # fmt: skip
        broadcast_side.apply_to_keyed_state("n", lambda k, s: None)


def test_explain_shows_a_non_keyed_broadcast_function() -> None:
    from weir.engine.explain import describe, render

    text = render(describe(_non_keyed(Enrich())))
    assert "forward (no key)" in text
    assert "broadcast operator enriched: Enrich (broadcast states: limits)" in text
