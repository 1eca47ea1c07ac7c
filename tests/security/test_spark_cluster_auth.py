"""The local Spark cluster weir's tooling starts (``tests.support.spark_cluster``: the tests'
session cluster, ``make bench-cluster``, the README's how-to) trusts no other local account.

The audit's attack: the helper's cluster had no authentication and its REST submission port
open, so any local account submitted an application whose tasks ran as the cluster's user.
Here ``nobody`` tries exactly that with pyspark against the session's cluster: the master
refuses it before any task runs. The master listens only on its two ports on 127.0.0.1 (no REST
server), and the secret is in files only the cluster's user reads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.security.conftest import Stranger
from tests.support.spark_cluster import SparkCluster

_LISTEN = "0A"


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != _LISTEN or cols[9] not in inodes:
                continue
            addr_hex, port_hex = cols[1].split(":")
            found.add((_address(addr_hex), int(port_hex, 16)))
    return found


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return ".".join(str(b) for b in reversed(raw))
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    v6 = b"".join(words)
    if v6[:12] == b"\0" * 10 + b"\xff\xff":
        return ".".join(str(b) for b in v6[12:])
    return ":".join(v6[i : i + 2].hex() for i in range(0, 16, 2))


def _master_pid(cluster: SparkCluster) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"org.apache.spark.deploy.master.Master" in cmd
            and str(cluster.master_port).encode() in cmd
        ):
            return int(entry.name)
    raise AssertionError("the master's JVM was not found")


INTRUDER = r"""
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[1]).appName("intruder")
         .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
         .getOrCreate())
marker = sys.argv[2]
def plant(_):
    open(marker, "w").write("ran as the cluster's user")
    return 1
print("ran", spark.sparkContext.parallelize([0], 1).map(plant).collect(), flush=True)
"""


def test_another_account_cannot_run_an_application_on_the_cluster(
    spark_cluster: SparkCluster, stranger: Stranger, public_dir: Path
) -> None:
    marker = public_dir / "intruded"
    public_dir.chmod(0o777)  # where the intruder's task would leave its mark
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    argv = [sys.executable, "-I", "-c", INTRUDER, spark_cluster.master_url, str(marker)]
    intruder = subprocess.Popen(
        stranger.command(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd="/tmp", start_new_session=True,
    )  # fmt: skip
    err: list[str] = []
    try:
        assert intruder.stderr is not None
        deadline = time.monotonic() + 120.0
        # a refused driver goes on retrying for a minute: its first refusal is enough
        while time.monotonic() < deadline and not _refused("".join(err)):
            line = intruder.stderr.readline()
            if not line:
                break
            err.append(line)
    finally:
        os.killpg(intruder.pid, signal.SIGKILL)
        out = intruder.communicate(timeout=30)[0]
    assert "ran" not in out, out
    assert not marker.exists(), "another account's application ran a task on the cluster"
    assert _refused("".join(err)), "".join(err)[-3000:]  # for want of the secret


def _refused(err: str) -> bool:
    return "SASL" in err or "A secret key must be specified" in err


def test_the_master_listens_only_on_its_two_loopback_ports(spark_cluster: SparkCluster) -> None:
    ports = _listening(_master_pid(spark_cluster))
    assert {p for _, p in ports} == {spark_cluster.master_port, spark_cluster.webui_port}, ports
    assert all(addr.startswith("127.") for addr, _ in ports), ports


def test_the_secret_is_readable_by_the_clusters_user_only(
    spark_cluster: SparkCluster, stranger: Stranger
) -> None:
    conf = spark_cluster.conf_dir
    assert conf.stat().st_mode & 0o777 == 0o700
    for f in (conf / "spark-defaults.conf", spark_cluster.secret_file):
        assert f.stat().st_mode & 0o777 == 0o600, f
        secret = spark_cluster.secret_file.read_text().strip()
        assert len(secret) >= 32 and secret in f.read_text()
    tried = stranger.run(f"print(open({str(spark_cluster.secret_file)!r}).read())")
    assert tried.returncode != 0 and secret not in tried.stdout
