"""The ``weir`` command line. Every flag also reads an environment variable (``WEIR_*``); both
are made from the settings' declarations (``app.catalogue``, ``app.parser``)."""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from weir.app.catalogue import ENVIRONMENT, flag_names
from weir.app.interrupt import CTRL_C, EXIT_INTERRUPTED
from weir.app.options import DEPRECATED
from weir.app.parser import parse
from weir.app.startup import collector_paused, exit_now, one_blas_thread
from weir.base import logs
from weir.base.errors import ConfigError, WeirError
from weir.base.settings import read_env, render
from weir.engine.runtime import heap
from weir.engine.runtime.config import RunConfig

if TYPE_CHECKING:
    from weir.api.settings import ApiSettings

DEMO_JOB = Path(__file__).with_name("demo_job.py")
LIFECYCLE = ("list", "stop", "cancel", "checkpoints", "savepoint")
RUNS = ("run", "sql", "demo", "api", "backfill", "produce")  # what reads the environment's
EXIT_PIPE = 128 + 13  # as a Unix tool killed by SIGPIPE: its reader went away (`| head -1`)


def config_from_args(args: argparse.Namespace, job_file: Path | str) -> RunConfig:
    """The ``RunConfig`` of ``weir run``'s (``sql``'s, ``demo``'s) flags: each field is the
    setting of the same name; the demo leaves its source, sink and workers to the job."""
    given = {f.name: getattr(args, f.name) for f in fields(RunConfig) if hasattr(args, f.name)}
    given.update(
        job_file=job_file,
        state_dir=Path(args.state_dir),
        checkpoint_dir=args.checkpoint_dir or None,
        backfill_dir=_backfill_root(args.backfill_dir),
        spark_conf=tuple(getattr(args, "spark_conf", None) or ()),
    )
    return RunConfig(**given)


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
    from weir.base.settings import named
    from weir.state.objectstore import storage_location

    where = storage_location(raw, named("backfill_dir"))
    return where.url if where.path is None else where.path.absolute()


def _comma_list(raw: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (raw or "").split(",") if item.strip())


def command() -> NoReturn:
    """The ``weir`` executable (and ``python -m weir``): ``main``'s status, the process ended
    without the interpreter's teardown (``startup.exit_now``)."""
    exit_now(main())


def main(argv: Sequence[str] | None = None) -> int:
    """The ``weir`` command: its exit status (2: usage, 1: failure, 130: Ctrl-C, 141: the reader
    of its output went away, as a Unix tool killed by SIGPIPE)."""
    # everything a run writes (state, checkpoints, status, side outputs, RocksDB's own files)
    # is the user's alone; the library also creates its own files with explicit modes
    os.umask(0o077)
    one_blas_thread()  # before anything imports numpy
    try:
        code = _main(argv)
    except SystemExit as exc:  # argparse: --help, --version, a usage error
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if code == 0 and _stdout_gone():  # argparse drops a write that fails: say so as we do
            _quiet_stdout()
            return EXIT_PIPE
    return _flushed(code)


def _main(argv: Sequence[str] | None) -> int:
    command: str | None = None
    try:
        args = parse(argv)
        command = args.command
        with CTRL_C.installed(command):
            _replace_deprecated(args)
            if command in RUNS:
                _check_environment()
            code = _run_command(args)
            if CTRL_C.pressed.is_set():  # a command that wound down in order (weir run)
                CTRL_C.acknowledge()
                return EXIT_INTERRUPTED
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        _quiet_stdout()
        return EXIT_PIPE
    except WeirError as exc:
        # errors below the command line name settings (`parallelism`); show them as flags
        logs.error(render(str(exc), flag_names(command)))
        return exc.exit_code
    except KeyboardInterrupt:
        CTRL_C.acknowledge()
        return EXIT_INTERRUPTED


def _flushed(code: int) -> int:
    """``code``, once what is left of standard output is written; a reader gone by then
    (``| head -1``) is a quiet exit, not a traceback at interpreter exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    return code


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (``poll`` says ``POLLERR``), so
    a ``BrokenPipeError`` from a socket is not taken for one."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _quiet_stdout() -> None:
    """Point standard output at /dev/null: what is still buffered is dropped, and the flush at
    exit does not fail again (Python's documented way to exit after a broken pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _replace_deprecated(args: argparse.Namespace) -> None:
    """A deprecated flag's value goes to the setting that replaces it, with a warning."""
    names = flag_names(args.command)
    for old, (new, convert) in DEPRECATED.items():
        value = getattr(args, old, None)
        if value is not None:
            setattr(args, new, convert(value))
            logs.say(
                f"{names[old]} is deprecated; use {names[new]} ({names[old]} {value:g} is "
                f"{names[new]} {getattr(args, new)})"
            )


def _check_environment() -> None:
    """Every variable read from the environment alone, checked before anything starts."""
    for _, group in ENVIRONMENT:
        for setting in group:
            read_env(setting)


def _run_command(args: argparse.Namespace) -> int:
    if args.command in LIFECYCLE:
        from weir.app import lifecycle  # imported late: keeps --help fast

        return lifecycle.run(args)
    if args.command == "query":
        from weir.app import query

        return query.main(args)
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
    if args.command == "api":
        from weir.app import api_process  # imported late: keeps --help fast

        heap.trim_in_background()  # a long-running process: give freed heap back to the OS

        return api_process.run(
            args.job_file,
            Path(args.state_dir),
            args.checkpoint_dir or None,
            args.api_port,
            _api_settings(args),
            workers=args.workers,
            log_spec=(args.log_level, args.log_format),
        )
    return _run_job(args)


def _run_job(args: argparse.Namespace) -> int:
    """``weir run``, ``weir sql`` and ``weir demo``."""
    with collector_paused():  # the runtime's modules (see supervise.run)
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
