"""``make bench-cluster``: cluster mode (``weir run --master spark://…``, issue 19) beside local
runs at parallelism 2, every ratio from one run, on a standalone Spark cluster on this host
(``SparkCluster``: a master and two one-core workers on loopback). The cluster's executors and
the local runs share this host's cores, so neither side has cores of its own.

1. ``throughput``: the Kafka benchmark's job (``kafka_bench.JOB``) over one Tansu topic, local
   and on the cluster in rounds (the order rotating), plus a local run with the TCP exchange (the
   cluster's transport) that separates the exchange's cost from the rest. Each run is a real
   ``weir run`` timed as ``runs.timed_run`` times one: from the workers' run start to their
   finish, from their own status, so Spark's start-up (~25 s) is not in it. Goal: cluster /
   local >= 0.8. ``<mode>_cpu_s``: each part's CPU within the timed part (job manager, local
   workers or Spark driver, the executors' JVMs and Python processes).
2. ``queries``: the last round's two finished jobs, still serving: the same point lookups on
   random keys that both workers own, sequential and concurrent, alternating between the two
   (local, cluster, cluster, local); p50/p99 each. Goal: cluster p50 within +5 ms of local.
3. ``freshness``: ``freshness.py``'s probe (an event's age when a query first sees it, through
   the exchange) on the cluster and locally, both with 1 s checkpoints. Goal: p99 <= 250 ms.
4. ``recovery``: that cluster job, still running, loses executor 0 (SIGKILL, JVM and Python):
   seconds from the kill to the job manager noticing, to its new barrier stage ("restarted
   from"), and to the first record the new workers read. Goal: <= 30 s to the first record.

Each cluster job costs a Spark application's start-up, so sections 1-2 share their last round's
jobs and sections 3-4 one job. Checkpoints go to a directory: every executor is on this host.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from benchmarks import cluster_queries, freshness, kafka_bench
from benchmarks.runs import serving
from tests.support import procs
from tests.support.broker import tansu
from tests.support.spark_cluster import SparkCluster
from weir.app.produce import produce
from weir.engine.runtime.config import RunConfig

_DEFAULTS = RunConfig(job_file=Path("-"))
START_S = 180.0  # a cluster job's Spark application and executors: ~25 s, more on a busy host
RUN_S = 600.0
RECOVERY_S = 120.0
KAFKA_JOB, KAFKA_OP = "kbench", "stats"


@dataclass(frozen=True)
class Settings:
    events: int = 500_000  # in the Kafka topic
    keys: int = 10_000
    rounds: int = 3  # of throughput: local, cluster, local TCP, the order rotating
    fresh_rate: int = 5_000  # events/s of the freshness job
    fresh_seconds: float = 4.0
    queries: int = 2_000  # lookups per side and pattern
    concurrency: int = 4
    checkpoint_interval_ms: int = 1_000


SMOKE = Settings(events=20_000, rounds=1, fresh_seconds=1.0, queries=200)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


@dataclass
class Place:
    workdir: Path
    cluster: SparkCluster
    settings: Settings

    def cluster_flags(self) -> tuple[str, ...]:
        store = self.workdir / "cluster-checkpoints"
        return ("--master", self.cluster.master_url, "--checkpoint-dir", str(store))


# -- CPU of a run's parts, from /proc -----------------------------------------------------------


def _run_pid(state_dir: Path) -> int:
    """The ``weir run`` process of ``state_dir`` (its command line names it)."""
    marker = str(state_dir).encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                return int(entry.name)
        except OSError:
            continue
    raise RuntimeError(f"no weir run process for {state_dir}")


def _component_cpu(place: Place, run_pid: int, mode: str) -> dict[str, float]:
    """CPU seconds so far of each part of a run: the ``weir run`` process (job manager, API),
    its children (local workers; on a cluster the Spark driver's JVM), and on a cluster the
    executors' JVMs and their Python processes (PySpark's daemon and the weir tasks)."""
    out = {
        "job_manager": procs.cpu_seconds([run_pid]),
        "driver_jvm" if mode == "cluster" else "workers": procs.cpu_seconds(
            sorted(procs.children(run_pid))
        ),
    }
    if mode == "cluster":
        out["executor_jvm"] = procs.cpu_seconds([e.pid for e in place.cluster.executor_pids()])
        out["executor_python"] = procs.cpu_seconds(place.cluster.python_worker_pids())
    return out


# -- 1. throughput -------------------------------------------------------------------------------


def _job_status(client: httpx.Client, job: str) -> dict[str, Any]:
    r = client.get(f"/jobs/{job}")
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    if body["state"] == "failed":
        raise RuntimeError(f"job {job} failed: {body}")
    return body


Cpu = Callable[[], dict[str, float]]


def _follow_run(client: httpx.Client, cpu: Cpu, t0: float) -> dict[str, Any]:
    """Wait for the job to finish; its rate as ``timed_run`` computes one, ``cpu()``'s growth
    from the last poll before every worker was reading to the first with all done, and the
    seconds from ``t0`` (the process's start) to every worker reading."""
    deadline = time.monotonic() + START_S + RUN_S
    cpu_at_start: dict[str, float] = {}
    before: dict[str, float] = {}
    start_s = 0.0
    while time.monotonic() < deadline:
        # taken before the status is read: when it says "not yet", the run had not started
        # (but for the workers' status interval, 100 ms), however short the run
        now = cpu() if not cpu_at_start else cpu_at_start
        body = _job_status(client, KAFKA_JOB)
        workers = body["workers"]
        if not cpu_at_start and all(w["run_started_at"] for w in workers):
            cpu_at_start, start_s = before or now, time.monotonic() - t0
        before = now
        if body["state"] == "finished" and all(w["finished_at"] for w in workers):
            used = {k: round(v - cpu_at_start.get(k, 0.0), 2) for k, v in cpu().items()}
            started = min(w["run_started_at"] for w in workers)
            seconds = max(w["finished_at"] for w in workers) - started
            events = sum(w["records_in"] for w in workers)
            return {
                "events": events,
                "seconds": round(seconds, 3),
                "events_per_s": round(events / seconds),
                "hosts": [w["host"] for w in workers],
                "cpu_s": used,
                "start_s": round(start_s, 1),
            }
        time.sleep(0.05)
    raise TimeoutError(f"the {KAFKA_JOB} job did not finish in {START_S + RUN_S:.0f} s")


@contextmanager
def _finished_run(place: Place, job: Path, mode: str, n: int) -> Iterator[tuple[str, Any]]:
    """A ``weir run`` of ``job`` at p=2 in ``mode`` (local, local_tcp, cluster), run to its
    end and still serving; yields its URL and figures."""
    flags = {
        "local": (),
        "local_tcp": ("--exchange-transport", "tcp"),
        "cluster": place.cluster_flags(),
    }[mode]
    state_dir = place.workdir / f"state-{mode}-{n}"

    t0 = time.monotonic()
    with (
        serving(job, state_dir, "--parallelism", "2", *flags, start_timeout_s=START_S) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        run_pid = _run_pid(state_dir)
        figures = _follow_run(client, lambda: _component_cpu(place, run_pid, mode), t0)
        yield url, figures
    shutil.rmtree(state_dir, ignore_errors=True)


MODES = ("local", "cluster", "local_tcp")


def throughput_and_queries(place: Place) -> dict[str, Any]:
    s = place.settings
    with tansu(place.workdir) as bootstrap:
        produce(
            bootstrap, "cbench", count=s.events, keys=s.keys, partitions=4, clock="synthetic",
            progress=False,
        )  # fmt: skip
        job = place.workdir / "cluster_kafka_job.py"
        job.write_text(kafka_bench.JOB.format(bootstrap=bootstrap, topic="cbench"))
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for r in range(s.rounds - 1):
            for mode in _order(r):
                with _finished_run(place, job, mode, r) as (_, figures):
                    runs[mode].append(figures)
        with ExitStack() as last:
            urls = {}
            for mode in _order(s.rounds - 1):
                if mode == "local_tcp":
                    with _finished_run(place, job, mode, s.rounds) as (_, figures):
                        runs[mode].append(figures)
                    continue
                urls[mode], figures = last.enter_context(_finished_run(place, job, mode, s.rounds))
                runs[mode].append(figures)
            queries = cluster_queries.measure(urls, s.queries, s.concurrency, KAFKA_JOB, KAFKA_OP)
    return {"throughput": _throughput_summary(runs, s.events), "queries": queries}


def _order(r: int) -> tuple[str, ...]:
    """Round ``r``'s order: each mode first, second and third in turn (a broker's warm-up or
    the host's drift falls on all three)."""
    k = r % len(MODES)
    return MODES[k:] + MODES[:k]


def _per_cpu_s(run: dict[str, Any]) -> float:
    cpu: dict[str, float] = run["cpu_s"]
    return float(run["events"]) / max(0.01, sum(cpu.values()))


def _throughput_summary(runs: dict[str, list[dict[str, Any]]], events: int) -> dict[str, Any]:
    rate = {m: [r["events_per_s"] for r in rs] for m, rs in runs.items()}
    for mode, rs in runs.items():
        if any(r["events"] != events for r in rs):
            raise RuntimeError(f"a {mode} run read {[r['events'] for r in rs]}, not {events}")
    per_round = [c / loc for c, loc in zip(rate["cluster"], rate["local"], strict=True)]
    # events per CPU-second of every part: what a loaded host's scheduling does not move
    per_cpu = {m: [_per_cpu_s(r) for r in rs] for m, rs in runs.items()}
    cpu_ratio = [c / loc for c, loc in zip(per_cpu["cluster"], per_cpu["local"], strict=True)]
    tcp = [t / loc for t, loc in zip(rate["local_tcp"], rate["local"], strict=True)]
    return {
        "events": events,
        "rounds": len(per_round),
        **{f"{m}_events_per_s": rs for m, rs in rate.items()},
        "cluster_over_local_median": _median(per_round),
        "cluster_over_local_best": round(max(rate["cluster"]) / max(rate["local"]), 3),
        "local_tcp_over_local_median": _median(tcp),
        **{f"{m}_events_per_cpu_s": [round(x) for x in xs] for m, xs in per_cpu.items()},
        "cluster_over_local_per_cpu_median": _median(cpu_ratio),
        # CPU seconds of each part within the timed part, per run: where the time went
        **{f"{m}_cpu_s": [r["cpu_s"] for r in rs] for m, rs in runs.items()},
        "cluster_seconds": [r["seconds"] for r in runs["cluster"]],
        # from starting `weir run` to every worker reading: Spark's start-up, not timed above
        "cluster_start_s": [r["start_s"] for r in runs["cluster"]],
        "local_start_s": [r["start_s"] for r in runs["local"]],
        "cluster_hosts": runs["cluster"][-1]["hosts"],
    }


# -- 3. freshness and 4. recovery ----------------------------------------------------------------


class LogTimes:
    """The wall-clock time each line of a ``weir run`` log was read, as it is written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def __call__(self, line: str) -> None:
        self.lines.append((time.time(), line))

    def first(self, text: str, after: float) -> float | None:
        return next((t for t, ln in list(self.lines) if t >= after and text in ln), None)


def freshness_and_recovery(place: Place) -> dict[str, Any]:
    s = place.settings
    checkpoints = ("--checkpoint-interval-ms", str(s.checkpoint_interval_ms))
    local = freshness.measure(
        place.workdir, rate=s.fresh_rate, parallelism=2, seconds=s.fresh_seconds,
        buffer_timeout_ms=_DEFAULTS.buffer_timeout_ms, extra_args=checkpoints, label="-local",
    )  # fmt: skip
    log = LogTimes()
    flags = (*place.cluster_flags(), *checkpoints, "--log-level", "INFO")
    with (
        serving(
            freshness.write_job(place.workdir, s.fresh_rate), place.workdir / "state-fresh-cluster",
            "--parallelism", "2", *flags, start_timeout_s=START_S, on_line=log,
        ) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):  # fmt: skip
        key = freshness.probe_key(2)
        ages = freshness.probe(client, key, warmup_s=1.5, seconds=s.fresh_seconds)
        recovery = _recover(client, place.cluster, log)
    cluster = {"rate": s.fresh_rate, "parallelism": 2, **freshness.summary(ages)}
    return {
        "freshness": {
            "checkpoint_interval_ms": s.checkpoint_interval_ms,
            "local": local,
            "cluster": cluster,
            "cluster_minus_local_p99_ms": round(cluster["p99_ms"] - local["p99_ms"], 1),
        },
        "recovery": recovery,
    }


def _checkpointed(client: httpx.Client, n: int) -> bool:
    return (_job_status(client, "fresh").get("last_checkpoint") or 0) >= n


def _restarted(body: dict[str, Any], killed_at: float) -> bool:
    workers = body["workers"]
    # the API shows a time not reached yet as None
    new = all((w["run_started_at"] or 0.0) > killed_at for w in workers)
    return body["restarts"] >= 1 and new and sum(w["records_in"] for w in workers) > 0


def _recover(client: httpx.Client, cluster: SparkCluster, log: LogTimes) -> dict[str, Any]:
    """Kill executor 0 once two checkpoints are complete; seconds to each step of the restart."""
    _wait(lambda: _checkpointed(client, 2), 60.0, "two checkpoints")
    killed_at = time.time()
    killed = cluster.kill_executor(0)
    if not killed:
        raise RuntimeError("no executor of the job ran on the cluster's first worker")
    new_executor: list[float] = []

    def restarted() -> dict[str, Any] | None:
        fresh = [e for e in cluster.executor_pids() if e.worker == 0 and e.pid not in killed]
        if fresh and not new_executor:
            new_executor.append(time.time())  # the worker launched a JVM in its place
        body = _job_status(client, "fresh")
        return body if _restarted(body, killed_at) else None

    body = _wait(restarted, RECOVERY_S, "the restarted workers to read records")
    seen_at = time.time()
    first = min(t for w in body["workers"] if (t := w["first_record_at"] or 0.0) > killed_at)
    noticed = log.first("restarting (attempt", killed_at)
    resubmitted = log.first("restarted from", killed_at)

    def since(t: float | None) -> float | None:
        return None if t is None else round(t - killed_at, 2)

    return {
        "restart_delay_ms": _DEFAULTS.restart_delay_ms,
        "restarts": body["restarts"],
        "noticed_s": since(noticed),
        "new_executor_s": since(new_executor[0] if new_executor else None),
        "stage_resubmitted_s": since(resubmitted),
        "first_record_s": since(first),
        "status_shows_records_s": since(seen_at),
    }


def _wait(fn: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := fn()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.05)
    return found


# -- the whole benchmark -------------------------------------------------------------------------


def measure(workdir: Path, cluster: SparkCluster, settings: Settings) -> dict[str, Any]:
    """Every section on ``cluster`` (two one-core workers), in ``workdir``."""
    place = Place(workdir, cluster, settings)
    out: dict[str, Any] = {"settings": settings.__dict__, "seconds": {}}
    for name, section in (
        ("throughput_and_queries", throughput_and_queries),
        ("freshness_and_recovery", freshness_and_recovery),
    ):
        t0 = time.monotonic()
        out.update(section(place))
        out["seconds"][name] = round(time.monotonic() - t0, 1)
    return out


def run(workdir: Path, settings: Settings = Settings()) -> dict[str, Any]:  # noqa: B008
    """``measure`` on a cluster of its own (``make bench``'s ``cluster`` section)."""
    workdir.mkdir(parents=True, exist_ok=True)
    with SparkCluster(workdir / "spark", workers=2) as cluster, cluster.clients_here():
        out = measure(workdir, cluster, settings)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=Settings.events, help="in the topic")
    parser.add_argument("--rounds", type=int, default=Settings.rounds, help="throughput rounds")
    parser.add_argument("--queries", type=int, default=Settings.queries, help="per side")
    parser.add_argument("--smoke", action="store_true", help="the smallest configuration")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    settings = SMOKE if args.smoke else Settings()
    if not args.smoke:
        settings = replace(settings, events=args.events, rounds=args.rounds, queries=args.queries)
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="weir-cluster-bench-"))
    print("cluster bench: throughput, queries, freshness, recovery…", file=sys.stderr, flush=True)
    try:
        result = {
            "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
            **run(workdir, settings),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    (args.out / "cluster-bench.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
