"""The test cluster's harness refuses to start, naming the fix, when Spark cannot run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.spark_cluster import SparkCluster, SparkClusterError


def test_without_java_the_cluster_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `java` on it
    cluster = SparkCluster(tmp_path / "cluster")
    with pytest.raises(SparkClusterError, match=r"Spark needs Java 17 or newer.*install a JRE"):
        cluster.start()
    assert not (tmp_path / "cluster").exists()  # nothing was started


def test_a_cluster_needs_a_worker_and_a_core(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"workers=0 cores_per_worker=1: need >= 1"):
        SparkCluster(tmp_path, workers=0)


def test_each_worker_gets_its_own_ports_and_work_dir(tmp_path: Path) -> None:
    cluster = SparkCluster(tmp_path, workers=3)
    ports = [cluster.master_port, cluster.webui_port, *cluster.worker_webui_ports]
    assert len(set(ports)) == 5
    assert len(set(cluster.work_dirs)) == 3
    assert cluster.master_url == f"spark://127.0.0.1:{cluster.master_port}"


def test_executor_java_options_go_to_the_clients_spark_defaults(tmp_path: Path) -> None:
    """The suite's cluster gives its executors the quick JVM settings (their applications read
    the cluster's spark-defaults.conf, not the suite's); a cluster without them leaves Spark's."""
    quick = SparkCluster(tmp_path / "quick", executor_java_options="-XX:TieredStopAtLevel=1")
    quick._write_conf()
    lines = (quick.conf_dir / "spark-defaults.conf").read_text().splitlines()
    assert "spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1" in lines
    plain = SparkCluster(tmp_path / "plain")
    plain._write_conf()
    assert "extraJavaOptions" not in (plain.conf_dir / "spark-defaults.conf").read_text()
