"""Private files (issue 17, item 5): a running job's state directory, checkpoints, status file,
side outputs and control key are the user's alone, ``0700`` directories and ``0600`` files,
even under a permissive umask and in a directory anybody can traverse. Another account can
neither list nor read any of it. The library creates them so too, without the command line's
umask."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.security.conftest import Stranger
from tests.support import WeirServer, job_text, make_events, wait_until, write_events
from weir.engine.runtime.control.runlock import RunLock
from weir.engine.runtime.control.status import write_status
from weir.engine.sinks import jsonl
from weir.state.checkpoints import METADATA, CheckpointStorage
from weir.state.rocksdb import RocksState

# the stranger tries every path and prints the ones it could list or read
PROBE = """
import json, os
found = []
for p in json.loads(PATHS):
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            with open(p, "rb") as fh:
                fh.read(1)
        found.append(p)
    except OSError:
        pass
print(json.dumps(found))
"""


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _tree(*roots: Path) -> list[Path]:
    return [p for r in roots for p in [r, *sorted(r.rglob("*"))]]


def _open_to_others(paths: list[Path]) -> list[str]:
    """Paths with any group or other permission bit (symlinks aside)."""
    return [
        f"{p} {oct(stat.S_IMODE(p.lstat().st_mode))}"
        for p in paths
        if p.exists() and not p.is_symlink() and p.lstat().st_mode & 0o077
    ]


def test_a_running_jobs_files_are_private(
    public_dir: Path,
    stranger: Stranger,
    tmp_path: Path,
    weir_server: Callable[..., WeirServer],
) -> None:
    src = write_events(tmp_path / "in.jsonl", make_events(400, seed=5))
    job = public_dir / "job.py"
    job.write_text(job_text(src, bound=200, size=1_000, lateness=500))
    state, chk = public_dir / "state", public_dir / "chk"
    with _umask(0o022):  # what a shell usually has: weir must not rely on a stricter one
        server = weir_server(
            job,
            "--parallelism", "2",
            "--checkpoint-dir", str(chk),
            "--checkpoint-interval-ms", "100",
            state_dir=state,
        )  # fmt: skip
    client = server.client()
    wait_until(lambda: (client.get("/jobs/t1").json().get("last_checkpoint") or 0) >= 1, 30)
    job_dir = server.job_dir
    for name in ("jobmanager.json", "control.key", "run.lock", "late.jsonl"):
        assert (job_dir / name).exists(), name
    assert list((chk / "t1").glob(f"chk-*/{METADATA}"))
    paths = _tree(state, chk)

    assert _open_to_others(paths) == []
    if stranger.other_uid:  # another account gets nothing: not a name, not a byte
        code = f"PATHS = {json.dumps([str(p) for p in paths])!r}\n{PROBE}"
        seen = stranger.run(code)
        assert seen.returncode == 0, seen.stderr
        assert json.loads(seen.stdout) == []
    for d in (state, job_dir, chk, chk / "t1", chk / "t1" / "shared"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_the_library_creates_private_files_without_the_cli(tmp_path: Path) -> None:
    """``weir.testing`` and embedding programs never run the CLI's ``umask 077``."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    os.chmod(mine, 0o755)
    with _umask(0o022):
        db = RocksState(mine / "state" / "t1" / "worker-0" / "db")
        db.write({b"k": b"v"})
        db.checkpoint(mine / "local-chk")
        db.close()
        storage = CheckpointStorage(mine / "checkpoints", "t1")
        storage.ensure()
        refs, _ = storage.upload(mine / "local-chk", 1, 0, "w0", {})
        storage.write_metadata(1, {"id": 1, "workers": [{"index": 0, "files": []}]})
        write_status(mine / "state" / "t1" / "status.json", _status())
        lock = RunLock(mine / "state" / "t1", "t1")
        lock.acquire()
        lock.release()
        jsonl(mine / "state" / "t1" / "out" / "late" / "late.jsonl").prepare()
    made = _tree(mine / "state", mine / "checkpoints")
    # RocksDB creates its own files through the umask; their 0700 directory keeps them
    weir_files = [p for p in made if p.is_file() and p.parent.name != "db"]
    assert {"_metadata", "status.json", "run.lock", "late.jsonl"} <= {p.name for p in weir_files}
    assert any(p.suffix == ".sst" for p in weir_files)
    assert _open_to_others([p for p in made if p.is_dir()] + weir_files) == []
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755  # the user's own directory is left alone
    assert refs


def test_the_jobs_own_directory_is_tightened_but_not_the_users(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "t1").mkdir(parents=True)
    os.chmod(state, 0o755)
    os.chmod(state / "t1", 0o755)  # left open by an older weir
    lock = RunLock(state / "t1", "t1")
    lock.acquire()
    lock.release()
    assert stat.S_IMODE((state / "t1").stat().st_mode) == 0o700
    assert stat.S_IMODE(state.stat().st_mode) == 0o755
    assert stat.S_IMODE((state / "t1" / "run.lock").stat().st_mode) == 0o600


def _status():  # type: ignore[no-untyped-def]
    from tests.support.runtimes import plain_status

    return plain_status("t1")
