"""``weir run --master spark://…``: the job's workers as one Spark barrier stage on a real
standalone cluster (a master and two one-core workers on loopback, so each weir worker runs in
its own executor JVM and Python worker), checkpoints in the real S3 server, real ``weir``
processes and HTTP.

- A job at parallelism 2 on the cluster serves exactly the brute-force model's windows
  (tumbling with late data, sliding, session), every key answered through the driver's API
  whichever task owns it, live and committed, and the file sink ends with the model's last
  emission of every window.
- kill -9 of one executor mid-run: Spark fails the stage, the job manager submits a new one from
  the latest checkpoint in S3, and every window's last emission still equals the model's.
- A savepoint of the cluster job at p=2 restores locally at p=1, and a savepoint of that run
  restores on the cluster at p=2: the chain ends with the model's windows.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.integration.test_checkpoints import N_EVENTS, SLOW_IMPRESSIONS, SPEC
from tests.support import (
    WeirResult,
    WeirServer,
    event_lines,
    job_text,
    make_events,
    read_jsonl,
    wait_until,
    write_lines,
)
from tests.support.cluster import START_S, ClusterPlace, cluster_place
from tests.support.reference import (
    AGGREGATES_SRC,
    Outcome,
    Spec,
    canonical,
    group_emissions,
    simulate,
)
from tests.support.servers import S3Place
from tests.support.spark_cluster import SparkCluster

MAX_P = 128


Place = ClusterPlace


@pytest.fixture(scope="module")
def place(
    spark_cluster: SparkCluster, module_s3: S3Place, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Place]:
    yield from cluster_place(spark_cluster, module_s3, tmp_path_factory, "cluster")


@pytest.fixture(autouse=True)
def _stopped_after(place: Place) -> Iterator[None]:
    """Every run a test starts ends with it, pass or fail: a driver left running would hold
    the cluster's two cores, and the next test's stage would never get its slots."""
    before = len(place.servers.started)
    yield
    for server in place.servers.started[before:]:
        server.stop()


def _job(place: Place, name: str, spec: Spec, lines: list[str], slow: bool = False) -> Path:
    src = write_lines(place.root / f"{name}.jsonl", lines)
    path = place.root / f"{name}.py"
    path.write_text(
        job_text(
            src, bound=spec.bound, size=spec.size, lateness=spec.lateness, name=name,
            slide=spec.slide, gap=spec.gap, steps=SLOW_IMPRESSIONS if slow else spec.steps,
        ),
        encoding="utf-8",
    )  # fmt: skip
    return path


def _start(place: Place, job: Path, *flags: str, cluster: bool = True) -> WeirServer:
    extra = place.cluster_flags() if cluster else ("--checkpoint-dir", place.s3.url)
    return place.servers.start(
        job, *extra, "--batch-size", "256", *flags,
        state_dir=place.root / f"state-{job.stem}-{len(place.servers.started)}",
        env=place.s3.env, timeout=START_S,
    )  # fmt: skip


def _state(server: WeirServer, key: str, consistency: str = "live") -> Any:
    url = f"/{server.job}/imps/state/{quote(key, safe='')}?consistency={consistency}"
    return server.client().get(url)


def _assert_sink(ref: Outcome, out: Path) -> None:
    """The file sink ends with the model's last emission of every window. A file sink is
    exactly-once: what a worker emits after a checkpoint's snapshot is written once that
    checkpoint completes, so the final windows reach the file a moment after the job reports
    finished (its final checkpoint, to S3 from the executors)."""
    want = {k: v[-1] for k, v in ref.emissions.items()}

    def last_emissions() -> dict[Any, Any]:
        return {k: v[-1] for k, v in group_emissions(read_jsonl(out)).items()}

    try:
        wait_until(lambda: last_emissions() == want, 30.0, what="the sink's last windows")
    except AssertionError:
        pass  # the asserts below say what differs
    got = last_emissions()
    assert set(got) == set(want), (
        sorted(set(want) - set(got))[:3],
        sorted(set(got) - set(want))[:3],
    )
    wrong = [k for k in want if got[k] != want[k]]
    assert not wrong, (
        f"{len(wrong)} windows differ, e.g. {[(k, got[k], want[k]) for k in wrong[:2]]}"
    )


def _owner(key: str, parallelism: int) -> int:
    kg = zlib.crc32(key.encode()) % MAX_P
    return next(i for i in range(parallelism) if kg <= (-(-(i + 1) * MAX_P // parallelism)) - 1)


# -- the same windows as the model, served through the driver ------------------------------


def test_cluster_job_serves_the_models_windows_from_both_tasks(place: Place) -> None:
    lines = event_lines(make_events(N_EVENTS, seed=31))
    ref = simulate(lines, SPEC)
    assert len(ref.late) >= 20, "the input must have late records"
    job = _job(place, "ct", SPEC, lines)
    out, late = place.root / "ct-out.jsonl", place.root / "ct-late.jsonl"
    server = _start(
        place, job, "--parallelism", "2", "--sink", f"file://{out}",
        "--late-sink", f"file://{late}", "--checkpoint-interval-ms", "300",
    )  # fmt: skip
    detail = server.wait_finished(90.0)
    assert [w["host"] for w in detail["workers"]] == ["127.0.0.1", "127.0.0.1"]
    expected = ref.state_by_key()
    owners = {_owner(k, 2) for k in expected}
    assert owners == {0, 1}, "the keys must fall on both tasks"
    for key, windows in expected.items():
        r = _state(server, key)
        assert r.status_code == 200, (key, r.text)
        assert r.json()["windows"] == windows, key
    _assert_sink(ref, out)
    assert canonical(read_jsonl(late)) == canonical(ref.late)
    # committed: the final checkpoint (taken after the end) holds the same windows
    c = server.client()
    wait_until(
        lambda: _state(server, "ad-0", "committed").status_code == 200, 30.0,
        what="the committed view of the latest checkpoint",
    )  # fmt: skip
    for key, windows in expected.items():
        body = _state(server, key, "committed").json()
        assert body["windows"] == windows and body["consistency"] == "committed", key
    listing = c.get(f"/{server.job}/imps/windows/{ref.state_by_key()['ad-0'][0]['start']}")
    assert listing.status_code == 200, listing.text
    assert {k["key_group"] for k in listing.json()["keys"]} and listing.json()["keys"]
    assert c.get(f"/{server.job}/imps/state/no-such-key").status_code == 404
    # an API process apart from the driver (weir api) routes to the tasks as well: it asks the
    # job manager where they serve over the control channel
    api = place.servers.start(
        job, "--checkpoint-dir", place.s3.url, command="api", state_dir=server.state_dir,
        env=place.s3.env,
    )  # fmt: skip
    for key, windows in expected.items():
        r = _state(api, key)
        assert r.status_code == 200, (key, r.text)
        assert r.json()["windows"] == windows, key
    assert api.stop() == 0, api.stderr()
    assert server.stop() == 0, server.stderr()


SLIDING = Spec(bound=200, size=1_000, slide=250, lateness=1_000, op="slide")
SESSION = Spec(bound=200, size=0, gap=400, lateness=500, op="sess")


def test_sliding_and_session_windows_on_the_cluster(place: Place) -> None:
    """One job, two operators on one keyed stream (one Spark start-up for both)."""
    lines = event_lines(make_events(6_000, seed=32))
    src = write_lines(place.root / "cs.jsonl", lines)
    job = place.root / "cs.py"
    job.write_text(
        f"""from weir import Job, WatermarkStrategy, agg, sources, windows

job = Job("cs", max_parallelism={MAX_P})
keyed = (
    job.source(
        sources.jsonl({str(src)!r}),
        timestamp="ts",
        watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200),
    )
    .filter(lambda e: e["event"] == "impression")
    .key_by("id")
)
keyed.window(windows.sliding(size_ms=1000, slide_ms=250), allowed_lateness_ms=1000).aggregate(
    "slide", {AGGREGATES_SRC}
)
keyed.window(windows.session(gap_ms=400), allowed_lateness_ms=500).aggregate(
    "sess", {AGGREGATES_SRC}
)
""",
        encoding="utf-8",
    )
    server = _start(place, job, "--parallelism", "2")
    server.wait_finished(90.0)
    for spec in (SLIDING, SESSION):
        expected = simulate(lines, spec).state_by_key()
        assert expected
        for key, windows in expected.items():
            r = server.client().get(f"/cs/{spec.op}/state/{quote(key, safe='')}")
            assert r.status_code == 200, (spec.op, key, r.text)
            assert r.json()["windows"] == windows, (spec.op, key)
    assert server.stop() == 0, server.stderr()


# -- failure: an executor lost --------------------------------------------------------------


def test_executor_killed_restarts_from_s3_exactly_once(
    place: Place, spark_cluster: SparkCluster
) -> None:
    lines = event_lines(make_events(N_EVENTS, seed=33))
    ref = simulate(lines, SPEC)
    out = place.root / "ck-out.jsonl"
    server = _start(
        place, _job(place, "ck", SPEC, lines, slow=True), "--parallelism", "2",
        "--sink", f"file://{out}", "--checkpoint-interval-ms", "200", "--restart-delay-ms", "0",
    )  # fmt: skip
    c = server.client()

    def checkpointed() -> dict[str, Any] | None:
        body: dict[str, Any] = c.get(f"/jobs/{server.job}").json()
        assert body["state"] != "finished", "the run ended before the kill: slow it down"
        return body if (body.get("last_checkpoint") or 0) >= 3 else None

    wait_until(checkpointed, 60.0, what="three checkpoints in S3")
    killed_at = time.monotonic()
    assert spark_cluster.kill_executor(0), "no executor ran on the first worker"
    restarted = wait_until(
        lambda: re.search(r"restarted from (\S+)", server.stderr()), 60.0, what="a restart"
    )  # fmt: skip
    assert restarted.group(1).startswith(place.s3.url), restarted.group(1)
    body = server.wait_finished(120.0)
    recovery_s = time.monotonic() - killed_at
    assert body["restarts"] >= 1
    _assert_sink(ref, out)
    print(json.dumps({"recovery_to_finished_s": round(recovery_s, 1)}))
    assert server.stop() == 0, server.stderr()


# -- rescale: cluster p=2 -> local p=1 -> cluster p=2, through savepoints --------------------


def _stop_with_savepoint(server: WeirServer, run_weir: Any) -> str:
    r: WeirResult = run_weir(
        "stop", server.job, "--savepoint", "--state-dir", str(server.state_dir), "--json",
        env=None, timeout=90,
    )  # fmt: skip
    assert r.rc == 0, r.stderr
    url: str = json.loads(r.stdout)["savepoint"]["path"]
    assert server.proc.wait(30) == 0, server.stderr()
    return url


def _records_in(server: WeirServer) -> int:
    return int(server.client().get(f"/jobs/{server.job}").json()["records_in"])


def test_savepoints_rescale_and_a_driver_restart_resumes(place: Place, run_weir: Any) -> None:
    """local p=1 -> (savepoint) -> cluster p=2 -> (kill -9 of the driver) -> cluster p=2 with
    --restore latest -> (savepoint) -> local p=1 to the end: the model's windows."""
    lines = event_lines(make_events(N_EVENTS, seed=34))
    ref = simulate(lines, SPEC)
    job = _job(place, "cr", SPEC, lines, slow=True)
    out = place.root / "cr-out.jsonl"
    sink = ("--sink", f"file://{out}")
    chk = ("--checkpoint-interval-ms", "300")
    first = _start(place, job, "--parallelism", "1", *sink, cluster=False)
    wait_until(lambda: _records_in(first) >= 2_000, 60.0, what="a twelfth of the input")
    savepoint = _stop_with_savepoint(first, run_weir)
    assert savepoint.startswith(place.s3.url), savepoint

    second = _start(place, job, "--parallelism", "2", *sink, *chk, "--restore", savepoint)
    wait_until(lambda: (_detail(second).get("last_checkpoint") or 0) >= 2, 60.0,
               what="two checkpoints of the cluster run")  # fmt: skip
    assert 0 < _records_in(second) and _detail(second)["state"] == "running"
    os.killpg(second.proc.pid, signal.SIGKILL)  # the driver, its JVM, its API
    second.proc.wait(10)

    third = _start(place, job, "--parallelism", "2", *sink, *chk, "--restore", "latest")
    restored = re.search(r"started workers=2 restored from (\S+)", third.stderr())
    assert restored and restored.group(1).startswith(place.s3.url), third.stderr()
    wait_until(lambda: _records_in(third) >= 2_000, 60.0, what="the resumed run to read on")
    again = _stop_with_savepoint(third, run_weir)

    last = _start(place, job, "--parallelism", "1", *sink, "--restore", again, cluster=False)
    last.wait_finished(120.0)
    _assert_sink(ref, out)
    for key, windows in ref.state_by_key().items():
        assert _state(last, key).json()["windows"] == windows, key
    assert last.stop() == 0, last.stderr()


def _detail(server: WeirServer) -> dict[str, Any]:
    body: dict[str, Any] = server.client().get(f"/jobs/{server.job}").json()
    return body


# -- what a user gets wrong: one line, at once ------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--master", "spark://127.0.0.1:1"),
            "cannot reach the Spark master at spark://127.0.0.1:1",
        ),
        (
            ("--spark-conf", "spark.dynamicAllocation.enabled=true"),
            "spark.dynamicAllocation.enabled=true",
        ),
        (("--spark-conf", "spark.speculation=true"), "spark.speculation=true"),
    ],
    ids=["unreachable", "dynamic-allocation", "speculation"],
)
def test_cluster_mistakes_are_named_at_once(
    place: Place, run_weir: Any, flags: tuple[str, ...], message: str
) -> None:
    job = _job(place, "cm", SPEC, event_lines(make_events(100, seed=1)))
    master = () if "--master" in flags else ("--master", place.master)
    began = time.monotonic()
    r: WeirResult = run_weir(
        "run", str(job), *master, *flags, "--checkpoint-dir", str(place.root / "chk-cm"),
        "--state-dir", str(place.root / "state-cm"), timeout=30,
    )  # fmt: skip
    assert r.rc == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert time.monotonic() - began < 20
