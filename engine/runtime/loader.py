"""Loading a job: a Python file that defines ``job = Job(...)`` at module level, a ``.sql`` file of
Flink SQL statements (``weir.engine.sql.script``), or a module of an importable package named as
``package.module:attr``, whose attribute is a ``Job`` or a zero-argument function returning one.
Every worker loads the same spec again itself, except a SQL job whose plan runs no user code,
which workers forked from the zygote take as planned (``preload``; ``control.zygote``)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from weir.base.errors import ConfigError, JobDefinitionError, SourceError, WeirError
from weir.engine.job import Job
from weir.engine.runtime.config import RunConfig
from weir.engine.runtime.joberrors import failed_to_load
from weir.engine.runtime.trust import check_job_path
from weir.engine.sinks import from_url as sink_from_url
from weir.engine.sources import JsonlSource
from weir.engine.sources import from_url as source_from_url

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
# a SQL job file that may import user code while it is planned (``CREATE FUNCTION``); any
# mention of the word keeps the plan from being shared, comments included: safe, not clever
_USER_CODE = re.compile(r"\bFUNCTION\b", re.IGNORECASE)
# in a zygote and its workers: (job file, source override, sink override) -> the planned job
_preloaded: tuple[tuple[str, str | None, str | None], Job] | None = None
MODULE_SPEC = re.compile(rf"^({_DOTTED}):({_DOTTED})$")


def load_job(spec: Path | str) -> Job:
    """The job that ``spec`` names: a path to a .py or .sql file, or ``package.module:attr`` (a
    file of that name wins, so an odd file name still loads as a file)."""
    found = MODULE_SPEC.match(str(spec))
    if found and not Path(spec).exists():
        return _load_attribute(found.group(1), found.group(2))
    return _load_file(Path(spec))


def _load_file(path: Path) -> Job:
    if not path.exists():
        raise JobDefinitionError(
            f"job file {path} does not exist; pass the path of a Python file that defines "
            "`job = Job(...)`, a .sql job file, or package.module:attr"
        )
    if path.is_dir() or path.suffix not in (".py", ".sql"):
        raise JobDefinitionError(
            f"job file {path} is not a .py file or a .sql file; pass a Python job file, a SQL job "
            "file, or package.module:attr"
        )
    check_job_path(path)
    _append_path(str(path.resolve().parent))
    if path.suffix == ".sql":
        from weir.engine.sql import load_script  # imported late: sqlglot only for SQL jobs

        return load_script(path)
    _refuse_legacy_imports(path)
    namespace = _loading(
        f"job file {path}",
        lambda: runpy.run_path(str(path), run_name="__weir_job__"),
        path,
        "the job file",
    )
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


def _loading(
    what: str, load: Callable[[], Any], path: Path | None = None, short: str | None = None
) -> Any:
    """Run ``load`` (a job file or module's code); whatever it raises names ``what``, the file
    and line in the user's code (``path``'s, when given) and Python's own message."""
    try:
        return load()
    except WeirError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "engine":
            raise JobDefinitionError(_legacy_message(what, "engine")) from None
        raise JobDefinitionError(failed_to_load(what, exc, path, short)) from exc
    except Exception as exc:
        raise JobDefinitionError(failed_to_load(what, exc, path, short)) from exc


def _load_attribute(module_name: str, attr: str) -> Job:
    spec = f"{module_name}:{attr}"
    module = _import(module_name, spec)
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise JobDefinitionError(
                f"job {spec}: module {module_name} has no attribute {attr!r}; {_jobs_in(module)}"
            )
        found = getattr(found, part)
    job = found if isinstance(found, Job) else _call_factory(spec, found)
    job.validate()
    return job


def _call_factory(spec: str, found: Any) -> Job:
    if not callable(found) or isinstance(found, type):
        raise JobDefinitionError(
            f"job {spec} is a {type(found).__name__}, not a weir.Job; name a Job, or a function "
            "that takes no arguments and returns one"
        )
    made = _loading(f"job {spec}", found)
    if not isinstance(made, Job):
        raise JobDefinitionError(
            f"job {spec}() returned a {type(made).__name__}, not a weir.Job; return the Job it "
            "builds"
        )
    return made


def _import(module_name: str, spec: str) -> ModuleType:
    """Import the job's module; the current directory is on the path, as for ``python -m``."""
    here = os.getcwd()
    _append_path(here)
    top = module_name.split(".")[0]
    if top in _LEGACY and _is_weirs_own(top):
        raise JobDefinitionError(_legacy_message(f"job {spec}", top))
    origin = _origin(module_name)
    if origin is not None and origin.exists():
        check_job_path(origin)
    if origin is not None and origin.suffix == ".py":
        _refuse_legacy_imports(origin)
    try:
        module: ModuleType = _loading(
            f"job module {module_name}", lambda: importlib.import_module(module_name), origin
        )
    except JobDefinitionError as exc:
        missing = exc.__cause__
        if isinstance(missing, ModuleNotFoundError) and _names_a_parent(missing, module_name):
            raise JobDefinitionError(
                f"job {spec}: no module named {missing.name!r} (looked in {here} and sys.path); "
                "run weir from the directory that holds the package, add that directory to "
                "PYTHONPATH, or install the package"
            ) from None
        raise
    return module


def _append_path(directory: str) -> None:
    """The job's own modules import from ``directory`` as in ``python JOB.py``, but after the
    standard library and site-packages: a module planted beside the job file and named as one
    of weir's dependencies (``sqlglot.py``, ``uvicorn.py``) never replaces it."""
    if directory not in sys.path:
        sys.path.append(directory)


def _origin(module_name: str) -> Path | None:
    """The module's source file, found without running it (its parent packages do run)."""
    try:
        found = importlib.util.find_spec(module_name)
    except Exception:  # noqa: BLE001 - a parent package that fails: importing it reports that
        return None
    return Path(found.origin) if found is not None and found.origin else None


def _names_a_parent(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Is the missing module the job's module or one of its packages (not one it imports)?"""
    return exc.name is not None and (module_name + ".").startswith(exc.name + ".")


def _jobs_in(module: ModuleType) -> str:
    names = [n for n, v in vars(module).items() if isinstance(v, Job)]
    if names:
        return f"it defines {', '.join(f'{module.__name__}:{n}' for n in sorted(names))}"
    return "name a Job defined in it, or a function that takes no arguments and returns one"


def plan_is_shareable(cfg: RunConfig) -> bool:
    """Is ``cfg``'s job a SQL file whose planning runs no user code? Its plan may then be
    made once and shared by forked workers (a Python job file's module-level code, a client
    or a connection, must run in each worker)."""
    path = Path(cfg.job_file)
    if path.suffix != ".sql" or not path.is_file():
        return False
    try:
        return _USER_CODE.search(path.read_text(encoding="utf-8", errors="replace")) is None
    except OSError:
        return False


def preload(cfg: RunConfig, job: Job) -> None:
    """In the zygote: ``load_configured_job(cfg)`` returns ``job`` (the supervisor's plan of
    the same file and overrides) in the workers forked from it."""
    global _preloaded
    _preloaded = (_preload_key(cfg), job)


def _preload_key(cfg: RunConfig) -> tuple[str, str | None, str | None]:
    return str(cfg.job_file), cfg.source_url, cfg.sink_url


def load_configured_job(cfg: RunConfig) -> Job:
    """Load the job file and apply the ``source_url`` / ``sink_url`` overrides."""
    if _preloaded is not None and _preloaded[0] == _preload_key(cfg):
        return _preloaded[1]
    job = load_job(cfg.job_file)
    if cfg.source_url:
        job.replace_source(source_from_url(cfg.source_url))
    if cfg.sink_url:
        job.replace_sinks(sink_from_url(cfg.sink_url))
    return job


def check_inputs(job: Job) -> None:
    """Refuse, before anything starts, a file source whose file does not exist (or whose glob
    matches none): a worker would find it only once the job and its API are up.

    Raises:
        ConfigError: naming the source, the missing path and the fix.
    """
    for side in job.sources:
        source = side.source
        if not isinstance(source, JsonlSource):
            continue  # a broker or a generator: reached (and retried) by the workers
        try:
            paths = source.splits()
        except SourceError as exc:
            raise ConfigError(f"source {side.name!r}: {exc}") from None
        for path in paths:
            if not Path(path).is_file():
                what = "is not a file" if Path(path).exists() else "does not exist"
                raise ConfigError(
                    f"source {side.name!r} reads {path}, which {what}; pass an existing JSONL "
                    "file (a path or file:///path) or a glob"
                )


# weir's folders were once importable as top-level packages; job files written against them
# (`from engine import Job`) get one line naming the new import instead of a traceback
_LEGACY = {"engine", "state", "api", "app"}
_WEIR_DIR = Path(__file__).parents[2]  # weir/, this module being weir/engine/runtime/loader.py


def _legacy_message(what: str, module: str) -> str:
    new = "weir" if module == "engine" else f"weir.{module}"
    return (
        f"{what} imports `{module}`, weir's old module name; import from `{new}` "
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
                raise JobDefinitionError(_legacy_message(f"job file {path}", top))


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
