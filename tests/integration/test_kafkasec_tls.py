"""Kafka over TLS and SASL, end to end with real ``weir`` processes: a TLS proxy that requires a
client certificate in front of a Tansu broker, and a Tansu broker that checks SASL SCRAM
(``tests/support/kafka_tls.py``). Results over TLS equal the expected windows; a wrong CA, a
plaintext client to the TLS port and a refused SASL login each fail within seconds with one line
that names the fix; no secret reaches an output, ``/jobs`` or ``--help``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.support import WeirResult, WeirServer, impression_counts, job_text, make_events
from tests.support.kafka_broker import create_topic, read_topic, send
from tests.support.kafka_tls import KEY_PASSWORD, TlsBroker

BOUND, SIZE = 300, 1_000
SASL_SECRET = "sasl-pw-Zk42-never-shown"
FAIL_FAST_S = 20.0  # a refusal that will not heal fails well before the 60 s connect budget
_topics = count()


def _client(b: TlsBroker) -> dict[str, Any]:
    """kafka-python settings of the test's own clients for the TLS broker."""
    p = b.pki
    return {
        "security_protocol": "SSL", "ssl_cafile": str(p.ca), "ssl_certfile": str(p.client_cert),
        "ssl_keyfile": str(p.client_key), "ssl_password": KEY_PASSWORD,
    }  # fmt: skip


def _tls_options(b: TlsBroker, **over: str) -> dict[str, str]:
    """weir's URL options for the TLS broker (the key password stays in the environment)."""
    p = b.pki
    return {
        "security_protocol": "SSL", "ssl_cafile": str(p.ca), "ssl_certfile": str(p.client_cert),
        "ssl_keyfile": str(p.client_key), **over,
    }  # fmt: skip


def _tls_env(b: TlsBroker) -> dict[str, str]:
    """The same settings as ``WEIR_KAFKA_*`` variables."""
    return {f"WEIR_KAFKA_{k.upper()}": v for k, v in _tls_options(b).items()} | {
        "WEIR_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD
    }


def _topic(b: TlsBroker, name: str, partitions: int) -> str:
    topic = f"{name}-{next(_topics)}-{os.getpid()}"
    create_topic(b.bootstrap, topic, partitions, **_client(b))
    return topic


def _job(tmp_path: Path) -> Path:
    job = tmp_path / "job.py"
    job.write_text(job_text(Path("unused.jsonl"), bound=BOUND, size=SIZE, lateness=0))
    return job


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert KEY_PASSWORD not in text and SASL_SECRET not in text, text


def test_a_tls_topic_is_read_and_written_end_to_end_by_weir_run(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_tls: TlsBroker
) -> None:
    """Source settings as URL options (over the same WEIR_KAFKA_* ones), the sink's and the dead
    letters' from WEIR_KAFKA_* alone: results and dead letters reach their TLS topics, equal to
    the expected windows."""
    b = kafka_tls
    topic, results, dlq = _topic(b, "in", 2), _topic(b, "out", 2), _topic(b, "dlq", 1)
    good = make_events(1_500, seed=71, jitter=100, far_fraction=0.0)
    values: list[tuple[int, bytes | dict[str, Any]]] = [(i % 2, e) for i, e in enumerate(good)]
    values += [(0, b"{not json"), (1, b'{"id": "x", "event": "x"}')]
    send(b.bootstrap, topic, values, **_client(b))
    source = f"kafka://{b.bootstrap}/{topic}?end=latest&{urlencode(_tls_options(b))}"
    r = run_weir(
        "run", str(_job(tmp_path)), "--source", source,
        "--sink", f"kafka://{b.bootstrap}/{results}",
        "--dead-letter", f"kafka://{b.bootstrap}/{dlq}", "--exit-at-end", "--api-port", "0",
        "--state-dir", str(tmp_path / "state"), "--parallelism", "2",
        env=_tls_env(b),
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    _no_secret(r.stdout, r.stderr)
    got = {
        (body["key"], body["start"], body["end"]): body["count"]
        for body in (json.loads(m.value) for m in read_topic(b.bootstrap, results, **_client(b)))
    }
    assert got == {(str(k[0]), k[1], k[2]): v for k, v in impression_counts(good, SIZE).items()}
    dead = [json.loads(m.value) for m in read_topic(b.bootstrap, dlq, **_client(b))]
    assert len(dead) == 2, dead


def test_weir_produce_writes_over_tls_from_the_environment(
    run_weir: Callable[..., WeirResult], kafka_tls: TlsBroker
) -> None:
    b = kafka_tls
    topic = f"produced-tls-{os.getpid()}"
    r = run_weir(
        "produce", "--bootstrap", b.bootstrap, "--topic", topic, "--count", "500",
        "--partitions", "2", "--keys", "20", "--clock", "synthetic", env=_tls_env(b),
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["events"] == 500
    assert len(read_topic(b.bootstrap, topic, **_client(b))) == 500
    _no_secret(r.stdout, r.stderr)


def _fails_fast(run: Callable[[], WeirResult], *expected: str) -> str:
    """Run, and return the error line: one line, naming each of ``expected``, within seconds."""
    t0 = time.monotonic()
    r = run()
    took = time.monotonic() - t0
    assert r.rc == 1, (r.rc, r.stderr)
    assert took < FAIL_FAST_S, (took, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("weir: error")]
    assert errors, r.stderr
    for text in expected:
        assert text in errors[-1], errors[-1]
    _no_secret(r.stdout, r.stderr)
    return errors[-1]


def test_a_wrong_ca_is_one_clear_line_within_seconds(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_tls: TlsBroker
) -> None:
    b = kafka_tls
    opts = urlencode(_tls_options(b, ssl_cafile=str(b.pki.other_ca)))
    line = _fails_fast(
        lambda: run_weir(
            "run", str(_job(tmp_path)), "--source", f"kafka://{b.bootstrap}/t?end=latest&{opts}",
            "--exit-at-end", "--no-api", "--state-dir", str(tmp_path / "s"),
            env={"WEIR_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD},
        ),
        f"Kafka broker {b.bootstrap}", "TLS certificate is not trusted",
        f"ssl_cafile={b.pki.other_ca}",
    )  # fmt: skip
    assert "\n" not in line


def test_a_plaintext_client_to_the_tls_port_and_a_wrong_host_name_are_clear(
    run_weir: Callable[..., WeirResult], kafka_tls: TlsBroker
) -> None:
    b = kafka_tls
    produce = ("produce", "--topic", "never", "--count", "1")
    _fails_fast(
        lambda: run_weir(*produce, "--bootstrap", b.bootstrap),
        "speaks TLS but the client is plaintext", "security_protocol=SSL",
    )  # fmt: skip
    _fails_fast(
        lambda: run_weir(*produce, "--bootstrap", b.wrong_name, env=_tls_env(b)),
        "does not name '127.0.0.1'", "ssl_check_hostname=false",
    )  # fmt: skip
    _fails_fast(
        lambda: run_weir(*produce, "--bootstrap", b.plain, env=_tls_env(b)),
        "did not complete a TLS handshake", "plaintext listener",
    )  # fmt: skip


def test_a_refused_sasl_login_is_one_clear_line_without_the_password(
    tmp_path: Path, run_weir: Callable[..., WeirResult], kafka_sasl: str
) -> None:
    """Tansu checks SCRAM for real (it knows no user here, so it refuses every password)."""
    env = {"WEIR_KAFKA_SASL_PASSWORD": SASL_SECRET, "WEIR_KAFKA_SASL_USERNAME": "alice"}
    query = "end=latest&security_protocol=SASL_PLAINTEXT&sasl_mechanism=SCRAM-SHA-512"
    _fails_fast(
        lambda: run_weir(
            "run", str(_job(tmp_path)), "--source", f"kafka://{kafka_sasl}/t?{query}",
            "--exit-at-end", "--no-api", "--state-dir", str(tmp_path / "s"), env=env,
        ),
        f"Kafka broker {kafka_sasl}", "SCRAM-SHA-512 authentication as 'alice' was refused",
        "WEIR_KAFKA_SASL_PASSWORD",
    )  # fmt: skip


def test_secrets_in_a_source_url_never_reach_jobs_logs_or_help(
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
    run_weir: Callable[..., WeirResult],
    kafka_tls: TlsBroker,
) -> None:
    """A password given in the URL (``ssl_key_password=``) works, and is shown nowhere."""
    b = kafka_tls
    topic = _topic(b, "shown", 1)
    send(b.bootstrap, topic, [(0, e) for e in make_events(50, seed=72)], **_client(b))
    opts = urlencode(_tls_options(b, ssl_key_password=KEY_PASSWORD))
    source = f"kafka://{b.bootstrap}/{topic}?{opts}"
    server = weir_server(_job(tmp_path), "--source", source)
    jobs = httpx.get(f"{server.base_url}/jobs", timeout=10).text
    job = httpx.get(f"{server.base_url}/jobs/{server.job}", timeout=10).text
    assert f"kafka://{b.bootstrap}/{topic}" in job and "security_protocol=SSL" in job, job
    server.stop()
    _no_secret(jobs, job, server.stderr())
    shown = run_weir("run", "--help", env={"WEIR_SOURCE": source})
    assert shown.rc == 0 and "ssl_key_password=***" in shown.stdout.replace("\n", ""), shown
    _no_secret(shown.stdout, shown.stderr)
    bad = run_weir("run", str(_job(tmp_path)), "--source", source + "&acks=1", "--no-api")
    assert bad.rc == 2 and "unknown option 'acks'" in bad.stderr, bad.stderr
    _no_secret(bad.stdout, bad.stderr)


def test_the_backfill_reads_a_tls_topic_and_its_plan_hides_the_key_password(
    spark: Any, kafka_tls: TlsBroker
) -> None:
    """The driver fixes the offsets over TLS; the Spark tasks read over TLS with the settings
    passed as the data source's options, which the query's plan does not show."""
    from weir.engine.spark.backfill import _kafka_frame
    from weir.engine.spark.inputs import plan_kafka

    b = kafka_tls
    topic = _topic(b, "backfill", 2)
    events = make_events(400, seed=73)
    send(b.bootstrap, topic, [(i % 2, e) for i, e in enumerate(events)], **_client(b))
    opts = urlencode(_tls_options(b, ssl_key_password=KEY_PASSWORD))
    k = plan_kafka(f"kafka://{b.bootstrap}/{topic}?{opts}")
    assert k.ranges == {0: (0, 200), 1: (0, 200)} and k.security.tls
    frame = _kafka_frame(spark, k)
    got = sorted(json.loads(row.value)["ts"] for row in frame.collect())
    assert got == sorted(e["ts"] for e in events)
    plan = frame._jdf.queryExecution().toString()
    assert "weir-kafka" in plan, plan
    _no_secret(plan)
