"""The flags of weir's commands. Each reads an environment variable (``WEIR_<FLAG>``) when it is
not given, and one check judges a value from either place: a bad one gets the same one-line
error, naming the flag or the variable, the value and the fix."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from weir.engine.errors import ConfigError
from weir.engine.redact import REDACTED, is_secret_name, redact_setting

Check = Callable[[str], Any]


class BadValue(ValueError):
    """A check's verdict on a raw value: what is wrong, and either a fix or an example of a good
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


def message(name: str, raw: str, bad: BadValue, *, example: str | None, env: bool) -> str:
    """``--flag='x' is not …; e.g. --flag 4`` or ``WEIR_FLAG='x' is not …; e.g. WEIR_FLAG=4``.

    A secret's value is never quoted (``shown_value``)."""
    raw = shown_value(env_name(name) if name.startswith("-") else name, raw)
    text = f"{name}: {bad.problem}" if bad.names_value else f"{name}={raw!r} {bad.problem}"
    if bad.fix:
        return f"{text}; {bad.fix}"
    example = example if example is not None else bad.example
    if example is None:
        return text
    return f"{text}; e.g. {name}={example}" if env else f"{text}; e.g. {name} {example}"


def whole_number(minimum: int | None = None, maximum: int | None = None) -> Check:
    def check(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            example = str(max(minimum, 1)) if minimum is not None else "0"
            raise BadValue("is not a whole number", example=example) from None
        if minimum is not None and value < minimum:
            raise BadValue("is too small", fix=f"use {minimum} or more")
        if maximum is not None and value > maximum:
            raise BadValue("is too large", fix=f"use {maximum} or less")
        return value

    return check


def number(minimum: float | None = None) -> Check:
    def check(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            example = f"{max(minimum, 1)}" if minimum is not None else "0"
            raise BadValue("is not a number", example=example)
        if minimum is not None and value < minimum:
            raise BadValue("is too small", fix=f"use {minimum} or more")
        return value

    return check


def choice(options: Sequence[str]) -> Check:
    """One of ``options``, in any case (``info`` is ``INFO``)."""
    by_folded = {o.casefold(): o for o in options}

    def check(raw: str) -> str:
        found = by_folded.get(raw.strip().casefold())
        if found is None:
            raise BadValue("is not a choice", fix=f"use one of {', '.join(options)}")
        return found

    return check


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def boolean(raw: str) -> bool:
    """A switch's variable (``WEIR_EXIT_AT_END=1``); on the command line a switch takes no value."""
    folded = raw.strip().casefold()
    if folded in _TRUE or folded in _FALSE:
        return folded in _TRUE
    raise BadValue("is not on or off", fix="use 1, true, yes or on; 0, false, no or off")


def url(parse: Callable[[str], object]) -> Callable[[str], str]:
    """A URL that ``parse`` (a source's or sink's ``from_url``) accepts; its error names the fix."""

    def check(raw: str) -> str:
        try:
            parse(raw)
        except ConfigError as exc:
            raise BadValue(str(exc), names_value=True) from None
        return raw

    return check


def http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadValue("is not an http:// or https:// URL", example="http://127.0.0.1:8000")
    return raw


def storage_url(raw: str) -> str:
    """A directory or ``s3://BUCKET/PREFIX``; never a URL of another scheme taken for a path."""
    from weir.engine.errors import ConfigError
    from weir.state.objectstore import SCHEMES, storage_location

    try:
        storage_location(raw)
    except ConfigError:
        raise BadValue(f"is not a storage location weir supports; use {SCHEMES}") from None
    return raw


def master_url(raw: str) -> str:
    """A Spark cluster's master (``engine.spark.cluster.parse_master`` names the forms)."""
    from weir.engine.spark.cluster import parse_master  # late: keeps --help fast

    try:
        return parse_master(raw)
    except ConfigError as exc:
        raise BadValue(str(exc), names_value=True) from None


def spark_setting(raw: str) -> tuple[str, str]:
    key, eq, value = raw.partition("=")
    if not eq or not key.startswith("spark."):
        raise BadValue("is not a Spark setting", example="spark.executor.memory=2g")
    return key, value


def spark_setting_typed(raw: str) -> tuple[str, str]:
    """A Spark setting typed on the command line, where every local account reads it in the
    process list: never a secret one."""
    key, value = spark_setting(raw)
    if is_secret_name(key):
        raise BadValue(
            "puts a secret on the command line, where every local user can read it",
            fix="give it in WEIR_SPARK_CONF instead, or as spark.authenticate.secret.file=PATH "
            "(a file only you can read)",
        )
    return key, value


def source_url(raw: str) -> str:
    from weir.engine.sources import from_url  # late: keeps --help fast

    return url(from_url)(raw)


def sink_url(raw: str) -> str:
    from weir.engine.sinks import from_url  # late: keeps --help fast

    return url(from_url)(raw)


def env_name(flag: str) -> str:
    return "WEIR_" + flag.lstrip("-").replace("-", "_").upper()


class _FlagType:
    """argparse's ``type`` for a checked flag: a bad value becomes argparse's error."""

    def __init__(self, flag: str, check: Check, example: str | None) -> None:
        self.flag, self.check, self.example = flag, check, example
        self.__name__ = flag  # argparse names a type by it

    def __call__(self, raw: str) -> Any:
        try:
            return self.check(raw)
        except BadValue as bad:
            text = message(self.flag, raw, bad, example=self.example, env=False)
            raise argparse.ArgumentTypeError(text) from None


@dataclass(frozen=True, slots=True)
class FromEnv:
    """A flag's value taken from its variable, checked once the command is known: a variable of
    another command (``WEIR_INPUT`` while running ``weir api``) is never judged."""

    var: str
    raw: str
    check: Check | None
    many: bool
    example: str | None

    def resolve(self) -> Any:
        items = self.raw.split() if self.many else [self.raw]
        values = []
        for item in items:
            try:
                values.append(item if self.check is None else self.check(item))
            except BadValue as bad:
                raise ConfigError(
                    message(self.var, item, bad, example=self.example, env=True)
                ) from None
        return values if self.many else values[0]


def resolve_env(args: argparse.Namespace) -> argparse.Namespace:
    """Replace every flag left to its variable by the variable's checked value."""
    for name, value in vars(args).items():
        if isinstance(value, FromEnv):
            setattr(args, name, value.resolve())
    return args


_ARGUMENT_PREFIX = re.compile(r"argument (\S+): (?=\1[=:])")


def without_argument_prefix(text: str) -> str:
    """argparse puts ``argument --flag:`` before a type's error, which names the flag already."""
    return _ARGUMENT_PREFIX.sub("", text, count=1)


def shown_value(var: str, raw: str) -> str:
    """``raw``, the value of ``var``, as ``--help`` may print it: a secret variable's value
    (``WEIR_API_TOKEN``) never; a URL's password (a source's ``sasl_password=``,
    ``user:pass@``) and a secret setting's value (``spark.authenticate.secret=``) as ``***``.
    (argparse %-formats help texts: the caller doubles ``%``.)"""
    if is_secret_name(var):
        return REDACTED
    return " ".join(redact_setting(item) for item in raw.split(" "))


class Env:
    """Adds flags whose default comes from ``WEIR_<FLAG>``, shown in ``--help``.

    ``type`` is a check (``whole_number(1)``, ``source_url``, …) raising ``BadValue``;
    ``choices`` become a ``choice`` check; a switch's variable is checked by ``boolean``."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def add(self, flag: str, help: str, default: Any = None, **kw: Any) -> None:
        var = env_name(flag)
        check: Check | None = kw.pop("type", None)
        typed: Check | None = kw.pop("typed", None)  # stricter, for a value typed in argv
        options = kw.pop("choices", None)
        if options is not None:
            check = choice(options)
            kw.setdefault("metavar", "|".join(options))
        numeric = isinstance(default, int | float) and not isinstance(default, bool)
        example = str(default) if numeric else None
        switch = kw.get("action") == "store_true"
        if check is not None and not switch:
            kw["type"] = _FlagType(flag, typed or check, example)
        raw = os.environ.get(var)
        value = default
        if raw is not None:
            many = kw.get("nargs") == "+"
            value = FromEnv(var, raw, boolean if switch else check, many, example)
            if many and raw.split():
                kw["required"] = False
        shown = default if raw is None else shown_value(var, raw).replace("%", "%%")
        note = f" (env {var}" + (f", default {shown})" if shown not in (None, False) else ")")
        self.parser.add_argument(flag, default=value, help=help + note, **kw)
