"""Spark secrets weir is given stay off command lines: ``split_secrets`` keeps every secret-named
setting apart (and reads ``spark.authenticate.secret.file``, which must be private), a secret
typed into ``--spark-conf`` is refused, and a session that would expose the task descriptions
is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.app.parser import build_parser
from weir.base.errors import ConfigError
from weir.engine.runtime.control.sparkauth import split_secrets, unprotected


def test_secret_settings_are_kept_apart(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret-from-file\n")
    secret_file.chmod(0o600)
    plain, secret = split_secrets(
        {
            "spark.authenticate": "true",
            "spark.authenticate.secret.file": str(secret_file),
            "spark.ssl.keyStorePassword": "ks-pw",
            "spark.executor.memory": "1g",
        }
    )
    assert plain == {"spark.authenticate": "true", "spark.executor.memory": "1g"}
    assert secret == {
        "spark.authenticate.secret": "s3cret-from-file",
        "spark.ssl.keyStorePassword": "ks-pw",
    }


def test_a_secret_file_others_may_read_is_refused(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("x\n")
    secret_file.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 0644\); chmod 600"):
        split_secrets({"spark.authenticate.secret.file": str(secret_file)})
    with pytest.raises(ConfigError, match="cannot read it"):
        split_secrets({"spark.authenticate.secret.file": str(tmp_path / "missing")})


def test_a_secret_typed_into_spark_conf_is_refused_without_showing_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser()[0].parse_args(
            ["run", "job.py", "--spark-conf", "spark.authenticate.secret=hunter2"]
        )
    err = capsys.readouterr().err
    assert "puts a secret on the command line" in err and "WEIR_SPARK_CONF" in err
    assert "hunter2" not in err


def test_a_session_that_exposes_the_task_descriptions_is_named() -> None:
    assert "spark.authenticate is off" in (unprotected({}) or "")
    assert "unencrypted" in (unprotected({"spark.authenticate": "true"}) or "")
    both = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    assert unprotected(both) is None
