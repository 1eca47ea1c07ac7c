"""Issue 17, item 2, against a real ``weir run`` job manager: its control channel cuts off a
client that dribbles its handshake at one absolute deadline (not a timeout per read), and with
50 silent connections and two dribblers open, a savepoint and then ``weir stop --savepoint``
still succeed promptly. Before the fix, eight silent connections took every slot (the ninth was
refused) and a dribbler was kept as long as it sent a byte every five seconds."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import WeirResult, WeirServer, wait_until
from weir.engine.runtime.control import admin
from weir.engine.runtime.control.status import read_status, status_path

JOB = """
from weir import Job, WatermarkStrategy, agg, sources, windows
job = Job("ctl")
(
    job.source(sources.generator("ads", rate=500, ids=20), timestamp="ts",
               watermarks=WatermarkStrategy.bounded_out_of_orderness(ms=200))
    .key_by("id")
    .window(windows.tumbling(ms=1_000))
    .aggregate("counts", n=agg.count())
)
"""


def _port(server: WeirServer) -> int:
    def published() -> int | None:
        found = read_status(status_path(server.job_dir))
        return found.control_port if found is not None else None

    return wait_until(published, 30.0, what="the control port in jobmanager.json")


@pytest.fixture
def job_manager(
    tmp_path: Path, weir_server: Callable[..., WeirServer]
) -> Iterator[tuple[WeirServer, int]]:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    server = weir_server(job, "--no-api", "--parallelism", "2")
    yield server, _port(server)


def _dribble(port: int, every_s: float, stop: threading.Event) -> float | None:
    """Take the hello, then send a handshake frame one byte every ``every_s``; how long the
    server kept the connection (None: still open when ``stop`` was set)."""
    with socket.create_connection((admin.HOST, port), timeout=5.0) as s:
        started = time.monotonic()
        s.recv(4 + len(b"weir-control-1") + 32)
        frame = struct.pack(">I", 64) + b"\0" * 64
        for byte in frame:
            if stop.wait(every_s):
                return None
            try:
                s.sendall(bytes([byte]))
                s.settimeout(0.01)
                if s.recv(1) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - started
    return None


def test_a_dribbling_handshake_is_cut_off_at_one_deadline(
    job_manager: tuple[WeirServer, int],
) -> None:
    server, port = job_manager
    stop = threading.Event()
    timer = threading.Timer(admin.HANDSHAKE_S + 6.0, stop.set)
    timer.start()
    try:
        held = _dribble(port, 0.25, stop)
    finally:
        timer.cancel()
    assert held is not None, f"a byte every 0.25 s kept the handshake open past {timer.interval} s"
    assert held <= admin.HANDSHAKE_S + 1.5, held
    assert "control: dropped peer=127.0.0.1:" in server.stderr()


def test_silent_and_slow_clients_never_block_a_savepoint_or_a_stop(
    job_manager: tuple[WeirServer, int], run_weir: Callable[..., WeirResult]
) -> None:
    server, port = job_manager
    key = admin.read_key(server.job_dir)
    silent = [socket.create_connection((admin.HOST, port), timeout=5.0) for _ in range(50)]
    stop = threading.Event()
    dribblers = [
        threading.Thread(target=_dribble, args=(port, 0.5, stop), daemon=True) for _ in range(2)
    ]
    for t in dribblers:
        t.start()
    try:
        time.sleep(0.2)  # all of them connected and waiting
        started = time.monotonic()
        taken = admin.call(port, key, "savepoint", {"timeout_s": 20.0}, 30.0)
        assert taken["path"] and time.monotonic() - started < 15.0
        started = time.monotonic()
        r = run_weir("stop", "ctl", "--savepoint", "--state-dir", str(server.state_dir))
        assert r.rc == 0, r.stderr
        assert "stopped with savepoint" in r.stdout, r.stdout
        assert time.monotonic() - started < 30.0
        assert server.proc.wait(30) == 0
    finally:
        stop.set()
        for s in silent:
            s.close()
        for t in dribblers:
            t.join(5.0)
