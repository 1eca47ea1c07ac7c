"""What an expression costs in today's per-record chain, beside the lambda it replaces: CPU ns
per event of one worker's chain (decode, timestamps, watermarks, the steps, keys) over the peer
workload's events, for the same job written three ways.

    python -m benchmarks.expr_bench [--events N] [--rounds R] [--backfill]

- ``lambda``: ``filter(lambda e: e["event"] == "impression")``, ``key_by("id")``;
- ``expr``: ``filter(col("event") == "impression")`` (the IR compiled to closures,
  ``kernels.rows``);
- ``reference``: the same filter run by the IR's tree-walking reference (``ir.evaluate_row``),
  what the closures replace;
- ``expr_more``: the expression job with ``with_columns(v2=col("value") * 2)`` and a key
  expression ``col("id").cast(str)``, against ``lambda_more``, its lambda twin.

Runs alternate (round-robin, ``--rounds`` of each) and each figure is the median of its rounds,
measured with ``time.process_time`` around ``Chain.process`` over pre-decoded batches of 1,024
events. Prints JSON: ``{variant: ns_per_event}``.

``--backfill``: the backfill's stage 1 instead (``spark.pairs.pairs_of_split`` in this process,
no Spark: reading the JSONL file, the chain or the column path, the pairs), CPU ns per line, for
the lambda filter job on the line path and the expression filter job on the line path and on
the column path (``spark.columnar``: pyarrow's reader, the scanner and the columnar evaluator).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from weir import Job, agg, col, sources, windows
from weir.engine.kernels import ir
from weir.engine.nodes import StatelessNode
from weir.engine.runtime.outputs import DeadLetters
from weir.engine.runtime.task.chain import Chain
from weir.engine.sources import SourceBatch

BATCH = 1024


def _events(n: int) -> list[bytes]:
    """Peer-workload-shaped lines: 10k ids, a third clicks (``benchmarks.hotpath``'s shape)."""
    return [
        orjson.dumps(
            {
                "id": f"ad-{(i * 7919) % 10_000}",
                "event": "click" if i % 3 == 0 else "impression",
                "ts": i,
                "value": i % 100,
            }
        )
        for i in range(n)
    ]


def _job(variant: str) -> Job:
    job = Job("bench")
    s = job.source(sources.jsonl("unused.jsonl"))
    if variant == "lambda":
        keyed = s.filter(lambda e: e["event"] == "impression").key_by("id")
    elif variant == "lambda_more":
        keyed = (
            s.filter(lambda e: e["event"] == "impression")
            .map(lambda e: {**e, "v2": e["value"] * 2})
            .key_by(lambda e: str(e["id"]))
        )
    elif variant == "expr_more":
        keyed = (
            s.filter(col("event") == "impression")
            .with_columns(v2=col("value") * 2)
            .key_by(col("id").cast(str))
        )
    else:
        keyed = s.filter(col("event") == "impression").key_by("id")
        if variant == "reference":
            node = job.sources[0].children[0]
            assert isinstance(node, StatelessNode) and node.expr is not None
            e = node.expr
            node.fn = lambda r: ir.evaluate_row(e, r) is True
    keyed.window(windows.tumbling(ms=10_000)).aggregate("w", n=agg.count())
    return job


def _round(variant: str, lines: list[bytes]) -> float:
    chain = Chain(_job(variant).sources[0], {}, DeadLetters(None))
    batches = [[orjson.loads(x) for x in lines[i : i + BATCH]] for i in range(0, len(lines), BATCH)]
    t0 = time.process_time()
    for b in batches:
        chain.process(SourceBatch(items=b, decoded=True))
    return (time.process_time() - t0) * 1e9 / len(lines)


_BACKFILL_JOB = """
from weir import Job, WatermarkStrategy, agg, col, sources, windows
job = Job("bench", max_parallelism=128)
(job.source(sources.jsonl("unused.jsonl"), timestamp="ts",
            watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2000))
    .filter(FILTER)
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("w", n=agg.count(), total=agg.sum("value")))
"""
_FILTERS = {
    "lambda": 'lambda e: e["event"] == "impression"',
    "expr": 'col("event") == "impression"',
}


def _backfill_round(name: str, tmp: Path, src: Path, n: int, r: int) -> float:
    from weir.engine.runtime.loader import load_job
    from weir.engine.spark.columnar import column_batches, plain_job
    from weir.engine.spark.inputs import file_batches
    from weir.engine.spark.pairs import pairs_of_split
    from weir.engine.spark.plan import Plan, backfill_operator

    kind, path = name.split("-")
    job = tmp / f"{kind}.py"
    job.write_text(_BACKFILL_JOB.replace("FILTER", _FILTERS[kind]))
    out = tmp / f"out-{name}-{r}"
    for sub in ("sst", "stats", "errors"):
        (out / sub).mkdir(parents=True)
    plan = Plan(str(job), "bench", "w", 128, None, None, str(out))
    loaded = load_job(job)
    plain = plain_job(loaded, backfill_operator(loaded, None)) if path == "columns" else None
    batches = file_batches(str(src), "jsonl") if plain is None else column_batches(str(src), plain)
    t0 = time.process_time()
    for _ in pairs_of_split(plan, str(src), batches, plain):
        pass
    return (time.process_time() - t0) * 1e9 / n


def _backfill(n: int, rounds: int) -> dict[str, int]:
    variants = ("lambda-lines", "expr-lines", "expr-columns")
    times: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="weir-expr-bench-") as d:
        tmp = Path(d)
        src = tmp / "in.jsonl"
        src.write_bytes(b"\n".join(_events(n)) + b"\n")
        for r in range(rounds):
            for v in variants:
                times[v].append(_backfill_round(v, tmp, src, n, r))
    return {v: round(statistics.median(t)) for v, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--backfill", action="store_true", help="time the backfill's stage 1")
    args = p.parse_args(argv)
    if args.backfill:
        print(json.dumps(_backfill(args.events, args.rounds)))
        return
    lines = _events(args.events)
    variants = ("lambda", "expr", "reference", "lambda_more", "expr_more")
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for v in variants:
            times[v].append(_round(v, lines))
    out: dict[str, Any] = {v: round(statistics.median(t)) for v, t in times.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
