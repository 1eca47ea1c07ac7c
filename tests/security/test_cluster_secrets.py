"""No secret weir holds reaches the command line of any process of a cluster-mode run.

The audit's finding: ``--spark-conf``/``WEIR_SPARK_CONF`` was the only way to give weir the Spark
cluster's secret, and PySpark starts ``spark-submit`` and the driver's JVM with every setting as
``--conf KEY=VALUE``, so ``/proc/<pid>/cmdline`` showed ``spark.authenticate.secret=…`` to every
local account, even when the value came from the environment. Here a real ``weir run --master``
on the session's authenticated cluster (two executors, ``--api-workers 2``) gets the Spark
secret only from ``WEIR_SPARK_CONF`` (its ``SPARK_CONF_DIR`` is empty), the API token, the S3
keys and a Kafka password from the environment; while it starts and serves, every process's
command line on the machine is read and none holds any of those values. The run reaches the
state through the driver's API, so the cluster did accept the secret weir passed on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import job_text
from tests.support.cluster import START_S, ClusterPlace, cluster_place
from tests.support.servers import S3Place
from tests.support.spark_cluster import SparkCluster

TOKEN = "api-token-3f9d0c7e51"
KAFKA_PASSWORD = "kafka-pw-8b2e4a61"
EXECUTOR = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
DRIVER = b"org.apache.spark.deploy.SparkSubmit"


@pytest.fixture(scope="module")
def place(
    spark_cluster: SparkCluster, module_s3: S3Place, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterPlace]:
    yield from cluster_place(spark_cluster, module_s3, tmp_path_factory, "secrets")


def _cmdlines() -> dict[int, bytes]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
    return found


def test_no_secret_is_on_any_command_line_of_a_cluster_run(
    place: ClusterPlace, spark_cluster: SparkCluster
) -> None:
    spark_secret = spark_cluster.secret_file.read_text().strip()
    secrets = {
        "the Spark secret": spark_secret,
        "the API token": TOKEN,
        "the S3 secret key": place.s3.env["AWS_SECRET_ACCESS_KEY"],
        "a Kafka password": KAFKA_PASSWORD,
    }
    empty_conf = place.root / "no-spark-conf"
    empty_conf.mkdir()
    job = place.root / "job.py"
    job.write_text(job_text(place.root / "unused.jsonl", bound=100, size=500, lateness=0))
    env = {
        **place.s3.env,
        "SPARK_CONF_DIR": str(empty_conf),  # the secret comes from WEIR_SPARK_CONF alone
        "WEIR_SPARK_CONF": "spark.authenticate=true spark.network.crypto.enabled=true "
        f"spark.authenticate.secret={spark_secret}",
        "WEIR_API_TOKEN": TOKEN,
        "WEIR_KAFKA_SASL_PASSWORD": KAFKA_PASSWORD,  # forwarded to the tasks, unused here
    }
    seen: dict[int, bytes] = {}
    leaks: list[str] = []

    def scan() -> None:
        for pid, cmd in _cmdlines().items():
            seen[pid] = cmd
            leaks.extend(
                f"{what} in pid {pid}: {cmd[:200]!r}"
                for what, value in secrets.items()
                if value.encode() in cmd
            )

    server = place.servers.start(
        job, *place.cluster_flags(), "--source", "generator://ads?rate=200&ids=20&seed=1",
        "--parallelism", "2", "--api-workers", "2", "--checkpoint-interval-ms", "500",
        state_dir=place.root / "state", env=env, timeout=START_S,
    )  # fmt: skip
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + START_S
        answered = False
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=10.0) as http:
            while time.monotonic() < deadline and not answered:
                scan()  # every process, while it starts and while it serves
                answered = http.get("/t1/imps/state/ad-0", headers=auth).status_code == 200
                time.sleep(0.2)
            for _ in range(5):
                scan()
                time.sleep(0.2)
    finally:
        server.stop()
    assert leaks == [], leaks[:5]
    assert answered, "the job never served a key: the cluster refused the secret?"
    kinds = {
        "driver JVM": any(DRIVER in cmd for cmd in seen.values()),
        "executor JVMs": sum(EXECUTOR in cmd for cmd in seen.values()) >= 2,
        "weir processes": sum(b"weir" in cmd for cmd in seen.values()) >= 2,
    }
    assert all(kinds.values()), kinds  # the scan did see the whole tree
