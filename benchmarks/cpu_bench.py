"""``make bench``'s ``cpu`` section (issue 38, item 6): events per CPU-second on the peer
workload, weir beside DuckDB and PyFlink, as ratios in the same run.

    python -m benchmarks.cpu_bench [--events N] [--keys K ...] [--only weir_lambda,duckdb,...]

The workload: ``--events`` JSON lines (2M) of the ``ads`` generator at 10,000 events a second of
event time over 10k and 1M ids (``benchmarks.hotpath``'s ``peer`` file); the job: filter
impressions, key by id, 10 s tumbling count + sum of ``value``, 2 s out-of-orderness bound.

- ``weir_lambda_p1``/``_p2``: ``weir run JOB.py --exit-at-end --no-api`` (the Python job API with
  a lambda filter) at parallelism 1 and 2; ``weir_sql_p1``/``_p2``: the same job as a ``.sql``
  file; ``weir_expr_p1``/``_p2``: the job API with an expression filter
  (``filter(col("event") == "impression")``), whose lines are read straight into columns;
- ``duckdb``: DuckDB's one-thread batch aggregate of the same file (``SET threads = 1``; the
  fastest honest reader of those measured each run: ``read_json`` with the columns given,
  ``read_ndjson`` with the columns given, ``read_json_auto``), no watermarks: a floor, not a
  streaming engine;
- ``pyflink_sql``: PyFlink 2.3's SQL job (``benchmarks/flink_sql_job.py``) in a venv of its own
  (``.bench-venvs/flink``, ``make bench-cpu`` installs it), parallelism 1.

Each system runs ``--rounds`` times (3), the systems in turn, and reports its run of median CPU
with every run's CPU and the load average after it: CPU per event rises on a busy machine (a
loaded 2-core host showed the lambda job at 2.0-3.7 CPU-s for the same events). Each runs as a
subprocess; its CPU is that of the whole process tree (the exited
children's ``RUSAGE_CHILDREN``, and every descendant's ``/proc`` times sampled every 100 ms, the
larger of the two), so JVMs, workers and threads all count. Prints JSON: per id count, each
system's events per CPU-second and CPU seconds, and the ratios ``weir_*_over_duckdb`` and
``weir_*_over_pyflink``.

Every process writes and reads bytecode, as under ``make`` (``bytecode_env``), and each system
runs once on a small file before the measured rounds: a tree's first run compiles the modules it
imports, which no later run of an installed package pays.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.procs import children, cpu_seconds

FLINK_PYTHON = Path(".bench-venvs/flink/bin/python")
FLINK_JOB = Path(__file__).with_name("flink_sql_job.py")
SAMPLE_S = 0.1
ROUNDS = 3
TIMEOUT_S = 1_800.0
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
WARM_EVENTS = 2_000
LAMBDA_JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("cpu-bench")
(
    job.source(sources.jsonl({path!r}), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000))
    .filter(lambda e: e["event"] == "impression")
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", count=agg.count(), total=agg.sum("value"))
)
"""
EXPR_JOB = LAMBDA_JOB.replace(
    'filter(lambda e: e["event"] == "impression")', 'filter(col("event") == "impression")'
).replace("import Job,", "import Job, col,")
SQL_JOB = """
SET 'pipeline.name' = 'cpu-bench-sql';
CREATE TABLE events (
  id STRING, event STRING, ts BIGINT, `value` DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'url', 'url' = 'file://{path}');
CREATE VIEW stats AS
SELECT id, window_start, window_end, COUNT(*) AS n, SUM(`value`) AS total
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
WHERE event = 'impression'
GROUP BY id, window_start, window_end;
"""
DUCKDB_COLUMNS = "{'id': 'VARCHAR', 'event': 'VARCHAR', 'ts': 'BIGINT', 'value': 'DOUBLE'}"
DUCKDB_READERS = {  # PATH: the events file
    "read_json_columns": "read_json('PATH', format='newline_delimited', columns="
    + DUCKDB_COLUMNS
    + ")",
    "read_ndjson_columns": "read_ndjson('PATH', columns=" + DUCKDB_COLUMNS + ")",
    "read_json_auto": "read_json_auto('PATH')",
}
DUCKDB_QUERY = """
SET threads = 1;
SELECT count(*) FROM (
  SELECT id, ts - ts % 10000 AS w, count(*) AS n, sum(value) AS total
  FROM {reader} WHERE event = 'impression' GROUP BY id, w
);
"""


def bytecode_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's environment by default) with bytecode written, as ``make`` has it.

    With PYTHONDONTWRITEBYTECODE set (as on CI's machines, and in a shell that set it) every
    process compiles every module it imports again, from source: ``import sqlglot`` took 0.7
    CPU-s instead of 0.16, and a SQL job's start-up 0.79 CPU-s. DuckDB's module is compiled code,
    so the variable weighed on weir's side of every ratio only.
    """
    return {k: v for k, v in (os.environ if env is None else env).items() if k != NO_BYTECODE}


def tree_cpu(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` to its end; the CPU seconds of its whole process tree and its wall time.
    Bytecode is written and read (``bytecode_env``).

    Raises:
        RuntimeError: the command failed (its output's tail is in the message).
    """
    seen: dict[int, float] = {}
    done = threading.Event()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=bytecode_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            todo, tree = [proc.pid], set()
            while todo:
                pid = todo.pop()
                tree.add(pid)
                try:
                    todo.extend(children(pid) - tree)
                except OSError:
                    continue
            for pid in tree:
                used = cpu_seconds([pid])
                if used:
                    seen[pid] = max(seen.get(pid, 0.0), used)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        done.set()
        sampler.join()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = out.decode(errors="replace")[-2_000:]
        raise RuntimeError(f"{cmd[:3]} exited with {proc.returncode}: {tail}")
    return {
        "cpu_s": round(max(reaped, sum(seen.values())), 3),
        "wall_s": round(wall, 3),
        "output": out.decode(errors="replace")[-500:],
    }


def _median_run(events: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median CPU (its rate, wall time and details), with every run's CPU seconds
    and the 1-minute load average after each (CPU per event rises on a busy machine)."""
    ordered = sorted(runs, key=lambda r: r["cpu_s"])
    mid = ordered[(len(ordered) - 1) // 2]
    return {
        **_rate(events, mid),
        **{k: v for k, v in mid.items() if k not in ("cpu_s", "wall_s", "output", "load_1m")},
        "cpu_s_runs": [r["cpu_s"] for r in runs],
        "load_1m_runs": [r["load_1m"] for r in runs],
    }


def _rate(events: int, run: dict[str, Any]) -> dict[str, Any]:
    return {
        "events_per_cpu_s": round(events / run["cpu_s"]),
        "cpu_s": run["cpu_s"],
        "wall_s": run["wall_s"],
    }


def weir(job: Path, parallelism: int, workdir: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "weir", "run", str(job), "--exit-at-end", "--no-api"]
    cmd += ["--parallelism", str(parallelism)]
    env = {**os.environ, "WEIR_STATE_DIR": str(workdir / f"state-{job.stem}-{parallelism}")}
    return tree_cpu(cmd, workdir, env)


def duckdb(path: Path, workdir: Path) -> dict[str, Any]:
    """Every reader once; the cheapest is DuckDB's figure (the rest are reported)."""
    runs = {}
    for name, reader in DUCKDB_READERS.items():
        sql = DUCKDB_QUERY.format(reader=reader.replace("PATH", str(path)))
        code = f"import duckdb, sys; print(duckdb.connect().execute({sql!r}).fetchall())"
        runs[name] = tree_cpu([sys.executable, "-c", code], workdir)
    best = min(runs, key=lambda r: runs[r]["cpu_s"])
    return {"reader": best, **runs[best], "readers_cpu_s": {r: v["cpu_s"] for r, v in runs.items()}}


def pyflink(path: Path, workdir: Path) -> dict[str, Any]:
    if not FLINK_PYTHON.exists():
        raise RuntimeError(f"{FLINK_PYTHON} is missing: `make bench-cpu` installs PyFlink there")
    env = {**os.environ, "JAVA_TOOL_OPTIONS": "-Djava.net.preferIPv4Stack=true"}
    # absolute, not resolved: the venv's python is a link to the base interpreter
    python = str(FLINK_PYTHON.absolute())
    return tree_cpu([python, str(FLINK_JOB.resolve()), str(path)], workdir, env)


def _systems(path: Path, workdir: Path, tag: str) -> dict[str, Callable[[], dict[str, Any]]]:
    """Every system on the events in ``path``; the jobs are written to ``workdir`` (names with
    ``tag``)."""
    lambda_job = workdir / f"cpu_lambda{tag}.py"
    lambda_job.write_text(LAMBDA_JOB.format(path=str(path)))
    sql_job = workdir / f"cpu_sql{tag}.sql"
    sql_job.write_text(SQL_JOB.format(path=str(path)))
    expr_job = workdir / f"cpu_expr{tag}.py"
    expr_job.write_text(EXPR_JOB.format(path=str(path)))
    return {
        "weir_lambda_p1": lambda: weir(lambda_job, 1, workdir),
        "weir_lambda_p2": lambda: weir(lambda_job, 2, workdir),
        "weir_sql_p1": lambda: weir(sql_job, 1, workdir),
        "weir_sql_p2": lambda: weir(sql_job, 2, workdir),
        "weir_expr_p1": lambda: weir(expr_job, 1, workdir),
        "weir_expr_p2": lambda: weir(expr_job, 2, workdir),
        "duckdb": lambda: duckdb(path, workdir),
        "pyflink_sql": lambda: pyflink(path, workdir),
    }


def _picked(
    path: Path, workdir: Path, tag: str, only: set[str]
) -> dict[str, Callable[[], dict[str, Any]]]:
    """``_systems``, those ``only`` names by prefix (all where it is empty)."""
    systems = _systems(path, workdir, tag)
    return {n: fn for n, fn in systems.items() if not only or any(n.startswith(o) for o in only)}


def warm_up(workdir: Path, keys: int, only: set[str]) -> None:
    """Each system (or those ``only`` names) once on a small file, before any is measured: the
    first run of a tree writes the bytecode of every module it imports (0.5 CPU-s for a SQL
    job), which no later run pays. Once per benchmark run: the id count does not change what
    is imported."""
    from benchmarks.hotpath import event_file  # hotpath imports bench, which imports this

    small = event_file("peer", WARM_EVENTS, workdir, keys)
    for fn in _picked(small, workdir, "warm", only).values():
        try:
            fn()
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # the measured runs report it


def section(
    events: int, keys: int, workdir: Path, only: set[str], rounds: int = ROUNDS
) -> dict[str, Any]:
    """Every system (or those ``only`` names by prefix) at ``keys`` ids, ``rounds`` times in
    turn; each system's run of median CPU (``warm_up`` first)."""
    from benchmarks.hotpath import event_file  # hotpath imports bench, which imports this

    picked = _picked(event_file("peer", events, workdir, keys), workdir, "", only)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in picked}
    errors: dict[str, str] = {}
    for _ in range(rounds):  # alternating: a busy spell of the machine falls on every system
        for name, fn in picked.items():
            if name in errors:
                continue
            try:
                runs[name].append({**fn(), "load_1m": round(os.getloadavg()[0], 2)})
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors[name] = str(exc)[-600:]
            print(f"cpu_bench: {keys} ids: {name}: {runs[name][-1:]}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {}
    for name in picked:
        out[name] = {"error": errors[name]} if name in errors else _median_run(events, runs[name])
    for name in [n for n in out if n.startswith("weir_")]:
        for peer in ("duckdb", "pyflink_sql"):
            mine, theirs = (
                out[name].get("events_per_cpu_s"),
                out.get(peer, {}).get("events_per_cpu_s"),
            )
            if mine and theirs:
                out[f"{name}_over_{peer.split('_')[0]}"] = round(mine / theirs, 3)
    return out


def columnar_prototype(events: int, keys: int, workdir: Path) -> dict[str, Any]:
    """The prototype columnar loop's figure on the same file (in this process, compiled)."""
    from benchmarks import columnar_loop
    from benchmarks.hotpath import event_file
    from weir.engine.kernels import load

    path = event_file("peer", events, workdir, keys)
    found = columnar_loop.measure(load("compiled"), path, 1 << 20, check=False)
    return {k: found[k] for k in ("events_per_cpu_s", "ns_per_event", "ns_per_event_without_fire")}


def measure(
    workdir: Path,
    events: int,
    keys: tuple[int, ...] = (10_000, 1_000_000),
    rounds: int = ROUNDS,
) -> dict[str, Any]:
    """The ``cpu`` section of ``make bench``: every system at each id count."""
    out: dict[str, Any] = {"events": events, "rounds": rounds}
    warm_up(workdir, keys[0], set())
    for k in keys:
        out[f"{k}_keys"] = section(events, k, workdir, set(), rounds)
        row = out[f"{k}_keys"]
        row["columnar_prototype"] = proto = columnar_prototype(events, k, workdir)
        duck = row.get("duckdb", {}).get("events_per_cpu_s")
        if duck:  # in-process loop, no start-up or state writes: the next phase's ceiling
            row["columnar_prototype_over_duckdb"] = round(proto["events_per_cpu_s"] / duck, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--only", default="", help="comma-separated system name prefixes")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="runs of each, alternating")
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "weir-hotpath"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    only = {o for o in args.only.split(",") if o}
    if only:
        warm_up(args.workdir, args.keys[0], only)
        report: dict[str, Any] = {"events": args.events, "rounds": args.rounds}
        report |= {
            f"{k}_keys": section(args.events, k, args.workdir, only, args.rounds) for k in args.keys
        }
    else:
        report = measure(args.workdir, args.events, tuple(args.keys), args.rounds)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
