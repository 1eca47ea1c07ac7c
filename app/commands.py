"""The settings of ``weir backfill`` and ``weir produce`` (``weir.base.settings.Setting``; each
flag also reads its ``WEIR_*`` variable)."""

from __future__ import annotations

from weir.app.flags import HTTP_URL
from weir.base.settings import Choice, Number, Parsed, Setting, WholeNumber
from weir.engine.runtime.settings import storage

BACKFILL = ("backfill",)
PRODUCE = ("produce",)
STORAGE = Parsed(storage, "a directory or s3://BUCKET/PREFIX")

BACKFILL_SETTINGS: tuple[Setting, ...] = (
    Setting("input", "files or globs (JSONL, Parquet, CSV; one file is one split) or Kafka "
            "offset ranges, kafka://host:port/topic?from=earliest|N|P:N,…&to=latest|N|P:N,…"
            "&metadata=true (one partition is one split); the env variable separates them with "
            "spaces", many=True, required=True, metavar="PATH|URL", commands=BACKFILL),
    Setting("format", "format of the input files; without it, each file's extension tells: "
            ".jsonl/.json/.ndjson, .parquet, .csv", check=Choice(("jsonl", "parquet", "csv")),
            commands=BACKFILL, default_doc="from the extension"),
    Setting("op", "backfill only this window operator",
            metavar="NAME", commands=BACKFILL,
            default_doc="every window operator of the job, in one Spark application"),
    Setting("from_ms", "first event time to include (epoch ms; Kafka offsets go in the URL); "
            "session windows keep the sessions whose events all lie in [`from_ms`, `to_ms`)",
            flag="--from", check=WholeNumber(), metavar="T", commands=BACKFILL),
    Setting("to_ms", "event times before this (epoch ms)", flag="--to", check=WholeNumber(),
            metavar="T", commands=BACKFILL),
    Setting("master", "Spark master", "local[*]", metavar="URL", commands=BACKFILL),
    Setting("into_savepoint", "write a savepoint of the job under DIR (DIR/<job>/chk-<n>; DIR "
            "may be s3://BUCKET/PREFIX); start the job from it with weir run `restore`",
            check=STORAGE, metavar="DIR|URL", commands=BACKFILL),
    Setting("live", "load into the running job whose API is at URL (e.g. "
            "http://127.0.0.1:8000)", check=HTTP_URL, metavar="URL", commands=BACKFILL),
    Setting("api_token", "bearer token of the running job's API", metavar="TOKEN",
            secret=True, commands=BACKFILL),
    Setting("parallelism", "workers of the savepoint (a restore re-cuts them anyway)", 1,
            WholeNumber(1), metavar="N", commands=BACKFILL),
    Setting("work_dir", "where the Spark tasks write the SST files (DIR/<job>/<op>/sst): a "
            "directory (on a cluster, one every executor and this driver mount at the same "
            "path) or s3://BUCKET/PREFIX, which the tasks upload to; a running job loads them "
            "from its `backfill_dir`", ".weir/backfill", STORAGE, metavar="DIR|URL",
            commands=BACKFILL),
)  # fmt: skip

PRODUCE_SETTINGS: tuple[Setting, ...] = (
    Setting("bootstrap", "the Kafka broker, host:port; TLS and SASL come from the WEIR_KAFKA_* "
            "settings (WEIR_KAFKA_SECURITY_PROTOCOL, WEIR_KAFKA_SSL_CAFILE, "
            "WEIR_KAFKA_SASL_USERNAME, …)", "127.0.0.1:9092", metavar="HOST:PORT",
            commands=PRODUCE),
    Setting("topic", "topic to write (created when missing)", "events", metavar="TOPIC",
            commands=PRODUCE),
    Setting("workload", "ads ({id,event,ts,value}) or sensors ({id,ts,temperature,humidity})",
            "ads", Choice(("ads", "sensors")), commands=PRODUCE),
    Setting("rate", "events per second (0: as fast as possible)", 0.0, Number(0.0),
            metavar="N", commands=PRODUCE),
    Setting("keys", "distinct ids", 1000, WholeNumber(1), metavar="N", commands=PRODUCE),
    Setting("skew", "Zipf exponent of the ids (0: uniform)", 1.1, Number(), metavar="S",
            commands=PRODUCE),
    Setting("disorder", "an event's time lags the clock by up to this many ms", 0,
            WholeNumber(0), metavar="MS", commands=PRODUCE),
    Setting("count", "events to write in all (0: until stopped)", 100_000, WholeNumber(0),
            metavar="N", commands=PRODUCE),
    Setting("partitions", "partitions of a topic this creates", 4, WholeNumber(1), metavar="N",
            commands=PRODUCE),
    Setting("seed", "generator seed", 7, WholeNumber(0), metavar="N", commands=PRODUCE),
    Setting("file", "write the events to this JSONL file instead of Kafka (history for weir "
            "backfill)", metavar="PATH", commands=PRODUCE),
    Setting("clock", "wall (event time is now) or synthetic (reproducible times)", "wall",
            Choice(("wall", "synthetic")), commands=PRODUCE),
    Setting("step_ms", "with `clock` synthetic, event i is at start + i * STEP ms (0.1: 10,000 "
            "events a second of event time)", 1.0, Number(0.0), metavar="STEP",
            commands=PRODUCE),
)  # fmt: skip
