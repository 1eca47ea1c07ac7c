"""The flags of ``weir run``, ``weir demo`` and ``weir api``: each with an environment variable
(``WEIR_<FLAG>``) for its default, and numbers checked with a message naming the flag, the value
and the fix."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from weir.engine.errors import ConfigError


def number_type(
    flag: str, minimum: float, kind: Callable[[str], Any] = int
) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(
                f"{flag}={raw!r} is not {what}; e.g. {flag} {max(minimum, 1)}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{flag}={value} is too small; use {minimum} or more")
        return value

    return parse


def int_type(flag: str, minimum: int) -> Callable[[str], int]:
    return number_type(flag, minimum, int)


def float_type(flag: str, minimum: float) -> Callable[[str], float]:
    return number_type(flag, minimum, float)


class Env:
    """Adds flags whose default comes from ``WEIR_<FLAG>``, shown in ``--help``."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def add(self, flag: str, help: str, default: Any = None, **kw: Any) -> None:
        env = "WEIR_" + flag.lstrip("-").replace("-", "_").upper()
        raw = os.environ.get(env)
        kind = kw.get("type")
        if raw is not None:
            if kw.get("nargs") == "+":  # several values: separated by spaces
                default = raw.split()
                kw["required"] = kw.get("required", False) and not default
            elif kw.get("action") == "store_true":
                default = raw.strip().lower() in ("1", "true", "yes", "on")
            elif kind is not None:
                try:
                    default = kind(raw)
                except argparse.ArgumentTypeError as exc:
                    raise ConfigError(f"environment variable {env}: {exc}") from None
            else:
                default = raw
        shown_default = " ".join(default) if isinstance(default, list) else default
        shown = f" (env {env}" + (
            f", default {shown_default})" if default not in (None, False) else ")"
        )
        self.parser.add_argument(flag, default=default, help=help + shown, **kw)


def run_flags(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    env = Env(p)
    if not demo:
        env.add(
            "--source",
            "source URL replacing the job's source: file:///x.jsonl, generator://ads?rate=N",
            metavar="URL",
        )
        env.add(
            "--sink", "sink URL for window results: file:///out.jsonl, stdout://", metavar="URL"
        )
        env.add(
            "--exit-at-end", "stop once a bounded source is fully processed", action="store_true"
        )
    env.add(
        "--parallelism",
        "number of worker processes",
        os.cpu_count() or 1,
        type=int_type("--parallelism", 1),
        metavar="N",
    )
    env.add(
        "--idle-timeout-ms",
        "a source split without records for this long stops holding the watermark back "
        "(default: the job's WatermarkStrategy.with_idleness, else never)",
        type=int_type("--idle-timeout-ms", 1),
        metavar="MS",
    )
    env.add(
        "--buffer-timeout-ms",
        "longest a record waits in an exchange buffer before it is shipped",
        10,
        type=int_type("--buffer-timeout-ms", 0),
        metavar="MS",
    )
    env.add(
        "--state-dir", "where workers keep RocksDB state and side outputs", ".weir", metavar="DIR"
    )
    env.add(
        "--state-retention-ms",
        "how long fired windows stay queryable (event time)",
        3_600_000,
        type=int_type("--state-retention-ms", 0),
        metavar="MS",
    )
    env.add(
        "--dead-letter",
        "sink URL for malformed input (default: <state-dir>/<job>/dead-letter.jsonl)",
        metavar="URL",
    )
    env.add(
        "--late-sink",
        "sink URL for records past allowed lateness (default: <state-dir>/<job>/late.jsonl)",
        metavar="URL",
    )
    env.add(
        "--batch-size",
        "records per source batch",
        8192,
        type=int_type("--batch-size", 1),
        metavar="N",
    )
    env.add(
        "--flush-interval-ms",
        "how often open windows are written to RocksDB (query freshness)",
        50,
        type=int_type("--flush-interval-ms", 0),
        metavar="MS",
    )
    env.add(
        "--checkpoint-dir",
        "checkpoint storage (default: <state-dir>/checkpoints)",
        metavar="DIR",
    )
    env.add(
        "--checkpoint-interval-ms",
        "how often a checkpoint is taken (0: never)",
        5000 if demo else 0,
        type=int_type("--checkpoint-interval-ms", 0),
        metavar="MS",
    )
    env.add(
        "--checkpoint-timeout-ms",
        "a checkpoint not complete by then is abandoned",
        60_000,
        type=int_type("--checkpoint-timeout-ms", 1),
        metavar="MS",
    )
    env.add(
        "--checkpoints-retained",
        "how many complete checkpoints to keep (savepoints are never deleted)",
        3,
        type=int_type("--checkpoints-retained", 1),
        metavar="K",
    )
    env.add(
        "--restore",
        "start from a checkpoint: 'latest' or a chk-<n> directory (any parallelism)",
        metavar="latest|PATH",
    )
    env.add(
        "--restart-attempts",
        "restarts from the latest checkpoint after a worker fails "
        "(default: 3 with checkpoints, else 0)",
        type=int_type("--restart-attempts", 0),
        metavar="N",
    )
    env.add(
        "--restart-delay-ms",
        "wait before a restart",
        1000,
        type=int_type("--restart-delay-ms", 0),
        metavar="MS",
    )
    env.add(
        "--max-future-ms",
        "records whose event time is further ahead of the wall clock go to the dead letters, "
        "so one bad timestamp cannot close every window (0: no limit)",
        86_400_000,
        type=int_type("--max-future-ms", 0),
        metavar="MS",
    )
    env.add(
        "--backfill-dir",
        "live backfills (POST /jobs/{job}/backfills, weir backfill --live) load SST files only "
        "from under this directory (weir backfill --work-dir)",
        ".weir/backfill",
        metavar="DIR",
    )
    env.add(
        "--no-api",
        "run the job without the HTTP API; serve it from another process with weir api",
        action="store_true",
    )
    api_flags(env)


def api_flags(env: Env) -> None:
    env.add(
        "--api-host",
        "address the HTTP API binds (without a token, admin routes answer only on loopback)",
        "127.0.0.1",
        metavar="H",
    )
    env.add(
        "--api-token",
        "bearer token every route but /health then requires (prefer the environment "
        "variable: a flag shows in the process list)",
        metavar="TOKEN",
    )
    env.add(
        "--cors-origins",
        "comma-separated origins allowed to call the API from a browser",
        metavar="ORIGINS",
    )
    env.add(
        "--api-port",
        "port of the HTTP API (0: any free port)",
        8000,
        type=int_type("--api-port", 0),
        metavar="P",
    )
    env.add(
        "--log-level",
        "DEBUG, INFO, WARNING or ERROR",
        "INFO",
        metavar="LEVEL",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
