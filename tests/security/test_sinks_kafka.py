"""The Kafka sink across a broker that stops answering (issue 17, item 8).

A run writes its results to a real Tansu broker started for this module (the session's broker
is shared, and this test freezes its process). Once a checkpoint has completed, the broker is
frozen with SIGSTOP (its in-memory topics survive) for longer than the sink's delivery timeout,
then resumed. Results sent meanwhile are not acknowledged: the sink's flush raises, the worker
fails with a message naming the topic and the broker error, the job restarts from its last
checkpoint and sends the results after it again. Afterwards every window's final result is in
the topic with the model's values (at-least-once: some are there twice).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from tests.support import WeirServer, event_lines, make_events, wait_until, write_lines
from tests.support.broker import tansu
from tests.support.kafka_broker import create_topic, read_topic
from tests.support.reference import Spec, group_emissions, simulate

SPEC = Spec(bound=200, size=1_000, lateness=1_500)


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A broker for this module alone: ``(host:port, pid)``."""
    with tansu(tmp_path_factory.mktemp("tansu")) as bootstrap:
        yield bootstrap, _pid_listening_as(bootstrap)


def _pid_listening_as(bootstrap: str) -> int:
    wanted = f"tcp://{bootstrap}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if wanted in argv and b"tansu" in Path(argv[0].decode()).name.encode():
                return int(entry.name)
    raise AssertionError(f"no Tansu process listening as {bootstrap}")


def test_a_frozen_broker_loses_no_result_and_the_log_says_why(
    tmp_path: Path,
    own_broker: tuple[str, int],
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    bootstrap, broker_pid = own_broker
    create_topic(bootstrap, "results", 2)
    lines = event_lines(make_events(4_000, seed=11))
    src = write_lines(tmp_path / "in.jsonl", lines)
    slow = (
        "filter",
        "lambda e: __import__('time').sleep(0.001) is None and e['event'] == 'impression'",
    )
    job = write_job(src, bound=SPEC.bound, size=SPEC.size, lateness=SPEC.lateness, steps=(slow,))
    server = weir_server(
        job, "--sink", f"kafka://{bootstrap}/results?delivery_timeout_ms=2000",
        "--parallelism", "2", "--batch-size", "100", "--checkpoint-interval-ms", "200",
        "--restart-failures", "10", "--restart-delay-ms", "200", "--exit-at-end",
    )  # fmt: skip
    c = server.client()
    wait_until(lambda: c.get(f"/jobs/{server.job}").json().get("last_checkpoint"), 30.0)
    os.kill(broker_pid, signal.SIGSTOP)
    try:
        wait_until(lambda: "not delivered" in server.stderr(), 20.0, what="the sink's failure")
        time.sleep(2.0)  # the restarted workers find the broker still frozen
    finally:
        os.kill(broker_pid, signal.SIGCONT)
    assert server.proc.wait(120) == 0, server.stderr()
    log = server.stderr()
    failure = next(line for line in log.splitlines() if "not delivered" in line)
    assert f"sink kafka://{bootstrap}/results" in failure, log
    # the client's own reason for the timeout: librdkafka's (the default client), or the
    # request or batch timeout kafka-python saw first
    reasons = r"RequestTimedOutError: |KafkaTimeoutError: |Local: Message timed out"
    assert re.search(rf"not delivered \(({reasons})", failure), log
    assert "restarting (attempt 1 of 10" in log and "restarted from" in log, log
    got = group_emissions(orjson.loads(m.value) for m in read_topic(bootstrap, "results"))
    ref = simulate(lines, SPEC)
    missing = sorted(set(ref.emissions) - set(got))
    assert not missing, f"{len(missing)} windows never reached the topic: {missing[:3]}"
    wrong = [k for k in ref.emissions if got[k][-1] != ref.emissions[k][-1]]
    assert not wrong, f"{len(wrong)} windows end with another value: {wrong[:3]}"
