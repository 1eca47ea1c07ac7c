"""``weir backfill``: run a job's window operator over historical input (files or Kafka offset
ranges) on Spark, then load the windows into a savepoint (``--into-savepoint``) or a running job
(``--live``)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.app.progress import SparkProgress, StatusLine
from weir.engine.errors import ConfigError

if TYPE_CHECKING:
    from weir.engine.spark.backfill import BackfillResult
    from weir.engine.spark.inputs import Inputs

# what the Spark extra (weir[spark]: pyspark[sql]) installs and the backfill needs
SPARK_MODULES = ("pyspark", "pyarrow", "pandas")


def require_spark() -> None:
    """One line naming the extra when Spark is not installed (weir itself does not need it)."""
    for name in SPARK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise ConfigError(
                f"weir backfill runs on Spark and {name} is not installed; install weir's Spark "
                "extra: pip install 'weir[spark]'"
            ) from None


def main(args: Any) -> int:
    require_spark()
    from weir.engine.runtime.loader import load_job
    from weir.engine.spark.backfill import backfill_operator
    from weir.engine.spark.inputs import resolve_inputs
    from weir.engine.spark.load import make_savepoint

    if bool(args.into_savepoint) == bool(args.live):
        raise ConfigError("weir backfill needs exactly one of --into-savepoint DIR or --live URL")
    if (
        args.__dict__["from"] is not None
        and args.to is not None
        and args.to <= args.__dict__["from"]
    ):
        raise ConfigError(f"--to={args.to} is not after --from={args.__dict__['from']}")
    job_file = Path(args.job_file)
    job = load_job(job_file)
    op = backfill_operator(job, args.op)
    inputs = resolve_inputs(args.input, args.format, job)  # Kafka offset ranges are fixed here
    print(
        f"weir backfill: {op.name} of job {job.name} on Spark {args.master}…",
        file=sys.stderr,
        flush=True,
    )
    result = _compute(args, job_file, Path(args.work_dir) / job.name, op.name, inputs)
    summary: dict[str, Any] = {"backfill": result.to_json()}
    if args.into_savepoint:
        summary["savepoint"] = make_savepoint(
            job, op, result, args.into_savepoint, Path(args.work_dir), args.parallelism
        )
    else:
        summary["live"] = _load_live(args, job.name, op.name, result.to_json())
    print(json.dumps(summary))
    return 0


def _compute(args: Any, job_file: Path, work_dir: Path, op: str, inputs: Inputs) -> BackfillResult:
    """The windows on Spark, its stages shown on stderr while they run."""
    from weir.engine.spark.backfill import run_backfill, spark_session

    spark = spark_session(args.master)
    try:
        with SparkProgress(spark.sparkContext, StatusLine()):
            return run_backfill(
                job_file,
                inputs,
                work_dir,
                op_name=op,
                from_ms=args.__dict__["from"],
                to_ms=args.to,
                master=args.master,
                session=spark,
            )
    finally:
        spark.stop()


def _load_live(args: Any, job: str, op: str, result: dict[str, Any]) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {args.api_token}"} if args.api_token else {}
    url = f"{args.live.rstrip('/')}/jobs/{job}/backfills"
    body = {
        "op": op,
        "path": str(Path(result["sst_dir"]).resolve()),
        "min_end": result["min_end"],
        "max_end": result["max_end"],
        "windows": result["windows"],
    }
    try:
        r = httpx.post(url, json=body, headers=headers, timeout=600, trust_env=False)
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot reach the job's API at {args.live} ({exc})") from None
    answer: dict[str, Any] = r.json()
    if r.status_code != 200:
        message = answer.get("error", {}).get("message", r.text)
        raise ConfigError(f"the running job refused the backfill ({r.status_code}): {message}")
    return answer
