"""Jobs whose checkpoints live on S3 (SeaweedFS on loopback), with real ``weir`` processes.

One run at parallelism 2 checkpoints to ``s3://weir/<unique>`` and its job manager is killed
with SIGKILL in the middle of the input (the module's shared run). From its checkpoints, new
runs on a fresh host (an empty ``--state-dir``) restore ``latest`` at parallelism 1, 2 and 4 and
finish the input: each serves exactly the brute-force model's windows, and its file sink
(a copy of the killed run's, rewound on restore) ends with the model's last emission of every
window. A restore names a checkpoint by its URL too, and ``weir checkpoints`` lists them.

Another run kills one worker: the restarted workers take their SST files from the local
copies (``local>0``) and download only the small per-checkpoint files, and the output is
exactly-once. ``weir stop --savepoint --savepoint-dir s3://…`` exports a savepoint that restores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.integration.test_checkpoints import (
    FAST,
    _assert_matches,
    _expected,
    _job,
    _last_emissions,
)
from tests.integration.test_checkpoints import _wait_checkpoint as wait_checkpoint
from tests.support import (
    WeirResult,
    WeirServer,
    alive,
    descendants,
    job_text,
    read_jsonl,
    wait_until,
    worker_pids,
)
from tests.support.reference import Outcome, canonical
from tests.support.servers import S3Place, Servers
from weir.state.checkpoints import CheckpointStorage

RESTORE_LINE = re.compile(
    r"restore chk=(\d+) worker=(\d+) files=(\d+) downloaded=(\d+) bytes=(\d+) local=(\d+)"
)


@dataclass
class Killed:
    """The module's run, killed with SIGKILL after a few checkpoints to S3."""

    job: Path
    ref: Outcome
    out: Path  # its file sink as the kill left it
    storage: CheckpointStorage
    place: S3Place
    ids: list[int]
    env: dict[str, str]
    servers: Servers


@pytest.fixture(scope="module")
def killed(module_s3: S3Place, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Killed]:
    root = tmp_path_factory.mktemp("s3-jobs")
    servers = Servers(root)
    job, lines = _job(root, lambda src, **kw: _write_job(root / "job.py", src, **kw), seed=21)
    ref = _expected(lines)
    out = root / "out.jsonl"
    with pytest.MonkeyPatch.context() as env:  # this process's storage clients read AWS_*
        for name, value in module_s3.env.items():
            env.setenv(name, value)
        try:
            first = servers.start(
                job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST,
                "--checkpoint-dir", module_s3.url, state_dir=root / "state", env=module_s3.env,
            )  # fmt: skip
            wait_checkpoint(first, at_least=3)
            workers = descendants(first.proc.pid)
            os.kill(first.proc.pid, signal.SIGKILL)  # the job manager, and the API with it
            first.proc.wait(10)
            wait_until(lambda: not any(alive(w) for w in workers), 15.0, what="workers to exit")
            assert not (root / "state" / "checkpoints").exists() and not (root / "s3:").exists()
            storage = CheckpointStorage(module_s3.url, "t1")
            ids = storage.ids()
            assert ids and ids[-1] >= 3, ids
            yield Killed(job, ref, out, storage, module_s3, ids, module_s3.env, servers)
        finally:
            servers.stop_all()


def _write_job(path: Path, src: Path, **spec: Any) -> Path:
    path.write_text(job_text(src, **spec), encoding="utf-8")
    return path


def _copy(killed: Killed) -> CheckpointStorage:
    """A copy of the killed run's storage under a new prefix: a restored run checkpoints (and
    retention deletes the oldest), so each restore starts from the same objects."""
    prefix = f"{killed.place.prefix}-copy-{uuid.uuid4().hex[:8]}"
    assert killed.place.server.copy(killed.place.prefix, prefix) > 0
    return CheckpointStorage(killed.place.server.url(prefix), "t1")


def _restore(
    killed: Killed, tmp_path: Path, storage: CheckpointStorage, parallelism: int, restore: str
) -> tuple[WeirServer, Path]:
    """Restore into an empty state dir, on a copy of the killed run's file sink; wait until
    the input is finished."""
    out = tmp_path / "out.jsonl"
    shutil.copyfile(killed.out, out)
    server = killed.servers.start(
        killed.job, "--sink", f"file://{out}", "--parallelism", str(parallelism),
        "--batch-size", "256", "--checkpoint-dir", storage.root.url,
        "--restore", restore, state_dir=tmp_path / "empty-state", env=killed.env,
    )  # fmt: skip
    server.wait_finished(90.0)
    return server, out


def _served(server: WeirServer, key: str) -> list[dict[str, Any]]:
    r = server.client().get(f"/{server.job}/imps/state/{quote(key, safe='')}")
    assert r.status_code == 200, r.text
    windows: list[dict[str, Any]] = r.json()["windows"]
    return windows


def _assert_windows(ref: Outcome, out: Path) -> None:
    """The file sink ends with the model's last emission of every window, and nothing else."""
    got = _last_emissions(out)
    want = {k: v[-1] for k, v in ref.emissions.items()}
    assert set(got) == set(want), sorted(set(got) ^ set(want))[:5]
    wrong = [k for k in sorted(want) if got[k] != want[k]]
    assert not wrong, f"{len(wrong)} windows differ: {[(k, got[k], want[k]) for k in wrong[:3]]}"


def _assert_serves_the_model(server: WeirServer, ref: Outcome) -> None:
    want: dict[str, list[dict[str, Any]]] = {}
    for (key, _start, _end), emitted in sorted(ref.emissions.items()):
        last = {k: v for k, v in emitted[-1].items() if k not in ("op", "key")}
        want.setdefault(key, []).append(last)
    for key, windows in want.items():
        got = sorted(_served(server, key), key=lambda w: w["start"])
        assert got == windows, f"key {key!r}: served {got[:2]}…, the model {windows[:2]}…"


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_restore_latest_from_s3_into_an_empty_state_dir_serves_the_models_windows(
    killed: Killed, tmp_path: Path, parallelism: int
) -> None:
    storage = _copy(killed)
    assert storage.ids() == killed.ids
    server, out = _restore(killed, tmp_path, storage, parallelism, "latest")
    latest = killed.ids[-1]
    stderr = server.stderr()
    assert f"restored from {storage.location(latest)}" in stderr, stderr
    restores = RESTORE_LINE.findall(stderr)
    # the killed run's two workers own halves of the key groups: a new worker downloads the
    # checkpoint of each old worker whose range overlaps its own, and no other
    assert {int(w) for _, w, *_ in restores} == {0, 1}, restores
    assert len(restores) == max(parallelism, 2), restores
    assert all(int(n) == latest and int(d) > 0 for n, _, _, d, _, _ in restores), restores
    _assert_serves_the_model(server, killed.ref)
    _assert_windows(killed.ref, out)
    # late records are a file of the state dir: a fresh host has those after the checkpoint
    late = canonical(read_jsonl(tmp_path / "empty-state" / "t1" / "late.jsonl"))
    assert late and set(late) <= set(canonical(killed.ref.late))
    server.stop()


def test_restore_names_an_s3_checkpoint_by_its_url_and_weir_checkpoints_lists_them(
    killed: Killed, tmp_path: Path, run_weir: Callable[..., WeirResult]
) -> None:
    r = run_weir(
        "checkpoints", "t1", "--checkpoint-dir", killed.storage.root.url, "--json", env=killed.env
    )
    assert r.rc == 0, r.stderr
    listed = json.loads(r.stdout)
    rows = listed if isinstance(listed, list) else listed["checkpoints"]
    assert sorted(c["id"] for c in rows) == killed.ids, listed
    first = killed.ids[0]
    storage = _copy(killed)
    url = storage.location(first)
    assert url.startswith("s3://weir/") and url.endswith(f"/t1/chk-{first}")
    server, out = _restore(killed, tmp_path, storage, 2, url)
    assert f"restored from {url}" in server.stderr()
    _assert_serves_the_model(server, killed.ref)
    restored_from = server.client().get("/jobs/t1/checkpoints").json()["restored_from"]
    assert restored_from == url
    server.stop()


def test_kill_9_of_a_worker_recovers_exactly_once_from_local_copies_of_s3_files(
    s3: S3Place,
    tmp_path: Path,
    write_job: Callable[..., Path],
    weir_server: Callable[..., WeirServer],
) -> None:
    job, lines = _job(tmp_path, write_job, seed=22)
    ref = _expected(lines)
    out, state = tmp_path / "out.jsonl", tmp_path / "state"
    server = weir_server(
        job, "--sink", f"file://{out}", "--exit-at-end", "--parallelism", "2", *FAST,
        "--checkpoint-dir", s3.url, state_dir=state, env=s3.env,
    )  # fmt: skip
    wait_checkpoint(server, at_least=2)
    victim = worker_pids(server.proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    assert server.proc.wait(90) == 0, server.stderr()
    stderr = server.stderr()
    assert "restarting (attempt 1 of 3)" in stderr and "restarted from s3://" in stderr, stderr
    restores = RESTORE_LINE.findall(stderr)
    assert sorted(int(w) for _, w, *_ in restores) == [0, 1], restores
    for _n, _w, files, downloaded, _bytes, local in restores:
        # every SST file is linked from the local copies; only the checkpoint's small
        # per-worker files (MANIFEST, OPTIONS, CURRENT) come over the network
        assert int(local) > 0 and int(downloaded) + int(local) == int(files), restores
    assert not alive(victim)
    _assert_matches(ref, out, state)
    assert not (state / "checkpoints").exists()
