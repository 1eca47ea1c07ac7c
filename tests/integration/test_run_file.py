"""``weir run JOB --exit-at-end`` on a bounded file: every emission, late record and window is
compared with the brute-force model (tests/support/reference.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WeirResult, event_lines, job_text, make_events, read_jsonl, write_lines
from tests.support.reference import Spec, canonical, group_emissions, simulate

N_EVENTS = 3_000
BOUND, SIZE = 200, 1_000


def _run(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
    lines: list[str],
    spec: Spec,
    *flags: str,
    tag: str = "run",
) -> tuple[WeirResult, Path, Path]:
    src = write_lines(tmp_path / f"{tag}-in.jsonl", lines)
    out = tmp_path / f"{tag}-out.jsonl"
    state = tmp_path / f"{tag}-state"
    job = write_job(
        src,
        bound=spec.bound,
        size=spec.size,
        lateness=spec.lateness,
        slide=spec.slide,
        gap=spec.gap,
    )
    result = run_weir(
        "run",
        str(job),
        "--source",
        f"file://{src}",
        "--sink",
        f"file://{out}",
        "--exit-at-end",
        "--api-port",
        "0",
        "--state-dir",
        str(state),
        *flags,
    )
    assert result.rc == 0, result.stderr
    return result, out, state / "t1"


@pytest.mark.parametrize(
    ("lateness", "parallelism", "batch_size"),
    [
        (0, 1, 8192),
        (1_500, 1, 8192),
        (0, 2, 8192),
        (1_500, 2, 8192),
        (1_500, 2, 1),
        (1_500, 4, 8192),
    ],
    ids=["L0-p1", "L1500-p1", "L0-p2", "L1500-p2", "L1500-p2-batch1", "L1500-p4"],
)
def test_bounded_file_matches_reference(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
    lateness: int,
    parallelism: int,
    batch_size: int,
) -> None:
    """One file is one split: neither the worker count nor the batch size may change any
    result (DESIGN.md, "Time")."""
    lines = event_lines(make_events(N_EVENTS, seed=lateness + batch_size))
    spec = Spec(bound=BOUND, size=SIZE, lateness=lateness)
    ref = simulate(lines, spec)
    # the input exercises what it should: late records, and (with lateness) late updates
    assert len(ref.late) >= 20
    if lateness:
        assert sum(len(s) > 2 for s in ref.emissions.values()) >= 10
    assert any(k[1] < 0 for k in ref.emissions)  # windows before the epoch too

    _, out, job_dir = _run(
        tmp_path, run_weir, write_job, lines, spec,
        "--batch-size", str(batch_size), "--parallelism", str(parallelism),
    )  # fmt: skip
    got = group_emissions(read_jsonl(out))

    # every window, with every aggregate, in its final emission
    assert {k: v[-1] for k, v in got.items()} == {k: v[-1] for k, v in ref.emissions.items()}
    # and the whole emission sequence of each (key, start, end)
    assert got == ref.emissions
    if lateness == 0:
        assert all(len(s) == 1 and s[0]["final"] for s in got.values())
    late = read_jsonl(job_dir / "late.jsonl")
    assert len(late) == len(ref.late)
    assert canonical(late) == canonical(ref.late)
    assert read_jsonl(job_dir / "dead-letter.jsonl") == []


@pytest.mark.parametrize("parallelism", [1, 2])
def test_sliding_windows_match_reference(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
    parallelism: int,
) -> None:
    """Sliding 1 s windows every 250 ms, with lateness: every window of every record, each
    window's emission sequence and the late output equal the model at 1 and 2 workers."""
    lines = event_lines(make_events(N_EVENTS, seed=11))
    spec = Spec(bound=BOUND, size=SIZE, slide=250, lateness=600)
    ref = simulate(lines, spec)
    assert len(ref.late) >= 5 and sum(len(s) > 2 for s in ref.emissions.values()) >= 10
    _, out, job_dir = _run(
        tmp_path, run_weir, write_job, lines, spec, "--parallelism", str(parallelism)
    )
    assert group_emissions(read_jsonl(out)) == ref.emissions
    assert canonical(read_jsonl(job_dir / "late.jsonl")) == canonical(ref.late)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_session_windows_match_reference(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    write_job: Callable[..., Path],
    parallelism: int,
) -> None:
    """Sessions with a 40 ms gap and lateness: merges (late bridging records included), each
    session's emission sequence and the late output equal the model at 1 and 2 workers."""
    lines = event_lines(make_events(N_EVENTS, seed=23))
    spec = Spec(bound=BOUND, size=1, gap=40, lateness=3_000)
    ref = simulate(lines, spec)
    # the input exercises it: late records, updates, and fired sessions later merged away
    assert len(ref.late) >= 20
    assert sum(len(s) > 2 for s in ref.emissions.values()) >= 10
    assert sum(not s[-1]["final"] for s in ref.emissions.values()) >= 10
    _, out, job_dir = _run(
        tmp_path, run_weir, write_job, lines, spec, "--parallelism", str(parallelism)
    )
    assert group_emissions(read_jsonl(out)) == ref.emissions
    assert canonical(read_jsonl(job_dir / "late.jsonl")) == canonical(ref.late)


def test_result_records_have_the_documented_shape(
    tmp_path: Path, run_weir: Callable[..., WeirResult], write_job: Callable[..., Path]
) -> None:
    events = [
        {"id": "k", "event": "impression", "ts": 1_010, "value": 4},
        {"id": "k", "event": "impression", "ts": 1_500, "value": 7},
        {"id": 42, "event": "impression", "ts": 1_999, "value": 2.5},
        {"id": "k", "event": "click", "ts": 1_700, "value": 1_000},  # filtered out
        {"id": "k", "event": "impression", "ts": 2_000, "value": 1},  # t == end: next window
    ]
    spec = Spec(bound=0, size=1_000, lateness=0)
    _, out, _ = _run(tmp_path, run_weir, write_job, event_lines(events), spec)
    results = read_jsonl(out)
    by_key = {(r["key"], r["start"]): r for r in results}
    assert by_key[("k", 1_000)] == {
        "op": "imps",  # the operator, named in every result record
        "key": "k",
        "start": 1_000,
        "end": 2_000,
        "count": 2,
        "total": 11,
        "lo": 4,
        "hi": 7,
        "avg": 5.5,
        "final": True,
    }
    assert type(by_key[("k", 1_000)]["total"]) is int
    assert by_key[("42", 1_000)]["key"] == "42"  # int keys become their decimal string
    assert by_key[("42", 1_000)]["avg"] == 2.5
    assert by_key[("k", 2_000)]["count"] == 1
    assert len(results) == 3


def test_lateness_trace_emission_sequence(
    tmp_path: Path, run_weir: Callable[..., WeirResult], write_job: Callable[..., Path]
) -> None:
    """A hand-checked trace (bound 10, size 100, lateness 50), in one batch as a file is read:
    [0,100) fires under watermark 109 (not final), is updated by a record within lateness, and
    becomes final once the watermark reaches 149; a record under watermark 189 is late."""
    trace = [5, 50, 120, 60, 200, 90, 400]
    events = [{"id": "a", "event": "impression", "ts": t, "value": t} for t in trace]
    spec = Spec(bound=10, size=100, lateness=50)
    _, out, job_dir = _run(tmp_path, run_weir, write_job, event_lines(events), spec)
    seq = group_emissions(read_jsonl(out))[("a", 0, 100)]
    assert [(r["count"], r["total"], r["final"]) for r in seq] == [
        (2, 55, False),
        (3, 115, False),
        (3, 115, True),
    ]
    late = read_jsonl(job_dir / "late.jsonl")
    assert [(r["op"], r["key"], r["ts"], r["watermark"]) for r in late] == [("imps", "a", 90, 189)]
    assert late[0]["record"] == events[5]


def test_rerun_starts_from_empty_state_and_truncates_outputs(
    tmp_path: Path, run_weir: Callable[..., WeirResult], write_job: Callable[..., Path]
) -> None:
    spec = Spec(bound=BOUND, size=SIZE, lateness=0)
    first = event_lines(make_events(1_000, seed=1))
    second = event_lines(make_events(200, seed=2, start=50_000))
    src = tmp_path / "in.jsonl"
    out = tmp_path / "out.jsonl"
    state = tmp_path / "state"
    job = write_job(
        src,
        bound=spec.bound,
        size=spec.size,
        lateness=spec.lateness,
        slide=spec.slide,
        gap=spec.gap,
    )
    for lines in (first, second):
        write_lines(src, lines)
        result = run_weir(
            "run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
            "--state-dir", str(state),
        )  # fmt: skip
        assert result.rc == 0, result.stderr
    ref = simulate(second, spec)
    assert group_emissions(read_jsonl(out)) == ref.emissions
    assert canonical(read_jsonl(state / "t1" / "late.jsonl")) == canonical(ref.late)


def test_generator_source_url_matches_reference(
    tmp_path: Path, run_weir: Callable[..., WeirResult], write_job: Callable[..., Path]
) -> None:
    """``--source generator://ads?...`` replaces the job's source; the synthetic clock makes the
    events reproducible, so the model can be run on the same events read in-process (one
    worker: one generator split)."""
    from weir import sources

    url = "generator://ads?rate=0&count=3000&ids=12&seed=21&disorder=400&clock=synthetic&step=2"
    src = sources.from_url(url)
    (split,) = src.splits(1)
    events = src.open(split).read_batch(3_000).items
    spec = Spec(bound=150, size=500, lateness=100)
    ref = simulate(event_lines(events), spec)
    assert ref.late  # disorder 400 > bound 150 + lateness 100: some records are late

    job = write_job(tmp_path / "unused.jsonl", bound=spec.bound, size=spec.size, lateness=100)
    out = tmp_path / "out.jsonl"
    result = run_weir(
        "run", str(job), "--source", url, "--sink", f"file://{out}", "--exit-at-end",
        "--api-port", "0", "--state-dir", str(tmp_path / "state"), "--batch-size", "8192",
        "--parallelism", "1",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    got = group_emissions(read_jsonl(out))
    assert {k: v[-1] for k, v in got.items()} == {k: v[-1] for k, v in ref.emissions.items()}
    late = read_jsonl(tmp_path / "state" / "t1" / "late.jsonl")
    assert canonical(late) == canonical(ref.late)


def test_processing_time_windows_are_honoured(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    """``windows.tumbling(ms=..., time="processing")`` windows by the wall clock, never by the
    records' event time."""
    src = write_lines(
        tmp_path / "in.jsonl",
        event_lines([{"id": "a", "event": "impression", "ts": t, "value": 1} for t in (5, 7)]),
    )
    job = tmp_path / "pt.py"
    job.write_text(
        job_text(src, bound=0, size=60_000, lateness=0).replace(
            "windows.tumbling(ms=60000)", 'windows.tumbling(ms=60000, time="processing")'
        )
    )
    assert 'time="processing"' in job.read_text()
    out = tmp_path / "out.jsonl"
    before_ms = time.time() * 1000
    result = run_weir(
        "run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "st"),
    )  # fmt: skip
    after_ms = time.time() * 1000
    assert result.rc == 0, result.stderr
    results = read_jsonl(out)
    starts = {r["start"] for r in results}
    assert starts, "no results"
    assert sum(r["count"] for r in results) == 2 and all(r["final"] for r in results)
    assert all(before_ms - 60_000 <= s <= after_ms for s in starts), starts
