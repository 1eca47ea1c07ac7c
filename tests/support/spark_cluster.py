"""A real Spark standalone cluster on loopback for tests and benchmarks: one master and N workers
started from pyspark's own ``bin/spark-class`` (no separate Spark download), each worker with
its own work directory, web UI port and log file, every process in its own process group.

    with SparkCluster(tmp_path, workers=2) as cluster:
        spark = cluster_session(cluster.master_url, ...)
        cluster.kill_executor(0)          # SIGKILL worker 0's executor JVM and its Python

The executors a worker launches stay in the worker's process group, but PySpark's Python
daemon puts itself and its task processes into a group of their own, so ``stop()`` finds those
by their working directory (inside a worker's work dir) as well.

The cluster trusts no other local account: every process of it and every client share a fresh
secret (``spark.authenticate``, with the RPC encrypted by ``spark.network.crypto.enabled``),
the master's REST submission server is off, the web UIs cannot kill anything, and all of it
listens on 127.0.0.1. The secret lives in ``<dir>/conf/spark-defaults.conf`` (``0600`` in a
``0700`` directory) and in ``<dir>/conf/secret`` for ``spark.authenticate.secret.file``; it is
never on a command line. A client authenticates with ``SPARK_CONF_DIR=<dir>/conf`` in its
environment (``client_env()``, or ``clients_here()`` for this process and its children).

``python -m tests.support.spark_cluster [--workers N] [--dir D]`` runs one until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.procs import state

_EXECUTOR_CLASS = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
_LOG_TAIL_LINES = 15
# what every process of the cluster and every client reads from <dir>/conf/spark-defaults.conf
# besides the secret: authenticated and encrypted RPC, no REST submissions, no kills from a UI
SECURITY_CONF = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
    "spark.master.rest.enabled": "false",
    "spark.ui.killEnabled": "false",
}


class SparkClusterError(RuntimeError):
    """The test cluster cannot start: Java or spark-class missing, or a process that exits or
    never registers; the message carries the fix or the last lines of each log."""


@dataclass(frozen=True)
class ExecutorProcess:
    """An executor JVM a worker launched for an application."""

    pid: int
    worker: int  # index of the worker that launched it
    app_id: str
    executor_id: str


@dataclass(frozen=True)
class Application:
    """A running application as the master's ``/json/`` shows it."""

    id: str
    name: str
    cores: int
    state: str


def spark_home() -> Path:
    """pyspark's install directory: it ships ``bin/spark-class`` and the jars."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise SparkClusterError(
            f"{home}/bin/spark-class is missing; install pyspark[sql] (`make test` does)"
        )
    return home


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return
    if shutil.which("java") is None:
        raise SparkClusterError(
            "Spark needs Java 17 or newer and neither JAVA_HOME nor `java` on PATH is set; "
            "install a JRE (Debian: openjdk-17-jre-headless; `make system-deps` does)"
        )


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on loopback right now (all bound at once, so no repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def _arg(cmd: list[bytes], flag: bytes) -> str:
    try:
        return cmd[cmd.index(flag) + 1].decode()
    except (ValueError, IndexError):
        return ""


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie that its (dead) parent will never reap."""
    return state(pid) not in (None, "Z")


def _kill_each(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class SparkCluster:
    """A standalone master and ``workers`` workers on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        base_dir: Path,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory: str = "1g",
        executor_java_options: str | None = None,
    ) -> None:
        """``executor_java_options``: the JVM options of every application's executors
        (``spark.executor.extraJavaOptions`` in the clients' spark-defaults.conf; the suite
        passes ``tests.support.jvm.JAVA_OPTIONS``). None: Spark's own."""
        if workers < 1 or cores_per_worker < 1:
            raise ValueError(f"workers={workers} cores_per_worker={cores_per_worker}: need >= 1")
        self.base_dir = base_dir
        self.workers, self.cores_per_worker, self.memory = workers, cores_per_worker, memory
        self.executor_java_options = executor_java_options
        ports = _free_ports(2 + workers)
        self.master_port, self.webui_port = ports[0], ports[1]
        self.worker_webui_ports = ports[2:]
        self.work_dirs = [base_dir / f"worker-{i}" for i in range(workers)]
        self.conf_dir = base_dir / "conf"
        self.secret_file = self.conf_dir / "secret"
        self.logs = [
            base_dir / "master.log",
            *(base_dir / f"worker-{i}.log" for i in range(workers)),
        ]
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def __enter__(self) -> SparkCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- start and stop ---------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment every process of the cluster runs with."""
        return {
            **os.environ,
            **self.client_env(),
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1",
        }

    def client_env(self) -> dict[str, str]:
        """What a client of the cluster (a SparkSession, ``weir run --master``, ``weir
        backfill --master``) needs in its environment to authenticate: Spark reads the secret
        from ``SPARK_CONF_DIR``'s private spark-defaults.conf, not from a command line."""
        return {"SPARK_CONF_DIR": str(self.conf_dir)}

    @contextmanager
    def clients_here(self) -> Iterator[None]:
        """While the block runs, Spark clients this process starts (and its children)
        authenticate to this cluster (``client_env`` in ``os.environ``)."""
        saved = {k: os.environ.get(k) for k in self.client_env()}
        os.environ.update(self.client_env())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def _write_conf(self) -> None:
        """A fresh secret in a private spark-defaults.conf (and in ``secret_file``)."""
        self.conf_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.conf_dir.chmod(0o700)
        secret = secrets.token_hex(32)
        lines = [f"{k} {v}" for k, v in SECURITY_CONF.items()]
        lines.append(f"spark.authenticate.secret {secret}")
        if self.executor_java_options:
            lines.append(f"spark.executor.extraJavaOptions {self.executor_java_options}")
        for path, text in (
            (self.conf_dir / "spark-defaults.conf", "\n".join(lines) + "\n"),
            (self.secret_file, secret + "\n"),
        ):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            path.chmod(0o600)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the master and the workers; return once the master lists every worker ALIVE.
        On failure (a process exits, or the deadline passes) stop everything and raise with
        the last lines of each log."""
        _check_java()
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_conf()
        master = [
            *(spark_class, "org.apache.spark.deploy.master.Master"),
            *("--host", "127.0.0.1", "--port", str(self.master_port)),
            *("--webui-port", str(self.webui_port)),
        ]
        self._spawn(master, self.logs[0])
        for i, work_dir in enumerate(self.work_dirs):
            work_dir.mkdir(parents=True, exist_ok=True)
            worker = [
                *(spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"),
                *("--cores", str(self.cores_per_worker), "--memory", self.memory),
                *("--webui-port", str(self.worker_webui_ports[i]), "--work-dir", str(work_dir)),
                self.master_url,
            ]
            self._spawn(worker, self.logs[1 + i])
        try:
            self._wait_alive(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, argv: list[str], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            self._procs.append(
                subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env(),
                    cwd=self.base_dir,
                    start_new_session=True,
                )
            )

    def _wait_alive(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        alive = 0
        while time.monotonic() < deadline:
            for proc, log in zip(self._procs, self.logs, strict=True):
                if proc.poll() is not None:
                    raise SparkClusterError(
                        f"{log.stem} exited with {proc.returncode}:\n{self._log_tails()}"
                    )
            try:
                alive = int(self.status().get("aliveworkers", 0))
            except (OSError, ValueError):
                alive = 0  # the master's web UI is not up yet
            if alive >= self.workers:
                return
            time.sleep(0.25)
        raise SparkClusterError(
            f"the Spark master at {self.master_url} lists {alive} of {self.workers} workers "
            f"alive after {timeout_s:.0f} s:\n{self._log_tails()}"
        )

    def _log_tails(self) -> str:
        return "\n".join(f"--- {log}:\n{_tail(log)}" for log in self.logs)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the workers (with their executors), the master, and the Python processes the
        executors started; wait until every one is gone."""
        _kill_each(self.python_worker_pids())
        for proc in reversed(self._procs):
            _kill_group(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout_s)
        self._procs = []
        # a worker's SIGTERM stops its executors, but none may outlive the cluster even if it
        # did not (a Python daemon restarted meanwhile, an executor slow to exit)
        leftovers = [e.pid for e in self.executor_pids()] + self.python_worker_pids()
        _kill_each(leftovers)
        deadline = time.monotonic() + timeout_s
        while any(_alive(pid) for pid in leftovers):
            if time.monotonic() > deadline:
                raise SparkClusterError(f"processes {leftovers} outlived SIGKILL by {timeout_s} s")
            time.sleep(0.05)

    # -- looking inside ---------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The master's ``/json/`` answer."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            body: dict[str, Any] = json.loads(resp.read())
        return body

    def applications(self) -> list[Application]:
        """The running applications and the cores each holds."""
        return [
            Application(a["id"], a["name"], int(a["cores"]), a["state"])
            for a in self.status().get("activeapps", [])
        ]

    def _worker_of(self, path: Path | None) -> int | None:
        if path is None:
            return None
        for i, work_dir in enumerate(self.work_dirs):
            if path.is_relative_to(work_dir.resolve()):
                return i
        return None

    def executor_pids(self, app_id: str | None = None) -> list[ExecutorProcess]:
        """The executor JVMs the workers launched (for ``app_id`` only, if given), found under
        /proc by their command line and placed on a worker by their working directory
        (``<work dir>/<app id>/<executor id>``)."""
        found = []
        for pid in _pids():
            cmd = _cmdline(pid)
            if _EXECUTOR_CLASS not in cmd:
                continue
            worker = self._worker_of(_cwd(pid))
            app = _arg(cmd, b"--app-id")
            if worker is None or (app_id is not None and app != app_id):
                continue
            found.append(ExecutorProcess(pid, worker, app, _arg(cmd, b"--executor-id")))
        return sorted(found, key=lambda e: (e.worker, e.pid))

    def python_worker_pids(self, worker: int | None = None) -> list[int]:
        """Python processes (PySpark's daemon and its task workers) whose working directory is
        inside a worker's work dir (``worker``'s only, if given)."""
        found = []
        for pid in _pids():
            cmd = _cmdline(pid)
            if not cmd or b"python" not in cmd[0].rpartition(b"/")[2]:
                continue
            on = self._worker_of(_cwd(pid))
            if on is not None and (worker is None or on == worker):
                found.append(pid)
        return sorted(found)

    def kill_executor(self, worker_index: int) -> list[int]:
        """SIGKILL the executor JVM(s) on worker ``worker_index`` and their Python processes;
        returns the pids killed."""
        victims = [e.pid for e in self.executor_pids() if e.worker == worker_index]
        victims += self.python_worker_pids(worker_index)
        _kill_each(victims)
        return victims


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.spark_cluster",
        description="Run a Spark standalone cluster on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    parser.add_argument("--dir", type=Path, help="work dirs and logs (default: a temp dir)")
    args = parser.parse_args(argv)
    base = args.dir or Path(tempfile.mkdtemp(prefix="weir-spark-"))
    stop = threading.Event()
    # SIGTERM too (and SIGINT even where a background start left it ignored): the cluster's
    # processes live in their own process groups and would outlive an unhandled signal
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with SparkCluster(base, args.workers, args.cores, args.memory) as cluster:
        print(f"master: {cluster.master_url}", flush=True)
        print(f"web UI: {cluster.webui_url}", flush=True)
        print(f"logs and work dirs: {base}", flush=True)
        print(f"clients authenticate with: export SPARK_CONF_DIR={cluster.conf_dir}", flush=True)
        stop.wait()
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
