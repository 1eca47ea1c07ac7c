"""The settings of a run of a job, declared once (``weir.base.settings``): ``RunConfig`` has a
field for each, ``weir run``, ``weir sql`` and ``weir demo`` a flag and a ``WEIR_*`` variable,
and the reference pages a row. ``RunConfig``'s field defaults are these declarations' defaults,
and it judges its fields with their checks, so a default or a range is written here only.

The checks of URLs and storage locations parse them as the run will (a source's or sink's
``from_url``, ``storage_location``, ``parse_master``), so a bad one is refused before anything
starts, with the parser's message.
"""

from __future__ import annotations

import os
import re
from typing import Any

from weir.base.errors import ConfigError
from weir.base.extras import require
from weir.base.redact import is_secret_name
from weir.base.settings import (
    BadValue,
    Choice,
    Number,
    Parsed,
    Setting,
    Switch,
    WholeNumber,
    named,
)
from weir.engine.columnar import COLUMNAR_SETTING
from weir.engine.kernels import KERNELS_SETTING

__all__ = ["MASTER_FORMS", "RUN_SETTINGS", "parse_master", "spark_addresses"]

RUN = ("run", "sql", "demo")
JOB_RUNS = ("run", "sql")  # not the demo: its source, sink and workers are its own
SERVED = (*RUN, "api")  # what the API of a job's state reads: its directories, its logging
LIFECYCLE = ("checkpoints", "list", "stop", "cancel", "savepoint", "query")
CPUS = os.cpu_count() or 1

MASTER_FORMS = (
    "spark://HOST:PORT (or spark://H1:P1,H2:P2 with standby masters), k8s://https://HOST:PORT, yarn"
)
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")
_K8S = re.compile(r"^k8s://(https?://)?[^\s/:]+(:\d{1,5})?/?$")


def parse_master(url: str) -> str:
    """The cluster master URL ``url`` names, checked: ``spark://host:port[,host:port…]``,
    ``k8s://[https://]host[:port]`` or ``yarn``. Local masters are refused: without a
    ``master`` weir runs its own local worker processes.

    Raises:
        ConfigError: ``url`` is none of those forms; the message names the forms.
    """
    master = url.strip()
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        raise ConfigError(
            f"{url!r} is a local master: without {named('master')} weir runs local worker "
            f"processes; {named('master')} takes a cluster's master URL: {MASTER_FORMS}"
        )
    if master == "yarn":
        return master
    if master.startswith("k8s://"):
        if not _K8S.match(master):
            raise ConfigError(
                f"{url!r}: a Kubernetes master is k8s://https://HOST:PORT (the API server's "
                "address)"
            )
        return master
    if master.startswith("spark://"):
        spark_addresses(master, url)
        return master
    raise ConfigError(f"{url!r} is not a cluster master URL; use one of: {MASTER_FORMS}")


def spark_addresses(master: str, shown: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each standalone master in ``spark://H1:P1,H2:P2``."""
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        m = _HOST_PORT.match(part)
        port = int(m.group(2)) if m else 0
        if m is None or not 0 < port < 65536:
            raise ConfigError(
                f"{shown!r}: {part!r} is not HOST:PORT with a port in 1-65535; a standalone "
                "master is spark://HOST:PORT (7077 unless set otherwise)"
            )
        addresses.append((m.group(1).strip("[]"), port))
    return addresses


def _parsed_by(parse: Any, accepts: str) -> Parsed:
    """A check that runs ``parse`` (which raises ``ConfigError`` naming the fix)."""

    def check(raw: str) -> str:
        try:
            parse(raw)
        except ConfigError as exc:
            raise BadValue(str(exc), names_value=True) from None
        return raw

    return Parsed(check, accepts)


def _source(raw: str) -> object:
    from weir.engine.sources import from_url  # late: keeps --help fast

    return from_url(raw)


def _sink(raw: str) -> object:
    from weir.engine.sinks import from_url

    return from_url(raw)


def storage(raw: str) -> str:
    """A directory or ``s3://BUCKET/PREFIX``; never a URL of another scheme taken for a path."""
    from weir.state.objectstore import SCHEMES, storage_location

    try:
        where = storage_location(raw)
    except ConfigError:
        raise BadValue(f"is not a storage location weir supports; use {SCHEMES}") from None
    if where.scheme == "s3":
        require("s3", f"storage on S3 ({where.url})")  # before anything starts, in one line
    return raw


def _master(raw: str) -> str:
    try:
        return parse_master(raw)
    except ConfigError as exc:
        raise BadValue(str(exc), names_value=True) from None


def _spark_setting(raw: str) -> tuple[str, str]:
    key, eq, value = raw.partition("=")
    if not eq or not key.startswith("spark."):
        raise BadValue("is not a Spark setting", example="spark.executor.memory=2g")
    return key, value


def _spark_setting_typed(raw: str) -> tuple[str, str]:
    """A Spark setting typed on the command line, where every local account reads it in the
    process list: never a secret one."""
    key, value = _spark_setting(raw)
    if is_secret_name(key):
        raise BadValue(
            "puts a secret on the command line, where every local user can read it",
            fix="give it in WEIR_SPARK_CONF instead, or as spark.authenticate.secret.file=PATH "
            "(a file only you can read)",
        )
    return key, value


SOURCE_URL = _parsed_by(_source, "a path or a source URL (file://, generator://, kafka://)")
SINK_URL = _parsed_by(_sink, "a path or a sink URL (file://, stdout://, kafka://)")
STORAGE = Parsed(storage, "a directory, file:///DIR or s3://BUCKET/PREFIX")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")

_WHERE = (
    Setting("source_url", "source replacing the job's: a path or file:///path/events.jsonl (a "
            "glob gives one split per file), generator://ads?rate=N&ids=N&skew=S&disorder=MS"
            "&seed=N&count=N&clock=wall|synthetic&step=MS (one split per worker; "
            "generator://sensors for sensor readings), kafka://host:port/topic?group=G"
            "&start=earliest|latest|committed|MS&end=latest&metadata=true (one split per "
            "partition; TLS and SASL options in the URL or WEIR_KAFKA_*)", flag="--source",
            check=SOURCE_URL, metavar="URL", commands=JOB_RUNS, default_doc="the job's"),
    Setting("sink_url", "where every operator's window results go (each record names its "
            "operator in the field \"op\"): a path or file:///path/out.jsonl, stdout://, "
            "kafka://host:port/topic", flag="--sink", check=SINK_URL, metavar="URL",
            commands=JOB_RUNS, default_doc="the job's"),
    Setting("exit_at_end", "stop once a bounded source is fully processed", False, Switch(),
            commands=JOB_RUNS),
)  # fmt: skip

_WORKERS = (
    Setting("parallelism", "worker processes (at most the job's max_parallelism)", 1,
            WholeNumber(1), metavar="N", commands=RUN,
            command_defaults=tuple((c, CPUS) for c in RUN), default_doc="CPU count"),
    Setting("idle_timeout_ms", "a source split without records for this long stops holding "
            "the watermark back", check=WholeNumber(1), metavar="MS", commands=RUN,
            default_doc="the job's WatermarkStrategy.with_idleness, else never"),
    Setting("buffer_timeout_ms", "longest a record waits in an exchange buffer before it is "
            "shipped", 10, WholeNumber(0), metavar="MS", commands=RUN),
    Setting("master", "run the workers as one Spark barrier stage on this cluster: "
            "spark://HOST:PORT (spark://H1:P1,H2:P2 with standby masters), "
            "k8s://https://HOST:PORT or yarn; needs a `checkpoint_dir` every executor reaches",
            check=Parsed(_master, "spark://, k8s:// or yarn"), metavar="URL", commands=JOB_RUNS,
            default_doc="none (local worker processes)"),
    Setting("spark_conf", "Spark settings for `master`, KEY=VALUE each "
            "(spark.executor.memory=2g); dynamic allocation and speculation are refused. A "
            "secret (spark.authenticate.secret=) only in the variable, or as "
            "spark.authenticate.secret.file=PATH: never on a command line", (),
            Parsed(_spark_setting, "spark.KEY=VALUE"), metavar="KEY=VALUE", many=True,
            argv_check=Parsed(_spark_setting_typed, "spark.KEY=VALUE, not a secret one"),
            commands=JOB_RUNS, default_doc="none"),
    Setting("driver_host", "the address of this host the cluster's executors reach (Spark's "
            "driver, the tasks' link to the job manager)", metavar="HOST", commands=JOB_RUNS,
            default_doc="SPARK_LOCAL_IP, else 127.0.0.1"),
    Setting("exchange_transport", "how workers reach each other: unix (a private 0700 "
            "directory each) or tcp (127.0.0.1); either way every connection proves it holds "
            "the run's secret", "unix", Choice(("unix", "tcp")), commands=RUN),
)  # fmt: skip

_STATE = (
    Setting("state_dir", "RocksDB state and default side outputs (DIR/<job>/); a running job "
            "publishes its status and addresses there, where the lifecycle commands find it",
            ".weir", metavar="DIR", commands=(*SERVED, *LIFECYCLE)),
    Setting("state_retention_ms", "how long fired windows stay queryable (event time)",
            3_600_000, WholeNumber(0), metavar="MS", commands=RUN),
    Setting("dead_letter_url", "where malformed input goes (a sink URL)", flag="--dead-letter",
            check=SINK_URL, metavar="URL", commands=RUN,
            default_doc="<state-dir>/<job>/dead-letter.jsonl"),
    Setting("late_sink_url", "where records past allowed lateness go (a sink URL)",
            flag="--late-sink", check=SINK_URL, metavar="URL", commands=RUN,
            default_doc="<state-dir>/<job>/late.jsonl"),
    # Flink users set failure thresholds the same way (a tolerable number of failures): a job
    # that sends most of its input to the dead letters is broken, not running
    Setting("max_dead_letter_ratio", "fail the job (exit 1, with the reason) once more than "
            "this share of the records read went to the dead letters (0.01: one in a hundred; "
            "0: any), "
            "judged from `dead_letter_min_records` records on and at the end of a bounded "
            "input; until then /health says degraded while the share is above it",
            check=Number(0.0, 1.0), metavar="RATIO", commands=RUN,
            default_doc="none (no limit)"),
    Setting("dead_letter_min_records", "records read before `max_dead_letter_ratio` judges "
            "(a bounded input is judged at its end however few)", 1000, WholeNumber(1),
            metavar="N", commands=RUN),
    # 1,024: a batch's records (decoded dicts) then stay in a core's L2 cache while each step
    # of the chain and the fold passes over them; 8,192 spilled to L3, and was 1.12-1.24x
    # slower in-process and 1.19x on Kafka at parallelism 1 (README, issue 21's sixth round)
    Setting("batch_size", "records per source batch (small enough that a batch's decoded "
            "records stay in a core's L2 cache through the chain and the fold)", 1024,
            WholeNumber(1), metavar="N", commands=RUN),
    Setting("flush_interval_ms", "how often open windows reach RocksDB (query freshness); "
            "under load a flush also waits until the state writer has rested 3x its last "
            "write's CPU time (100 ms at most)", 50, WholeNumber(0), metavar="MS",
            commands=RUN),
)  # fmt: skip

_CHECKPOINTS = (
    Setting("checkpoint_dir", "checkpoint storage: a directory, file:///DIR or "
            "s3://BUCKET/PREFIX (.../<job>/shared, .../<job>/chk-<n>)", check=STORAGE,
            metavar="DIR|URL", commands=(*SERVED, "checkpoints"),
            default_doc="<state-dir>/checkpoints"),
    Setting("checkpoint_interval_ms", "how often a checkpoint is taken (0: never)", 0,
            WholeNumber(0), metavar="MS", commands=RUN, command_defaults=(("demo", 5000),)),
    Setting("checkpoint_timeout_ms", "a checkpoint not complete by then is abandoned", 60_000,
            WholeNumber(1), metavar="MS", commands=RUN),
    Setting("checkpoints_retained", "complete checkpoints kept (savepoints are never "
            "deleted)", 3, WholeNumber(1), metavar="K", commands=RUN),
    Setting("restore", "start from the job's newest committed checkpoint or savepoint in "
            "`checkpoint_dir` if it has one, else from empty state (auto: what a supervisor "
            "passes on every start); the same but an error when there is none (latest); or "
            "a chk-<n> directory or s3://.../<job>/chk-<n>; at any parallelism, into an empty "
            "`state_dir` too", metavar="auto|latest|PATH|URL", commands=RUN,
            command_defaults=(("demo", "auto"),),
            default_doc="none: a fresh start, refused over committed checkpoints without "
            "`fresh`"),
    Setting("fresh", "start from empty state although the job has committed checkpoints (a "
            "start without `restore` refuses to throw them away)", False, Switch(),
            commands=RUN),
    Setting("lease_ms", "the job manager's lease on the job in checkpoint storage "
            "(<job>/leader), renewed every quarter of it: a job manager that cannot renew it "
            "stops, and a standby takes over once it went this long without a renewal",
            60_000, WholeNumber(1000), metavar="MS", commands=RUN),
    Setting("restart_failures", "restarts from the latest checkpoint after a worker fails, at "
            "most N within `restart_interval_ms`; one more fails the job",
            check=WholeNumber(0), metavar="N", commands=RUN,
            default_doc="3 with checkpoints, else 0"),
    Setting("restart_interval_ms", "the interval `restart_failures` counts restarts in "
            "(Flink's failure-rate strategy)", 600_000, WholeNumber(1), metavar="MS",
            commands=RUN),
    Setting("restart_attempts", "old name of `restart_failures` (both with different values "
            "is an error)", check=WholeNumber(0), metavar="N", commands=RUN,
            default_doc="none"),
    Setting("restart_delay_ms", "wait before a restart", 1000, WholeNumber(0), metavar="MS",
            commands=RUN),
    Setting("max_future_ms", "a record whose event time is further ahead of the wall clock is "
            "a dead letter, so one bad timestamp cannot close every window (0: no limit)",
            86_400_000, WholeNumber(0), metavar="MS", commands=RUN),
    Setting("backfill_dir", "live backfills (POST /jobs/{job}/backfills, weir backfill `live`) "
            "load SST files only from under this directory or s3://BUCKET/PREFIX (by prefix, "
            "segment by segment; weir backfill `work_dir`); a cluster job's tasks download "
            "them from S3 with the settings this process forwards", ".weir/backfill", STORAGE,
            metavar="DIR|URL", commands=RUN),
)  # fmt: skip

_LOGGING = (
    Setting("log_level", "DEBUG, INFO, WARNING or ERROR (any case)", "INFO",
            Choice(LOG_LEVELS), commands=SERVED),
    Setting("log_format", "text (one readable line a record) or json (one JSON object a line, "
            "from weir and its workers alike, with time, level, logger, process, message and "
            "each key=value of the message as a field; the weir: lines become records too)",
            "text", Choice(LOG_FORMATS), commands=SERVED),
)  # fmt: skip

# every user setting of a run, in the order ``weir run --help`` lists them
RUN_SETTINGS: tuple[Setting, ...] = (*_WHERE, *_WORKERS, *_STATE, *_CHECKPOINTS, *_LOGGING)
BY_NAME = {s.name: s for s in RUN_SETTINGS}


def _directory(raw: str) -> str:
    if not os.path.isdir(raw):
        raise BadValue("is not a directory", fix="create it first, or unset the variable")
    return raw


# what a run reads from the environment alone
PROFILE_DIR = Setting(
    "profile_dir",
    "cProfile each worker; its stats land in DIR/worker-<i>.prof (an existing directory)",
    check=Parsed(_directory, "an existing directory"),
    metavar="DIR",
    env_only=True,
)
WORKER_START = Setting(
    "worker_start",
    "how local workers start: zygote (forked from a copy of `weir run` made before it starts "
    "any thread, which has imported a worker's modules and holds a SQL job's plan: a start "
    "costs milliseconds) or spawn (a fresh interpreter per worker, importing and planning "
    "again)",
    "zygote",
    Choice(("zygote", "spawn")),
    env_only=True,
)
SPARK_LOCAL_IP = Setting(
    "spark_local_ip",
    "Spark's own: the address of this host; weir's default for `driver_host` and the local "
    "backfill's driver (default: 127.0.0.1)",
    env="SPARK_LOCAL_IP",
    env_only=True,
)
RUN_ENVIRONMENT: tuple[Setting, ...] = (
    PROFILE_DIR,
    WORKER_START,
    SPARK_LOCAL_IP,
    KERNELS_SETTING,
    COLUMNAR_SETTING,
)
