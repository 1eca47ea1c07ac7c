"""Settings declared once (``weir.base.settings``): the flags, their variables, ``--help``, the
reference pages and ``RunConfig``'s checks are made from the declarations, and nothing reads a
variable or names a flag outside them."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from weir.app import reference
from weir.app.catalogue import ALL, FLAGS, flag_names, for_command
from weir.app.parser import COMMANDS, build_parser
from weir.base.errors import ConfigError
from weir.base.redact import is_secret_name
from weir.base.settings import Setting, WholeNumber, read_env, render

ROOT = Path(__file__).resolve().parents[2]
FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
VARIABLE = re.compile(r"\b(?:WEIR|AWS|SPARK)_[A-Z0-9_]*[A-Z0-9]\b")
NAMED = re.compile(r"`([a-z][a-z0-9_]*)`")


def _strings(folder: str) -> Iterator[tuple[Path, int, str]]:
    """Every string constant of the product code under ``folder`` that is not a docstring
    (nor the ``flag=`` of a declaration), with its file and line."""
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                skip.add(id(body[0].value))
            if isinstance(node, ast.keyword) and node.arg == "flag":
                skip.add(id(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in skip:
                    yield path.relative_to(ROOT), node.lineno, node.value


def test_no_flag_is_named_below_the_command_line() -> None:
    """``engine/`` and ``state/`` name settings (```parallelism```), never flags."""
    found = [
        f"{path}:{line}: {flag}"
        for folder in ("engine", "state")
        for path, line, text in _strings(folder)
        for flag in FLAG_IN_TEXT.findall(text)
    ]
    assert found == []


def test_every_variable_weir_reads_is_declared() -> None:
    declared = {s.env for s in ALL}
    used = {
        f"{path}:{line}: {var}"
        for folder in ("app", "api", "engine", "state", "weir/base")
        for path, line, text in _strings(folder)
        for var in VARIABLE.findall(text)
        if var not in declared and not text.startswith(var + "_")
    }
    assert used == set()


def test_a_setting_shared_by_commands_has_one_flag_and_one_variable() -> None:
    by_name: dict[str, set[tuple[str, str]]] = {}
    for s in FLAGS:
        by_name.setdefault(s.name, set()).add((s.flag, s.env))
    assert {name: forms for name, forms in by_name.items() if len(forms) > 1} == {}
    for command in COMMANDS:
        flags = [s.flag for s in for_command(command.name)]
        assert len(flags) == len(set(flags)), command.name


def test_every_setting_named_in_a_help_text_exists() -> None:
    known = set(flag_names())
    stray = {(s.name, word) for s in ALL for word in NAMED.findall(s.help) if word not in known}
    assert stray == set()


def test_help_shows_every_flag_and_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    _, commands = build_parser()
    for command in COMMANDS:
        text = " ".join(commands[command.name].format_help().split())
        for s in for_command(command.name):
            assert s.flag in text and f"env {s.env}" in text, (command.name, s.flag)
        assert "`" not in text.replace("`job`", ""), command.name  # every name rendered


def test_a_secret_variable_is_never_shown_in_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_API_TOKEN", "sekrit-token-1")
    _, commands = build_parser()
    for name in ("run", "api", "savepoint", "backfill"):
        text = commands[name].format_help()
        assert "sekrit" not in text and "WEIR_API_TOKEN, default (set)" in " ".join(text.split())


def test_every_setting_named_as_a_secret_is_declared_one() -> None:
    """``secret=True`` is what keeps a value out of ``--help`` and errors: a setting whose name
    says it holds a secret (a token, a password, a secret key) must say so."""
    undeclared = [s.env for s in ALL if is_secret_name(s.env) and not s.secret]
    assert undeclared == []
    assert {"WEIR_API_TOKEN", "AWS_SECRET_ACCESS_KEY"} <= {s.env for s in ALL if s.secret}


def test_secret_spark_settings_and_url_passwords_are_masked_in_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``spark_conf`` and the URLs are not secrets as a whole: their variable's value is shown,
    with a secret setting's value and a URL's password as ``***``."""
    spark = "spark.authenticate.secret=sekrit1 spark.executor.cores=1"
    monkeypatch.setenv("WEIR_SPARK_CONF", spark)
    monkeypatch.setenv("WEIR_SOURCE", "kafka://u:sekrit2@127.0.0.1:9/t?sasl_password=sekrit3")
    _, commands = build_parser()
    text = " ".join(commands["run"].format_help().split())
    assert "sekrit" not in text
    assert "spark.authenticate.secret=*** spark.executor.cores=1" in text
    assert "kafka://u:***@127.0.0.1:9/t?sasl_password=***" in text


def test_a_variable_without_a_flag_is_read_with_its_check() -> None:
    s = Setting("x_s", "h", 30, WholeNumber(1), env="WEIR_X_S", env_only=True)
    assert read_env(s, {}) == 30 and read_env(s, {"WEIR_X_S": "7"}) == 7
    with pytest.raises(ConfigError, match=r"^WEIR_X_S='0' is too small; use 1 or more$"):
        read_env(s, {"WEIR_X_S": "0"})
    secret = Setting("k", "h", secret=True, check=WholeNumber(), env="WEIR_K", env_only=True)
    with pytest.raises(ConfigError, match=r"WEIR_K='\(set\)' is not a whole number") as info:
        read_env(secret, {"WEIR_K": "hunter2"})
    assert "hunter2" not in str(info.value)


def test_render_shows_settings_as_the_commands_flags() -> None:
    text = "`parallelism`=9 exceeds; give `checkpoint_dir` s3://B/P; `job` stays"
    assert render(text, flag_names("run")) == (
        "--parallelism=9 exceeds; give --checkpoint-dir s3://B/P; `job` stays"
    )
    assert render("`from_ms`", flag_names("backfill")) == "--from"


def test_the_reference_pages_are_what_the_declarations_give() -> None:
    """``make reference`` wrote them; a change to a declaration without it fails here."""
    for rel, text in reference.pages().items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel}: run make reference"
