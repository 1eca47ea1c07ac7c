"""The chaos run's real parts, each started and stopped by the driver (``benchmarks.chaos.run``):
the Kafka-protocol broker (Tansu, so it can be paused with SIGSTOP), the producer of the input,
and supervisor loops that start ``weir run --restore auto`` and ``weir api`` again whenever
they exit, as docker-compose's ``restart: on-failure`` or systemd's ``Restart=`` would.
Everything binds 127.0.0.1 and stops by itself (``stop``, or at the driver's deadline)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from tests.support.broker import free_port, tansu_binary

log = logging.getLogger(__name__)


class Broker:
    """Tansu on a free loopback port with memory storage; ``pause``/``resume`` stop and
    continue its process (SIGSTOP/SIGCONT), as a broker that hangs would."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = work / "tansu.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        url = f"tcp://{self.bootstrap}"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url",
                 url, "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        from tests.support import wait_until

        def listening() -> bool:
            import socket

            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return False
            return True

        wait_until(listening, 20.0, what="the Tansu broker to listen")

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Producer(threading.Thread):
    """Sends ``events`` (then one end marker per partition) at ``rate`` a second, each key to
    one partition, in order. One request in flight and no retry: a retried send would
    duplicate an event (the broker may have appended it), which the job reports as an invalid
    transition; a pause of the broker shorter than the request timeout loses nothing."""

    def __init__(
        self, bootstrap: str, topic: str, events: Sequence[dict[str, Any]], end: dict[str, Any],
        rate: float, partitions: int, stop: threading.Event,
    ) -> None:  # fmt: skip
        super().__init__(name="chaos-producer", daemon=True)
        self.bootstrap, self.topic, self.events, self.end = bootstrap, topic, events, end
        self.rate, self.partitions, self.stop = rate, partitions, stop
        self.sent = 0
        self.error: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=5, acks=1, retries=0,
            max_in_flight_requests_per_connection=1, request_timeout_ms=60_000,
            max_block_ms=120_000, enable_idempotence=False,
        )  # fmt: skip
        try:
            started = time.monotonic()
            for i, e in enumerate(self.events):
                if self.stop.is_set():
                    return
                ahead = started + i / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                part = int(e["key"].rsplit("-", 1)[1]) % self.partitions
                producer.send(self.topic, value=orjson.dumps(e), partition=part)
                self.sent = i + 1
            for part in range(self.partitions):
                producer.send(self.topic, value=orjson.dumps(self.end), partition=part)
            producer.flush(120)
        except Exception as exc:  # noqa: BLE001 - the verdict names it
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("chaos: the producer failed: %s", self.error)
        finally:
            producer.close(10)
            self.done.set()


class Supervised(threading.Thread):
    """Runs ``argv`` and starts it again whenever it exits, until ``stop`` is set; ``proc`` is
    the current process. Its output goes to ``log`` (appended across restarts)."""

    def __init__(
        self, name: str, argv: Sequence[str], env: dict[str, str], log_path: Path, cwd: Path
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.argv, self.env, self.log_path, self.cwd = list(argv), env, log_path, cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exits: list[int] = []
        self.halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.halt.is_set():
            with self._lock:
                if self.halt.is_set():
                    return
                with open(self.log_path, "ab") as out:
                    self.proc = subprocess.Popen(
                        self.argv, stdout=subprocess.DEVNULL, stderr=out, env=self.env,
                        cwd=self.cwd, start_new_session=True,
                    )  # fmt: skip
                self.starts += 1
            rc = self.proc.wait()
            self.exits.append(rc)
            if not self.halt.is_set():
                log.info("chaos: %s exited rc=%d; starting it again", self.name, rc)
                self.halt.wait(0.5)

    def pid(self) -> int | None:
        proc = self.proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop supervising and stop the process in order (SIGTERM, then SIGKILL)."""
        with self._lock:
            self.halt.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.join(timeout_s)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every whole line of ``path`` (none when it does not exist yet)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]
