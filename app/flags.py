"""Flags made from settings (``weir.base.settings.Setting``): each reads its variable
(``WEIR_<FLAG>``) when it is not given, shows the variable in ``--help``, and one check judges a
value from either place, so a bad one gets the same one-line error, naming the flag or the
variable, the value and the fix. A secret's value is never shown."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from weir.base.errors import ConfigError
from weir.base.redact import redact_setting
from weir.base.settings import (
    BadValue,
    Check,
    Choice,
    Parsed,
    Setting,
    example_of,
    message,
    render,
)


def http_url(raw: str) -> str:
    """An ``http://`` or ``https://`` URL with a host (a job's API)."""
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadValue("is not an http:// or https:// URL", example="http://127.0.0.1:8000")
    return raw


HTTP_URL = Parsed(http_url, "an http:// or https:// URL")


class _FlagType:
    """argparse's ``type`` for a checked flag: a bad value becomes argparse's error."""

    def __init__(self, flag: str, check: Check, example: str | None, secret: bool) -> None:
        self.flag, self.check, self.example, self.secret = flag, check, example, secret
        self.__name__ = flag  # argparse names a type by it

    def __call__(self, raw: str) -> Any:
        try:
            return self.check.parse(raw)
        except BadValue as bad:
            shown = "'(set)'" if self.secret else repr(shown_value(raw))
            text = message(self.flag, shown, bad, example=self.example, sep=" ")
            raise argparse.ArgumentTypeError(text) from None


@dataclass(frozen=True, slots=True)
class FromEnv:
    """A flag's value taken from its variable, checked once the command is known: a variable of
    another command (``WEIR_INPUT`` while running ``weir api``) is never judged."""

    setting: Setting

    def resolve(self, environ: Mapping[str, str]) -> Any:
        s = self.setting
        raw = environ[s.env]
        items = raw.split() if s.many else [raw]
        values = []
        for item in items:
            try:
                values.append(item if s.check is None else s.check.parse(item))
            except BadValue as bad:
                shown = "'(set)'" if s.secret else repr(shown_value(item))
                raise ConfigError(
                    message(s.env, shown, bad, example=example_of(s), sep="=")
                ) from None
        return values if s.many else values[0]


def resolve_env(args: argparse.Namespace) -> argparse.Namespace:
    """Replace every flag left to its variable by the variable's checked value."""
    for name, value in vars(args).items():
        if isinstance(value, FromEnv):
            setattr(args, name, value.resolve(os.environ))
    return args


_ARGUMENT_PREFIX = re.compile(r"argument (\S+): (?=\1[=:])")


def without_argument_prefix(text: str) -> str:
    """argparse puts ``argument --flag:`` before a type's error, which names the flag already."""
    return _ARGUMENT_PREFIX.sub("", text, count=1)


def shown_value(raw: str) -> str:
    """``raw``, the value of a setting that is not a secret as a whole, as ``--help`` and errors
    may show it: a URL's password (a source's ``sasl_password=``, ``user:pass@``) and a secret
    setting's value (``spark.authenticate.secret=`` in ``WEIR_SPARK_CONF``) as ``***``. A
    secret setting (``secret=True``: ``WEIR_API_TOKEN``) is never shown at all."""
    return " ".join(redact_setting(item) for item in raw.split(" "))


def shown_default(setting: Setting, command: str) -> str | None:
    """The default as ``--help`` and the reference pages show it (None: nothing to show)."""
    if setting.default_doc is not None:  # the same on every machine (not "2 CPUs")
        return setting.default_doc
    default = setting.default_for(command)
    if default is None or default is False or default == ():
        return None
    return setting.shown(default)


def add_setting(
    parser: argparse.ArgumentParser, setting: Setting, command: str, flags: Mapping[str, str]
) -> None:
    """Add ``setting``'s flag to ``command``'s parser. Its help names its variable and default
    (the variable's value when set, redacted, and never a secret's); settings named in the help
    (```restart_interval_ms```) are shown as their ``flags``."""
    s = setting
    kw: dict[str, Any] = {"dest": s.name}
    if s.switch:
        kw["action"] = "store_true"
    else:
        kw["metavar"] = s.metavar or _choices_metavar(s)
        if s.many:
            kw["nargs"] = "+"
            kw["required"] = s.required
        if s.check is not None:
            # a value typed in argv may be judged more strictly (no secret in the process list)
            kw["type"] = _FlagType(s.flag, s.argv_check or s.check, example_of(s), s.secret)
    raw = os.environ.get(s.env)
    value = s.default_for(command)
    if raw is not None:
        value = FromEnv(s)
        if s.many and raw.split():
            kw["required"] = False
        # a secret's value is never printed in --help, nor a URL's password or a secret Spark
        # setting's value; argparse %-formats help texts, so a URL's %2F must be %%2F
        shown: str | None = "(set)" if s.secret else shown_value(raw).replace("%", "%%")
    else:
        shown = shown_default(s, command)
        shown = None if shown is None else render(shown, flags)
    note = f" (env {s.env}" + (f", default {shown})" if shown is not None else ")")
    parser.add_argument(s.flag, default=value, help=render(s.help, flags) + note, **kw)


def _choices_metavar(setting: Setting) -> str | None:
    return "|".join(setting.check.options) if isinstance(setting.check, Choice) else None
