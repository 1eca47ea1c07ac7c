"""A worker as a Spark barrier task (``control.spark_workers`` submits the stage).

The task connects to the job manager, proves it holds the attempt's secret (``peerauth``), and
runs worker ``partitionId`` exactly as a local worker process does (``main.run_worker``), with
three differences: the job file is written from the text the job manager sent (executors need
not see the driver's files), the state lives under the executor's own working directory, and
the worker binds its exchange and its state server (``stateserver``) to the executor's host as
Spark knows it, where the other tasks and the job manager reach it.

``TaskPayload`` is data only (msgpack): it is what Spark carries to every task.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgpack

from weir.base import logs
from weir.base.files import private_dir, write_private
from weir.engine.runtime import peerauth
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.messages import ManagerLink
from weir.engine.runtime.netio import parse_address
from weir.engine.runtime.peerauth import PeerAuth, prove
from weir.engine.runtime.task.main import run_worker

CONNECT_S = 30.0
_PATHS = {f.name for f in dataclasses.fields(RunConfig) if f.type in ("Path", Path)}


@dataclass(frozen=True, slots=True)
class TaskPayload:
    job_name: str
    job_text: str | None  # a job file's text; None: ``job_spec`` is a module every task imports
    job_spec: str
    settings: dict[str, Any]  # the run's RunConfig fields (paths as strings)
    facts: dict[str, Any]  # the attempt's RunFacts fields
    manager: str  # tcp:<host>:<port> of the job manager's link listener
    secret: bytes
    attempt: int
    env: dict[str, str]  # storage and Kafka settings the tasks need, from the job manager

    @staticmethod
    def build(
        cfg: RunConfig,
        facts: RunFacts,
        job_name: str,
        manager: str,
        auth: PeerAuth,
        forwarded: Sequence[str],
    ) -> TaskPayload:
        spec = str(cfg.job_file)
        text = Path(spec).read_text() if spec.endswith((".py", ".sql")) else None
        settings = {
            f.name: _plain(getattr(cfg, f.name))
            for f in dataclasses.fields(cfg)
            if f.name not in ("job_file", "master", "spark_conf", "driver_host")
        }
        env = {k: v for k, v in os.environ.items() if k.startswith(tuple(forwarded))}
        plain_facts = dataclasses.asdict(facts)
        return TaskPayload(
            job_name, text, spec, settings, plain_facts, manager, auth.secret, auth.attempt, env
        )

    def encode(self) -> bytes:
        packed: bytes = msgpack.packb(dataclasses.asdict(self), use_bin_type=True)
        return packed

    @staticmethod
    def decode(raw: bytes) -> TaskPayload:
        return TaskPayload(**msgpack.unpackb(raw, raw=False))

    def config(self, workdir: Path, host: str) -> tuple[RunConfig, RunFacts]:
        """The worker's settings on this executor (its files under ``workdir``) and the
        attempt's facts, with this task's host."""
        fields: dict[str, Any] = {
            k: Path(v) if k in _PATHS else v for k, v in self.settings.items()
        }
        if self.job_text is not None:
            job_file: Path | str = workdir / Path(self.job_spec).name
            write_private(Path(job_file), self.job_text.encode())
        else:
            job_file = self.job_spec
        fields.update(
            job_file=job_file,
            state_dir=workdir / "state",
            backfill_dir=workdir / "backfill",
            exchange_transport="tcp",
        )
        facts = RunFacts(**{**self.facts, "worker_host": host, "serve_state": True})
        return RunConfig(**fields), facts


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def run_task(raw: bytes, _partition: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """The barrier task: worker ``partitionId`` of the job, until told to stop."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    index = ctx.partitionId()
    payload = TaskPayload.decode(raw)
    os.environ.update(payload.env)
    host = ctx.getTaskInfos()[index].address.rpartition(":")[0] or "127.0.0.1"
    # not "weir": a directory of that name in the executor's working directory (first on a
    # Python worker's sys.path) would shadow the installed package for the next task here
    workdir = Path(os.getcwd()) / "weir-tasks" / f"{payload.job_name}-{payload.attempt}-w{index}"
    private_dir(workdir)
    cfg, facts = payload.config(workdir, host)
    logs.configure(cfg.log_level, cfg.log_format)
    auth = PeerAuth(payload.secret, payload.attempt)
    link = ManagerLink(Connection(connect(payload.manager, auth, index).detach()))
    try:
        ok = run_worker(cfg, facts, index, link, auth, threading.Event())
    finally:
        link.close()
    if not ok:
        raise RuntimeError(f"weir worker {index} failed (the job manager has the reason)")
    yield {"worker": index, "host": host}


def connect(address: str, auth: PeerAuth, index: int) -> socket.socket:
    """A connection to the job manager's link listener, proved with the attempt's secret."""
    _, where = parse_address(address)
    deadline = time.monotonic() + CONNECT_S
    sock = socket.create_connection(where, timeout=CONNECT_S)  # type: ignore[arg-type]
    try:
        prove(sock, auth, index, peerauth.MANAGER, deadline)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock
