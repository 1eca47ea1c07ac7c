"""Spark settings that hold secrets, kept off every command line.

PySpark starts ``spark-submit``, and through it the driver's JVM, with each setting of the
session as ``--conf KEY=VALUE``; any local account reads those from ``/proc/<pid>/cmdline``. So
a setting whose name says it is a secret (``spark.authenticate.secret``, a ``…password``, a
``…secret.key``: ``redact.is_secret_name``) never goes there: the JVM starts with the other
settings, and the secrets follow over PySpark's own authenticated Py4J connection into the
session's configuration, before the SparkContext reads it.

``spark.authenticate.secret.file=PATH`` names a file only its owner may read that holds the
cluster's secret: weir reads it and hands the secret on the same way (Spark's own driver does
not take the file on a standalone cluster). Spark's standard ``SPARK_CONF_DIR`` with a private
``spark-defaults.conf`` works as well: spark-submit reads that file itself.

Spark keeps ``spark.authenticate.secret`` off the executors' command lines; a standalone worker
gives its executors its own secret in their environment.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weir.base.errors import ConfigError
from weir.base.redact import is_secret_name

SECRET = "spark.authenticate.secret"
SECRET_FILE = "spark.authenticate.secret.file"


def split_secrets(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``conf`` as (settings that may go on a command line, secret settings). A
    ``spark.authenticate.secret.file`` becomes the secret it holds.

    Raises:
        ConfigError: the secret file cannot be read, is empty, or others may read it.
    """
    plain = {k: v for k, v in conf.items() if not is_secret_name(k) and k != SECRET_FILE}
    secret = {k: v for k, v in conf.items() if is_secret_name(k)}
    if SECRET_FILE in conf and SECRET not in secret:
        secret[SECRET] = read_secret_file(Path(conf[SECRET_FILE]))
    return plain, secret


def read_secret_file(path: Path) -> str:
    """The secret in ``path`` (its first line), which only its owner may read or write."""
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{SECRET_FILE}={path}: cannot read it ({exc.strerror}); give the path of a file "
            "that holds the cluster's secret"
        ) from None
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"{SECRET_FILE}={path} may be read or written by other users (mode {mode:04o}); "
            f"chmod 600 {path}"
        )
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not secret:
        raise ConfigError(f"{SECRET_FILE}={path} is empty; write the cluster's secret into it")
    return secret


def start_context(settings: Mapping[str, str], secret: Mapping[str, str]) -> Any:
    """A SparkContext with ``settings`` and ``secret``, whose JVM's command line holds only
    ``settings`` (``secret`` goes over Py4J). Without secrets, PySpark's own start."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    gateway = None
    # a JVM this process started for an earlier session is reused (PySpark keeps one per
    # process) and is already running: settings reach it over Py4J either way
    if secret and SparkContext._gateway is None:
        on_command_line = SparkConf().setAll(list(settings.items()))
        gateway = launch_gateway(on_command_line)  # type: ignore[no-untyped-call]
    conf = SparkConf().setAll([*settings.items(), *secret.items()])
    return SparkContext(conf=conf, gateway=gateway)


def unprotected(conf: Mapping[str, str]) -> str | None:
    """Why the tasks' descriptions are exposed under the session's effective ``conf`` (None:
    they travel authenticated and encrypted). They carry the attempt's secret and the S3 and
    Kafka settings weir forwards."""
    on = {k: str(conf.get(k, "false")).strip().lower() == "true" for k in _PROTECTION}
    if not on["spark.authenticate"]:
        return (
            "spark.authenticate is off: any process that reaches the cluster's or this driver's "
            "ports can run code as the cluster's user and read the task descriptions, which "
            "carry the attempt's secret and the S3 and Kafka settings"
        )
    if not on["spark.network.crypto.enabled"]:
        return (
            "spark.network.crypto.enabled is off: the task descriptions, which carry the "
            "attempt's secret and the S3 and Kafka settings, cross the network unencrypted"
        )
    return None


_PROTECTION = ("spark.authenticate", "spark.network.crypto.enabled")

__all__ = [
    "SECRET",
    "SECRET_FILE",
    "read_secret_file",
    "split_secrets",
    "start_context",
    "unprotected",
]
