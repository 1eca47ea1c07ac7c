"""``weir`` command-line errors: each exits 2 with one ``weir: error:`` line naming the value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support import WeirResult

Run = Callable[..., WeirResult]


def _one_error_line(result: WeirResult, *needles: str) -> str:
    assert result.rc == 2, result.stderr
    lines = result.error_lines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    line = lines[0]
    assert line.startswith("weir: error: "), line
    for needle in needles:
        assert needle in line, line
    return line


def test_missing_job_file(run_weir: Run, tmp_path: Path) -> None:
    missing = tmp_path / "missing.py"
    _one_error_line(run_weir("run", str(missing)), str(missing), "does not exist")


def test_job_file_without_job(run_weir: Run, tmp_path: Path) -> None:
    path = tmp_path / "nojob.py"
    path.write_text("x = 1\n")
    _one_error_line(run_weir("run", str(path)), str(path), "defines no `job`")


def test_unknown_source_scheme(run_weir: Run, job_file: Path) -> None:
    _one_error_line(
        run_weir("run", str(job_file), "--source", "ftpx://host/x.jsonl"),
        "'ftpx'",
        "file://",
    )


def test_unknown_sink_scheme(run_weir: Run, job_file: Path) -> None:
    _one_error_line(run_weir("run", str(job_file), "--sink", "bogus://x"), "'bogus'")


def test_bad_generator_option_is_named(run_weir: Run, job_file: Path) -> None:
    _one_error_line(
        run_weir("run", str(job_file), "--source", "generator://ads?speed=9"), "'speed'"
    )


def test_non_numeric_parallelism(run_weir: Run, job_file: Path) -> None:
    _one_error_line(run_weir("run", str(job_file), "--parallelism", "x"), "--parallelism", "'x'")


def test_negative_retention(run_weir: Run, job_file: Path) -> None:
    _one_error_line(
        run_weir("run", str(job_file), "--state-retention-ms", "-5"), "--state-retention-ms", "-5"
    )


def test_parallelism_above_max_parallelism(run_weir: Run, job_file: Path) -> None:
    _one_error_line(
        run_weir("run", str(job_file), "--parallelism", "200", "--api-port", "0"),
        "--parallelism=200",
        "max_parallelism=128",
    )


def test_zero_parallelism(run_weir: Run, job_file: Path) -> None:
    _one_error_line(run_weir("run", str(job_file), "--parallelism", "0"), "--parallelism", "0")


def test_bad_environment_variable_is_named(run_weir: Run, job_file: Path) -> None:
    result = run_weir("run", str(job_file), env={"WEIR_PARALLELISM": "many"})
    _one_error_line(result, "WEIR_PARALLELISM", "'many'")


def test_help_shows_environment_variables(run_weir: Run) -> None:
    result = run_weir("run", "--help")
    assert result.rc == 0
    text = " ".join(result.stdout.split())
    for env in ("WEIR_SOURCE", "WEIR_PARALLELISM", "WEIR_STATE_RETENTION_MS", "WEIR_API_PORT"):
        assert env in text


def test_job_file_that_raises(run_weir: Run, tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nraise ValueError('no such thing')\n")
    r = run_weir("run", str(path))
    assert r.rc == 2 and r.error_lines() == [
        f"weir: error: {path}:2: the job file failed to load: ValueError: no such thing",
        "  raise ValueError('no such thing')",
    ]


def test_job_names_on_the_command_line_cannot_name_other_directories(
    run_weir: Run, tmp_path: Path
) -> None:
    _one_error_line(run_weir("checkpoints", "../x", "--state-dir", str(tmp_path)), "'../x'")
    _one_error_line(run_weir("savepoint", "a/b", "--api-url", "http://127.0.0.1:9"), "'a/b'")


def test_a_job_file_renaming_its_job_out_of_its_directory_is_refused(
    run_weir: Run, job_file: Path
) -> None:
    job_file.write_text(job_file.read_text() + 'job.name = "../x"\n')
    _one_error_line(run_weir("run", str(job_file)), "job name '../x' is not allowed")
    _one_error_line(run_weir("api", str(job_file)), "job name '../x' is not allowed")


def test_a_restore_whose_metadata_points_outside_its_storage_is_refused(
    run_weir: Run, job_file: Path, tmp_path: Path
) -> None:
    chk = tmp_path / "sp" / "t1" / "chk-1"
    chk.mkdir(parents=True)
    escape = {"name": "000001.sst", "size": 1, "crc32": 0, "shared": "../../../../etc/passwd"}
    meta = {"id": 1, "workers": [{"index": 0, "key_groups": [0, 127], "files": [escape]}]}
    (chk / "_metadata").write_text(json.dumps(meta))
    _one_error_line(
        run_weir("run", str(job_file), "--restore", str(chk), "--api-port", "0"),
        "cannot restore this checkpoint",
        "'../../../../etc/passwd' is not a plain file name",
    )


def test_api_help_shows_its_flags_and_environment_variables(run_weir: Run) -> None:
    text = " ".join(run_weir("api", "--help").stdout.split())
    for env in ("WEIR_STATE_DIR", "WEIR_CHECKPOINT_DIR", "WEIR_API_HOST", "WEIR_API_PORT",
                "WEIR_API_TOKEN"):  # fmt: skip
        assert env in text
    run_help = " ".join(run_weir("run", "--help").stdout.split())
    assert "WEIR_NO_API" in run_help and "WEIR_BACKFILL_DIR" in run_help


def test_backfill_input_errors_name_the_input_and_the_fix(
    run_weir: Run, job_file: Path, tmp_path: Path
) -> None:
    """Before Spark starts: an unknown extension, an unreadable Parquet file, a glob matching
    nothing, a bad Kafka offset; ``WEIR_INPUT`` and ``WEIR_FORMAT`` stand for the flags."""
    (tmp_path / "events.txt").write_text("{}\n")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 but not really")
    sp = ("--into-savepoint", str(tmp_path / "sp"))
    backfill = ("backfill", str(job_file), *sp)
    _one_error_line(
        run_weir(*backfill, "--input", str(tmp_path / "events.txt")),
        "events.txt: cannot tell its format from the extension '.txt'",
        "pass --format jsonl|parquet|csv",
    )
    _one_error_line(
        run_weir(
            *backfill, env={"WEIR_INPUT": f"{tmp_path / 'in.jsonl'} {tmp_path / 'bad.parquet'}"}
        ),
        "bad.parquet: not a readable Parquet file",
    )
    _one_error_line(
        run_weir(*backfill, "--input", str(tmp_path / "in.jsonl"), env={"WEIR_FORMAT": "parquet"}),
        "in.jsonl: not a readable Parquet file",
        "pass --format",
    )
    _one_error_line(
        run_weir(*backfill, "--input", str(tmp_path / "none-*.csv")), "none-*.csv matches no file"
    )
    _one_error_line(
        run_weir(*backfill, "--input", "kafka://127.0.0.1:9/ads?from=yesterday"),
        "from='yesterday' is not an offset",
        "from=earliest, from=N (offset N in every partition) or from=P:N,P:N",
    )
    _one_error_line(
        run_weir(*backfill, "--input", "kafka://127.0.0.1:9/ads?start=earliest"),
        "unknown option 'start'",
    )


def test_explain_and_run_refuse_a_window_without_an_aggregate(
    run_weir: Run, tmp_path: Path
) -> None:
    """The window is named and what to add is said, before anything reads the input."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "ts": 1}\n')
    path = tmp_path / "dangling.py"
    path.write_text(
        "from weir import Job, sources, windows\n"
        'job = Job("dangling")\n'
        f'job.source(sources.jsonl({str(src)!r})).key_by("id").window(windows.tumbling(ms=60_000))\n'
    )
    for command in ("explain", "run"):
        line = _one_error_line(
            run_weir(command, str(path)),
            "key_by('id').window(tumbling(size_ms=60000)) has no aggregate",
            ".aggregate(",
        )
        assert "dangling" in line
    assert not (tmp_path / ".weir" / "dangling").exists()  # nothing started
