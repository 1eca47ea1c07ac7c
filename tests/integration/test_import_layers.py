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
)


def _loaded(statement: str, cwd: Path | None = None) -> list[str]:
    probe = (
        f"import sys, json; {statement}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('weir') "
        "or m.split('.')[0] in ('rocksdict', 'fastapi', 'uvicorn', 'pyspark', 'sqlglot', "
        "'numpy'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=cwd,
    )
    found: list[str] = json.loads(out.stdout)
    return found


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in _HEAVY)]


def test_the_client_loads_no_rocksdb_server_or_runtime() -> None:
    loaded = _loaded("import weir.client")
    assert _heavy(loaded) == []
    assert not [m for m in loaded if m.startswith("weir.engine")], loaded


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
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    # pandas is installed here (pyspark's extra), so pa.array would have imported it
    assert out.stdout.split() == ["True", "True", "False"], out.stdout
