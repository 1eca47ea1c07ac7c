"""Two source trees of weir side by side, in one sitting: the bench's parallel job (two JSONL
files, 1M events, tumbling count+sum) at parallelism 2, without and with a file sink and a
checkpoint every second, alternating base and new run by run, so the shared machine's drift
falls on both. Prints JSON: events/s and the workers' CPU seconds per tree, and new/base ratios
of the medians.

    python -m benchmarks.compare_trees --base /path/to/old/checkout [--new .] [--rounds 10]

Each run is a process of its own with ``PYTHONPATH`` set to its tree, so each tree runs its own
code, workers included (a checkout of another commit: ``git worktree add /tmp/base REV``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

VARIANTS = ("plain", "sink_checkpoints")


def _one(work: Path, variant: str) -> dict[str, Any]:
    """A timed run in this process's tree (what ``--child`` runs)."""
    from benchmarks.runs import timed_run

    state = work / f"state-{variant}"
    shutil.rmtree(state, ignore_errors=True)
    settings: dict[str, Any] = {}
    if variant == "sink_checkpoints":
        out = work / "out.jsonl"
        settings = {"sink_url": f"file://{out}", "checkpoint_interval_ms": 1000}
    run = timed_run(work / "parallel_job.py", state, 2, **settings)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "events_per_s": run["events_per_s"],
        "worker_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
    }


def _spawn(tree: Path, work: Path, variant: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # this file by path, so a base tree that predates it still runs its own ``benchmarks.runs``
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(work), variant]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a run in {tree} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _summary(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        med = {
            tree: {
                field: statistics.median(r[field] for r in runs[tree][variant])
                for field in ("events_per_s", "worker_cpu_s")
            }
            for tree in ("base", "new")
        }
        out[variant] = {
            **med,
            "new_over_base_events_per_s": round(
                med["new"]["events_per_s"] / med["base"]["events_per_s"], 3
            ),
            "new_over_base_worker_cpu": round(
                med["new"]["worker_cpu_s"] / med["base"]["worker_cpu_s"], 3
            ),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, help="the tree to compare against")
    parser.add_argument("--new", type=Path, default=Path("."), help="the tree measured")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, metavar=("WORKDIR", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_one(Path(args.child[0]), args.child[1])))
        return
    if args.base is None:
        parser.error("--base: give the checkout to compare against (git worktree add DIR REV)")
    from benchmarks.bench import write_parallel_inputs

    trees = {"base": args.base.resolve(), "new": args.new.resolve()}
    with tempfile.TemporaryDirectory(prefix="weir-compare-") as tmp:
        work = Path(tmp)
        write_parallel_inputs(work, args.events, 10_000)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            tree: {v: [] for v in VARIANTS} for tree in trees
        }
        for _ in range(args.rounds):
            for name, tree in trees.items():
                for variant in VARIANTS:
                    runs[name][variant].append(_spawn(tree, work, variant))
    print(json.dumps({"rounds": args.rounds, **_summary(runs)}, indent=2))


if __name__ == "__main__":
    main()
