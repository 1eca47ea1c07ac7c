"""Cluster mode's checks that need no cluster: the forms of --master, the refused Spark
settings, and an unreachable master (a free loopback port nobody listens on)."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from weir.base.errors import ConfigError, MissingExtra
from weir.engine.runtime.control.cluster import (
    check_conf,
    check_reachable,
    cluster_session,
    parse_master,
)


@pytest.mark.parametrize(
    "url",
    [
        "spark://127.0.0.1:7077",
        "spark://master.example:7077",
        "spark://h1:7077,h2:7078",
        "spark://[::1]:7077",
        "k8s://https://10.0.0.1:6443",
        "k8s://https://api.example",
        "k8s://http://127.0.0.1:8001",
        "yarn",
    ],
)
def test_cluster_masters_are_accepted(url: str) -> None:
    assert parse_master(f" {url} ") == url


@pytest.mark.parametrize("url", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_local_masters_are_refused_with_the_reason(url: str) -> None:
    with pytest.raises(ConfigError, match=r"without `master` weir runs local worker processes"):
        parse_master(url)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mesos://h:5050", r"'mesos://h:5050' is not a cluster master URL; use one of: spark://"),
        ("127.0.0.1:7077", r"not a cluster master URL.*k8s://https://HOST:PORT, yarn"),
        ("", r"not a cluster master URL"),
        ("spark://h", r"'h' is not HOST:PORT with a port in 1-65535"),
        ("spark://h:0", r"'h:0' is not HOST:PORT"),
        ("spark://h:70000", r"'h:70000' is not HOST:PORT"),
        ("spark://h1:7077,", r"'' is not HOST:PORT"),
        ("k8s://", r"a Kubernetes master is k8s://https://HOST:PORT"),
        ("k8s://https://h:1/path", r"a Kubernetes master is k8s://https://HOST:PORT"),
    ],
)
def test_other_masters_are_refused_naming_the_forms(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_master(url)


@pytest.mark.parametrize("key", ["spark.dynamicAllocation.enabled", "spark.speculation"])
@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_settings_that_break_a_barrier_stage_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}={value}: .*; set {key}=false for this app"):
        check_conf({key: value})


def test_refusals_give_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"would release one that looks idle and so kill a"):
        check_conf({"spark.dynamicAllocation.enabled": "true"})
    with pytest.raises(ConfigError, match=r"second live worker for the same key groups"):
        check_conf({"spark.speculation": "true"})


def test_harmless_settings_pass() -> None:
    check_conf({})
    check_conf({"spark.dynamicAllocation.enabled": "false", "spark.speculation": "false"})
    check_conf({"spark.executor.memory": "512m"})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_master_is_named_quickly() -> None:
    url = f"spark://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=rf"cannot reach the Spark master at {url}: connection refused; start it or fix "
        r"`master`",
    ):
        check_reachable(url, timeout_s=5)
    assert time.monotonic() - t0 < 10


def test_with_standby_masters_each_unreachable_one_is_named() -> None:
    a, b = _closed_port(), _closed_port()
    url = f"spark://127.0.0.1:{a},127.0.0.1:{b}"
    with pytest.raises(ConfigError, match=rf"127.0.0.1:{a} connection refused; 127.0.0.1:{b}"):
        check_reachable(url)


def test_one_answering_master_of_several_is_enough() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_reachable(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}")


def test_the_session_refuses_before_contacting_the_master() -> None:
    # a closed port: were the settings not checked first, this would fail on reachability
    url = f"spark://127.0.0.1:{_closed_port()}"
    with pytest.raises(ConfigError, match=r"spark.speculation=true"):
        cluster_session(url, "t", {"spark.speculation": "true"})
    with pytest.raises(ConfigError, match=r"cannot reach the Spark master"):
        cluster_session(url, "t", {})
    with pytest.raises(ConfigError, match=r"without `master` weir runs local worker"):
        cluster_session("local[2]", "t", {})


def test_without_pyspark_the_session_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # what an install without it gives
    with pytest.raises(
        MissingExtra,
        match=r"spark extra, and pyspark is not installed: pip install 'weir-stream\[spark\]'",
    ):
        cluster_session(f"spark://127.0.0.1:{_closed_port()}", "t", {})
