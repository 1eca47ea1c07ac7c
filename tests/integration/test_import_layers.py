"""What importing weir's public entry points loads, and that weir's folders answer to one name
each (``docs/contributing/architecture.md``). Each probe runs in a fresh interpreter, since this
session has loaded everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# what must not load with an entry point: the runtime, the backfill, RocksDB, the server stack
_HEAVY = (
    "rocksdict",
    "fastapi",
    "uvicorn",
    "pyspark",
    "weir.engine.runtime",
    "weir.engine.spark",
    "weir.state.rocksdb",
    "weir.state.secondary",
)


def _loaded(statement: str, cwd: Path | None = None) -> list[str]:
    probe = (
        f"import sys, json; {statement}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('weir') "
        "or m.split('.')[0] in ('rocksdict', 'fastapi', 'uvicorn', 'pyspark', 'sqlglot', "
        "'numpy'))))"
    )
    found: list[str] = json.loads(_probe(probe, cwd))
    return found


def _probe(code: str, cwd: Path | None = None) -> str:
    """What ``code`` prints, run in a fresh interpreter (a clean ``sys.modules``)."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=cwd,
    )
    return out.stdout


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in _HEAVY)]


def test_the_client_loads_no_rocksdb_server_or_runtime() -> None:
    loaded = _loaded("import weir.client")
    assert _heavy(loaded) == []
    assert not [m for m in loaded if m.startswith("weir.engine")], loaded


def test_the_api_server_loads_no_http_client_until_it_forwards() -> None:
    """httpx loads with a request forwarded to a leader on another host; where rich and click
    are installed its import brings them too (0.15 CPU-s of every API process's start)."""
    code = (
        "import sys, json, weir.api.app; "
        "print(json.dumps([m for m in ('httpx', 'rich') if m in sys.modules]))"
    )
    assert json.loads(_probe(code)) == []


def test_the_job_api_loads_no_runtime_no_rocksdb_and_no_sql_parser() -> None:
    loaded = _loaded("import weir; from weir import Job, agg, joins, sources, windows")
    assert _heavy(loaded) == []
    assert "sqlglot" not in loaded  # loads with a job's first query
    assert "weir.engine.joins" in loaded  # the library binds DataStream.join at import


def test_expressions_load_the_ir_but_no_numpy_nor_compiled_kernels() -> None:
    """``col(...)`` compiles to the kernels' IR when the job is built; the kernels themselves
    (numpy, the extension modules) load when a job runs."""
    loaded = _loaded("from weir import Job, col; (col('v') * 2 > 1).ir")
    assert "weir.engine.kernels.ir" in loaded and "weir.engine.kernels.rows" in loaded
    assert "numpy" not in loaded
    assert not [m for m in loaded if m.startswith("weir.engine.kernels._")], loaded


def test_the_command_line_loads_no_numpy_sql_parser_or_runtime_until_a_command_needs_them() -> None:
    """``weir --help``, a usage error and the lifecycle commands parse flags made from the
    settings' declarations; numpy, sqlglot, RocksDB and the job manager load with a run."""
    loaded = _loaded("import weir.app.cli")
    assert _heavy([m for m in loaded if m not in _SETTINGS_OF_A_RUN]) == []
    assert "numpy" not in loaded and "sqlglot" not in loaded, loaded


# what the command line's flags are made from (``app.catalogue``): a run's settings and config
_SETTINGS_OF_A_RUN = (
    "weir.engine.runtime",
    "weir.engine.runtime.config",
    "weir.engine.runtime.heap",
    "weir.engine.runtime.settings",
)


def test_bare_import_weir_loads_only_its_namespace() -> None:
    assert _loaded("import weir") == ["weir"]


def test_the_libraries_bind_their_methods_to_the_core_classes() -> None:
    from weir.engine import cep, joins, sql
    from weir.engine.job import Job
    from weir.engine.streams import DataStream, KeyedStream

    assert DataStream.join is joins.streams.join
    assert KeyedStream.pattern is cep.stream.pattern
    assert KeyedStream.interval_join is joins.streams.interval_join
    assert Job.sql.__module__ == sql.__name__ and Job.sql.__doc__


@pytest.mark.parametrize("folder", ["engine", "state", "api", "app"])
def test_a_folder_imported_by_its_own_name_fails_naming_the_weir_import(folder: str) -> None:
    """From the checkout's root each folder is importable under its bare name too, which would
    load a second copy of every class; the folder refuses with one line naming ``weir.…``."""
    out = subprocess.run(
        [sys.executable, "-c", f"import {folder}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == (
        f"ImportError: import weir.{folder}, not {folder}: this folder installs as weir.{folder}"
    )


def test_the_test_session_has_one_copy_of_each_module() -> None:
    """pytest puts the checkout's root on sys.path; the tests import ``weir.…`` only."""
    assert not {"engine", "state", "api", "app"} & set(sys.modules)


def test_shipping_a_column_batch_loads_no_pandas() -> None:
    """pyarrow's ``pa.array`` asks whether its argument is a pandas object, importing pandas
    (~0.2 CPU-s) in every worker that ships a batch; the exchange builds its arrays from the
    columns' buffers instead."""
    probe = (
        "import importlib.util, sys, numpy as np\n"
        "from weir.engine.kernels.scan import INT\n"
        "from weir.engine.runtime.operators.columns import ColumnBatch, Keys, Records, Tagged\n"
        "from weir.engine.runtime.task.framing import encode_entries\n"
        "v = Tagged(np.array([INT], np.uint8), np.array([7], np.int64), np.zeros(1), {})\n"
        "ts = np.array([10], np.int64)\n"
        "batch = ColumnBatch(1, Keys(['a']), ts, ts - 1, {'v': v}, Records([{}]), numeric=True)\n"
        "frame = encode_entries([([batch], b'', 5, 0, 0)])\n"
        "print(len(frame) > 0, importlib.util.find_spec('pandas') is not None, "
        "'pandas' in sys.modules)\n"
    )
    out = _probe(probe)
    # pandas is installed here (pyspark's extra), so pa.array would have imported it
    assert out.split() == ["True", "True", "False"], out


# what a windowed SQL aggregate's run (the cpu bench's job) never uses, so never loads: the
# libraries and planners it has no view for, the runtimes of other operators, Kafka and the
# generator, the bulk load of a live backfill, a profiler (issue 38, decision 0016)
_UNUSED_BY_A_WINDOWED_SQL_RUN = (
    "weir.engine.cep",
    "weir.engine.joins",
    "weir.engine.evictors",
    "weir.engine.sources.kafka",
    "weir.engine.sources.generator",
    "weir.engine.sinks.kafka",
    "weir.engine.sql.continuous",
    "weir.engine.sql.lookup",
    "weir.engine.sql.outerjoin",
    "weir.engine.sql.ranked",
    "weir.engine.sql.recognize",
    "weir.engine.sql.rownumber",
    "weir.engine.sql.sqljoin",
    "weir.engine.sql.temporal",
    "weir.engine.sql.windowed",
    "weir.engine.sql.windowjoin",
    "weir.engine.runtime.operators.broadcast",
    "weir.engine.runtime.operators.coprocess",
    "weir.engine.runtime.operators.process",
    "weir.engine.runtime.operators.session",
    "weir.engine.runtime.operators.sliding",
    "weir.engine.runtime.operators.triggered",
    "weir.engine.runtime.stored.triggered",
    "weir.state.bulkload",
    "weir.state.bulkstore",
    "cProfile",
    "glob",
)

# ``weir run`` in this process, which then prints what it loaded; an audit hook, which forked
# processes inherit, records what the zygote (a child of this process) and a worker (a child
# of the zygote) import after the fork: what a worker imports, every worker pays for
_RUN_PROBE = """
import json, os, sys
run, log = sys.argv[1:3]
me = os.getpid()

def after_fork(event, args):
    if event == "import" and os.getpid() != me:
        with open(log, "a") as f:
            f.write(("zygote " if os.getppid() == me else "worker ") + args[0] + "\\n")

sys.addaudithook(after_fork)
from weir.app.cli import main
code = main(["run", *json.loads(run)])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), flush=True)
os._exit(0)
"""


def _run_sql(tmp_path: Path, views: str) -> tuple[list[str], dict[str, list[str]]]:
    """``weir run`` of a SQL job over a small file: what it loaded, and what its zygote and
    its worker imported after the fork."""
    events = tmp_path / "events.jsonl"
    rows = [
        {"id": f"ad-{i % 7}", "event": "impression", "ts": 1_000 * i, "value": i} for i in range(50)
    ]
    events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = tmp_path / "job.sql"
    job.write_text(
        "CREATE TABLE events (id STRING, event STRING, ts BIGINT, `value` DOUBLE,\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND\n"
        f") WITH ('connector' = 'url', 'url' = 'file://{events}');\n{views}"
    )
    return _run(tmp_path, job)


def _run(tmp_path: Path, job: Path) -> tuple[list[str], dict[str, list[str]]]:
    log = tmp_path / "after-fork.txt"
    log.touch()
    args = [str(job), "--exit-at-end", "--no-api", "--parallelism", "1"]
    args += ["--state-dir", str(tmp_path / "state")]
    out = subprocess.run(
        [sys.executable, "-c", _RUN_PROBE, json.dumps(args), str(log)],
        capture_output=True, text=True, check=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    ran = json.loads(out.stdout.strip().splitlines()[-1])
    assert ran["code"] == 0, out.stderr
    forked: dict[str, list[str]] = {"zygote": [], "worker": []}
    for line in log.read_text().splitlines():
        who, module = line.split()
        forked[who].append(module)
    return ran["modules"], forked


def test_a_windowed_sql_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    """``weir run`` of a windowed ``GROUP BY`` (its job manager, which imports what its
    workers run before it forks them) loads no library, planner, runtime or connector the job
    has no use for; and its worker imports nothing after the fork."""
    loaded, after_fork = _run_sql(
        tmp_path,
        "CREATE VIEW stats AS\n"
        "SELECT id, window_start, window_end, COUNT(*) AS n, SUM(`value`) AS total\n"
        "FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n"
        "WHERE event = 'impression' GROUP BY id, window_start, window_end;\n",
    )
    unused = _UNUSED_BY_A_WINDOWED_SQL_RUN
    assert [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unused)] == []
    assert "weir.engine.runtime.operators.colwindow" in loaded  # what the job does run
    assert after_fork["worker"] == []


def test_the_zygote_imports_the_runtimes_of_its_jobs_operators_before_it_forks(
    tmp_path: Path,
) -> None:
    """A runtime's module loads with its first operator (``operators.factory``): the zygote
    imports those of its plan, so a worker of a continuous aggregate (a process function)
    imports nothing after the fork, while the job manager itself never loads the runtime."""
    loaded, after_fork = _run_sql(
        tmp_path,
        "SET 'table.exec.state.ttl' = '1 h';\n"
        "CREATE VIEW totals AS SELECT id, COUNT(*) AS n FROM events GROUP BY id;\n",
    )
    assert "weir.engine.sql.continuous" in loaded  # the view's planner, in the job manager
    assert "weir.engine.runtime.operators.process" not in loaded  # the zygote's alone
    assert "weir.engine.runtime.operators.process" in after_fork["zygote"]
    assert after_fork["worker"] == []


def test_a_job_files_workers_find_what_it_may_use_imported_before_the_fork(tmp_path: Path) -> None:
    """A Python job file is loaded by each worker after the fork (decision 0015): what it may
    use, the libraries and connectors that load on first use among them, is imported before,
    so a worker imports the file's own module and nothing of weir."""
    job = tmp_path / "gen_job.py"
    job.write_text(
        "from weir import Job, agg, sources, windows\n"
        "job = Job('gen')\n"
        "(job.source(sources.generator('ads', rate=0, ids=5, count=200, clock='synthetic'),\n"
        "            timestamp='ts')\n"
        " .key_by('id').window(windows.tumbling(ms=10_000)).aggregate('n', n=agg.count()))\n"
    )
    _, after_fork = _run(tmp_path, job)
    assert [m for m in after_fork["worker"] if m.startswith("weir")] == [], after_fork


# the packages whose names load on first use (PEP 562); those that list them in ``dir`` before
# they load, as they did when they were imported up front
_LISTED = (
    "weir",
    "weir.engine",
    "weir.engine.sources",
    "weir.engine.sinks",
    "weir.engine.runtime.stored",
)
_LAZY_PACKAGES = (*_LISTED, "weir.engine.sql", "weir.state", "weir.api")


@pytest.mark.parametrize("package", _LAZY_PACKAGES)
def test_every_name_a_lazy_package_exports_resolves(package: str) -> None:
    """Each name of the package's ``__all__`` resolves in a fresh interpreter, and ``from
    package import *`` binds them all; ``dir`` lists them where it did before."""
    probe = (
        "import importlib, json, sys\n"
        f"m = importlib.import_module({package!r})\n"
        "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
        f"undir = sorted(set(m.__all__) - set(dir(m))) if {package in _LISTED} else []\n"
        "ns = {}\n"
        f"exec('from {package} import *', ns)\n"
        "unbound = sorted(set(m.__all__) - set(ns))\n"
        "print(json.dumps([missing, undir, unbound]))\n"
    )
    out = _probe(probe)
    assert json.loads(out) == [[], [], []], out


def test_functions_named_like_submodules_stay_functions_once_those_load() -> None:
    """``sources.kafka`` and ``generator`` and ``sinks.kafka`` are functions; their submodules
    load late (with a Kafka source, or ``import weir.engine.sources.kafka`` anywhere), which
    must not replace them."""
    probe = (
        "import inspect, json\n"
        "from weir.engine import sinks, sources\n"
        "import weir.engine.sources.kafka, weir.engine.sources.generator\n"
        "from weir.engine.sinks.kafka import KafkaSink\n"
        "print(json.dumps([inspect.isfunction(f) for f in "
        "(sources.kafka, sources.generator, sinks.kafka)]))\n"
    )
    out = _probe(probe)
    assert json.loads(out) == [True, True, True]


def test_the_libraries_methods_load_their_library_at_their_first_call() -> None:
    """``weir.engine`` does not import CEP or the joins; ``KeyedStream.pattern`` and
    ``DataStream.join`` keep their declared signature and docstring and load the library at
    their first call, which binds the library's body in their place."""
    probe = (
        "import inspect, json, sys\n"
        "from weir import Job, sources\n"
        "from weir.engine.streams import DataStream, KeyedStream\n"
        "before = [m in sys.modules for m in ('weir.engine.cep', 'weir.engine.joins')]\n"
        "sig = str(inspect.signature(KeyedStream.pattern))\n"
        "doc = 'CEP' in KeyedStream.pattern.__doc__\n"
        "job = Job('j')\n"
        "s = job.source(sources.jsonl('/x.jsonl'), timestamp='ts')\n"
        "joined = type(s.join(s)).__module__\n"
        "import weir.engine.joins as joins\n"
        "print(json.dumps([before, sig, doc, joined, DataStream.join is joins.streams.join]))\n"
    )
    out = _probe(probe)
    before, sig, doc, joined, bound = json.loads(out)
    assert before == [False, False]
    assert sig == "(self, pattern: 'Pattern') -> 'PatternStream'" and doc
    assert joined == "weir.engine.joins.streams" and bound
