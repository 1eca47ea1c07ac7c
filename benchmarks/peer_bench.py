"""weir beside a peer on the same Kafka workload, in one run (issue 10): Quix Streams 3.28 (its
own venv, ``.bench-venvs/quix``, which ``make bench`` installs), weir at parallelism 1 and 2,
and the bare confluent-kafka consume rate as the client's ceiling.

The job on both sides: tumbling 10 s windows of count+sum of ``value`` per ad id, event time
from ``ts``, 1 s of allowed disorder, state in RocksDB, fault tolerance on (weir: a checkpoint
every 5 s; Quix: its changelog topics and a commit every 5 s, its default). Quix runs with
``closing_strategy="partition"``, its fastest. Two topics of 4 partitions written by ``weir
produce`` (uniform ids, 10,000 events a second of event time): 10k ids (10 events per id and
window) and 1M ids (2M events by default, so most events are the first of their id in a window).
Each rate is events over the time from the first record processed to the last (weir: the
first record any worker read to the last worker's end, its final windows fired and written);
start-up and group joins are not counted on either side. Beside each rate, peak resident memory:
Quix's process, and the sum over weir's worker processes (sampled from ``/proc``: ``VmHWM``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.kafka_bench import JOB, bare_consumer
from benchmarks.runs import timed_run
from tests.support.broker import tansu
from tests.support.procs import worker_pids
from weir.app.produce import produce

QUIX_PYTHON = Path(".bench-venvs/quix/bin/python")
QUIX_JOB = Path(__file__).with_name("quix_job.py")
WORKLOADS = (("10k_keys", 10_000), ("1m_keys", 1_000_000))
EVENTS = 2_000_000
SAMPLE_S = 0.1


def peak_rss(pid: int) -> int:
    """``pid``'s peak resident set (``VmHWM``) in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextmanager
def workers_peak_rss() -> Iterator[dict[int, int]]:
    """While the block runs, the peak RSS of each worker this process spawned, by pid (a peak
    only grows, so the last sample before a worker exits is within one sample of its peak)."""
    peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            for pid in worker_pids(os.getpid()):
                peaks[pid] = max(peaks.get(pid, 0), peak_rss(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        done.set()
        sampler.join()


def _mib(n: int) -> float:
    return round(n / 2**20, 1)


def quix(python: Path, bootstrap: str, topic: str, events: int) -> dict[str, Any]:
    if not python.exists():
        raise RuntimeError(
            f"{python} is missing: `make bench` installs Quix Streams in its own venv "
            "(or: python3 -m venv .bench-venvs/quix && "
            ".bench-venvs/quix/bin/pip install quixstreams==3.28.0)"
        )
    done = subprocess.run(
        [str(python), str(QUIX_JOB), bootstrap, topic, "--events", str(events)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Quix Streams failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def weir_run(job: Path, state_dir: Path, parallelism: int) -> dict[str, Any]:
    """A weir run of ``job`` to its end: its rate from the first record and its workers' peak
    RSS."""
    with workers_peak_rss() as peaks:
        run = timed_run(job, state_dir, parallelism, checkpoint_interval_ms=5000)
    seconds = run["seconds_from_first_record"]
    return {
        "events": run["events"],
        "seconds": seconds,
        "events_per_s": round(run["events"] / seconds),
        "checkpoints": len(run.get("checkpoints", [])),
        "peak_rss_mib": _mib(sum(peaks.values())),
    }


def measure(workdir: Path, events: int = EVENTS, quix_python: Path = QUIX_PYTHON) -> dict[str, Any]:
    out: dict[str, Any] = {"events_per_workload": events, "partitions": 4}
    with tansu(workdir) as bootstrap:
        for name, keys in WORKLOADS:
            topic = f"peer-{name}"
            produced = produce(
                bootstrap, topic, count=events, keys=keys, skew=0.0, partitions=4,
                clock="synthetic", step=0.1, progress=False,
            )  # fmt: skip
            print(f"peer_bench: {name}: {produced['events']} events in {topic}", file=sys.stderr)
            bare = bare_consumer(bootstrap, topic, produced["events"], decode=False)
            peer = quix(quix_python, bootstrap, topic, events)
            print(f"peer_bench: {name}: Quix Streams {peer['events_per_s']} events/s",
                  file=sys.stderr)  # fmt: skip
            job = workdir / f"peer_{name}.py"
            job.write_text(JOB.format(bootstrap=bootstrap, topic=topic))
            weir = {f"p{p}": weir_run(job, workdir / f"peer-{name}-p{p}", p) for p in (1, 2)}
            best = max(w["events_per_s"] for w in weir.values())
            out[name] = {
                "keys": keys,
                "bare_confluent_events_per_s": bare["events_per_s"],
                "quix_streams": peer,
                "weir": weir,
                "weir_p1_over_quix": round(weir["p1"]["events_per_s"] / peer["events_per_s"], 1),
                "weir_best_over_quix": round(best / peer["events_per_s"], 1),
                "weir_p1_rss_over_quix": round(
                    weir["p1"]["peak_rss_mib"] / peer["peak_rss_mib"], 2
                ),
            }
            print(f"peer_bench: {name}: weir/Quix = {out[name]['weir_best_over_quix']}",
                  file=sys.stderr)  # fmt: skip
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=EVENTS, help="per workload")
    parser.add_argument("--quix-python", type=Path, default=QUIX_PYTHON)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="weir-peer-bench-"))
    print(json.dumps(measure(work, args.events, args.quix_python), indent=2))
