"""CPU per event of the ``single_worker`` job in this process: the worker thread's CPU time
(``time.thread_time``), which a loaded, shared host disturbs far less than wall-clock rates;
the process's (the state writer's thread too) and the wall-clock rate beside it.

    python -m benchmarks.hotpath dense|sparse|sliding|peer [--events N] [--keys K] [--no-status]

``peer`` is the peer bench's event time (10,000 events a second, tumbling 10 s windows) over
``--keys`` ids: at 1M ids most events are the first of their id in a window, so nearly every
event is a new entry in memory and a RocksDB put.

Compare two trees by running this alternately with each on ``PYTHONPATH`` and keeping the
minimum of several runs of each. ``--no-status`` sets the status interval to a minute: the
current window's top-N is ranked at every status report, work driven by the wall clock, so a
slower (loaded) run does more of it per event.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy  # noqa: F401 - imported before timing: a one-off cost at the first large batch

from benchmarks import bench
from tests.support.workloads import write_ads
from weir.engine.runtime.config import RunFacts

KEYS = 10_000
STEPS = {  # event-time step per event (ms) at KEYS keys, window
    "dense": (10_000 / (KEYS * 10), bench.TUMBLING),
    "sparse": (10_000 / KEYS, bench.TUMBLING),
    "sliding": (10_000 / (KEYS * 10), bench.SLIDING),
    "peer": (0.1, bench.TUMBLING),
}


def event_file(name: str, events: int, workdir: Path, keys: int = KEYS) -> Path:
    """The JSONL events of workload ``name`` in ``workdir``, written the first time."""
    step = STEPS[name][0]
    if name != "peer":  # the same events and windows per key at any number of keys
        step = step * KEYS / keys
    data = workdir / f"events-{events}-{keys}-{step:g}.jsonl"
    if not data.exists():
        write_ads(data, events, keys, step_ms=step)
    return data


def cpu_per_event(
    name: str, events: int, workdir: Path, no_status: bool, keys: int = KEYS
) -> dict[str, float]:
    data = event_file(name, events, workdir, keys)
    window = STEPS[name][1]
    run = Path(tempfile.mkdtemp(dir=workdir))
    try:
        job = run / "job.py"
        job.write_text(bench.JOB.format(path=str(data), window=window))
        status_ms = 60_000 if no_status else RunFacts().status_interval_ms
        wall0, thread0, process0 = time.perf_counter(), time.thread_time(), time.process_time()
        worker = bench.finished_worker(job, run / "state", status_interval_ms=status_ms)
        wall_s = time.perf_counter() - wall0
        thread_s, process_s = time.thread_time() - thread0, time.process_time() - process0
    finally:
        shutil.rmtree(run)
    n = worker.sources.records_in
    return {
        "events": n,
        "events_per_s": round(n / wall_s),
        "events_per_thread_cpu_s": round(n / thread_s),
        "events_per_process_cpu_s": round(n / process_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=sorted(STEPS))
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "weir-hotpath"
    )
    parser.add_argument("--keys", type=int, default=KEYS, help="distinct ids")
    parser.add_argument("--no-status", action="store_true")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    result = cpu_per_event(args.workload, args.events, args.workdir, args.no_status, args.keys)
    print(args.workload, result)


if __name__ == "__main__":
    main()
