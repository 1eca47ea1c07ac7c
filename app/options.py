"""What each command takes: ``weir run``'s and ``weir demo``'s flags (``run_flags``) and the
HTTP API's (``api_flags``, shared with ``weir api``). ``flags`` has the machinery: every flag
reads its ``WEIR_…`` variable and one check judges both."""

from __future__ import annotations

import argparse
import os
from typing import Any

from weir.app.flags import (
    Env,
    master_url,
    sink_url,
    source_url,
    spark_setting,
    spark_setting_typed,
    storage_url,
    whole_number,
)

MAX_API_WORKERS = 64


def checkpoint_dir_flag(env: Env) -> None:
    """``--checkpoint-dir``, as ``weir run``, ``demo``, ``api`` and ``checkpoints`` take it."""
    env.add(
        "--checkpoint-dir",
        "checkpoint storage: a directory or s3://BUCKET/PREFIX (default: <state-dir>/checkpoints)",
        type=storage_url,
        metavar="DIR|URL",
    )


def cluster_flags(env: Env) -> None:
    env.add(
        "--master",
        "run the workers as one Spark barrier stage on this cluster: spark://HOST:PORT, "
        "k8s://https://HOST:PORT or yarn (needs --checkpoint-dir every executor reaches); "
        "without it, local worker processes",
        type=master_url,
        metavar="URL",
    )
    env.add(
        "--spark-conf",
        "Spark settings for --master, KEY=VALUE each (spark.executor.memory=2g); the env "
        "variable separates them with spaces. A secret (spark.authenticate.secret=) only in "
        "the variable, or as spark.authenticate.secret.file=PATH: never on a command line",
        nargs="+",
        type=spark_setting,
        typed=spark_setting_typed,
        default=[],
        metavar="KEY=VALUE",
    )
    env.add(
        "--driver-host",
        "the address of this host that the cluster's executors reach (default: SPARK_LOCAL_IP, "
        "else 127.0.0.1)",
        metavar="HOST",
    )


def run_flags(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    env = Env(p)
    if not demo:
        env.add(
            "--source",
            "source URL replacing the job's source: file:///x.jsonl, generator://ads?rate=N",
            type=source_url,
            metavar="URL",
        )
        env.add(
            "--sink",
            "sink URL for window results: file:///out.jsonl, stdout://",
            type=sink_url,
            metavar="URL",
        )
        env.add(
            "--exit-at-end", "stop once a bounded source is fully processed", action="store_true"
        )
    env.add(
        "--parallelism",
        "number of worker processes",
        os.cpu_count() or 1,
        type=whole_number(1),
        metavar="N",
    )
    env.add(
        "--idle-timeout-ms",
        "a source split without records for this long stops holding the watermark back "
        "(default: the job's WatermarkStrategy.with_idleness, else never)",
        type=whole_number(1),
        metavar="MS",
    )
    env.add(
        "--buffer-timeout-ms",
        "longest a record waits in an exchange buffer before it is shipped",
        10,
        type=whole_number(0),
        metavar="MS",
    )
    if not demo:
        cluster_flags(env)
    env.add(
        "--exchange-transport",
        "how workers reach each other: unix (a private 0700 directory each) or tcp (127.0.0.1); "
        "either way every connection proves it holds the run's secret",
        "unix",
        choices=["unix", "tcp"],
    )
    env.add(
        "--state-dir", "where workers keep RocksDB state and side outputs", ".weir", metavar="DIR"
    )
    env.add(
        "--state-retention-ms",
        "how long fired windows stay queryable (event time)",
        3_600_000,
        type=whole_number(0),
        metavar="MS",
    )
    env.add(
        "--dead-letter",
        "sink URL for malformed input (default: <state-dir>/<job>/dead-letter.jsonl)",
        type=sink_url,
        metavar="URL",
    )
    env.add(
        "--late-sink",
        "sink URL for records past allowed lateness (default: <state-dir>/<job>/late.jsonl)",
        type=sink_url,
        metavar="URL",
    )
    # 1,024: a batch's records (decoded dicts) then stay in a core's L2 cache while each step
    # of the chain and the fold passes over them; 8,192 spilled to L3, and was 1.12-1.24x slower
    # in-process and 1.19x on Kafka at parallelism 1 (README, issue 21's sixth round)
    env.add(
        "--batch-size",
        "records per source batch",
        1024,
        type=whole_number(1),
        metavar="N",
    )
    env.add(
        "--flush-interval-ms",
        "how often open windows are written to RocksDB (query freshness)",
        50,
        type=whole_number(0),
        metavar="MS",
    )
    checkpoint_dir_flag(env)
    env.add(
        "--checkpoint-interval-ms",
        "how often a checkpoint is taken (0: never)",
        5000 if demo else 0,
        type=whole_number(0),
        metavar="MS",
    )
    env.add(
        "--checkpoint-timeout-ms",
        "a checkpoint not complete by then is abandoned",
        60_000,
        type=whole_number(1),
        metavar="MS",
    )
    env.add(
        "--checkpoints-retained",
        "how many complete checkpoints to keep (savepoints are never deleted)",
        3,
        type=whole_number(1),
        metavar="K",
    )
    env.add(
        "--restore",
        "start from a checkpoint: 'latest', a chk-<n> directory or s3://…/<job>/chk-<n> (any "
        "parallelism)",
        metavar="latest|PATH|URL",
    )
    env.add(
        "--restart-failures",
        "restarts from the latest checkpoint after a worker fails, at most N within "
        "--restart-interval-ms; one more fails the job (default: 3 with checkpoints, else 0)",
        type=whole_number(0),
        metavar="N",
    )
    env.add(
        "--restart-interval-ms",
        "the interval --restart-failures counts restarts in",
        600_000,
        type=whole_number(1),
        metavar="MS",
    )
    env.add(
        "--restart-attempts",
        "old name of --restart-failures (now counted within --restart-interval-ms)",
        type=whole_number(0),
        metavar="N",
    )
    env.add(
        "--restart-delay-ms",
        "wait before a restart",
        1000,
        type=whole_number(0),
        metavar="MS",
    )
    env.add(
        "--max-future-ms",
        "records whose event time is further ahead of the wall clock go to the dead letters, "
        "so one bad timestamp cannot close every window (0: no limit)",
        86_400_000,
        type=whole_number(0),
        metavar="MS",
    )
    env.add(
        "--backfill-dir",
        "live backfills (POST /jobs/{job}/backfills, weir backfill --live) load SST files only "
        "from under this directory or s3://BUCKET/PREFIX (weir backfill --work-dir); on a "
        "cluster, the tasks download them from S3 with the settings this process forwards",
        ".weir/backfill",
        type=storage_url,
        metavar="DIR|URL",
    )
    env.add(
        "--no-api",
        "run the job without the HTTP API; serve it from another process with weir api",
        action="store_true",
    )
    env.add(
        "--api-workers",
        "HTTP API processes on the one port (SO_REUSEPORT): this one and N-1 that read the job "
        "as weir api does, so reads scale with cores",
        1,
        type=whole_number(1, maximum=MAX_API_WORKERS),
        metavar="N",
    )
    api_flags(env)


def sql_commands(sub: Any) -> None:
    """``weir sql JOB.sql`` (``weir run``'s flags) and ``weir explain JOB``."""
    sql = sub.add_parser(
        "sql",
        help="run a SQL job file (SET, CREATE TABLE, CREATE FUNCTION, CREATE VIEW) as weir run "
        "does, with the same flags",
    )
    sql.add_argument("job_file", metavar="JOB.sql", help="the SQL job file")
    run_flags(sql)
    explain = sub.add_parser(
        "explain",
        help="print the operator graph a job (.py, .sql or package.module:attr) compiles to",
    )
    explain.add_argument("job_file", metavar="JOB", help="the job, as weir run takes it")
    explain.add_argument(
        "--json", action="store_true", help="print the graph as JSON instead of text"
    )


def api_workers_flag(env: Env) -> None:
    """``weir api``'s ``--workers``."""
    env.add(
        "--workers",
        "API processes on the one port (SO_REUSEPORT), each with its own readers, so reads "
        "scale with cores",
        1,
        type=whole_number(1, maximum=MAX_API_WORKERS),
        metavar="N",
    )


def api_flags(env: Env) -> None:
    env.add(
        "--api-host",
        "address the HTTP API binds (without a token, an API off loopback serves only /health)",
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
        "--allowed-hosts",
        "comma-separated host names requests may carry in Host besides loopback's and the "
        "bound address (checked without a token, and with one when this is set)",
        metavar="HOSTS",
    )
    env.add(
        "--max-connections",
        "HTTP connections waiting on their clients (for a request, its body, or to read a "
        "response) at most; past it the one waiting longest is closed",
        1024,
        type=whole_number(1),
        metavar="N",
    )
    env.add(
        "--max-streams",
        "event streams (/state/{key}/stream) open at once at most; more get 503 + Retry-After",
        256,
        type=whole_number(1),
        metavar="N",
    )
    env.add(
        "--api-port",
        "port of the HTTP API (0: any free port)",
        8000,
        type=whole_number(0, maximum=65535),
        metavar="P",
    )
    env.add(
        "--log-level",
        "DEBUG, INFO, WARNING or ERROR",
        "INFO",
        metavar="LEVEL",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
    env.add(
        "--log-format",
        "text (one readable line per record) or json (one JSON object per line, with the "
        "record's key=value fields as fields), for this process and its workers",
        "text",
        choices=["text", "json"],
    )
