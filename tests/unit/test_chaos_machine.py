"""The chaos run's job and its checks (``benchmarks.chaos.machine``), run in-process by
``weir.testing``: the clean input passes; a duplicated or a lost event is reported as an
invalid transition; an output written twice, one missing and a wrong window each fail the
verdict."""

from __future__ import annotations

from typing import Any

from benchmarks.chaos import machine
from weir import testing


def _run(evs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    scope: dict[str, Any] = {}
    text = machine.job_text("127.0.0.1:1", "events", "/nonexistent/m", "/nonexistent/w")
    exec(compile(text, "chaos_job.py", "exec"), scope)  # the job file weir run would load
    out = testing.run(scope["job"], [*evs, machine.end_marker(evs[-1]["ts"])]).by_operator
    wins = [r for r in out["counts"] if r["key"] != machine.END_KEY]
    return {"machine": out["machine"], "windows": wins}


EVENTS = machine.events(2_000, 10, seed=3)
WANT = machine.model(EVENTS)


def test_the_clean_input_matches_the_model() -> None:
    out = _run(EVENTS)
    verdict = machine.verdict(WANT, out["machine"], out["windows"])
    assert verdict.ok, verdict
    assert machine.complete(WANT, out["machine"], out["windows"])
    assert len(WANT.windows) == 50 and sum(WANT.cycles.values()) > 100


def test_a_duplicated_or_lost_event_is_an_invalid_transition() -> None:
    duplicated = [*EVENTS[:500], EVENTS[499], *EVENTS[500:]]
    out = _run(duplicated)
    verdict = machine.verdict(WANT, out["machine"], out["windows"])
    assert [a["key"] for a in verdict.invalid][:1] == [EVENTS[499]["key"]]
    lost = [*EVENTS[:500], *EVENTS[501:]]
    out = _run(lost)
    assert machine.verdict(WANT, out["machine"], out["windows"]).invalid


def test_an_output_twice_missing_or_wrong_fails_the_verdict() -> None:
    out = _run(EVENTS)
    m, w = out["machine"], out["windows"]
    assert machine.verdict(WANT, m, [*w, w[3]]).duplicates == 1
    assert machine.verdict(WANT, [*m, m[0]], w).duplicates == 1
    assert machine.verdict(WANT, m, w[1:]).missing == 1
    assert not machine.complete(WANT, m, w[1:])
    bad = [dict(w[0], total=w[0]["total"] + 1), *w[1:]]
    assert machine.verdict(WANT, m, bad).wrong
