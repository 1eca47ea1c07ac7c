"""Settings declared once: a ``Setting`` is the data every other form of a setting is made from.

A setting has a name (the field of the frozen dataclass that holds it, ``RunConfig.parallelism``,
and the word errors use for it), a type check, a default, and where a user gives it: a command
line flag (``--parallelism``) and an environment variable (``WEIR_PARALLELISM``), or the variable
alone. ``weir.app`` builds the command line, its ``--help`` and the reference pages
(``docs/reference/``) from these declarations; ``RunConfig`` judges its fields with the same
checks; ``read_env`` reads a variable-only setting (``WEIR_PROFILE_DIR``) with its check.

Errors below the command line name a setting in backticks (``named("parallelism")`` is
```parallelism```), never a flag: the library's user set a field, not a flag. ``render`` turns
those names into the flags of the command that runs (``--parallelism``).

Example:
    >>> s = Setting("batch_size", "records per source batch", 1024, WholeNumber(1))
    >>> (s.flag, s.env, s.check.parse("64"))
    ('--batch-size', 'WEIR_BATCH_SIZE', 64)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from weir.base.errors import ConfigError

__all__ = [
    "BadValue",
    "Check",
    "Choice",
    "Number",
    "Parsed",
    "Setting",
    "Switch",
    "WholeNumber",
    "example_of",
    "judge",
    "message",
    "named",
    "read_env",
    "render",
]


class BadValue(ValueError):
    """A check's verdict on a value: what is wrong, and either a fix or an example of a good
    value. ``names_value``: the problem already quotes the value (a URL parser's message)."""

    def __init__(
        self,
        problem: str,
        *,
        fix: str | None = None,
        example: str | None = None,
        names_value: bool = False,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.example = example
        self.names_value = names_value


class Check(Protocol):
    """What a setting accepts. ``parse`` takes the text of a flag or a variable; ``judge`` a
    value already typed (a ``RunConfig`` field). Both raise ``BadValue``."""

    def parse(self, raw: str) -> Any: ...

    def judge(self, value: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class WholeNumber:
    """An ``int`` within ``[minimum, maximum]`` (either bound may be open)."""

    minimum: int | None = None
    maximum: int | None = None

    def parse(self, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            example = str(max(self.minimum, 1)) if self.minimum is not None else "0"
            raise BadValue("is not a whole number", example=example) from None
        self.judge(value)
        return value

    def judge(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadValue("is not a whole number", example=str(self.minimum or 0))
        if self.minimum is not None and value < self.minimum:
            raise BadValue("is too small", fix=f"use {self.minimum} or more")
        if self.maximum is not None and value > self.maximum:
            raise BadValue("is too large", fix=f"use {self.maximum} or less")


@dataclass(frozen=True, slots=True)
class Number:
    """A finite ``float`` within ``[minimum, maximum]`` (either bound may be open)."""

    minimum: float | None = None
    maximum: float | None = None

    def parse(self, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            example = f"{max(self.minimum, 1)}" if self.minimum is not None else "0"
            raise BadValue("is not a number", example=example)
        self.judge(value)
        return value

    def judge(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadValue("is not a number", example=str(self.minimum or 0))
        if not math.isfinite(value):
            raise BadValue("is not a finite number", example=str(self.minimum or 0))
        if self.minimum is not None and value < self.minimum:
            raise BadValue("is too small", fix=f"use {self.minimum} or more")
        if self.maximum is not None and value > self.maximum:
            raise BadValue("is too large", fix=f"use {self.maximum} or less")


@dataclass(frozen=True, slots=True)
class Choice:
    """One of ``options``, in any case (``info`` is ``INFO``)."""

    options: tuple[str, ...]

    def parse(self, raw: str) -> str:
        for option in self.options:
            if option.casefold() == raw.strip().casefold():
                return option
        raise BadValue("is not a choice", fix=f"use one of {', '.join(self.options)}")

    def judge(self, value: Any) -> None:
        if value not in self.options:
            raise BadValue("is not a choice", fix=f"use one of {', '.join(self.options)}")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True, slots=True)
class Switch:
    """On or off: a flag that takes no value, and a variable that says 1/true/yes/on or
    0/false/no/off (``WEIR_EXIT_AT_END=1``)."""

    def parse(self, raw: str) -> bool:
        folded = raw.strip().casefold()
        if folded in _TRUE or folded in _FALSE:
            return folded in _TRUE
        raise BadValue("is not on or off", fix="use 1, true, yes or on; 0, false, no or off")

    def judge(self, value: Any) -> None:
        if not isinstance(value, bool):
            raise BadValue("is not on or off", fix="use True or False")


@dataclass(frozen=True, slots=True)
class Parsed:
    """A check that is a function of the text (a URL's parser): it returns the value or raises
    ``BadValue``. ``accepts``: what it takes, in words (for the reference pages). ``typed``:
    judge a typed value by parsing its text too (else any is taken: the function is costly or
    reaches outside, and the command line has run it already)."""

    function: Callable[[str], Any]
    accepts: str
    typed: bool = False

    def parse(self, raw: str) -> Any:
        return self.function(raw)

    def judge(self, value: Any) -> None:
        if self.typed and value is not None:
            self.function(str(value))


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting, declared once.

    Attributes:
        name: the field that holds it (``RunConfig.parallelism``) and the word errors use.
        help: one sentence for ``--help`` and the reference pages.
        default: the value when it is not given (``None``: unset).
        check: what it accepts (``None``: any text).
        flag: its command-line flag (default ``--`` and the name with dashes); ``""`` for a
            setting that only a variable gives (``env_only``).
        env: its variable (default ``WEIR_`` and the flag in capitals).
        metavar: how ``--help`` shows its value (``MS``, ``URL``).
        many: the flag takes several values; the variable separates them with spaces.
        required: the command needs it (from the flag or the variable).
        secret: its value is never shown (``--help``, errors, the reference pages).
        argv_check: a stricter check for a value typed on the command line, where every local
            account reads it in the process list (``spark_conf`` refuses a secret setting
            there); ``check`` still judges the variable's value.
        commands: the ``weir`` commands that take it, in the order they list it.
        default_doc: how the docs describe a default that is not a plain value ("CPU count").
        command_defaults: ``(command, default)`` pairs where a command's default differs.
        env_only: no flag; the variable alone (read with ``read_env``).
    """

    name: str
    help: str
    default: Any = None
    check: Check | None = None
    flag: str = ""
    env: str = ""
    metavar: str | None = None
    many: bool = False
    required: bool = False
    secret: bool = False
    argv_check: Check | None = None
    commands: tuple[str, ...] = ()
    default_doc: str | None = None
    command_defaults: tuple[tuple[str, Any], ...] = field(default=())
    env_only: bool = False

    def __post_init__(self) -> None:
        if not self.env_only and not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        if not self.env:
            stem = self.flag.lstrip("-") if self.flag else self.name
            object.__setattr__(self, "env", "WEIR_" + stem.replace("-", "_").upper())

    @property
    def switch(self) -> bool:
        """A flag without a value (``--exit-at-end``)."""
        return isinstance(self.check, Switch)

    def default_for(self, command: str) -> Any:
        """The default when ``command`` runs."""
        return dict(self.command_defaults).get(command, self.default)

    def shown(self, value: Any) -> str:
        """``value`` as help, docs and errors may show it: a secret never is."""
        return "(set)" if self.secret else str(value)


def named(name: str) -> str:
    """How an error names setting ``name``; ``render`` turns it into a flag."""
    return f"`{name}`"


_NAMED = re.compile(r"`([a-z][a-z0-9_]*)`")


def render(text: str, flags: Mapping[str, str]) -> str:
    """``text`` with each setting named in it (```parallelism```) shown as in ``flags``
    (``{"parallelism": "--parallelism"}``); other backticked words stay as they are."""
    return _NAMED.sub(lambda m: flags.get(m.group(1), m.group(0)), text)


def message(name: str, raw: str, bad: BadValue, *, example: str | None, sep: str) -> str:
    """``name='x' is not …; e.g. <name><sep>4``: ``sep`` is ``" "`` for a flag (``--batch-size
    4``), ``"="`` for a variable or a setting."""
    text = f"{name}: {bad.problem}" if bad.names_value else f"{name}={raw} {bad.problem}"
    if bad.fix:
        return f"{text}; {bad.fix}"
    example = example if example is not None else bad.example
    return text if example is None else f"{text}; e.g. {name}{sep}{example}"


def example_of(setting: Setting) -> str | None:
    """The default of a numeric setting, the example its errors give."""
    value = setting.default
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return str(value) if numeric else None


def judge(setting: Setting, value: Any) -> None:
    """Raise ``ConfigError`` naming the setting unless ``value`` is one it accepts."""
    if setting.check is None or value is None:
        return
    try:
        setting.check.judge(value)
    except BadValue as bad:
        shown = "'(set)'" if setting.secret else repr(value)
        raise ConfigError(
            message(named(setting.name), shown, bad, example=example_of(setting), sep="=")
        ) from None


def read_env(setting: Setting, environ: Mapping[str, str] | None = None) -> Any:
    """The value of a setting's variable, checked (its default when unset or empty); a bad one
    is a ``ConfigError`` naming the variable, its value (unless secret) and the fix."""
    raw = (os.environ if environ is None else environ).get(setting.env, "")
    if not raw:
        return setting.default
    if setting.check is None:
        return raw
    try:
        return setting.check.parse(raw)
    except BadValue as bad:
        shown = "'(set)'" if setting.secret else repr(raw)
        raise ConfigError(
            message(setting.env, shown, bad, example=example_of(setting), sep="=")
        ) from None
