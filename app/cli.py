"""The ``weir`` command line. Every flag also reads an environment variable (``WEIR_*``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from weir import __version__  # the installed package's version (its metadata)
from weir.app.commands import backfill_command, produce_command
from weir.app.flags import (
    Env,
    http_url,
    number,
    resolve_env,
    storage_url,
    whole_number,
    without_argument_prefix,
)
from weir.app.options import (
    api_flags,
    api_workers_flag,
    checkpoint_dir_flag,
    run_flags,
    sql_commands,
)
from weir.base import logs
from weir.base.errors import ConfigError, WeirError
from weir.engine.runtime import heap
from weir.engine.runtime.config import RunConfig

if TYPE_CHECKING:
    from weir.api.settings import ApiSettings

DEMO_JOB = Path(__file__).with_name("demo_job.py")
JOB_HELP = (
    "the job: a Python file that defines `job` (jobs/ads.py), a SQL job file (jobs/ads.sql), or "
    "package.module:attr naming a Job or a function returning one (mypkg.jobs:ads)"
)


class _Parser(argparse.ArgumentParser):
    """Bad flags get the same one-line ``weir: error:`` as every other error (exit 2)."""

    def error(self, message: str) -> NoReturn:
        text = without_argument_prefix(message)
        print(f"weir: error: {text}; see '{self.prog} --help'", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="weir", description="weir: a queryable-state stream processor")
    parser.add_argument("--version", action="version", version=f"weir {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run a job file and serve its state over HTTP")
    run.add_argument("job_file", metavar="JOB", help=JOB_HELP)
    run_flags(run)
    sql_commands(sub)
    demo = sub.add_parser("demo", help="run the ad-stats demo job on generated events")
    run_flags(demo, demo=True)
    api = sub.add_parser(
        "api",
        help="serve the state of a job that weir run runs, from a process of its own "
        "(killable and restartable while the job runs)",
    )
    api.add_argument("job_file", metavar="JOB", help="the job weir run runs (as given to it)")
    env = Env(api)
    env.add("--state-dir", "the job's state directory (as given to weir run)", ".weir",
            metavar="DIR")  # fmt: skip
    checkpoint_dir_flag(env)
    api_flags(env)
    api_workers_flag(env)
    chks = sub.add_parser("checkpoints", help="list a job's complete checkpoints and savepoints")
    chks.add_argument("job", metavar="JOB", help="the job's name")
    env = Env(chks)
    env.add("--state-dir", "the job's state directory", ".weir", metavar="DIR")
    checkpoint_dir_flag(env)
    chks.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _lifecycle_commands(sub)
    save = sub.add_parser("savepoint", help="take a savepoint of a running job")
    save.add_argument("job", metavar="JOB", help="the job's name")
    env = Env(save)
    env.add(
        "--api-url", "the running job's API", "http://127.0.0.1:8000", type=http_url, metavar="URL"
    )
    env.add("--api-token", "bearer token, if the API requires one", metavar="TOKEN")
    env.add(
        "--timeout-ms",
        "how long to wait for the savepoint",
        120_000,
        type=whole_number(1),
        metavar="MS",
    )
    backfill_command(sub)
    produce_command(sub)
    return parser


def _lifecycle_commands(sub: Any) -> None:
    """``list``, ``stop`` and ``cancel`` on the ``weir`` parser's subcommands."""
    listing = sub.add_parser(
        "list", help="list the jobs under a state directory: state, pid, API address"
    )
    _common(listing)
    stop = sub.add_parser(
        "stop",
        help="stop a running job: gracefully, or with a savepoint that weir run --restore "
        "resumes from without emitting anything twice",
    )
    stop.add_argument("job", metavar="JOB", help="the job's name (weir list shows them)")
    env = _common(stop)
    env.add(
        "--savepoint",
        "stop-with-savepoint: sources stop at its barrier, it completes, then the job ends "
        "(if it fails, the job goes on)",
        False,
        action="store_true",
    )
    env.add(
        "--savepoint-dir",
        "also copy the savepoint, with its files, to DIR/<job>/chk-<n> (restorable on its own; "
        "DIR may be s3://BUCKET/PREFIX)",
        type=storage_url,
        metavar="DIR|URL",
    )
    env.add(
        "--timeout-s",
        "how long the savepoint may take; past it the job is not stopped",
        120.0,
        type=number(0.001),
        metavar="S",
    )
    cancel = sub.add_parser(
        "cancel",
        help="stop a running job at once, without a savepoint (its state is as of its last "
        "checkpoint)",
    )
    cancel.add_argument("job", metavar="JOB", help="the job's name (weir list shows them)")
    _common(cancel)


def _common(parser: argparse.ArgumentParser) -> Env:
    env = Env(parser)
    env.add("--state-dir", "the state directory weir run uses", ".weir", metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return env


LIFECYCLE = ("list", "stop", "cancel", "checkpoints", "savepoint")


def config_from_args(args: argparse.Namespace, job_file: Path | str) -> RunConfig:
    return RunConfig(
        job_file=job_file,
        state_dir=Path(args.state_dir),
        source_url=getattr(args, "source", None),
        sink_url=getattr(args, "sink", None),
        dead_letter_url=args.dead_letter,
        late_sink_url=args.late_sink,
        parallelism=args.parallelism,
        exit_at_end=getattr(args, "exit_at_end", False),
        state_retention_ms=args.state_retention_ms,
        flush_interval_ms=args.flush_interval_ms,
        batch_size=args.batch_size,
        buffer_timeout_ms=args.buffer_timeout_ms,
        exchange_transport=args.exchange_transport,
        idle_timeout_ms=args.idle_timeout_ms,
        log_level=args.log_level,
        log_format=args.log_format,
        checkpoint_dir=args.checkpoint_dir or None,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        checkpoint_timeout_ms=args.checkpoint_timeout_ms,
        checkpoints_retained=args.checkpoints_retained,
        restore=args.restore,
        restart_failures=args.restart_failures,
        restart_attempts=args.restart_attempts,
        restart_interval_ms=args.restart_interval_ms,
        restart_delay_ms=args.restart_delay_ms,
        max_future_ms=args.max_future_ms,
        backfill_dir=_backfill_root(args.backfill_dir),
        master=getattr(args, "master", None),
        spark_conf=tuple(getattr(args, "spark_conf", None) or ()),
        driver_host=getattr(args, "driver_host", None),
    )


def _api_settings(args: argparse.Namespace) -> ApiSettings:
    from weir.api.settings import ApiSettings

    return ApiSettings(
        token=args.api_token or None,
        cors_origins=_comma_list(args.cors_origins),
        host=args.api_host,
        allowed_hosts=_comma_list(args.allowed_hosts),
        max_connections=args.max_connections,
        max_streams=args.max_streams,
    )


def _backfill_root(raw: str) -> str | Path:
    """``--backfill-dir``: an ``s3://`` URL as written, a directory made absolute."""
    from weir.state.objectstore import storage_location

    where = storage_location(raw, "--backfill-dir")
    return where.url if where.path is None else where.path.absolute()


def _comma_list(raw: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (raw or "").split(",") if item.strip())


def main(argv: Sequence[str] | None = None) -> int:
    # everything a run writes (state, checkpoints, status, side outputs, RocksDB's own files)
    # is the user's alone; the library also creates its own files with explicit modes
    os.umask(0o077)
    try:
        return _run_command(resolve_env(build_parser().parse_args(argv)))
    except WeirError as exc:
        logs.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        logs.say("interrupted (Ctrl-C)")
        return 130


def _run_command(args: argparse.Namespace) -> int:
    if args.command in LIFECYCLE:
        from weir.app import lifecycle  # imported late: keeps --help fast

        return lifecycle.run(args)
    if args.command == "backfill":
        from weir.app import backfill

        logs.configure("WARNING")
        return backfill.main(args)
    if args.command == "explain":
        from weir.app import explain

        return explain.main(args.job_file, as_json=args.json)
    if args.command == "produce":
        from weir.app import produce

        logs.configure("WARNING")
        return produce.main(args)
    logs.configure(args.log_level, args.log_format)
    heap.trim_in_background()  # a long-running process: give freed heap back to the OS
    if args.command == "api":
        from weir.app import api_process  # imported late: keeps --help fast

        return api_process.run(
            args.job_file,
            Path(args.state_dir),
            args.checkpoint_dir or None,
            args.api_port,
            _api_settings(args),
            workers=args.workers,
            log_spec=(args.log_level, args.log_format),
        )
    from weir.app import supervise

    if args.command == "sql" and not str(args.job_file).endswith(".sql"):
        raise ConfigError(
            f"weir sql {args.job_file}: weir sql runs .sql job files; run a Python job with "
            "weir run"
        )
    job: Path | str = DEMO_JOB if args.command == "demo" else args.job_file
    cfg = config_from_args(args, job)
    api = _api_settings(args)
    return supervise.run(
        cfg,
        args.api_host,
        args.api_port,
        api,
        serve_api=not args.no_api,
        api_workers=args.api_workers,
    )


if __name__ == "__main__":
    sys.exit(main())
