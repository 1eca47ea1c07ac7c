"""The chaos run (issue 42 item 4; ``make chaos``, ``python -m benchmarks.chaos``): the
state-machine job (``benchmarks.chaos.machine``) reads a Kafka topic (Tansu) that a producer
fills for ``seconds``, checkpoints to S3 (SeaweedFS) under a lease, and is served by ``weir api``;
a seeded driver injects each fault of ``benchmarks.chaos.faults`` at a random time, one at a
time. At the end: no invalid transition, every window's result equal to the brute-force model,
every output exactly once, and each fault's recovery time, as one JSON report.

Everything is started here, on loopback, and stopped here (each part also stops within its
own bound); the whole run ends within ``seconds`` + ``END_TIMEOUT_S`` + the faults' bounds.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.chaos import machine
from benchmarks.chaos.faults import FAULTS, KINDS, Rig, schedule
from benchmarks.chaos.parts import Broker, Producer, Supervised, read_jsonl
from tests.support import WEIR, wait_until
from tests.support.broker import free_port
from tests.support.kafka_broker import create_topic
from tests.support.s3_server import S3Server
from tests.support.spark_cluster import SparkCluster
from weir.state.checkpoints import CheckpointStorage

log = logging.getLogger(__name__)

PARTITIONS = 2
KEYS = 40
END_TIMEOUT_S = 180.0  # after the input ends: every window fired and was committed
LEASE_MS = 15_000  # rides out an S3 outage of ~8 s (0.55 of it); a dead holder is seen at once


def chaos(
    work: Path,
    seconds: float = 180.0,
    seed: int = 1,
    rate: float = 200.0,
    kinds: tuple[str, ...] = KINDS,
    repeat: int = 2,
    outage_s: float = 5.0,
    cluster: bool = False,
) -> dict[str, Any]:
    """Run the job for ``seconds`` of input while ``repeat`` faults of each of ``kinds`` are
    injected; returns the report (``ok``: every check passed). ``cluster``: the job runs on a
    Spark standalone cluster on loopback (two one-core workers), a ``worker`` fault kills an
    executor and a ``jobmanager`` fault the driver with its JVM."""
    began = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    s3 = S3Server(work / "s3")
    broker = Broker(work)
    stop = threading.Event()
    rig: Rig | None = None
    spark = SparkCluster(work / "spark", workers=2) if cluster else None
    try:
        if spark is not None:
            spark.start()
        s3.start()
        broker.start()
        os.environ.update(s3.env)  # the driver reads the lease too
        create_topic(broker.bootstrap, "events", PARTITIONS)
        evs = machine.events(int(seconds * rate), KEYS, seed)
        want = machine.model(evs)
        outs = work / "machine.jsonl", work / "windows.jsonl"
        rig = _rig(work, seed, s3, broker, outs, outage_s, spark)
        wait_until(rig.committed_past(None), 120.0, what="the job's first checkpoint")
        producer = Producer(broker.bootstrap, "events", evs, machine.end_marker(evs[-1]["ts"]),
                            rate, PARTITIONS, stop)  # fmt: skip
        rig.started = time.monotonic()  # faults are timed from the input's start
        producer.start()
        faults = _inject(rig, [k for k in kinds for _ in range(repeat)], seconds)
        producer.done.wait(seconds * 3 + 120)
        end = time.monotonic()

        def finished() -> bool:
            return machine.complete(want, read_jsonl(outs[0]), _windows(outs[1]))

        done = _wait(finished, END_TIMEOUT_S)
        drained_s = round(time.monotonic() - end, 2)
        rig.jobmanager.stop()
        rig.api.stop()
        verdict = machine.verdict(want, read_jsonl(outs[0]), _windows(outs[1]))
        summary = {"seed": seed, "seconds": seconds, "rate": rate, "events": len(evs),
                   "windows": len(want.windows), "cycles": sum(want.cycles.values()),
                   "complete": done, "drained_s": drained_s,
                   "wall_s": round(time.monotonic() - began, 1)}  # fmt: skip
        return _report(summary, faults, verdict, producer, rig)
    finally:
        stop.set()
        if rig is not None:
            rig.jobmanager.stop()
            rig.api.stop()
        broker.stop()
        s3.stop()
        if spark is not None:
            spark.stop()


def _rig(
    work: Path, seed: int, s3: S3Server, broker: Broker, outs: tuple[Path, Path],
    outage_s: float, spark: SparkCluster | None,
) -> Rig:  # fmt: skip
    """Write the job file; start ``weir run`` and ``weir api`` under their supervisor loops."""
    env = {**os.environ, **s3.env, "PYTHONUNBUFFERED": "1"}
    if spark is not None:
        env.update(spark.client_env())
    env = {k: v for k, v in env.items() if not k.startswith("WEIR_")}
    job_file = work / "chaos_job.py"
    job_file.write_text(machine.job_text(broker.bootstrap, "events", str(outs[0]), str(outs[1])))
    where = s3.url(f"chaos-{seed}")
    jm_flags = (
        "--checkpoint-dir", where, "--checkpoint-interval-ms", "500", "--lease-ms",
        str(LEASE_MS), "--restore", "auto", "--parallelism", "2", "--no-api",
        "--restart-delay-ms", "200",
        *(("--master", spark.master_url) if spark is not None else ()),
    )  # fmt: skip
    state = work / "state"
    jm = Supervised(
        "jobmanager", [*WEIR, "run", str(job_file), "--state-dir", str(state), *jm_flags],
        env, work / "jobmanager.log", work,
    )  # fmt: skip
    port = free_port()
    api = Supervised(
        "api", [*WEIR, "api", str(job_file), "--state-dir", str(state), "--checkpoint-dir",
                where, "--api-port", str(port)],
        env, work / "api.log", work,
    )  # fmt: skip
    jm.start()
    api.start()
    return Rig(
        work, job_file, CheckpointStorage(where, "chaos"), jm, api, f"http://127.0.0.1:{port}",
        s3, broker, env, jm_flags, state, outage_s, random.Random(seed), spark,
    )  # fmt: skip


def _windows(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(path) if r["key"] != machine.END_KEY]


def _wait(fn: Any, timeout_s: float) -> bool:
    try:
        wait_until(fn, timeout_s, interval=0.5, what="every window and cycle in the output")
    except AssertionError:
        return False
    return True


def _inject(rig: Rig, kinds: list[str], seconds: float) -> list[dict[str, Any]]:
    done = []
    for at, kind in schedule(kinds, seconds, rig.rng):
        ahead = rig.started + at - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)  # the seeded moment of the next fault
        t0 = time.monotonic()
        log.warning("chaos: fault %s at %.1f s", kind, t0 - rig.started)
        try:
            result = FAULTS[kind](rig)
            result["ok"] = True
        except AssertionError as exc:
            result = {"ok": False, "error": str(exc)[:500]}
        done.append({"kind": kind, "at_s": round(t0 - rig.started, 1), **result})
        log.warning("chaos: %s", done[-1])
    return done


def _report(
    summary: dict[str, Any], faults: list[dict[str, Any]], verdict: machine.Verdict,
    producer: Producer, rig: Rig,
) -> dict[str, Any]:  # fmt: skip
    counts: dict[str, int] = {}
    recovery: dict[str, list[float]] = {}
    for f in faults:
        counts[f["kind"]] = counts.get(f["kind"], 0) + 1
        if "recovery_s" in f:
            recovery.setdefault(f["kind"], []).append(f["recovery_s"])
    ok = (
        verdict.ok and summary["complete"] and all(f["ok"] for f in faults)
        and producer.error is None
    )  # fmt: skip
    return {
        "ok": ok,
        **summary,
        "producer_error": producer.error,
        "fault_counts": counts,
        "recovery_s": recovery,
        "faults": faults,
        "jobmanager_starts": rig.jobmanager.starts,
        "api_starts": rig.api.starts,
        "verdict": {**asdict(verdict), "ok": verdict.ok},
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.chaos [--seconds S] [--seed N] [--rate R] [--repeat K]``."""
    import argparse
    import json
    import tempfile

    p = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    p.add_argument("--seconds", type=float, default=180.0, help="seconds of input")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=200.0, help="events a second")
    p.add_argument("--repeat", type=int, default=2, help="faults of each kind")
    p.add_argument("--outage-s", type=float, default=5.0, help="S3 down / broker paused for")
    p.add_argument("--faults", default=",".join(KINDS), help=f"of {','.join(KINDS)}")
    p.add_argument("--out", type=Path, default=None, help="also write the report here")
    p.add_argument("--work", type=Path, default=None, help="keep logs and outputs here")
    p.add_argument("--cluster", action="store_true", help="on a Spark standalone cluster")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        p.error(f"unknown fault {sorted(unknown)}; use some of {','.join(KINDS)}")
    with tempfile.TemporaryDirectory(prefix="weir-chaos-") as tmp:
        report = chaos(args.work or Path(tmp), args.seconds, args.seed, args.rate, kinds,
                       args.repeat, args.outage_s, args.cluster)  # fmt: skip
    text = json.dumps(report, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
