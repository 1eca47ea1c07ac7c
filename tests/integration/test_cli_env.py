"""``WEIR_*`` variables are checked exactly like their flags: a bad value gets the flag's one-line
error, naming the variable instead of the flag, and exit code 2; a variable of another command
is never judged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import WeirResult

Run = Callable[..., WeirResult]


def _error_line(result: WeirResult) -> str:
    assert result.rc == 2, result.stderr
    lines = result.error_lines()
    assert len(lines) == 1 and lines[0].startswith("weir: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def _as_variable(flag_line: str, command: str, flag: str, var: str) -> str:
    """The flag's error line as it reads for the variable."""
    text = flag_line.removesuffix(f"; see 'weir {command} --help'")
    for old, new in (
        (f"{flag}=", f"{var}="),
        (f"{flag}:", f"{var}:"),
        (f"e.g. {flag} ", f"e.g. {var}="),
    ):
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize(
    ("command", "flag", "value", "problem"),
    [
        ("run", "--parallelism", "many", "--parallelism='many' is not a whole number; e.g. "),
        ("run", "--state-retention-ms", "-5", "--state-retention-ms='-5' is too small; use 0 or"),
        ("run", "--log-level", "LOUD", "is not a choice; use one of DEBUG, INFO, WARNING, ERROR"),
        (
            "run",
            "--log-format",
            "yaml",
            "--log-format='yaml' is not a choice; use one of text, json",
        ),
        ("run", "--source", "ftpx://host/x", "--source: unknown source scheme 'ftpx' in 'ftpx://"),
        ("run", "--source", "generator://ads?speed=9", "unknown option 'speed'"),
        ("run", "--sink", "bogus://x", "--sink: unknown sink scheme 'bogus' in 'bogus://x'"),
        ("run", "--dead-letter", "file://", "--dead-letter: sink 'file://' has no path"),
        (
            "api",
            "--api-port",
            "http",
            "--api-port='http' is not a whole number; e.g. --api-port 8000",
        ),
        ("api", "--api-port", "70000", "--api-port='70000' is too large; use 65535 or less"),
        ("api", "--log-level", "verbose", "--log-level='verbose' is not a choice"),
        ("api", "--workers", "0", "--workers='0' is too small; use 1 or more"),
        ("api", "--workers", "lots", "--workers='lots' is not a whole number; e.g. --workers 1"),
        ("run", "--api-workers", "65", "--api-workers='65' is too large; use 64 or less"),
        ("api", "--log-format", "xml", "--log-format='xml' is not a choice; use one of text, json"),
        ("savepoint", "--api-url", "localhost:8000", "is not an http:// or https:// URL"),
        ("backfill", "--from", "yesterday", "--from='yesterday' is not a whole number"),
    ],
)
def test_a_bad_variable_gets_the_flags_error_naming_the_variable(
    run_weir: Run, job_file: Path, command: str, flag: str, value: str, problem: str
) -> None:
    var = "WEIR_" + flag.lstrip("-").replace("-", "_").upper()
    target = "t1" if command == "savepoint" else str(job_file)
    extra = ("--input", str(job_file)) if command == "backfill" else ()
    flag_line = _error_line(run_weir(command, target, *extra, flag, value))
    assert problem in flag_line
    env_line = _error_line(run_weir(command, target, *extra, env={var: value}))
    assert env_line == _as_variable(flag_line, command, flag, var)
    assert var in env_line and (repr(value) in env_line or value in env_line)


def test_a_switchs_variable_must_say_on_or_off(run_weir: Run, job_file: Path) -> None:
    line = _error_line(run_weir("run", str(job_file), env={"WEIR_EXIT_AT_END": "maybe"}))
    assert line == (
        "weir: error: WEIR_EXIT_AT_END='maybe' is not on or off; use 1, true, yes or on; 0, "
        "false, no or off"
    )
    done = run_weir(
        "run", str(job_file), "--state-dir", "st",
        env={"WEIR_EXIT_AT_END": "Yes", "WEIR_NO_API": "1", "WEIR_LOG_LEVEL": "warning"},
    )  # fmt: skip
    assert done.rc == 0, done.stderr
    assert "running without an API" in done.stderr and " INFO " not in done.stderr


def test_a_good_variable_stands_for_its_flag(run_weir: Run, job_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run_weir(
        "run", str(job_file), "--exit-at-end", "--api-port", "0", "--state-dir", "st",
        env={"WEIR_SINK": f"file://{out}", "WEIR_PARALLELISM": "2", "WEIR_BATCH_SIZE": "1"},
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert "workers=2" in result.stderr
    assert out.read_text().count('"key":"a"') == 1


def test_the_flag_wins_over_its_variable(run_weir: Run, job_file: Path) -> None:
    result = run_weir(
        "run", str(job_file), "--exit-at-end", "--no-api", "--parallelism", "1",
        "--state-dir", "st", env={"WEIR_PARALLELISM": "3"},
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert "workers=1" in result.stderr


def test_variables_of_other_commands_are_not_judged(run_weir: Run, job_file: Path) -> None:
    bad = {"WEIR_PARALLELISM": "many", "WEIR_SOURCE": "bogus://", "WEIR_LOG_FORMAT": "xml"}
    listed = run_weir("checkpoints", "t1", "--json", env=bad)
    assert listed.rc == 0 and listed.stdout.strip() == "[]", listed.stderr
    assert run_weir("--help", env=bad).rc == 0
    assert run_weir("run", "--help", env=bad).rc == 0


def test_help_shows_the_variables_value_as_the_default(run_weir: Run) -> None:
    text = " ".join(run_weir("run", "--help", env={"WEIR_LOG_FORMAT": "json"}).stdout.split())
    assert "(env WEIR_LOG_FORMAT, default json)" in text
    assert "--log-format text|json" in text


# from tests/unit/test_settings.py: a run starts a process, so it is an integration test
@pytest.mark.parametrize(
    ("var", "value", "problem"),
    [
        ("WEIR_KAFKA_CONNECT_TIMEOUT_S", "soon", "is not a number"),
        ("WEIR_PROFILE_DIR", "/nonexistent/weir-profiles", "is not a directory"),
        ("WEIR_S3_ADDRESSING", "sideways", "is not a choice; use one of path, virtual"),
        ("WEIR_KAFKA_SECURITY_PROTOCOL", "TLS", "is not a choice"),
    ],
)
def test_a_bad_variable_read_deep_inside_stops_the_run_before_it_starts(
    run_weir: Run, job_file: Path, var: str, value: str, problem: str
) -> None:
    r = run_weir("run", str(job_file), "--api-port", "0", env={var: value})
    assert r.rc == 2, r.stderr
    assert r.error_lines() == [f"weir: error: {var}={value!r} {problem}" + _fix(problem)]
    assert "serving" not in r.stderr


def _fix(problem: str) -> str:
    if problem == "is not a number":
        return "; e.g. WEIR_KAFKA_CONNECT_TIMEOUT_S=60.0"
    if problem == "is not a directory":
        return "; create it first, or unset the variable"
    if problem == "is not a choice":
        return "; use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    return ""
