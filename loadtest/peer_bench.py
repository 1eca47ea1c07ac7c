"""weir beside a peer on the same Kafka workload, in one run (issue 10): Quix Streams 3.28 (its
own venv, ``.bench-venvs/quix``, which ``make bench`` installs), weir at parallelism 1 and 2,
and the bare confluent-kafka consume rate as the client's ceiling.

The job on both sides: tumbling 10 s windows of count+sum of ``value`` per ad id, event time
from ``ts``, 1 s of allowed disorder, state in RocksDB, fault tolerance on (weir: a checkpoint
every 5 s; Quix: its changelog topics and a commit every 5 s, its default). Quix runs with
``closing_strategy="partition"``, its fastest. Two topics of 4 partitions written by ``weir
produce`` (uniform ids, 10,000 events a second of event time): 10k ids (10 events per id and
window) and 1M ids (300,000 events, so nearly every event is a key not seen before).
Each rate is events over the time from the first record processed to the last; start-up and
group joins are not counted on either side.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from loadtest.broker import tansu
from loadtest.kafka_bench import JOB, bare_consumer
from loadtest.runs import timed_run
from weir.app.produce import produce

QUIX_PYTHON = Path(".bench-venvs/quix/bin/python")
QUIX_JOB = Path(__file__).with_name("quix_job.py")
WORKLOADS = (("10k_keys", 10_000), ("1m_keys", 1_000_000))


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


def measure(
    workdir: Path, events: int = 300_000, quix_python: Path = QUIX_PYTHON
) -> dict[str, Any]:
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
            weir = {}
            for p in (1, 2):
                run = timed_run(job, workdir / f"peer-{name}-p{p}", p, checkpoint_interval_ms=5000)
                weir[f"p{p}"] = {k: run[k] for k in ("events", "seconds", "events_per_s")}
                weir[f"p{p}"]["checkpoints"] = len(run.get("checkpoints", []))
            best = max(w["events_per_s"] for w in weir.values())
            out[name] = {
                "keys": keys,
                "bare_confluent_events_per_s": bare["events_per_s"],
                "quix_streams": peer,
                "weir": weir,
                "weir_best_over_quix": round(best / peer["events_per_s"], 1),
            }
            print(f"peer_bench: {name}: weir/Quix = {out[name]['weir_best_over_quix']}",
                  file=sys.stderr)  # fmt: skip
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--quix-python", type=Path, default=QUIX_PYTHON)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="weir-peer-bench-"))
    print(json.dumps(measure(work, args.events, args.quix_python), indent=2))
