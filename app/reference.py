"""The reference pages made from the settings' declarations: ``docs/reference/cli.md`` (every
command and its flags) and ``docs/reference/configuration.md`` (every setting and every
environment variable weir reads). The README is a front page and holds no table.

``python -m weir.app.reference`` writes them (``make reference``); ``--check`` exits 1 naming
each one that differs from what the declarations give, which a test runs, so the pages never
drift from the code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from weir.app.catalogue import ENVIRONMENT, FLAGS, flag_names, for_command
from weir.app.flags import shown_default
from weir.app.parser import COMMANDS, Command
from weir.base.settings import (
    Check,
    Choice,
    Number,
    Parsed,
    Setting,
    Switch,
    WholeNumber,
    render,
)
from weir.engine.runtime.settings import RUN_SETTINGS

ROOT = Path(__file__).resolve().parents[1]
CLI_PAGE = Path("docs/reference/cli.md")
CONFIG_PAGE = Path("docs/reference/configuration.md")
GENERATED = "<!-- generated from the settings' declarations by `make reference`; do not edit -->"

_CLI_INTRO = """\
Every flag also reads an environment variable, named in each table; a flag given on the command
line wins over its variable. A variable is checked exactly like its flag, and only when its
command runs: `WEIR_PARALLELISM=many weir run job.py` stops with `weir: error:
WEIR_PARALLELISM='many' is not a whole number; e.g. WEIR_PARALLELISM=1`. A switch's variable
(`WEIR_EXIT_AT_END`) takes 1, true, yes or on, or 0, false, no or off; a flag that takes several
values (`--spark-conf`, `--input`) takes them separated by spaces in its variable. A secret's
value (`--api-token`) is never shown, by `--help` or in an error. A mistyped command or flag
gets a suggestion (`--paralelism`: did you mean `--parallelism`?) and the command's own
`--help`.

Every command that prints exits quietly when its reader goes away (`weir checkpoints JOB --json
| head -1`); Ctrl-C stops any command with one line, `weir: interrupted (Ctrl-C), …`, saying
what was stopped, and exit status 130. Usage errors exit 2, failures 1.

The settings behind these flags, with their names in the Python API and every environment
variable weir reads, are in [configuration.md](configuration.md)."""

_CONFIG_INTRO = """\
Each setting is declared once (`weir.base.settings.Setting`: its name, default, check, flag,
variable and help); the flags, `--help`, these pages and the checks of `RunConfig` are made
from the declarations. In Python a setting goes by its name (`RunConfig(parallelism=4)`), and
errors raised below the command line name it so (`` `parallelism`=0 is too small; use 1 or
more``); the command line shows the same error with the flag (`--parallelism=0 …`). What a run
decides itself (its id, the checkpoint a restart restores, a cluster task's host) is not a
setting: `RunFacts`.

The commands and their flags are in [cli.md](cli.md)."""


def _cell(text: str) -> str:
    """``text`` in a table cell: ``|`` escaped, and ``<`` (``<job>`` would be an HTML tag)."""
    return text.replace("|", "\\|").replace("<", "\\<").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`".replace("|", "\\|")


def accepts(check: Check | None) -> str:
    """What a check accepts, in words."""
    if check is None:
        return "text"
    if isinstance(check, Switch):
        return "on or off"
    if isinstance(check, Choice):
        return "one of " + ", ".join(check.options)
    if isinstance(check, WholeNumber | Number):
        kind = "whole number" if isinstance(check, WholeNumber) else "number"
        low = check.minimum
        high = check.maximum if isinstance(check, WholeNumber) else None
        if low is not None and high is not None:
            return f"{kind}, {low} to {high}"
        return f"{kind} ≥ {low}" if low is not None else kind
    if isinstance(check, Parsed):
        return check.accepts
    return "see its meaning"


def _default(setting: Setting, command: str) -> str:
    shown = shown_default(setting, command)
    if shown is None:
        return "none" if not setting.switch else "off"
    if setting.default_doc is None or " " not in shown:
        return _code(shown)  # a value, as typed
    return _cell(render(shown, flag_names(command)))


def _flag_cell(setting: Setting) -> str:
    if setting.switch:
        return _code(setting.flag)
    options = setting.check.options if isinstance(setting.check, Choice) else ()
    value = setting.metavar or "|".join(options) or "VALUE"
    return _code(f"{setting.flag} {value}" + (" …" if setting.many else ""))


def flag_table(command: str) -> list[str]:
    """``command``'s flags: flag, variable, default, meaning."""
    names = flag_names(command)
    rows = ["| flag | variable | default | meaning |", "| --- | --- | --- | --- |"]
    for s in for_command(command):
        meaning = render(s.help, names)
        rows.append(
            f"| {_flag_cell(s)} | {_code(s.env)} | {_default(s, command)} | {_cell(meaning)} |"
        )
    return rows


def _usage(command: Command) -> str:
    words = ["weir", command.name, *(metavar for _, metavar, _ in command.positional)]
    return " ".join(words) + (" [flags]" if for_command(command.name) else "")


def cli_page() -> str:
    lines = ["# The `weir` command line", "", GENERATED, "", _CLI_INTRO, "", "## Commands", ""]
    lines += ["| command | what it does |", "| --- | --- |"]
    lines += [f"| [`weir {c.name}`](#weir-{c.name}) | {_cell(c.help)} |" for c in COMMANDS]
    for command in COMMANDS:
        lines += ["", f"## weir {command.name}", "", f"`{_usage(command)}`", "", command.help]
        for _, metavar, help in command.positional:
            lines += ["", f"- `{metavar}`: {help}"]
        if for_command(command.name):
            lines += ["", *flag_table(command.name)]
    return "\n".join(lines) + "\n"


def _commands_of(env: str) -> str:
    """Every command whose flag reads ``env`` (several settings may share one variable)."""
    found = dict.fromkeys(c for s in FLAGS if s.env == env for c in s.commands)
    return ", ".join(f"`{c}`" for c in found)


def config_page() -> str:
    lines = ["# Configuration: settings and environment variables", "", GENERATED, ""]
    lines += [_CONFIG_INTRO, "", "## The settings of a run (`RunConfig`)", ""]
    lines += ["| setting | flag | variable | default | accepts |", "|---|---|---|---|---|"]
    for s in RUN_SETTINGS:
        lines.append(
            f"| `{s.name}` | `{s.flag}` | `{s.env}` | {_default(s, 'run')} | "
            f"{_cell(accepts(s.check))} |"
        )
    lines += ["", "## Every flag's variable", ""]
    lines += ["| variable | flag | commands | accepts |", "| --- | --- | --- | --- |"]
    for s in sorted(_once(FLAGS), key=lambda s: s.env):
        lines.append(
            f"| `{s.env}` | `{s.flag}` | {_commands_of(s.env)} | {_cell(accepts(s.check))} |"
        )
    lines += ["", "## Variables without a flag", ""]
    for area, group in ENVIRONMENT:
        lines += [f"### {area[0].upper()}{area[1:]}", ""]
        lines += ["| variable | default | accepts | meaning |", "| --- | --- | --- | --- |"]
        for s in group:
            default = "none" if s.default is None else _cell(s.shown(s.default))
            meaning = render(s.help, flag_names()) + (" (secret: never shown)" if s.secret else "")
            lines.append(
                f"| `{s.env}` | {default} | {_cell(accepts(s.check))} | {_cell(meaning)} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _once(settings: Iterable[Setting]) -> list[Setting]:
    """One setting per variable (a name several commands share is one variable)."""
    seen: dict[str, Setting] = {}
    for s in settings:
        seen.setdefault(s.env, s)
    return list(seen.values())


def pages() -> dict[Path, str]:
    """Each generated file and what it must hold."""
    return {CLI_PAGE: cli_page(), CONFIG_PAGE: config_page()}


def main(argv: Sequence[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for rel, text in pages().items():
        path = ROOT / rel
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        if check:
            stale.append(str(rel))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    for name in stale:
        print(f"{name} differs from the settings' declarations: make reference", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
