"""The job runtime contract (``engine/runtime/view.py``'s ``JobRuntime``, what the API reads),
one suite run against both implementations, as Flink's ``StateBackendTestBase`` is: the
in-process ``JobManager`` (``weir run``'s own API) and ``api.remote.RemoteRuntime`` (``weir
api``, reading ``jobmanager.json`` and calling the job manager's control channel), each over the
same real job (``tests/support/runtimes.py``). Five jobs are started once for the module: a
bounded one with checkpoints on, paced so that it runs for seconds; one whose worker is killed
with checkpoints on (it restarts); one whose worker is killed with checkpoints off (it fails);
one stopped and one cancelled while they run.

The remote view lags: it sees what the job manager last published (every 250 ms, and soon after
a change), so a condition it must reach is waited for with a deadline. Where the two differ by
design, the suite asserts the difference:

- ``generation`` counts restarts from 0 in process; the remote view counts the (run, generation)
  pairs it has read, from 1 at its first read, so that a new ``weir run`` of the job makes its
  readers reopen too. Both bump by exactly one per restart, which is what the API uses.
- ``checkpoints``: the status file carries the newest ``status.RECENT_CHECKPOINTS`` (10), the
  job manager keeps up to 100; ``completed_checkpoints`` counts every one in both.
- ``state()`` and ``status_problem``: only the remote view can lose sight of the job manager
  (``unknown``, a problem naming the missing or stale file; ``tests/unit/test_remote_runtime.py``)
  or say that the job ended (stopped, cancelled); in process there is no status to vouch for.
  Before its first read the remote view knows nothing: no parallelism, ranges or workers.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.support import LOCAL, chk_dir, event_lines, make_events, wait_until
from tests.support.reference import Spec, simulate
from tests.support.runtimes import (
    BOUND,
    IMPLEMENTATIONS,
    IN_PROCESS,
    JOB_S,
    LAG_S,
    MAX_PARALLELISM,
    PARALLELISM,
    REMOTE,
    SIZE,
    LiveJob,
    live_job,
    settled,
    wait_settled,
)
from weir.api import Registry, create_app, handle_for
from weir.api.remote import RemoteRuntime
from weir.base.errors import ConfigError, ControlError, PathRefused
from weir.engine.runtime.control.status import RECENT_CHECKPOINTS, read_status, status_path
from weir.engine.runtime.messages import WorkerStatus
from weir.engine.runtime.wire import from_plain
from weir.engine.watermarks import MAX_WATERMARK, MIN_WATERMARK
from weir.state.checkpoints import now_ms
from weir.state.keygroups import KeyGroupRange, range_for_operator


def halves(n: int, seed: int) -> list[list[dict[str, Any]]]:
    """``n`` ad events in two inputs, none late: they lag by at most ``BOUND`` ms."""
    events = make_events(n, seed, far_fraction=0.0, jitter=BOUND)
    return [events[: n // 2], events[n // 2 :]]


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveJob]:
    """2,000 events, each impression paced 5 ms, 8 a batch: about 5 s of running, with a
    checkpoint every 100 ms (some 15 complete on a loaded machine, each commit also writing
    the job's lease: more than the status file carries)."""
    root = tmp_path_factory.mktemp("bounded")
    with live_job(root, halves(2_000, seed=3), pace_s=0.005, batch_size=8,
                  checkpoint_interval_ms=100) as job:  # fmt: skip
        yield job


@dataclass(frozen=True)
class Restart:
    job: LiveJob
    generations: dict[str, int]  # what each view said before the kill
    checkpoint: int  # the newest complete checkpoint then: the restart restores it or a newer one

    def seen_by(self, impl: str) -> bool:
        """``impl`` says the job restarted, and its new workers finished and checkpointed."""
        rt = self.job.runtime(impl)
        return rt.restarts == 1 and rt.generation != self.generations[impl] and settled(rt)


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restart]:
    """A job that finished and checkpointed its end, then lost worker 1 to ``kill -9``."""
    root = tmp_path_factory.mktemp("restarted")
    with live_job(root, halves(400, seed=4), checkpoint_interval_ms=100,
                  restart_delay_ms=100) as job:  # fmt: skip
        for impl in IMPLEMENTATIONS:
            wait_settled(job.runtime(impl))
        generations = {impl: job.runtime(impl).generation for impl in IMPLEMENTATIONS}
        checkpoint = job.manager.last_checkpoint
        assert checkpoint is not None
        os.kill(job.pids[1], signal.SIGKILL)
        yield Restart(job, generations, checkpoint)


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveJob]:
    """A job without checkpoints (so without restarts) whose worker 1 was killed with ``kill
    -9`` once it ran."""
    root = tmp_path_factory.mktemp("failed")
    with live_job(root, halves(400, seed=5)) as job:
        wait_until(lambda: job.manager.state() in ("running", "finished"), JOB_S,
                   what="the workers to report")  # fmt: skip
        os.kill(job.pids[1], signal.SIGKILL)
        yield job


@dataclass(frozen=True)
class Ended:
    job: LiveJob
    state: str  # stopped or cancelled


@pytest.fixture(scope="module", params=["stopped", "cancelled"])
def ended(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ended]:
    """A paced job stopped (``JobManager.stop``, as ``weir run`` does on SIGTERM) or cancelled
    (``weir cancel``) once both views' timelines saw it running."""
    root = tmp_path_factory.mktemp(request.param)
    with live_job(root, halves(1_200, seed=6), pace_s=0.005, batch_size=8) as job:
        seen = job.timeline.seen
        wait_until(lambda: all(seen[impl][-1:] == ["running"] for impl in IMPLEMENTATIONS),
                   JOB_S, what="both views' timelines to show the job running")  # fmt: skip
        if request.param == "stopped":
            job.manager.stop()
        else:
            job.manager.cancel_job()
        yield Ended(job, request.param)


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def reaches(read: Callable[[], object], expected: object, timeout: float = LAG_S) -> None:
    """``read()`` equals ``expected`` within ``timeout`` (at once in process; the remote view
    may lag a publication); on a timeout pytest shows the difference."""
    deadline = time.monotonic() + timeout
    while (got := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.02)
    assert got == expected


# -- the bounded job -----------------------------------------------------------------------------


def test_parallelism_and_key_group_ranges(bounded: LiveJob, impl: str) -> None:
    rt = bounded.runtime(impl)
    reaches(lambda: rt.parallelism, PARALLELISM)
    expected = [range_for_operator(MAX_PARALLELISM, PARALLELISM, i) for i in range(PARALLELISM)]
    assert rt.ranges == expected == [KeyGroupRange(0, 3), KeyGroupRange(4, 6)]
    assert sorted(kg for r in rt.ranges for kg in r) == list(range(MAX_PARALLELISM))
    assert [w["key_groups"] for w in rt.worker_status()] == [(0, 3), (4, 6)]


def test_state_goes_from_starting_through_running_to_finished(bounded: LiveJob, impl: str) -> None:
    assert bounded.timeline.final(impl) == ["starting", "running", "finished"]
    assert bounded.runtime(impl).failure_reason is None


def test_the_source_is_the_job_files(bounded: LiveJob, impl: str) -> None:
    assert bounded.runtime(impl).source == bounded.source


def test_every_watermark_is_the_final_one_once_the_input_ended(bounded: LiveJob, impl: str) -> None:
    rt = bounded.runtime(impl)
    wait_settled(rt)
    assert rt.operator_watermark("imps") == MAX_WATERMARK
    # and what RocksDB holds is as of it: live reads of a finished job see everything, final
    assert rt.state_watermark("imps") == MAX_WATERMARK
    assert rt.operator_watermark("no-such-op") == MIN_WATERMARK  # no worker reports it
    # the last watermark data produced: the slower input's newest event time, less the bound
    data = min(max(e["ts"] for e in part) for part in bounded.events) - BOUND - 1
    for w in rt.worker_status():
        assert w["watermark"] == MAX_WATERMARK
        assert w["operators"]["imps"]["watermark"] == MAX_WATERMARK
        assert w["operators"]["imps"]["state_watermark"] == MAX_WATERMARK
        assert w["operators"]["imps"]["data_watermark"] == data


def test_worker_statuses_one_per_worker_with_typed_fields(bounded: LiveJob, impl: str) -> None:
    rt = bounded.runtime(impl)
    wait_settled(rt)
    workers = rt.worker_status()
    assert [w["worker"] for w in workers] == list(range(PARALLELISM))
    for i, w in enumerate(workers):
        assert from_plain(WorkerStatus, w) == w  # every field of the type it is declared with
        assert w["splits"] == [str(bounded.inputs[i])]
        assert w["records_in"] == len(bounded.events[i])
        assert w["finished"] and w["restored_from"] is None and w["dead_letters"] == 0
        assert 0 < w["run_started_at"] <= w["first_record_at"] <= w["finished_at"]
    assert sum(w["records_sent"] for w in workers) == sum(w["records_received"] for w in workers)
    impressions = sum(e["event"] == "impression" for part in bounded.events for e in part)
    assert sum(w["operators"]["imps"]["records_in"] for w in workers) == impressions


def test_checkpoints_are_those_on_disk(bounded: LiveJob, impl: str) -> None:
    rt, manager = bounded.runtime(impl), bounded.manager
    wait_settled(rt)
    newest = bounded.storage.ids()[-1]
    reaches(lambda: rt.last_checkpoint, newest)  # another test may have taken a savepoint
    everything = manager.checkpoints  # in process: every one of this run (fewer than 100)
    assert [c["id"] for c in everything] == list(range(1, newest + 1))
    expected = everything if impl == IN_PROCESS else everything[-RECENT_CHECKPOINTS:]
    reaches(lambda: rt.checkpoints, expected)
    assert rt.completed_checkpoints == len(everything) == newest
    assert len(everything) > RECENT_CHECKPOINTS or impl == IN_PROCESS  # the difference is seen
    for n in bounded.storage.ids():  # those retained: their summary is their _metadata's
        meta = bounded.storage.metadata(n)
        assert everything[n - 1] == {k: v for k, v in meta.items() if k != "workers"}
    assert rt.storage.where == bounded.storage.where
    assert (rt.checkpoint_problem, rt.status_problem, rt.restored_from) == (None, None, None)
    assert rt.restarts == 0 and rt.backfills == []


def test_a_savepoint_through_each_lands_on_disk(bounded: LiveJob, impl: str) -> None:
    rt = bounded.runtime(impl)
    wait_settled(rt)
    before = rt.last_checkpoint
    assert before is not None
    result = rt.trigger_savepoint(30.0)
    # done is seen at once: the job manager publishes a checkpoint before it answers for it
    assert rt.last_checkpoint == rt.checkpoints[-1]["id"] == result["id"] > before
    assert rt.checkpoints[-1]["savepoint"] is True
    path = chk_dir(bounded.storage, result["id"]).resolve()
    assert result["path"] == str(path) and (path / "_metadata").is_file()
    meta = bounded.storage.metadata(result["id"])
    assert meta["savepoint"] is True and meta["id"] == result["id"]
    assert meta["watermark"] == MAX_WATERMARK  # it holds the end of the input
    assert rt.state() == "finished"


def test_a_backfill_the_job_manager_refuses_is_refused_alike(bounded: LiveJob, impl: str) -> None:
    rt = bounded.runtime(impl)
    wait_settled(rt)
    base = bounded.cfg.backfill_dir.resolve()
    outside = {"op": "imps", "path": "/etc", "min_end": 0, "max_end": 1_000, "windows": None}
    with pytest.raises(PathRefused, match=f"backfill path '/etc' is not under {base}; write"):
        rt.ingest_backfill(outside, 10.0)
    empty = base / f"empty-{impl}"
    empty.mkdir(parents=True)
    with pytest.raises(ConfigError, match="is not a directory of backfill SST files"):
        rt.ingest_backfill({**outside, "path": str(empty)}, 10.0)
    assert rt.backfills == []


# -- a restart and a failure ---------------------------------------------------------------------


def test_a_restart_bumps_the_generation_once(restarted: Restart, impl: str) -> None:
    rt = restarted.job.runtime(impl)
    wait_until(lambda: restarted.seen_by(impl), JOB_S, what="the job to restart and finish again")
    assert rt.generation == restarted.generations[impl] + 1
    # the newest complete checkpoint: the one before the kill, or one that completed between
    # reading it and the kill (the job checkpoints every 100 ms)
    assert rt.restored_from is not None
    n = int(Path(rt.restored_from).name.removeprefix("chk-"))
    assert n >= restarted.checkpoint
    restored = chk_dir(restarted.job.storage, n).resolve()
    assert rt.restored_from == str(restored)
    assert [w["restored_from"] for w in rt.worker_status()] == [restored.name] * PARALLELISM
    assert rt.failure_reason is None and rt.state() == "finished"


def test_a_worker_that_dies_without_checkpoints_fails_the_job(failed: LiveJob, impl: str) -> None:
    rt = failed.runtime(impl)
    reason = f"worker 1 failed: process {failed.pids[1]} exited with code -9"
    reaches(rt.state, "failed", JOB_S)
    assert rt.failure_reason == reason
    assert rt.restarts == 0
    with pytest.raises(ControlError, match="job 't1' is not running; no savepoint taken"):
        rt.trigger_savepoint(5.0)


def test_a_job_ended_while_it_runs_says_how(ended: Ended, impl: str) -> None:
    rt = ended.job.runtime(impl)
    assert ended.job.timeline.final(impl) == ["starting", "running", ended.state]
    assert rt.failure_reason is None
    with pytest.raises(ControlError, match="job 't1' is not running"):
        rt.trigger_savepoint(5.0)
    # only the remote view has a status to vouch for: it says why it cannot
    assert rt.status_problem == (None if impl == IN_PROCESS else f"the job was {ended.state}")


def test_the_remote_view_of_an_ended_job_keeps_its_last_word(ended: Ended) -> None:
    """The job manager wrote its last status as the job ended: that status only grows older."""
    job_dir = ended.job.cfg.job_dir(ended.job.job.name)
    remote = RemoteRuntime(ended.job.job, job_dir, ended.job.storage, stale_after_s=0.2)
    last = read_status(status_path(job_dir))
    assert last is not None and (last.state, last.ended) == (ended.state, True)
    wait_until(lambda: now_ms() - last.written_at > 500, 5.0, interval=0.1,
               what="the last status to be older than this view's staleness limit")  # fmt: skip
    assert (remote.state(), remote.status_problem) == (ended.state, f"the job was {ended.state}")


# -- the HTTP API over each ----------------------------------------------------------------------


@contextmanager
def apis(job: LiveJob) -> Iterator[dict[str, TestClient]]:
    """The HTTP API (``create_app``) over each implementation, with files of its own."""
    with ExitStack() as stack:
        clients = {}
        for impl in IMPLEMENTATIONS:
            registry = Registry()
            api_dir = job.cfg.job_dir(job.job.name) / f"api-{impl}"
            registry.add(handle_for(job.job, job.runtime(impl), job.cfg, api_dir))
            client = TestClient(create_app(registry), base_url=LOCAL, raise_server_exceptions=False)
            clients[impl] = stack.enter_context(client)
        yield clients


def same_answer(clients: dict[str, TestClient], path: str) -> tuple[int, Any]:
    """The answer to ``GET path`` once both APIs give it (the remote one may lag)."""

    def answers() -> dict[str, tuple[int, Any]]:
        return {
            impl: (r.status_code, r.json()) for impl, c in clients.items() for r in [c.get(path)]
        }

    found = answers()
    deadline = time.monotonic() + LAG_S
    while found[REMOTE] != found[IN_PROCESS] and time.monotonic() < deadline:
        time.sleep(0.05)
        found = answers()
    assert found[REMOTE] == found[IN_PROCESS], path
    return found[IN_PROCESS]


def model_state(job: LiveJob) -> dict[str, Any]:
    lines = event_lines([e for part in job.events for e in part])  # none late: order is moot
    return simulate(lines, Spec(bound=BOUND, size=SIZE, lateness=0)).state_by_key()


def test_the_api_answers_the_same_over_each(bounded: LiveJob) -> None:
    wait_settled(bounded.manager)
    with apis(bounded) as clients:
        assert same_answer(clients, "/health") == (
            200, {"status": "ok", "jobs": {"t1": "finished"}, "problems": {}}
        )  # fmt: skip
        code, detail = same_answer(clients, "/jobs/t1")
        assert code == 200 and detail["state"] == "finished" and detail["parallelism"] == 2
        assert [w["key_groups"] for w in detail["workers"]] == [[0, 3], [4, 6]]
        assert same_answer(clients, "/jobs/t1/checkpoints")[0] == 200
        for key, windows in model_state(bounded).items():
            code, body = same_answer(clients, f"/t1/imps/state/{quote(key, safe='')}")
            assert code == 200 and body["windows"] == windows, key


def test_after_a_restart_both_apis_answer_from_the_new_workers(restarted: Restart) -> None:
    for impl in IMPLEMENTATIONS:
        seen = partial(restarted.seen_by, impl)
        wait_until(seen, JOB_S, what=f"the {impl} view of the restart")
    with apis(restarted.job) as clients:
        for key, windows in model_state(restarted.job).items():
            code, body = same_answer(clients, f"/t1/imps/state/{quote(key, safe='')}")
            assert code == 200 and body["windows"] == windows, key


def test_health_is_503_over_each_once_the_job_failed(failed: LiveJob) -> None:
    reaches(failed.remote.state, "failed", JOB_S)
    with apis(failed) as clients:
        code, body = same_answer(clients, "/health")
        assert code == 503 and body["jobs"] == {"t1": "failed"}
        assert body["problems"]["t1"] == failed.manager.failure_reason
