"""``weir run package.module:attr``: a real package in the current directory, run by two spawned
workers that each resolve the same spec (and the package's own imports) themselves, with the
results of the brute-force model; ``weir api`` takes the same spec."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.reference import AGGREGATES_SRC, Spec, canonical, group_emissions, simulate

SPEC = Spec(bound=200, size=1_000, lateness=1_500)

# the package splits the job over two modules: the workers must import the sibling too
SETTINGS = f"""
BOUND_MS = {SPEC.bound}
SIZE_MS = {SPEC.size}
LATENESS_MS = {SPEC.lateness}
"""
JOBS = f"""
from weir import Job, WatermarkStrategy, agg, sources, windows

from . import settings


def ads(path="unused.jsonl"):
    job = Job("t1")
    (
        job.source(
            sources.jsonl(path),
            timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=settings.BOUND_MS),
        )
        .filter(lambda e: e["event"] == "impression")
        .key_by("id")
        .window(windows.tumbling(ms=settings.SIZE_MS), allowed_lateness_ms=settings.LATENESS_MS)
        .aggregate("imps", {AGGREGATES_SRC})
    )
    return job
"""


def _package(root: Path) -> str:
    pkg = root / "adjobs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "settings.py").write_text(SETTINGS)
    (pkg / "jobs.py").write_text(JOBS)
    return "adjobs.jobs:ads"


def test_a_package_job_runs_on_two_workers_with_the_reference_results(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    lines = event_lines(make_events(2_000, seed=16))
    src = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    ref = simulate(lines, SPEC)
    assert len(ref.late) >= 10 and sum(len(s) > 1 for s in ref.emissions.values()) >= 5
    result = run_weir(
        "run", _package(tmp_path), "--source", f"file://{src}", "--sink", f"file://{out}",
        "--exit-at-end", "--no-api", "--parallelism", "2", "--state-dir", "st",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert "job=t1 started workers=2" in result.stderr
    assert result.stderr.count("finished records_in=") == 2  # both workers loaded the job
    assert group_emissions(read_jsonl(out)) == ref.emissions
    assert canonical(read_jsonl(tmp_path / "st" / "t1" / "late.jsonl")) == canonical(ref.late)


def test_weir_api_serves_a_job_named_by_its_module(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> None:
    lines = event_lines(make_events(300, seed=2))
    src = write_lines(tmp_path / "in.jsonl", lines)
    ref = simulate(lines, SPEC)
    spec = _package(tmp_path)
    state = tmp_path / "state"
    weir_server(spec, "--source", f"file://{src}", "--no-api", "--parallelism", "2",
                state_dir=state)  # fmt: skip
    api = weir_server(spec, state_dir=state, command="api")
    client = api.client()
    want = sorted((k[1], k[2], v[-1]["count"]) for k, v in ref.emissions.items() if k[0] == "ad-0")

    def served() -> list[tuple[int, int, int]] | None:
        r = client.get("/t1/imps/state/ad-0", params={"limit": 10_000})
        if r.status_code != 200:
            return None
        got = sorted((w["start"], w["end"], w["count"]) for w in r.json()["windows"])
        return got if got == want else None

    wait_until(served, 30.0, what="weir api to serve ad-0's windows")
