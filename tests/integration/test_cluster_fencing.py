"""Fencing in cluster mode (issue 42 item 2): two job managers (Spark drivers) of one job on the
real standalone cluster, checkpoints in the real S3 server. The second waits as a standby while
the first holds the lease; the first stalls (SIGSTOP: a GC pause, a partition) while its task
runs on in its executor; the second takes over once the lease expired and runs the job on the
cluster's other core; the first, resumed, finds its lease lost, commits nothing more and exits
with an error. No checkpoint of the first's epoch is written after the take-over, and the
file sink ends with exactly the model's windows."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.integration.test_checkpoints import N_EVENTS, SPEC
from tests.integration.test_cluster import Place, _assert_sink, _job, _start
from tests.support import event_lines, make_events, wait_until
from tests.support.cluster import cluster_place
from tests.support.reference import simulate
from tests.support.servers import S3Place
from tests.support.spark_cluster import SparkCluster
from weir.state.checkpoints import CheckpointStorage
from weir.state.lease import LeaseStore

LEASE_MS = 8000


@pytest.fixture(scope="module")
def place(
    spark_cluster: SparkCluster, module_s3: S3Place, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Place]:
    yield from cluster_place(spark_cluster, module_s3, tmp_path_factory, "fencing")


def _epochs(place: Place, job: str, monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    for name, value in place.s3.env.items():
        monkeypatch.setenv(name, value)
    chk = CheckpointStorage(place.s3.url, job)
    return {n: int(chk.metadata(n)["epoch"]) for n in chk.ids()}


def test_a_second_driver_of_the_job_never_commits_until_it_holds_the_lease(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = event_lines(make_events(N_EVENTS, seed=12))
    ref = simulate(lines, SPEC)
    job = _job(place, "fence", SPEC, lines, slow=True)
    out = place.root / "fence-out.jsonl"
    flags = (
        "--parallelism", "1", "--checkpoint-interval-ms", "300", "--lease-ms", str(LEASE_MS),
        "--restore", "auto", "--sink", f"file://{out}", "--exit-at-end",
    )  # fmt: skip
    first = _start(place, job, *flags)
    c = first.client()

    def checkpointed() -> bool:
        assert first.proc.poll() is None, first.stderr()[-3000:]
        body = c.get("/jobs/fence").json()
        assert body["state"] != "finished", "the run ended before the stall: slow it down"
        return (body.get("last_checkpoint") or 0) >= 2

    wait_until(checkpointed, 60.0, what="two checkpoints of the first driver")
    first.proc.send_signal(signal.SIGSTOP)  # the driver stalls; its task runs on
    try:
        stalled = _epochs(place, "fence", monkeypatch)
        second = _start(place, job, *flags)
        text = second.stderr()
        assert "standby: the lease" in text and "was not renewed" in text, text
    finally:
        first.proc.send_signal(signal.SIGCONT)
    assert first.proc.wait(60) != 0
    assert "lost its lease" in first.stderr(), first.stderr()[-3000:]
    assert second.proc.wait(180) == 0, second.stderr()[-3000:]

    epochs = _epochs(place, "fence", monkeypatch)
    assert set(stalled.values()) == {1}, stalled
    taken = [n for n in epochs if n not in stalled]
    assert taken and all(epochs[n] == 2 for n in taken), epochs
    found = LeaseStore(CheckpointStorage(place.s3.url, "fence")).read()
    assert found is not None and found[0].epoch == 2 and found[0].released
    _assert_sink(ref, out)
