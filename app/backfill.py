"""``weir backfill``: run a job's window operators over historical input (files or Kafka offset
ranges) on Spark, every operator (or ``--op``'s) in one Spark application, then load the
windows into one savepoint (``--into-savepoint``) or a running job (``--live``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.app.interrupt import CTRL_C
from weir.app.progress import SparkProgress, StatusLine
from weir.base.errors import ConfigError
from weir.base.extras import require
from weir.base.settings import named
from weir.state.objectstore import StorageLocation, storage_location

if TYPE_CHECKING:
    from weir.engine.spark.backfill import BackfillResult
    from weir.engine.spark.inputs import BackfillInputs

BACKFILL_SLOTS_S = 120.0  # a cluster with every core held by other applications: give up then


def main(args: Any) -> int:
    require("spark", "weir backfill (it runs on Spark)")
    from weir.engine.runtime.control.cluster import check_reachable
    from weir.engine.runtime.loader import load_job
    from weir.engine.spark.inputs import resolve_inputs
    from weir.engine.spark.load import make_savepoint
    from weir.engine.spark.plan import backfill_operators

    if bool(args.into_savepoint) == bool(args.live):
        raise ConfigError(
            f"weir backfill needs exactly one of {named('into_savepoint')} DIR or "
            f"{named('live')} URL"
        )
    if args.from_ms is not None and args.to_ms is not None and args.to_ms <= args.from_ms:
        raise ConfigError(
            f"{named('to_ms')}={args.to_ms} is not after {named('from_ms')}={args.from_ms}"
        )
    job_file = Path(args.job_file)
    job = load_job(job_file)
    ops = [op.name for op in backfill_operators(job, args.op)]
    inputs = resolve_inputs(args.input, args.format, job)  # Kafka offset ranges are fixed here
    print(
        f"weir backfill: {', '.join(ops)} of job {job.name} on Spark {args.master}…",
        file=sys.stderr,
        flush=True,
    )
    work = storage_location(args.work_dir, named("work_dir"))
    _note_shared_dir(args.master, work)
    check_reachable(args.master)  # in seconds, not after Spark's minute of retries
    with CTRL_C.doing(f"the backfill of job {job.name} on Spark"):
        results = _compute(args, job_file, work.child(job.name), ops, inputs)
    # by operator, as a savepoint's ``backfill`` and ``GET /jobs/{job}`` name them
    summary: dict[str, Any] = {"backfill": {r.op: r.to_json() for r in results}}
    if args.into_savepoint:
        summary["savepoint"] = make_savepoint(
            job, results, args.into_savepoint, work.path, args.parallelism
        )
    else:
        summary["live"] = {r.op: _load_live(args, job.name, r.op, r.to_json()) for r in results}
    print(json.dumps(summary))
    return 0


def _note_shared_dir(master: str, work: StorageLocation) -> None:
    """On a cluster the Spark tasks write the files on their executors' hosts: a directory
    works only when it is one every executor and this driver mount at the same path."""
    if work.path is not None and not master.startswith("local"):
        print(
            f"weir backfill: --work-dir {work.path} is a directory; on a cluster every executor "
            "and this driver must mount it at the same path (or use --work-dir "
            "s3://BUCKET/PREFIX)",
            file=sys.stderr,
            flush=True,
        )


def _compute(
    args: Any, job_file: Path, work: StorageLocation, ops: list[str], inputs: BackfillInputs
) -> list[BackfillResult]:
    """Every operator's windows on one Spark session (one application), one operator after
    another, each under ``work/<op>``; its stages shown on stderr while they run."""
    from weir.engine.spark.backfill import run_backfill

    spark, owned = _session(args.master)
    try:
        if not args.master.startswith("local"):
            from weir.engine.runtime.control.cluster import wait_for_slots

            # Spark would wait for cores forever, warning every 15 s; a clear exit 2 instead
            wait_for_slots(spark, 1, BACKFILL_SLOTS_S, barrier=False)
        with SparkProgress(spark.sparkContext, StatusLine()):
            return [
                run_backfill(
                    job_file,
                    inputs,
                    _where(work.child(op)),
                    op_name=op,
                    from_ms=args.from_ms,
                    to_ms=args.to_ms,
                    master=args.master,
                    session=spark,
                )
                for op in ops
            ]
    finally:
        if owned:
            spark.stop()


def _where(place: StorageLocation) -> Path | str:
    return place.path if place.path is not None else place.url


def _session(master: str) -> tuple[Any, bool]:
    """The SparkSession to run on, and whether this backfill started it (and so stops it). A
    process that already holds an active session on ``master`` (a test session running the
    command in-process, a notebook) lends it: a second one cannot start beside it, and stopping
    it would pull it from under its owner."""
    from pyspark.sql import SparkSession

    from weir.engine.spark.backfill import spark_session

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master == master:
        return active, False
    return spark_session(master), True


def _load_live(args: Any, job: str, op: str, result: dict[str, Any]) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {args.api_token}"} if args.api_token else {}
    url = f"{args.live.rstrip('/')}/jobs/{job}/backfills"
    sst = storage_location(result["sst_dir"])
    body = {
        "op": op,
        # what the job reads: the objects' URL, or the directory's absolute path
        "path": sst.url if sst.path is None else str(sst.path.resolve()),
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
