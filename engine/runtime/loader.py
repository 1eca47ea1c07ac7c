"""Loading a job file: a Python file that defines ``job = Job(...)`` at module level."""

from __future__ import annotations

import ast
import importlib.util
import runpy
import sys
from pathlib import Path

import weir
from weir.engine.errors import JobDefinitionError, WeirError
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.sinks import from_url as sink_from_url
from weir.engine.sources import from_url as source_from_url


def load_job(path: Path) -> Job:
    if not path.exists():
        raise JobDefinitionError(
            f"job file {path} does not exist; pass the path of a Python file that defines "
            "`job = Job(...)`"
        )
    if path.is_dir() or path.suffix != ".py":
        raise JobDefinitionError(f"job file {path} is not a .py file; pass a Python job file")
    directory = str(path.resolve().parent)  # the job's own modules import as in `python JOB.py`
    if directory not in sys.path:
        sys.path.insert(0, directory)
    _refuse_legacy_imports(path)
    try:
        namespace = runpy.run_path(str(path), run_name="__weir_job__")
    except WeirError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "engine":
            raise JobDefinitionError(_legacy_message(path, "engine")) from None
        raise JobDefinitionError(
            f"job file {path} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise JobDefinitionError(
            f"job file {path} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    job = namespace.get("job")
    if job is None:
        raise JobDefinitionError(
            f'job file {path} defines no `job`; add `job = Job("name")` at module level'
        )
    if not isinstance(job, Job):
        raise JobDefinitionError(
            f'`job` in {path} is a {type(job).__name__}, not a weir.Job; assign `job = Job("name")`'
        )
    job.validate()
    return job


def load_configured_job(cfg: RunConfig) -> Job:
    """Load the job file and apply ``--source`` / ``--sink`` overrides."""
    job = load_job(cfg.job_file)
    if cfg.source_url:
        job.replace_source(source_from_url(cfg.source_url))
    if cfg.sink_url:
        job.replace_sinks(sink_from_url(cfg.sink_url))
    return job


# weir's folders were once importable as top-level packages; job files written against them
# (`from engine import Job`) get one line naming the new import instead of a traceback
_LEGACY = {"engine", "state", "api", "app"}
_WEIR_DIR = Path(weir.__file__).parent


def _legacy_message(path: Path, module: str) -> str:
    new = "weir" if module == "engine" else f"weir.{module}"
    return (
        f"job file {path} imports `{module}`, weir's old module name; import from `{new}` "
        "instead (e.g. `from weir import Job, WatermarkStrategy, agg, sources, windows`)"
    )


def _refuse_legacy_imports(path: Path) -> None:
    """Refuse `engine`, `state`, `api` and `app` imports that would reach weir's own folders.

    From weir's source tree those folders may still be importable by their old names, which would
    load a second copy of weir's modules; a user's own module of the same name is left alone.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError:
        return  # runpy reports it with its line
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in _LEGACY and _is_weirs_own(top):
                raise JobDefinitionError(_legacy_message(path, top))


def _is_weirs_own(top: str) -> bool:
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return top == "engine"  # nobody else's module is called that in a job file
    origin = spec.origin or next(iter(spec.submodule_search_locations or []), None)
    own = (_WEIR_DIR / top).resolve()
    return origin is not None and Path(origin).resolve().is_relative_to(own)
