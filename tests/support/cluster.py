"""What the cluster-mode test modules share: a place to run ``weir`` against the session's
standalone Spark cluster and S3 prefix, whose runs all stop when the module ends."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import S3Place, Servers
from tests.support.spark_cluster import SparkCluster

START_S = 120.0  # a driver's Spark application and its stage's executors start in ~25 s here


@dataclass
class ClusterPlace:
    root: Path
    servers: Servers
    s3: S3Place
    master: str

    def cluster_flags(self) -> tuple[str, ...]:
        return ("--master", self.master, "--checkpoint-dir", self.s3.url)


def cluster_place(
    spark_cluster: SparkCluster, s3: S3Place, factory: pytest.TempPathFactory, name: str
) -> Iterator[ClusterPlace]:
    """A module fixture's body: yields the place, then stops every run started there."""
    root = factory.mktemp(name)
    servers = Servers(root)
    try:
        yield ClusterPlace(root, servers, s3, spark_cluster.master_url)
    finally:
        servers.stop_all()
