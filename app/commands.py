"""The ``weir backfill`` and ``weir produce`` subcommands' flags (every flag also reads a
``WEIR_*`` variable)."""

from __future__ import annotations

from typing import Any

from weir.app.flags import Env, http_url, number, storage_url, whole_number


def backfill_command(sub: Any) -> None:
    """``weir backfill``: a job's windows over historical input, computed on Spark."""
    back = sub.add_parser(
        "backfill", help="compute a job's windows over historical input on Spark and load them"
    )
    back.add_argument("job_file", metavar="JOB", help="the job `weir run` runs (.py or .sql)")
    env = Env(back)
    env.add(
        "--input",
        "files or globs (JSONL, Parquet, CSV; one file is one split) or Kafka offset ranges, "
        "kafka://host:port/topic?from=earliest|N|P:N,…&to=latest|N|P:N,…&metadata=true "
        "(one partition is one split); the env variable separates them with spaces",
        nargs="+",
        required=True,
        metavar="PATH|URL",
    )
    env.add(
        "--format",
        "format of the input files; without it, each file's extension tells: "
        ".jsonl/.json/.ndjson, .parquet, .csv",
        choices=["jsonl", "parquet", "csv"],
    )
    env.add("--op", "the window operator (when the job has several)", metavar="NAME")
    env.add(
        "--from",
        "first event time to include (epoch ms; Kafka offsets go in the URL); session windows "
        "keep the sessions whose events all lie in [--from, --to)",
        type=whole_number(),
        metavar="T",
    )
    env.add("--to", "event times before this (epoch ms)", type=whole_number(), metavar="T")
    env.add("--master", "Spark master", "local[*]", metavar="URL")
    env.add(
        "--into-savepoint",
        "write a savepoint of the job under DIR (DIR/<job>/chk-<n>; DIR may be "
        "s3://BUCKET/PREFIX); start the job from it with weir run --restore",
        type=storage_url,
        metavar="DIR|URL",
    )
    env.add(
        "--live",
        "load into the running job whose API is at URL (e.g. http://127.0.0.1:8000)",
        type=http_url,
        metavar="URL",
    )
    env.add("--api-token", "bearer token of the running job's API", metavar="TOKEN")
    env.add(
        "--parallelism",
        "workers of the savepoint (a restore re-cuts them anyway)",
        1,
        type=whole_number(1),
        metavar="N",
    )
    env.add(
        "--work-dir",
        "where the Spark tasks write the SST files (DIR/<job>/sst): a directory (on a cluster, "
        "one every executor and this driver mount at the same path) or s3://BUCKET/PREFIX, "
        "which the tasks upload to; a running job loads them from its --backfill-dir",
        ".weir/backfill",
        type=storage_url,
        metavar="DIR|URL",
    )


def produce_command(sub: Any) -> None:
    """``weir produce``: a generated workload into a Kafka topic or a JSONL file."""
    prod = sub.add_parser("produce", help="write a generated workload into a Kafka topic")
    env = Env(prod)
    env.add(
        "--bootstrap",
        "the Kafka broker, host:port; TLS and SASL come from the WEIR_KAFKA_* settings "
        "(WEIR_KAFKA_SECURITY_PROTOCOL, WEIR_KAFKA_SSL_CAFILE, WEIR_KAFKA_SASL_USERNAME, …)",
        "127.0.0.1:9092",
        metavar="HOST:PORT",
    )
    env.add("--topic", "topic to write (created when missing)", "events", metavar="TOPIC")
    env.add(
        "--workload",
        "ads ({id,event,ts,value}) or sensors ({id,ts,temperature,humidity})",
        "ads",
        choices=["ads", "sensors"],
    )
    env.add(
        "--rate", "events per second (0: as fast as possible)", 0.0, type=number(0.0), metavar="N"
    )
    env.add("--keys", "distinct ids", 1000, type=whole_number(1), metavar="N")
    env.add("--skew", "Zipf exponent of the ids (0: uniform)", 1.1, type=number(), metavar="S")
    env.add(
        "--disorder",
        "an event's time lags the clock by up to this many ms",
        0,
        type=whole_number(0),
        metavar="MS",
    )
    env.add(
        "--count",
        "events to write in all (0: until stopped)",
        100_000,
        type=whole_number(0),
        metavar="N",
    )
    env.add(
        "--partitions",
        "partitions of a topic this creates",
        4,
        type=whole_number(1),
        metavar="N",
    )
    env.add("--seed", "generator seed", 7, type=whole_number(0), metavar="N")
    env.add(
        "--file",
        "write the events to this JSONL file instead of Kafka (history for weir backfill)",
        metavar="PATH",
    )
    env.add(
        "--clock",
        "wall (event time is now) or synthetic (reproducible times)",
        "wall",
        choices=["wall", "synthetic"],
    )
    env.add(
        "--step-ms",
        "with --clock synthetic, event i is at start + i * STEP ms (0.1: 10,000 events a second "
        "of event time)",
        1.0,
        type=number(0.0),
        metavar="STEP",
    )
