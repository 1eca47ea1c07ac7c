"""The command line behaves the same everywhere (issue 39 items 7, 8 and 11), from real ``weir``
processes: a reader that goes away is a quiet exit; sources and sinks are checked before
anything starts (plain paths are files everywhere, ``file://host/…`` is refused with the
``file:///…`` it probably meant, a missing input file is a usage error); mistyped commands and
flags get a suggestion and the command's own ``--help``; a job file's error says where, with
the line (and a caret under a syntax error) and Python's own "Did you mean"."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WEIR, WeirResult, job_text

Run = Callable[..., WeirResult]
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell shows for `yes | head -1`'s yes


def _reader_gone(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``weir argv`` with its standard output's reader closed before it writes (its
    output buffered, as it is unless PYTHONUNBUFFERED is set)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [*WEIR, *argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -1` does once it has its line
    err = proc.stderr.read().decode(errors="replace")
    return proc.wait(timeout=60), err


@pytest.mark.parametrize(
    "argv",
    [
        ["checkpoints", "t1", "--json", "--state-dir", "st"],
        ["list", "--json", "--state-dir", "st"],
        ["explain", "{job}", "--json"],
        ["run", "--help"],
        ["--version"],
    ],
    ids=["checkpoints", "list", "explain", "help", "version"],
)
def test_a_reader_that_goes_away_is_a_quiet_exit(
    tmp_path: Path, job_file: Path, argv: list[str]
) -> None:
    rc, err = _reader_gone([a.format(job=job_file) for a in argv], tmp_path)
    assert (rc, err) == (EXIT_PIPE, "")


def test_a_pipe_to_head_prints_one_line_and_nothing_else(
    run_weir: Run, tmp_path: Path, job_file: Path
) -> None:
    whole = run_weir("explain", str(job_file)).stdout.splitlines()
    shell = f'{" ".join(WEIR)} explain {job_file} | head -1; echo "${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    first, status = done.stdout.splitlines()
    assert len(whole) > 1 and first == whole[0]
    assert status in ("0", str(EXIT_PIPE)) and done.stderr == ""


def test_a_file_url_with_a_host_is_refused_before_anything_starts(
    run_weir: Run, job_file: Path
) -> None:
    r = run_weir("run", str(job_file), "--source", "file://tmp/x.jsonl", "--api-port", "0")
    assert r.rc == 2 and r.error_lines() == [
        "weir: error: --source: source 'file://tmp/x.jsonl' names host 'tmp', which a file URL "
        "does not have; a file URL has three slashes: file:///tmp/x.jsonl; see 'weir run --help'"
    ]
    r = run_weir("run", str(job_file), "--dead-letter", "file://out/dead.jsonl")
    assert r.rc == 2 and "three slashes: file:///out/dead.jsonl" in r.stderr


def test_a_missing_input_file_is_found_before_the_job_starts(
    run_weir: Run, job_file: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.jsonl"
    r = run_weir("run", str(job_file), "--source", str(missing), "--api-port", "0")
    assert r.rc == 2, r.stderr
    assert r.error_lines() == [
        f"weir: error: source 'source-0' reads {missing}, which does not exist; pass an "
        "existing JSONL file (a path or file:///path) or a glob"
    ]  # and nothing else: no "serving" line, no worker started
    own = tmp_path / "own.py"
    own.write_text(job_text(missing, bound=0, size=10, lateness=0))
    r = run_weir("run", str(own), "--api-port", "0")
    assert r.rc == 2 and f"reads {missing}, which does not exist" in r.stderr


def test_plain_paths_are_files_for_sources_and_sinks(run_weir: Run, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "event": "impression", "ts": 1, "value": 1}\n')
    job = tmp_path / "job.py"
    job.write_text(job_text(tmp_path / "unused.jsonl", bound=0, size=10, lateness=0))
    r = run_weir(
        "run", str(job), "--source", "in.jsonl", "--sink", "out.jsonl", "--dead-letter",
        "dead.jsonl", "--exit-at-end", "--no-api", "--state-dir", "st", "--parallelism", "1",
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(row["key"], row["count"]) for row in rows] == [("a", 1)]


def test_a_backfill_input_url_with_a_host_is_refused(run_weir: Run, job_file: Path) -> None:
    r = run_weir(
        "backfill", str(job_file), "--input", "file://data/in.jsonl", "--into-savepoint", "sp"
    )
    assert r.rc == 2 and "three slashes: file:///data/in.jsonl" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["run", "{job}", "--paralelism", "2"],
            "unrecognized argument --paralelism; did you mean --parallelism?; see 'weir run "
            "--help'",
        ),
        (
            ["stop", "t1", "--savepiont"],
            "unrecognized argument --savepiont; did you mean --savepoint?; see 'weir stop --help'",
        ),
        (["rnu", "{job}"], "unknown command 'rnu'; did you mean 'run'?; see 'weir --help'"),
        (["frobnicate"], "unknown command 'frobnicate'; use one of run, sql, explain"),
    ],
    ids=["flag", "flag-with-value", "command", "no-close-command"],
)
def test_a_mistyped_flag_or_command_gets_a_suggestion(
    run_weir: Run, job_file: Path, argv: list[str], line: str
) -> None:
    r = run_weir(*(a.format(job=job_file) for a in argv))
    assert r.rc == 2 and len(r.error_lines()) == 1, r.stderr
    assert r.error_lines()[0].startswith(f"weir: error: {line}"), r.stderr


def test_a_job_files_error_says_where_with_pythons_suggestion(
    run_weir: Run, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.py"
    typo.write_text(
        "from weir import Job, agg, sources, windows\njob = Job('t')\nn = agg.cuont()\n"
    )
    r = run_weir("run", str(typo))
    assert r.rc == 2 and r.error_lines() == [
        f"weir: error: {typo}:3: the job file failed to load: AttributeError: module "
        "'weir.engine.agg' has no attribute 'cuont'. Did you mean: 'count'?",
        "  n = agg.cuont()",
    ]
    syntax = tmp_path / "syntax.py"
    syntax.write_text("from weir import Job\njob = Job('t'\nx = 1\n")
    r = run_weir("explain", str(syntax))
    assert r.rc == 2 and r.error_lines() == [
        f"weir: error: {syntax}:2:10: the job file failed to load: SyntaxError: '(' was never "
        "closed",
        "  job = Job('t'",
        "           ^",
    ]
