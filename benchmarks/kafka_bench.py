"""Kafka consume rates side by side in one run on one topic (issue 38: "over Kafka at p=1,
>= 0.7x a bare confluent-kafka consumer's rate on the same topic").

    python -m benchmarks.kafka_bench [--events N] [--rounds R]

The topic: ``--events`` events of the peer workload (``ads``, uniform over 10k ids, 10,000
events a second of event time), 4 partitions, keyed by id, on a Tansu broker on loopback
(``tests/support/broker.py``). The systems, each a subprocess, in alternating rounds:

- ``bare``: confluent-kafka's consumer alone, the fastest honest configuration measured: one
  consumer assigned every partition, weir's fetch sizes, ``consume(num_messages=N)`` for each
  N of ``BARE_BATCHES`` (the cheapest N's median is the figure), nothing done with a message;
  ``bare_json`` decodes each value with orjson, at the same N;
- ``weir_expr_p1``: ``weir run JOB --exit-at-end --no-api`` at parallelism 1, the issue's job
  (filter impressions with an expression, key by id, 10 s tumbling count+sum, 2 s bound),
  whose Kafka payloads go to the columnar scanner as one block; ``weir_lambda_p1``: the same
  job with a lambda filter (records, then columns for the keyed side).

What counts: events per CPU-second, the issue's measure (issue 38 is about CPU per event; on a
shared two-core host a wall rate measures the neighbours as much as the system). Each side is
timed from its first fetch to its last record, start-up not counted: the bare consumer times
its consume loop itself (``time.process_time``, which counts librdkafka's threads); weir's
figure is the CPU of its whole process tree (job manager, zygote, worker, librdkafka threads)
minus that of the same run over an empty topic of as many partitions (start-up, connecting,
the end, shutting down), and likewise its wall time. ``*_with_startup`` keeps the whole run.
Medians over the rounds, with the spread (min, max). Wall rates are reported beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.cpu_bench import bytecode_env, tree_cpu
from tests.support.broker import tansu

ROOT = Path(__file__).resolve().parent.parent  # where ``-m benchmarks…`` and ``-m weir`` run
EVENTS = 1_000_000
KEYS = 10_000
PARTITIONS = 4
# the bare consumer's ``consume(num_messages=...)``: each is run, the cheapest is the figure
# (small batches cost less CPU a message: their Message objects are freed and their memory
# reused while still in the cache)
BARE_BATCHES = (256, 1_000, 10_000)
BARE_BATCH = BARE_BATCHES[0]
BARE_CONFIG = {
    "group.id": "bench", "enable.auto.commit": False,
    # weir's fetch sizes (sources.kafka's defaults)
    "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "fetch.wait.max.ms": 50,
}  # fmt: skip

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("kbench")
(
    job.source(sources.kafka({bootstrap!r}, {topic!r}, end="latest"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=1_000))
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", n=agg.count(), total=agg.sum("value"))
)
"""
PEER_JOB = """
from weir import Job, WatermarkStrategy, agg, col, sources, windows
job = Job("kbench-{kind}")
(
    job.source(sources.kafka({bootstrap!r}, {topic!r}, end="latest"), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=2_000))
    .filter({filter})
    .key_by("id")
    .window(windows.tumbling(ms=10_000))
    .aggregate("stats", count=agg.count(), total=agg.sum("value"))
)
"""
FILTERS = {
    "expr": 'col("event") == "impression"',
    "lambda": 'lambda e: e["event"] == "impression"',
}


def fill_topic(bootstrap: str, topic: str, events: int, keys: int = KEYS) -> dict[str, Any]:
    """``events`` of the peer workload into ``topic`` (created with ``PARTITIONS``), keyed by
    id, with confluent-kafka's producer (``weir produce``'s kafka-python one is ~15k/s)."""
    import confluent_kafka as ck

    from weir.app.produce import ensure_topic
    from weir.engine.sources.generator import GeneratorSource

    ensure_topic(bootstrap, topic, PARTITIONS)
    spec = GeneratorSource(
        workload="ads", rate=0, ids=keys, skew=0, disorder=0, seed=7, count=events,
        clock="synthetic", step=0.1, split_count=1,
    )  # fmt: skip
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    reader = spec.open("0/1")
    t0, sent = time.perf_counter(), 0
    while sent < events:
        for rec in reader.read_batch(8192).items:
            while True:
                try:
                    producer.produce(topic, orjson.dumps(rec), rec["id"].encode())
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.05)
            sent += 1
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError(f"topic {topic}: not every event was delivered in 60 s")
    seconds = time.perf_counter() - t0
    return {"events": sent, "partitions": PARTITIONS, "produce_events_per_s": round(sent / seconds)}


def bare_confluent_consumer(bootstrap: str, topic: str) -> Any:
    """confluent-kafka's consumer alone (the client floor), assigned every partition of
    ``topic`` from its start, with the fetch sizes weir's source uses."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **BARE_CONFIG})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
    return consumer


def bare_consumer(
    bootstrap: str, topic: str, events: int, decode: bool, batch: int = BARE_BATCH
) -> dict[str, Any]:
    """Consume ``events`` in this process; the loop's wall and CPU seconds (every thread of
    the process: librdkafka fetches in its own) and rates."""
    consumer = bare_confluent_consumer(bootstrap, topic)
    n = 0
    c0, t0 = time.process_time(), time.perf_counter()
    while n < events:
        msgs = consumer.consume(batch, 0.1)
        n += len(msgs)
        if decode:
            for m in msgs:
                orjson.loads(m.value() or b"null")
    cpu, seconds = time.process_time() - c0, time.perf_counter() - t0
    consumer.close()
    return {
        "events": n,
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "events_per_s": round(n / seconds),
        "events_per_cpu_s": round(n / cpu),
    }


def bare_run(bootstrap: str, topic: str, events: int, decode: bool, batch: int) -> Any:
    """``bare_consumer`` in a process of its own (as weir's worker is: no shared allocator
    or threads with the benchmark), its JSON."""
    cmd = [sys.executable, "-m", "benchmarks.kafka_bench", "--bare", bootstrap, topic]
    cmd += ["--events", str(events), "--batch", str(batch)] + (["--decode"] if decode else [])
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, check=True, cwd=ROOT, env=bytecode_env()
    )
    return json.loads(out.stdout)


def weir_run(job: Path, workdir: Path, client: str = "auto") -> dict[str, Any]:
    """``weir run JOB --exit-at-end --no-api`` at parallelism 1 in a fresh state directory,
    through Kafka ``client``: its process tree's CPU seconds and wall time
    (``cpu_bench.tree_cpu``)."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=workdir))
    cmd = [sys.executable, "-m", "weir", "run", str(job), "--exit-at-end", "--no-api"]
    env = {**bytecode_env(), "WEIR_STATE_DIR": str(state), "WEIR_PARALLELISM": "1"}
    env["WEIR_KAFKA_CLIENT"] = client
    return tree_cpu(cmd, ROOT, env)


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def _weir_figures(events: int, full: list[dict[str, Any]], empty: list[dict[str, Any]]) -> Any:
    """Rates of the runs over the topic, start-up (the median empty run) taken off."""
    base_cpu = statistics.median(r["cpu_s"] for r in empty)
    base_wall = statistics.median(r["wall_s"] for r in empty)
    cpu = [r["cpu_s"] - base_cpu for r in full]
    wall = [r["wall_s"] - base_wall for r in full]
    rate_cpu = [events / c for c in cpu]
    return {
        "events_per_cpu_s": round(statistics.median(rate_cpu)),
        "events_per_cpu_s_spread": _spread([round(r) for r in rate_cpu]),
        "events_per_s": round(statistics.median(events / w for w in wall)),
        "cpu_s": _spread(cpu),
        "wall_s": _spread(wall),
        "events_per_cpu_s_with_startup": round(
            statistics.median(events / r["cpu_s"] for r in full)
        ),
        "startup_cpu_s": round(base_cpu, 3),
        "startup_wall_s": round(base_wall, 3),
    }


def _bare_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "events_per_cpu_s": round(statistics.median(r["events_per_cpu_s"] for r in runs)),
        "events_per_cpu_s_spread": _spread([r["events_per_cpu_s"] for r in runs]),
        "events_per_s": round(statistics.median(r["events_per_s"] for r in runs)),
        "cpu_s": _spread([r["cpu_s"] for r in runs]),
    }


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def measure(
    workdir: Path,
    events: int = EVENTS,
    rounds: int = 3,
    kinds: tuple[str, ...] = ("expr", "expr_confluent", "lambda"),
) -> dict[str, Any]:
    """The ``kafka`` section: every system once per round, in turn; medians and spread.
    ``kinds``: weir's jobs (``FILTERS``), ``expr`` being the goal's; ``KIND_confluent``
    runs that job with ``client=confluent`` (librdkafka's messages, not raw record batches:
    the A/B of decision 0018)."""
    loads = [_load()]
    with tansu(workdir) as bootstrap:
        produced = fill_topic(bootstrap, "kbench", events)
        fill_topic(bootstrap, "kbench-empty", 0)
        jobs: dict[str, Path] = {}
        for kind in kinds:
            for topic in ("kbench", "kbench-empty"):
                job = workdir / f"kafka_{kind}_{topic.replace('-', '_')}.py"
                job.write_text(
                    PEER_JOB.format(
                        kind=kind,
                        bootstrap=bootstrap,
                        topic=topic,
                        filter=FILTERS[kind.removesuffix("_confluent")],
                    )
                )
                jobs[f"{kind}/{topic}"] = job
        runs: dict[str, list[dict[str, Any]]] = {}
        for _ in range(rounds):  # alternating: the host is shared and noisy
            for batch in BARE_BATCHES:
                for decode, name in ((False, "bare"), (True, "bare_json")):
                    runs.setdefault(f"{name}/{batch}", []).append(
                        bare_run(bootstrap, "kbench", events, decode, batch)
                    )
            for key, job in jobs.items():
                client = "confluent" if "_confluent/" in key else "auto"
                runs.setdefault(key, []).append(weir_run(job, workdir, client))
            loads.append(_load())
    return _summary(produced, runs, kinds, rounds, loads)


def _summary(
    produced: dict[str, Any],
    runs: dict[str, list[dict[str, Any]]],
    kinds: tuple[str, ...],
    rounds: int,
    loads: list[float],
) -> dict[str, Any]:
    events = produced["events"]
    by_batch = {b: _bare_figures(runs[f"bare/{b}"]) for b in BARE_BATCHES}
    batch = max(BARE_BATCHES, key=lambda b: by_batch[b]["events_per_cpu_s"])
    out: dict[str, Any] = {**produced, "rounds": rounds, "bare_batch": batch}
    out["bare_confluent"] = bare = by_batch[batch]
    out["bare_confluent_json"] = bare_json = _bare_figures(runs[f"bare_json/{batch}"])
    out["bare_confluent_by_batch"] = {
        str(b): {"events_per_cpu_s": f["events_per_cpu_s"], "events_per_s": f["events_per_s"]}
        for b, f in by_batch.items()
    }
    for kind in kinds:
        mine = _weir_figures(events, runs[f"{kind}/kbench"], runs[f"{kind}/kbench-empty"])
        out[f"weir_{kind}_p1"] = mine
        for unit in ("events_per_cpu_s", "events_per_s"):
            tag = "cpu" if unit == "events_per_cpu_s" else "wall"
            out[f"weir_{kind}_p1_over_bare_{tag}"] = round(mine[unit] / bare[unit], 2)
            out[f"weir_{kind}_p1_over_bare_json_{tag}"] = round(mine[unit] / bare_json[unit], 2)
    out["load_average_1m"] = loads
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--kinds", default="expr,expr_confluent,lambda",
        help=f"weir's jobs, of {list(FILTERS)} (a _confluent suffix: client=confluent)",
    )  # fmt: skip
    parser.add_argument("--bare", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    parser.add_argument("--decode", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=BARE_BATCH, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:  # the bare consumer's own process (bare_run)
        bootstrap, topic = args.bare
        found = bare_consumer(bootstrap, topic, args.events, args.decode, args.batch)
        print(json.dumps(found))
        return
    workdir = Path(tempfile.mkdtemp(prefix="weir-kafka-bench-"))
    kinds = tuple(k for k in args.kinds.split(",") if k)
    print(json.dumps(measure(workdir, args.events, args.rounds, kinds), indent=2))


if __name__ == "__main__":
    main()
