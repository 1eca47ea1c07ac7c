"""Broadcast state through real ``weir run`` processes: a rules file broadcast to every worker,
an events file keyed by id, a keyed broadcast process function that checks each event against
the rule in force at its event time (Flink's broadcast state pattern, made deterministic by
event time: a timer at the event's time fires once the watermark, the minimum of both inputs,
has passed it, so every rule up to then is in). Its output equals a brute-force model at
parallelism 1, 2 and 4; its keyed state answers at ``/{job}/{op}/state/{key}``; a checkpoint
taken at parallelism 2 restores at 3 and, across a second restore, at 1, with the broadcast
state on every worker; a worker killed with SIGKILL recovers exactly once."""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_checkpoints import FAST
from tests.support import (
    WeirServer,
    read_jsonl,
    wait_until,
    worker_pids,
    write_lines,
)
from weir.client import Client, NotFound
from weir.engine.job import operator_state_id
from weir.state import layout
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import LeaseStore
from weir.state.rocksdb import RocksState

JOB = """
import time
from weir import Job, KeyedBroadcastProcessFunction, WatermarkStrategy, agg, sinks, sources, windows


class Limits(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, rule, ctx):
        rules = ctx.broadcast_state("rules")
        rules.put(rule["kind"], sorted([*rules.get(rule["kind"], []), [rule["ts"], rule["limit"]]]))
        ctx.emit({{"rule_seen": rule["kind"], "ts": rule["ts"]}})

    def process_element(self, event, ctx):
        ctx.list("pending").append([event["ts"], event["value"], event["kind"]])
        ctx.register_event_time_timer(event["ts"])

    def on_timer(self, ts, ctx):
        pending = ctx.list("pending")
        due = sorted(p for p in pending.get() if p[0] <= ts)
        rest = [p for p in pending.get() if p[0] > ts]
        pending.clear()
        for p in rest:
            pending.append(p)
        over = ctx.value("over")
        rules = ctx.broadcast_state("rules")
        for t, value, kind in due:
            limit = None
            for since, lim in rules.get(kind, []):
                if since <= t:
                    limit = lim
            if limit is not None and value > limit:
                over.set(over.get(0) + 1)
                ctx.emit({{"key": ctx.key, "ts": t, "value": value, "limit": limit}})


def slow(event):
    time.sleep({sleep})  # a run of a few seconds: checkpoints and kills land in the middle
    return event


job = Job("limits")
wm = WatermarkStrategy.bounded_out_of_orderness(ms=50)
events = job.source(sources.jsonl({events!r}), name="events", watermarks=wm).map(slow)
rules = job.source(sources.jsonl({rules!r}), name="rules", watermarks=wm)
(
    events.key_by("id")
    .connect(rules.broadcast("rules"))
    .process(Limits(), name="checked")
    .sink(sinks.jsonl({out!r}))
)
events.key_by("id").window(windows.tumbling(ms=1_000)).aggregate("counts", n=agg.count())
"""


def _inputs(tmp_path: Path, n_events: int, seed: int) -> tuple[list[Any], list[Any]]:
    """Events over 20 keys, a little out of order; rules for three kinds every 200 ms, in
    order, each kind at its own times."""
    rng = random.Random(seed)
    events, clock = [], 0
    for _ in range(n_events):
        clock += rng.randrange(0, 4)
        events.append(
            {
                "id": f"k{rng.randrange(20)}",
                "kind": rng.choice("abc"),
                "value": rng.randrange(100),
                "ts": max(0, clock - rng.choice([0, 0, 0, 30, 120])),
            }
        )
    rules = [
        {"kind": kind, "limit": rng.randrange(100), "ts": t + offset}
        for t in range(0, clock + 400, 200)
        for offset, kind in enumerate("abc")
    ]
    write_lines(tmp_path / "events.jsonl", [json.dumps(e) for e in events])
    write_lines(tmp_path / "rules.jsonl", [json.dumps(r) for r in rules])
    return events, rules


def _job(tmp_path: Path, sleep: float = 0.0) -> Path:
    path = tmp_path / "job.py"
    path.write_text(
        JOB.format(
            events=str(tmp_path / "events.jsonl"),
            rules=str(tmp_path / "rules.jsonl"),
            out=str(tmp_path / "out.jsonl"),
            sleep=sleep,
        )
    )
    return path


def _model(events: list[Any], rules: list[Any]) -> list[dict[str, Any]]:
    """Each event over the limit of the last rule of its kind at or before its time."""
    versions: dict[str, list[tuple[int, int]]] = {}
    for r in rules:
        versions.setdefault(r["kind"], []).append((r["ts"], r["limit"]))
    out = []
    for e in events:
        in_force = [lim for since, lim in sorted(versions[e["kind"]]) if since <= e["ts"]]
        if in_force and e["value"] > in_force[-1]:
            out.append({"key": e["id"], "ts": e["ts"], "value": e["value"], "limit": in_force[-1]})
    return out


def _split(out: Path) -> tuple[list[str], Counter[str]]:
    """The checked events (sorted, as JSON) and how many times each rule was seen."""
    got = read_jsonl(out)
    seen = Counter(f"{r['rule_seen']}@{r['ts']}" for r in got if "rule_seen" in r)
    checked = sorted(json.dumps(r, sort_keys=True) for r in got if "rule_seen" not in r)
    return checked, seen


def _as_json(records: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def _broadcast_entries(state_dir: Path, worker: int) -> dict[str, Any]:
    """What worker ``worker``'s RocksDB holds of operator ``checked``'s broadcast state."""
    import msgpack

    db = RocksState(state_dir / "limits" / f"worker-{worker}" / "db")
    try:
        prefix = layout.broadcast_prefix(operator_state_id("checked"))
        found = {}
        for key, value in db.scan(prefix, layout.prefix_upper_bound(prefix)):
            _, name, raw = layout.decode_broadcast_key(key)
            found[f"{name}:{msgpack.unpackb(raw)}"] = msgpack.unpackb(value)
        return found
    finally:
        db.close()


def _final_rules(rules: list[Any]) -> dict[str, Any]:
    by_kind: dict[str, list[list[int]]] = {}
    for r in rules:
        by_kind.setdefault(r["kind"], []).append([r["ts"], r["limit"]])
    return {f"rules:{k}": sorted(v) for k, v in by_kind.items()}


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_rules_and_events_equal_the_model(
    tmp_path: Path, weir_server: Callable[..., WeirServer], parallelism: int
) -> None:
    events, rules = _inputs(tmp_path, 3_000, seed=parallelism)
    state = tmp_path / "state"
    server = weir_server(
        _job(tmp_path), "--parallelism", str(parallelism), "--checkpoint-interval-ms", "100",
        state_dir=state,
    )  # fmt: skip
    server.wait_finished(60.0)
    want = _model(events, rules)
    assert len(want) > 500
    # a finished job's last file writes wait for the checkpoint in flight to settle
    lines = len(want) + len(rules) * parallelism
    out = tmp_path / "out.jsonl"
    wait_until(lambda: len(read_jsonl(out)) >= lines, 30.0, what=f"{lines} output lines")
    checked, seen = _split(out)
    assert checked == _as_json(want)
    # every worker got every rule: each one's broadcast side saw it once
    assert seen == Counter({f"{r['kind']}@{r['ts']}": parallelism for r in rules})
    c = server.client()
    over = Counter(r["key"] for r in want)
    for key in sorted(over)[:5]:
        body = c.get(f"/limits/checked/state/{key}").json()
        assert body["state"] == {"over": over[key]}, body  # nothing left pending
    ops = {o["name"]: o for o in c.get("/jobs/limits").json()["operators"]}
    assert ops["checked"]["type"] == "keyed_broadcast", ops
    with Client(server.base_url) as client:
        answer = client.broadcast_state("limits", "checked")
        assert {f"rules:{k}": v for k, v in answer.states["rules"]} == _final_rules(rules)
        if parallelism == 2:  # as of the latest checkpoint: each kind's versions so far
            committed = client.broadcast_state("limits", "checked", consistency="committed")
            assert committed.consistency == "committed" and committed.checkpoint
            for kind, versions in committed.states.get("rules", []):
                assert versions == _final_rules(rules)[f"rules:{kind}"][: len(versions)]
        with pytest.raises(NotFound, match=r"operator 'counts' of job 'limits' has no broadcast "
                           r"state \(it is a window operator\)"):  # fmt: skip
            client.broadcast_state("limits", "counts")
    server.stop()
    for w in range(parallelism):
        assert _broadcast_entries(state, w) == _final_rules(rules), w


def _checkpoint_with_rules_done(state: Path, after: int = 0) -> int:
    """A completed checkpoint newer than ``after`` taken once the rules file was read whole."""
    storage = CheckpointStorage(state / "checkpoints", "limits")
    lease = LeaseStore(storage)

    def found() -> int | None:
        n = storage.latest_valid()
        if n is None or n <= after:
            return None
        # committed: recorded in the job's lease after its _metadata (what --restore reads)
        read = lease.read()
        if read is None or n not in read[0].lineage.checkpoints:
            return None
        splits = [v for w in storage.metadata(n)["workers"] for k, v in w["sources"].items()
                  if k.startswith("rules/")]  # fmt: skip
        return n if splits and all(v["ended"] for v in splits) else None

    return wait_until(found, 60.0, what="a checkpoint after the rules file ended")


def _kill_run(server: WeirServer) -> None:
    server.crash()  # the job manager and its workers at once


def test_a_checkpoint_at_2_restores_at_3_then_at_1(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Every worker of a new parallelism starts with the broadcast state (rules are never read
    again: the checkpoint holds the rules file's end), across two restores in a row."""
    events, rules = _inputs(tmp_path, 6_000, seed=7)
    job, state, out = _job(tmp_path, sleep=0.0004), tmp_path / "state", tmp_path / "out.jsonl"
    flags = ("--exit-at-end", *FAST)
    first = weir_server(job, "--parallelism", "2", *flags, state_dir=state)
    n = _checkpoint_with_rules_done(state)
    _kill_run(first)
    second = weir_server(job, "--parallelism", "3", *flags, "--restore", "latest", state_dir=state)
    _checkpoint_with_rules_done(state, after=n)
    assert "restored from" in second.stderr()
    _kill_run(second)
    for w in range(3):  # as the parallelism-3 run left them (some of it past its checkpoint)
        assert _broadcast_entries(state, w) == _final_rules(rules), w
    third = weir_server(job, "--parallelism", "1", *flags, "--restore", "latest", state_dir=state)
    assert third.proc.wait(90) == 0, third.stderr()
    checked, seen = _split(out)
    assert checked == _as_json(_model(events, rules))
    # the rules were seen by the two workers of the first run only, before its checkpoint
    assert seen == Counter({f"{r['kind']}@{r['ts']}": 2 for r in rules})
    assert _broadcast_entries(state, 0) == _final_rules(rules)


def test_a_worker_killed_with_sigkill_recovers_exactly_once(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    events, rules = _inputs(tmp_path, 6_000, seed=11)
    out = tmp_path / "out.jsonl"
    server = weir_server(
        _job(tmp_path, sleep=0.0004), "--parallelism", "2", "--exit-at-end", *FAST,
        state_dir=tmp_path / "state",
    )  # fmt: skip
    _checkpoint_with_rules_done(tmp_path / "state")
    victim = random.Random(11).choice(worker_pids(server.proc.pid))
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(90) == 0, server.stderr()
    assert "restarting (attempt 1 of 3)" in server.stderr()
    checked, seen = _split(out)
    assert checked == _as_json(_model(events, rules))
    assert seen == Counter({f"{r['kind']}@{r['ts']}": 2 for r in rules})


NON_KEYED = """
from weir import BroadcastProcessFunction, Job, sinks, sources


class Enrich(BroadcastProcessFunction):
    def process_broadcast_element(self, rule, ctx):
        ctx.broadcast_state("rules").put(rule["kind"], rule["limit"])
        ctx.emit({{"rule_seen": rule["kind"], "ts": rule["ts"]}})

    def process_element(self, event, ctx):
        ctx.emit({{**event, "limit": ctx.broadcast_state("rules").get(event["kind"])}})


job = Job("enrich")
stream = job.source(sources.jsonl({mixed!r}))
rules = stream.filter(lambda e: "limit" in e).broadcast("rules")
(stream.filter(lambda e: "limit" not in e).connect(rules).process(Enrich(), name="enriched")
    .sink(sinks.jsonl({out!r})))
"""


def test_a_non_keyed_stream_is_enriched_once_where_it_is_read(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    """Rules and events in one file, rules first: every worker gets the rules, each event is
    processed once, on the worker reading the file (forward), after the rules before it."""
    events, rules = _inputs(tmp_path, 2_000, seed=3)
    rules = [r for r in rules if r["ts"] < 1_000]
    write_lines(tmp_path / "mixed.jsonl", [json.dumps(x) for x in [*rules, *events]])
    job = tmp_path / "enrich.py"
    job.write_text(NON_KEYED.format(mixed=str(tmp_path / "mixed.jsonl"), out=str(tmp_path / "o")))
    server = weir_server(job, "--parallelism", "2", state_dir=tmp_path / "state")
    server.wait_finished(60.0)
    got = read_jsonl(tmp_path / "o")
    seen = Counter(f"{r['rule_seen']}@{r['ts']}" for r in got if "rule_seen" in r)
    assert seen == Counter({f"{r['kind']}@{r['ts']}": 2 for r in rules})
    final = {r["kind"]: r["limit"] for r in rules}
    want = [{**e, "limit": final[e["kind"]]} for e in events]
    assert _as_json([r for r in got if "rule_seen" not in r]) == _as_json(want)
    with Client(server.base_url) as client:
        states = client.broadcast_state("enrich", "enriched").states
        assert dict(states["rules"]) == final
