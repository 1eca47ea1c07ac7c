"""A worker process's entry point (spawned by the job manager): signals, logging, the job file,
the loop, and a ``Failed`` message to the job manager when anything goes wrong.

The job manager owns a worker's lifecycle: Ctrl-C (SIGINT to the whole process group) is
ignored here, so the job manager can stop workers in order; SIGTERM stops gracefully. A worker
whose job manager is gone (its pipe closed without a ``Stop``: killed, or its lease lost)
exits at once and writes nothing more (``ManagerGone``): a new job manager rewinds the outputs
and restores the state, and must not find this worker still writing. A local worker holds a
shared lock on ``<state-dir>/<job>/workers.lock`` for its life, so the next job manager can
wait until it is gone (``control.resume``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import traceback
from multiprocessing.connection import Connection

from weir.base import logs
from weir.base.errors import WeirError, WorkerFailed
from weir.base.files import hold_shared_lock
from weir.base.settings import read_env
from weir.engine.runtime import gctuning, heap
from weir.engine.runtime.config import RunConfig, RunFacts
from weir.engine.runtime.loader import load_configured_job
from weir.engine.runtime.messages import Failed, ManagerLink
from weir.engine.runtime.peerauth import PeerAuth
from weir.engine.runtime.settings import PROFILE_DIR
from weir.engine.runtime.task.worker import ManagerGone, Worker

log = logging.getLogger(__name__)

EXIT_ORPHANED = 3  # a worker whose job manager went away


def worker_main(
    cfg: RunConfig, facts: RunFacts, index: int, conn: Connection, auth: PeerAuth
) -> None:
    """``auth``: the exchange's secret for this attempt, in the spawn arguments (the private
    pipe from the job manager), never in a file or the environment."""
    terminated = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: terminated.set())
    logs.configure(cfg.log_level, cfg.log_format)  # a spawned process starts unconfigured
    heap.trim_in_background()
    if not run_worker(cfg, facts, index, ManagerLink(conn), auth, terminated, local=True):
        raise SystemExit(1)


def run_worker(
    cfg: RunConfig,
    facts: RunFacts,
    index: int,
    link: ManagerLink,
    auth: PeerAuth,
    terminated: threading.Event,
    *,
    local: bool = False,
) -> bool:
    """Load the job and run worker ``index`` until it is told to stop (True) or fails (False,
    after telling the job manager why). ``local``: a worker process of this host's job
    manager (it holds the workers' lock). A job manager found gone ends the process at
    once."""
    try:
        job = load_configured_job(cfg)
        if local:
            hold_shared_lock(cfg.workers_lock(job.name))
        worker = Worker(cfg, index, link, job, terminated, auth, facts)
        profile_dir = read_env(PROFILE_DIR)
        with gctuning.tuned():  # the job loaded and restored: the loop's collector settings
            if profile_dir:  # cProfile each worker; stats land in <dir>/worker-<i>.prof
                import cProfile  # only for a profiled run

                cProfile.runctx(
                    "worker.run()",
                    {},
                    {"worker": worker},
                    os.path.join(profile_dir, f"worker-{index}.prof"),
                )
            else:
                worker.run()
    except ManagerGone:
        log.warning("worker=%d: its job manager is gone; exiting without writing more", index)
        if not local:
            return False  # a Spark task: it fails, and Spark ends its Python worker
        logging.shutdown()
        os._exit(EXIT_ORPHANED)  # no flush, no close: nothing more reaches an output
    except WorkerFailed as exc:
        _report_failure(link, index, exc.reason)
        return False
    except WeirError as exc:
        _report_failure(link, index, str(exc))
        return False
    except Exception:
        _report_failure(link, index, traceback.format_exc())
        return False
    return True


def _report_failure(link: ManagerLink, index: int, reason: str) -> None:
    try:
        link.send(Failed(index, reason))
    except OSError:
        pass
