"""A live backfill from a directory another account writes (issue 37, item 3), against a real
``weir run`` whose checkpoints go on every 300 ms.

The audit's attacks: the job manager checked the files, but each worker listed the directory
again and opened what it found. A FIFO named ``kg-00001.sst`` blocked the worker (checkpoints
stuck, ``/health`` ok); a symlink out of the directory, put in place after the check, was
followed. Here the attacker (``nobody``) owns the backfill's subdirectory: a FIFO there is
refused at once, and a file swapped again and again between a real SST and a symlink to a FIFO
of its own outside the directory is never followed (the attacker would see its FIFO opened);
every request is answered, and the job keeps checkpointing throughout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest
from rocksdict import Options, SstFileWriter

from tests.security.conftest import Stranger
from tests.support import WeirServer, job_text, wait_until
from weir.engine.job import operator_state_id
from weir.engine.runtime.control import status
from weir.state import layout
from weir.state.keygroups import key_group

MAX_PAR = 128
KG = key_group("ad-0", MAX_PAR)
NAME = f"kg-{KG:05d}.sst"
FAR_AWAY = {"min_end": -(10**12), "max_end": -(10**12) + 1}
RACE_S = 15.0
SWAPPER = r"""
import os, sys, threading, time
here, fifo, seed = __HERE__, __FIFO__, open(__SEED__, "rb").read()
os.mkfifo(fifo, 0o666)
opened = threading.Event()
def watch():  # blocks until someone opens the FIFO for reading: then they followed the link
    fd = os.open(fifo, os.O_WRONLY)
    opened.set()
    os.close(fd)
threading.Thread(target=watch, daemon=True).start()
print("ready", flush=True)
name, swaps = os.path.join(here, __NAME__), 0
deadline = time.monotonic() + __RACE__
while time.monotonic() < deadline and not opened.is_set():
    with open(os.path.join(here, ".r"), "wb") as f:
        f.write(seed)
    os.rename(os.path.join(here, ".r"), name)
    time.sleep(0.0005)
    os.symlink(fifo, os.path.join(here, ".l"))
    os.rename(os.path.join(here, ".l"), name)
    time.sleep(0.0005)
    swaps += 1
print("opened" if opened.is_set() else "never opened", swaps, flush=True)
"""


@pytest.fixture
def live(public_dir: Path, weir_server: Callable[..., WeirServer]) -> tuple[WeirServer, Path]:
    job = public_dir / "job.py"
    job.write_text(job_text(public_dir / "unused.jsonl", bound=100, size=500, lateness=0,
                            max_parallelism=MAX_PAR))  # fmt: skip
    bf = public_dir / "bf"
    bf.mkdir()
    bf.chmod(0o777)  # a backfill drop folder others write to
    server = weir_server(
        job,
        "--source", "generator://ads?rate=500&ids=20&seed=1",
        "--backfill-dir", str(bf),
        "--checkpoint-dir", str(public_dir / "chk"),
        "--checkpoint-interval-ms", "300",
    )  # fmt: skip
    client = server.client()
    wait_until(lambda: client.get("/t1/imps/state/ad-0").status_code == 200, 30.0, what="ad-0")
    return server, bf


def _checkpoints(server: WeirServer) -> int:
    """Completed checkpoints, from the job manager's status file (written every few hundred
    ms; ``starting`` until the first)."""
    found = wait_until(
        lambda: (
            (s := status.read_status(status.status_path(server.job_dir))) is not None
            and s.state == "running"
            and s
        ),
        20.0,
        what="a running status",
    )
    return found.completed_checkpoints


def _post(server: WeirServer, path: Path) -> httpx.Response:
    body: dict[str, Any] = {"op": "imps", "path": str(path), **FAR_AWAY}
    with httpx.Client(base_url=server.base_url, trust_env=False, timeout=20.0) as c:
        return c.post("/jobs/t1/backfills", json=body)


def _seed(path: Path) -> Path:
    """A real backfill file of ``ad-0``'s key group: a window long closed."""
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path))
    sid = operator_state_id("imps")
    writer[layout.state_key(KG, sid, b"ad-0", -5_000)] = msgpack.packb([1, 1, 1, 1, 1, 1])
    writer.finish()
    path.chmod(0o644)
    return path


def test_a_fifo_named_as_a_backfill_file_is_refused_and_blocks_nobody(
    live: tuple[WeirServer, Path], stranger: Stranger
) -> None:
    server, bf = live
    made = stranger.run(
        f"import os; d = os.path.join({str(bf)!r}, 'fifo'); os.mkdir(d); "
        f"os.mkfifo(os.path.join(d, {NAME!r}), 0o666)"
    )
    assert made.returncode == 0, made.stderr
    before = _checkpoints(server)
    started = time.monotonic()
    r = _post(server, bf / "fifo")
    assert time.monotonic() - started < 10.0
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "path_refused" and "is not a regular file" in error["message"]
    assert str(bf / "fifo" / NAME) in error["message"]
    wait_until(lambda: _checkpoints(server) >= before + 3, 20.0, what="three more checkpoints")
    assert server.client().get("/jobs/t1").json()["backfills"] == []


def test_a_file_swapped_for_a_symlink_after_the_check_is_never_followed(
    live: tuple[WeirServer, Path], stranger: Stranger, public_dir: Path
) -> None:
    server, bf = live
    seed = _seed(public_dir / "seed.sst")
    race = bf / "race"
    (public_dir / "out").mkdir(mode=0o777)
    (public_dir / "out").chmod(0o777)  # somewhere outside the backfill storage it may write
    made = stranger.run(f"import os; os.mkdir({str(race)!r})")
    assert made.returncode == 0, made.stderr
    code = (
        SWAPPER.replace("__HERE__", repr(str(race)))
        .replace("__FIFO__", repr(str(public_dir / "out" / "fifo")))
        .replace("__SEED__", repr(str(seed)))
        .replace("__NAME__", repr(NAME))
        .replace("__RACE__", str(RACE_S))
    )
    swapper = stranger.popen(code)
    answers: list[int] = []
    try:
        assert swapper.stdout is not None
        assert swapper.stdout.readline().strip() == "ready", swapper.communicate(timeout=10)
        before = _checkpoints(server)
        deadline = time.monotonic() + RACE_S - 2.0
        while time.monotonic() < deadline and swapper.poll() is None:
            answers.append(_post(server, race).status_code)  # each answered within 20 s
        out, err = swapper.communicate(timeout=RACE_S + 10)
    finally:
        if swapper.poll() is None:
            swapper.kill()
            swapper.communicate()
    assert out.startswith("never opened"), (out, err, answers)
    assert len(answers) >= 5 and set(answers) <= {200, 400, 409}, answers
    wait_until(lambda: _checkpoints(server) >= before + 3, 20.0, what="three more checkpoints")
