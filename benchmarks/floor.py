"""The bare-Python floor of the ``single_worker`` job: the same JSONL file through the same
steps with no engine around them (orjson per line, the job's filter lambda, the key, time and
value columns with their type checks, window ends, the generated fold's loop into dicts), no
watermarks, late data, dead letters, RocksDB, checkpoints or status. What weir adds per event
is its own time over this; issue 21's in-process goals are read against it.

    python -m benchmarks.floor dense|sparse [--events N] [--batch B ...]

Prints JSON: events per second of this thread's CPU for each batch size, and the CPU time of
each step per event (ns). The event files are ``benchmarks.hotpath``'s (``event_file``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from benchmarks.hotpath import event_file

WINDOW_MS = 10_000
STEP_NAMES = ("decode", "filter", "columns", "ends", "fold")


def _keep(e: dict[str, Any]) -> bool:
    return bool(e["event"] == "impression")  # the bench job's filter


def floor(lines: list[bytes], batch: int) -> dict[str, Any]:
    """One pass of ``lines`` in batches of ``batch``: CPU ns per event of each step."""
    spent = dict.fromkeys(STEP_NAMES, 0.0)
    buckets: dict[int, dict[str, list[Any]]] = {}
    dirty: dict[int, set[str]] = {}
    clock: Callable[[], float] = time.thread_time
    keep = _keep
    loads = orjson.loads
    for i in range(0, len(lines), batch):
        t0 = clock()
        recs = list(map(loads, lines[i : i + batch]))
        t1 = clock()
        recs = list(compress(recs, list(map(keep, recs))))
        t2 = clock()
        keys = list(map(itemgetter("id"), recs))
        ts = list(map(itemgetter("ts"), recs))
        values = list(map(itemgetter("value"), recs))
        if not (
            set(map(type, keys)) <= {str}
            and set(map(type, ts)) <= {int}
            and set(map(type, values)) <= {int, float}
        ):
            raise ValueError("the floor takes well-formed events only")
        t3 = clock()
        ends = [t - t % WINDOW_MS + WINDOW_MS for t in ts]
        t4 = clock()
        last = None
        b: dict[str, list[Any]] = {}
        d: set[str] = set()
        get = b.get
        for k, e, v in zip(keys, ends, values, strict=True):
            if e != last:
                b = buckets.setdefault(e, {})
                d = dirty.setdefault(e, set())
                get = b.get
                last = e
            d.add(k)
            a = get(k)
            if a is None:
                b[k] = [1, v]
            else:
                a[0] += 1
                a[1] += v
        if len(buckets) > 2:  # windows fire: memory holds the open ones only, as weir's does
            for end in sorted(buckets)[:-2]:
                del buckets[end], dirty[end]
        t5 = clock()
        for name, (a0, a1) in zip(
            STEP_NAMES, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)), strict=True
        ):
            spent[name] += a1 - a0
    n = len(lines)
    total = sum(spent.values())
    return {
        "events_per_thread_cpu_s": round(n / total),
        "ns_per_event": {k: round(v / n * 1e9) for k, v in spent.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["dense", "sparse"])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--rounds", type=int, default=3, help="best of this many passes")
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "weir-hotpath"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    lines = event_file(args.workload, args.events, args.workdir).read_bytes().splitlines()
    out: dict[str, Any] = {"workload": args.workload, "events": len(lines)}
    for batch in args.batch:
        runs = [floor(lines, batch) for _ in range(args.rounds)]
        out[f"batch_{batch}"] = max(runs, key=lambda r: int(r["events_per_thread_cpu_s"]))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
