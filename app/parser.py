"""The ``weir`` command's parser, made from the settings (``app.catalogue``): each command's flags
are the settings that name it, each with its ``WEIR_*`` variable. A bad command line gets one
``weir: error:`` line (exit 2) that suggests the command or flag meant (``--paralelism``: did
you mean ``--parallelism``?) and names the command's own ``--help``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from weir.app.catalogue import flag_names, for_command
from weir.app.flags import add_setting, resolve_env, without_argument_prefix

JOB_HELP = (
    "the job: a Python file that defines `job` (jobs/ads.py), a SQL job file (jobs/ads.sql), or "
    "package.module:attr naming a Job or a function returning one (mypkg.jobs:ads)"
)
_NAMED_JOB = "the job's name (weir list shows them)"


@dataclass(frozen=True, slots=True)
class Command:
    """A ``weir`` command: its name, its one line of help and its positional arguments
    (``(dest, metavar, help)`` each); its flags are the settings that name it."""

    name: str
    help: str
    positional: tuple[tuple[str, str, str], ...] = ()


COMMANDS: tuple[Command, ...] = (
    Command("run", "run a job file and serve its state over HTTP",
            (("job_file", "JOB", JOB_HELP),)),
    Command("sql", "run a SQL job file (SET, CREATE TABLE, CREATE FUNCTION, CREATE VIEW) as weir "
            "run does, with the same flags", (("job_file", "JOB.sql", "the SQL job file"),)),
    Command("explain", "print the operator graph a job (.py, .sql or package.module:attr) "
            "compiles to", (("job_file", "JOB", "the job, as weir run takes it"),)),
    Command("demo", "run the ad-stats demo job on generated events"),
    Command("api", "serve the state of a job that weir run runs, from a process of its own "
            "(killable and restartable while the job runs)",
            (("job_file", "JOB", "the job weir run runs (as given to it)"),)),
    Command("checkpoints", "list a job's complete checkpoints and savepoints",
            (("job", "JOB", _NAMED_JOB),)),
    Command("list", "list the jobs under a state directory: state, pid, API address"),
    Command("stop", "stop a running job: gracefully, or with a savepoint that weir run "
            "--restore resumes from without emitting anything twice",
            (("job", "JOB", _NAMED_JOB),)),
    Command("cancel", "stop a running job at once, without a savepoint (its state is as of its "
            "last checkpoint)", (("job", "JOB", _NAMED_JOB),)),
    Command("savepoint", "take a savepoint of a running job", (("job", "JOB", _NAMED_JOB),)),
    Command("backfill", "compute a job's windows over historical input on Spark and load them",
            (("job_file", "JOB", "the job weir run runs (.py or .sql)"),)),
    Command("produce", "write a generated workload into a Kafka topic"),
    Command("query", "run a read-only SQL SELECT over a running job's views and windows (a "
            "pull query, POST /{job}/sql)",
            (("job", "JOB", _NAMED_JOB), ("query", "SELECT", "the query, one SELECT"))),
)  # fmt: skip
NAMES = tuple(c.name for c in COMMANDS)


class _Parser(argparse.ArgumentParser):
    """Bad flags get the same one-line ``weir: error:`` as every other error (exit 2)."""

    def error(self, message: str) -> NoReturn:
        text = without_argument_prefix(message)
        print(f"weir: error: {text}; see '{self.prog} --help'", file=sys.stderr)
        raise SystemExit(2)


class _Version(argparse.Action):
    """``--version``: the installed package's version, read from its metadata only when asked
    (``importlib.metadata`` costs ~30 ms of imports in every ``weir`` process otherwise)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings, dest, default=argparse.SUPPRESS, nargs=0,
            help="show weir's version and exit",
        )  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from weir import __version__

        print(f"weir {__version__}")
        parser.exit()


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``weir`` parser and each command's own."""
    parser = _Parser(prog="weir", description="weir: a queryable-state stream processor")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands: dict[str, argparse.ArgumentParser] = {}
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        for dest, metavar, help in command.positional:
            p.add_argument(dest, metavar=metavar, help=help)
        flags = flag_names(command.name)
        for setting in for_command(command.name):
            add_setting(p, setting, command.name, flags)
        commands[command.name] = p
    return parser, commands


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, every flag left to its variable replaced by the variable's checked
    value; a mistyped command or flag exits 2 with a suggestion."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    _check_command(parser, words)
    args, extra = parser.parse_known_args(words)
    if extra:
        commands[args.command].error(_unknown(extra, args.command))
    return resolve_env(args)


def _check_command(parser: argparse.ArgumentParser, words: list[str]) -> None:
    """The first word that is not an option names the command: a typo gets a suggestion."""
    first = next((w for w in words if not w.startswith("-")), None)
    if first is None or first in NAMES:
        return
    import difflib  # for a mistyped command only

    close = difflib.get_close_matches(first, NAMES, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else f"; use one of {', '.join(NAMES)}"
    parser.error(f"unknown command {first!r}{hint}")


def _unknown(extra: list[str], command: str) -> str:
    """``unrecognized argument --paralelism; did you mean --parallelism?``"""
    known = [s.flag for s in for_command(command)] + ["--help"]
    options = [w for w in extra if w.startswith("-")]
    if not options:
        return f"unrecognized argument{'s' if len(extra) > 1 else ''} {' '.join(extra)}"
    word = options[0].partition("=")[0]
    import difflib  # for a mistyped flag only

    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unrecognized argument {word}{hint}"
