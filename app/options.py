"""The command line's own settings (``weir.base.settings.Setting``): how ``weir run`` serves its
API, how the lifecycle commands find a job and how they print. The settings of a run are
``engine.runtime.settings``'s, the API's ``api.settings``'s, the backfill's and the load
generator's ``app.commands``'s; ``app.catalogue`` gathers them all."""

from __future__ import annotations

from collections.abc import Callable

from weir.app.flags import HTTP_URL
from weir.base.settings import Choice, Number, Parsed, Setting, Switch, WholeNumber
from weir.engine.runtime.settings import LIFECYCLE, storage

MAX_API_WORKERS = 64
PRINTING = (*LIFECYCLE, "explain")  # those that print JSON with --json

SERVING: tuple[Setting, ...] = (
    Setting("no_api", "run the job without the HTTP API; serve it from another process with "
            "weir api", False, Switch(), commands=("run", "sql", "demo")),
    Setting("api_workers", "HTTP API processes on the one port (SO_REUSEPORT): the job "
            "manager's own API and N-1 processes that read the job as weir api does, so reads "
            "scale with cores; `max_connections` and `max_streams` hold per process", 1,
            WholeNumber(1, maximum=MAX_API_WORKERS), metavar="N", commands=("run", "sql", "demo")),
    Setting("workers", "API processes on the one port (SO_REUSEPORT), each with its own "
            "readers, so reads scale with cores", 1, WholeNumber(1, maximum=MAX_API_WORKERS),
            metavar="N", commands=("api",)),
)  # fmt: skip

LIFECYCLE_SETTINGS: tuple[Setting, ...] = (
    Setting("api_url", "ask the job's HTTP API at URL instead of finding the job in "
            "`state_dir` (where weir run publishes its address)", check=HTTP_URL, metavar="URL",
            commands=("savepoint", "checkpoints", "list", "query"),
            default_doc="the address the job publishes in `state_dir`"),
    Setting("api_token", "bearer token of the job's API, if it requires one (with `api_url`)",
            metavar="TOKEN", secret=True, commands=("savepoint", "checkpoints", "list", "query")),
    Setting("consistency", "read the live state (newest) or the committed one (as of the "
            "latest checkpoint)", "live", Choice(("live", "committed")), commands=("query",)),
    Setting("budget", "most keys the query may read; past it a query is refused, or paged "
            "(`cursor`) when it has no ORDER BY or aggregate", 1_000,
            WholeNumber(1, maximum=10_000), metavar="N", commands=("query",)),
    Setting("cursor", "resume a paged query: the next_cursor a page printed", metavar="CURSOR",
            commands=("query",)),
    Setting("savepoint", "stop-with-savepoint: sources stop at its barrier, it completes, then "
            "the job ends (if it fails, the job goes on)", False, Switch(), commands=("stop",)),
    Setting("savepoint_dir", "also copy the savepoint, with its files, to DIR/<job>/chk-<n> "
            "(restorable on its own; DIR may be s3://BUCKET/PREFIX)",
            check=Parsed(storage, "a directory or s3://BUCKET/PREFIX"), metavar="DIR|URL",
            commands=("stop",)),
    Setting("timeout_ms", "how long the savepoint may take; past it, no savepoint (and weir "
            "stop does not stop the job)", 120_000, WholeNumber(1), metavar="MS",
            commands=("savepoint", "stop")),
    Setting("timeout_s", "old form of `timeout_ms`, in seconds (deprecated)",
            check=Number(0.001), metavar="S", commands=("stop",), default_doc="none"),
    Setting("json", "print JSON instead of text", False, Switch(), commands=PRINTING),
)  # fmt: skip

# deprecated settings: the setting that replaces each, and how a value converts
DEPRECATED: dict[str, tuple[str, Callable[[float], int]]] = {
    "timeout_s": ("timeout_ms", lambda seconds: max(1, round(seconds * 1000))),
}
