"""Side outputs of process functions (Flink's ``OutputTag`` / ``ctx.output`` /
``getSideOutput``): declared on the result, routed to their own sinks, a default file when none
is attached; an undeclared tag or a record JSON cannot hold goes to the dead letters."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from weir import Job, OutputTag, agg, sinks, sources, testing, windows
from weir.base.errors import JobDefinitionError
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.outputs import tagged_sinks

ALERTS, AUDIT, NOWHERE = OutputTag("alerts"), OutputTag("audit"), OutputTag("nowhere")


def fraud(event: dict[str, Any], ctx: Any) -> None:
    ctx.emit({"key": ctx.key, "value": event["value"]})
    if event["value"] > 50:
        ctx.output(ALERTS, {"key": ctx.key, "ts": ctx.timestamp, "value": event["value"]})
    if event.get("odd") == "tag":
        ctx.output(NOWHERE, event)
    if event.get("odd") == "set":
        ctx.output(AUDIT, {"values": {1, 2}})
    if event.get("odd") == "name":
        ctx.output("alerts", event)  # a bare name is not a tag


def _job(tmp_path: Path) -> tuple[Job, Any]:
    job = Job("sides")
    result = job.source(sources.jsonl("/unused.jsonl")).key_by("id").process(fraud, name="fraud")
    result.side_output(ALERTS).sink(sinks.jsonl(tmp_path / "alerts.jsonl"))
    result.side_output(AUDIT)
    return job, result


def test_records_reach_their_tag_and_the_main_output_goes_on(tmp_path: Path) -> None:
    job, _ = _job(tmp_path)
    evs = [{"id": k, "ts": t, "value": v} for k, t, v in [("a", 1, 10), ("b", 2, 70), ("a", 3, 99)]]
    out = testing.run(job, evs)
    assert [r["value"] for r in out.results] == [10, 70, 99]
    assert out.side == {
        "fraud": {
            "alerts": [{"key": "b", "ts": 2, "value": 70}, {"key": "a", "ts": 3, "value": 99}]
        }
    }
    assert out.dead == []
    assert job.operators["fraud"].describe()["side_outputs"] == ["alerts", "audit"]


@pytest.mark.parametrize(
    ("odd", "reason"),
    [
        ("tag", r"OutputTag\(name='nowhere'\)\): not a side output of 'fraud' \(declared: "
                r"alerts, audit\); declare it"),
        ("name", r"ctx.output\('alerts'\): not a side output"),
        ("set", r"side output 'audit' cannot hold the record as JSON: Type is not JSON"),
    ],
    ids=["undeclared-tag", "not-a-tag", "unencodable"],
)  # fmt: skip
def test_a_bad_side_output_goes_to_the_dead_letters(tmp_path: Path, odd: str, reason: str) -> None:
    job, _ = _job(tmp_path)
    out = testing.run(
        job, [{"id": "a", "ts": 1, "value": 1, "odd": odd}, {"id": "a", "ts": 2, "value": 60}]
    )
    assert [d["stage"] for d in out.dead] == ["side_output:fraud"]
    assert re.search(reason, out.dead[0]["reason"]), out.dead[0]["reason"]
    assert [r["value"] for r in out.side["fraud"]["alerts"]] == [60]  # the job went on


def test_a_declared_tag_without_a_sink_writes_the_default_file(tmp_path: Path) -> None:
    job, _ = _job(tmp_path)
    cfg = RunConfig(job_file="job.py", state_dir=tmp_path / "state")
    found = tagged_sinks(cfg, job)
    assert list(found["fraud"]) == ["alerts", "audit"]
    assert found["fraud"]["alerts"][0].describe().endswith("alerts.jsonl")
    default = found["fraud"]["audit"][0].describe()
    assert default.endswith(str(tmp_path / "state" / "sides" / "side-fraud-audit.jsonl"))


def test_side_outputs_come_from_process_functions_only(tmp_path: Path) -> None:
    job = Job("w")
    stream = job.source(sources.jsonl("/unused.jsonl")).key_by("id")
    windowed = stream.window(windows.tumbling(ms=10)).aggregate("w", n=agg.count())
    with pytest.raises(JobDefinitionError, match=r"on window operator 'w': side outputs come from"):
        windowed.side_output(ALERTS)
    result = stream.process(fraud, name="p")
    with pytest.raises(JobDefinitionError, match=r"side_output\('alerts'\): pass an OutputTag"):
        result.side_output("alerts")  # type: ignore[arg-type]
    with pytest.raises(JobDefinitionError, match=r"output tag name 'no spaces' is not allowed"):
        OutputTag("no spaces")
