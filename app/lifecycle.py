"""The lifecycle commands: ``weir list`` (the jobs under a state directory, from the status file
each job manager publishes), ``weir stop`` and ``weir cancel`` (over the job manager's control
channel, ``engine/runtime/control/admin.py``, authenticated by the job's ``control.key``), and
``weir checkpoints`` (the job's checkpoint storage) and ``weir savepoint`` (the control channel
too). Each finds its job the same way: under the state directory (``--state-dir``, default
``.weir``), where the job manager publishes its status, its control port and its API's address;
``--api-url`` asks an API instead (``savepoint``, ``checkpoints``, ``list``). ``weir stop`` and
``weir cancel`` need the state directory: only the job's user, who can read its control key
there, may end it. ``app/parser.py`` makes their flags; ``app/cli.py`` imports this module only
to run one of them.

A status is the job manager's own account: a job is ``unknown`` when its status stopped changing
without the job manager saying the job ended (``JobStatus.seen_state``). The commands refuse,
naming the fix, an unknown job (listing the jobs there are), a job that is not running and a
control key they cannot read; usage errors exit 2, the rest 1 (``WeirError.usage``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from weir.app.interrupt import CTRL_C
from weir.base.errors import ConfigError, ControlError, MessageError, StateError
from weir.engine.runtime.control import admin
from weir.engine.runtime.control.status import STALE_AFTER_S, read_status, status_path
from weir.engine.runtime.view import SavepointResult
from weir.engine.runtime.wire import from_plain, to_plain
from weir.state.checkpoints import CheckpointStorage, now_ms

if TYPE_CHECKING:
    from weir.client import Client, WeirClientError

STOP_SLACK_S = 60.0  # past the savepoint's timeout: the stop itself (workers flush and exit)
CANCEL_TIMEOUT_S = 30.0
API_TIMEOUT_S = 10.0  # a read of the API; a savepoint's wait comes on top


# -- reading the state directory ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listed:
    """A job under the state directory, as ``weir list`` shows it."""

    job: str
    state: str
    pid: int | None
    api_url: str | None
    parallelism: int | None
    last_checkpoint: int | None
    status_age_s: float | None
    problem: str | None  # why the status cannot be read (None: it can)


def _listed(job: str, path: Path) -> Listed:
    try:
        status = read_status(path)
    except MessageError as exc:
        return Listed(job, "unknown", None, None, None, None, None, str(exc))
    if status is None:
        return Listed(job, "unknown", None, None, None, None, None, f"cannot read {path}")
    now = now_ms()
    return Listed(
        job=job,
        state=status.seen_state(now, STALE_AFTER_S),
        pid=status.pid,
        api_url=status.api_url,
        parallelism=status.parallelism,
        last_checkpoint=status.last_checkpoint,
        status_age_s=round(status.age_s(now), 3),
        problem=None,
    )


def jobs_under(state_dir: Path) -> list[Listed]:
    """Every job with a status file under ``state_dir``, by name (none: a missing directory)."""
    if not state_dir.is_dir():
        return []
    return [
        _listed(d.name, status_path(d))
        for d in sorted(state_dir.iterdir())
        if status_path(d).is_file()
    ]


def _running(state_dir: Path, job: str, what: str) -> tuple[int, bytes]:
    """The control port and key of running job ``job``, or the error that names the fix."""
    job_dir = state_dir / job
    try:
        status = read_status(status_path(job_dir))
    except MessageError as exc:
        raise ControlError(f"job {job!r}: {exc}") from None
    if status is None:
        names = ", ".join(j.job for j in jobs_under(state_dir)) or "none"
        raise ConfigError(
            f"no job {job!r} under {state_dir} (jobs there: {names}); pass the --state-dir "
            "its weir run uses"
        )
    age = status.age_s(now_ms())
    state = status.seen_state(now_ms(), STALE_AFTER_S)
    if state == "unknown":
        raise ControlError(
            f"job {job!r} is not running: its job manager (pid {status.pid}) has not published "
            f"its status for {age:.1f} s; is weir run still running? Nothing to {what}"
        )
    port = status.control_port
    if status.ended or port is None:
        raise ControlError(
            f"job {job!r} is not running: it {state} ({age:.1f} s ago); nothing to {what}"
        )
    return port, admin.read_key(job_dir)


# -- the commands ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """The lifecycle command ``args.command``."""
    if args.command != "list":
        job_name(args.job)
    commands = {
        "list": list_jobs,
        "stop": stop_job,
        "cancel": cancel_job,
        "checkpoints": list_checkpoints,
        "savepoint": take_savepoint,
    }
    waiting = {
        "stop": "the wait for job {} to stop (it goes on stopping)",
        "cancel": "the wait for job {} to be cancelled",
        "savepoint": "the wait for job {}'s savepoint (the job goes on; the savepoint may "
        "still complete)",
    }
    if args.command not in waiting:
        return commands[args.command](args)
    with CTRL_C.doing(waiting[args.command].format(args.job)):
        return commands[args.command](args)


def job_name(raw: str) -> str:
    """A job name from the command line: it names directories, so the job API's rule holds."""
    from weir.engine.nodes import NAME_PATTERN

    if not NAME_PATTERN.match(raw):
        raise ConfigError(
            f"job name {raw!r} is not allowed; use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return raw


def _client(args: argparse.Namespace, timeout_s: float = API_TIMEOUT_S) -> Client:
    """The client of the API ``--api-url`` names: a refused connection is not retried (the
    command says at once that nothing answers there)."""
    from weir.client import Client, Retries

    return Client(
        args.api_url,
        token=args.api_token or None,
        timeout=timeout_s,
        retries=Retries(attempts=1),
        trust_env=False,
    )


def _asking(what: str, url: str) -> Callable[[WeirClientError], ControlError]:
    """The command's error for a client error: what it asked, where, the status, the answer."""

    def failed(exc: WeirClientError) -> ControlError:
        from weir.client import ApiError

        status = f" ({exc.status})" if isinstance(exc, ApiError) else ""
        return ControlError(f"{what} at {url} failed{status}: {exc}")

    return failed


def list_checkpoints(args: argparse.Namespace) -> int:
    """The job's complete checkpoints and savepoints: from its storage (``<state-dir>/
    checkpoints`` or ``--checkpoint-dir``), or from its API with ``--api-url``."""
    if args.api_url:
        from weir.client import WeirClientError

        with _client(args) as client:
            try:
                answer = client.checkpoints(args.job)
            except WeirClientError as exc:
                raise _asking(f"the checkpoints of job {args.job!r}", args.api_url)(exc) from None
        found = [dict(c) for c in answer.checkpoints]
        where = answer.storage
    else:
        root = args.checkpoint_dir or Path(args.state_dir) / "checkpoints"
        storage = CheckpointStorage(root, job_name(args.job))
        found, where = storage.summaries(), storage.where
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    if not found:
        print(f"no complete checkpoint of job {args.job!r} under {where}", file=sys.stderr)
        return 1
    lines = [
        f"{'id':>6}  {'time (UTC)':19}  {'kind':10}  {'size':>12}  {'incremental':>12}  "
        f"{'sync ms':>8}  {'async ms':>8}  {'total ms':>8}"
    ]
    for c in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c["time"] / 1000))
        kind = "savepoint" if c.get("savepoint") else "checkpoint"
        lines.append(
            f"{c['id']:>6}  {when:19}  {kind:10}  {c['size']:>12}  {c['incremental_size']:>12}  "
            f"{c['sync_ms']:>8.1f}  {c['async_ms']:>8.1f}  {c['duration_ms']:>8.0f}"
        )
    lines.append(f"storage: {where}")
    print("\n".join(lines))
    return 0


def take_savepoint(args: argparse.Namespace) -> int:
    """A savepoint of the running job: through its job manager's control channel, found in the
    state directory as ``weir stop`` finds it, or through its API with ``--api-url``."""
    timeout_s = args.timeout_ms / 1000
    if args.api_url:
        from weir.client import WeirClientError

        with _client(args, timeout_s + API_TIMEOUT_S) as client:
            try:
                taken = client.savepoint(args.job, timeout_ms=args.timeout_ms)
            except WeirClientError as exc:
                raise _asking(f"a savepoint of job {args.job!r}", args.api_url)(exc) from None
        result: SavepointResult = {"id": taken.id, "path": taken.path}
    else:
        port, key = _running(Path(args.state_dir), args.job, "savepoint")
        request = admin.SavepointArgs(timeout_s=timeout_s)
        answer = admin.call(port, key, "savepoint", to_plain(request), timeout_s + STOP_SLACK_S)
        result = from_plain(SavepointResult, answer, "savepoint answer")
    if args.json:
        print(json.dumps(result))
    else:
        print(f"savepoint {result['id']} of job {args.job}: {result['path']}")
    return 0


def list_jobs(args: argparse.Namespace) -> int:
    """The jobs under the state directory (from the status each job manager publishes), or
    those the API at ``--api-url`` serves."""
    found = _jobs_at(args.api_url, args) if args.api_url else jobs_under(Path(args.state_dir))
    if args.json:
        print(json.dumps([to_plain(j) for j in found], indent=1))
        return 0
    if not found:
        print(f"no jobs under {args.api_url or args.state_dir}", file=sys.stderr)
        return 0
    lines = [
        f"{'job':20}  {'state':9}  {'pid':>7}  {'api':26}  {'workers':>7}  {'checkpoint':>10}  "
        f"{'status age':>10}"
    ]
    for j in found:
        lines.append(
            f"{j.job:20}  {j.state:9}  {_shown(j.pid):>7}  {_shown(j.api_url):26}  "
            f"{_shown(j.parallelism):>7}  {_shown(j.last_checkpoint):>10}  "
            f"{_age(j.status_age_s):>10}"
        )
        if j.problem is not None:
            lines.append(f"  {j.problem}")
    print("\n".join(lines))
    return 0


def _jobs_at(url: str, args: argparse.Namespace) -> list[Listed]:
    from weir.client import WeirClientError

    with _client(args) as client:
        try:
            answer = client.jobs()
        except WeirClientError as exc:
            raise _asking("the list of jobs", url)(exc) from None
    return [
        Listed(j.name, j.state, None, url, j.parallelism, None, None, None) for j in answer.jobs
    ]


def stop_job(args: argparse.Namespace) -> int:
    if args.savepoint_dir and not args.savepoint:
        raise ConfigError("--savepoint-dir copies a stop's savepoint; pass --savepoint too")
    port, key = _running(Path(args.state_dir), args.job, "stop")
    timeout_s = args.timeout_ms / 1000
    request = admin.StopArgs(savepoint=args.savepoint, timeout_s=timeout_s)
    answer = admin.call(port, key, "stop", to_plain(request), timeout_s + STOP_SLACK_S)
    result = from_plain(admin.StopResult, answer, "stop answer")
    taken = result["savepoint"]
    if taken is not None and args.savepoint_dir:
        result["savepoint"] = taken = _export(taken, args.savepoint_dir, Path(args.state_dir))
    if args.json:
        print(json.dumps(result))
    elif taken is not None:
        print(f"job {args.job} {result['state']} with savepoint {taken['id']}: {taken['path']}")
    else:
        print(f"job {args.job} {result['state']}")
    return 0


def cancel_job(args: argparse.Namespace) -> int:
    port, key = _running(Path(args.state_dir), args.job, "cancel")
    answer = admin.call(port, key, "cancel", to_plain(admin.CancelArgs()), CANCEL_TIMEOUT_S)
    result = from_plain(admin.CancelResult, answer, "cancel answer")
    n = result["last_checkpoint"]
    if args.json:
        print(json.dumps(result))
    elif n is None:
        print(f"job {args.job} {result['state']}; it completed no checkpoint in this run")
    else:
        print(f"job {args.job} {result['state']}; weir run --restore latest resumes from {n}")
    return 0


def _export(taken: SavepointResult, root: str, state_dir: Path) -> SavepointResult:
    """Copy the savepoint at ``taken["path"]`` with the shared files it references to
    ``root/<job>/chk-<n>`` (a directory or S3), ``_metadata`` last (a copy cut short does not
    exist), then check every file's size (and, in a directory, CRC) there."""
    n, where = taken["id"], taken["path"]
    source, _ = CheckpointStorage.at(where)
    target = CheckpointStorage(root, source.job)
    fail = f"the job stopped with savepoint {n} at {where}, but copying it to {root} failed"
    if n in target.ids():
        raise StateError(f"{fail}: {target.location(n)} exists already; restore from {where}")
    scratch = state_dir / source.job / f".export-{os.getpid()}"
    try:
        source.export(n, target, scratch)
    except (OSError, StateError) as exc:
        raise StateError(f"{fail}: {exc}; restore from {where}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    problem = target.problem(n)
    if problem is not None:
        raise StateError(f"{fail}: {problem}; restore from {where}")
    return {"id": n, "path": target.location(n)}


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


__all__ = ["Listed", "jobs_under", "job_name", "run"]
