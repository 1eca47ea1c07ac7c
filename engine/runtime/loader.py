"""Loading a job file: a Python file that defines ``job = Job(...)`` at module level."""

from __future__ import annotations

import runpy
from pathlib import Path

from engine.errors import JobDefinitionError, WeirError
from engine.job import Job
from engine.runtime.config import RunConfig
from engine.sinks import from_url as sink_from_url
from engine.sources import from_url as source_from_url


def load_job(path: Path) -> Job:
    if not path.exists():
        raise JobDefinitionError(
            f"job file {path} does not exist; pass the path of a Python file that defines "
            "`job = Job(...)`"
        )
    if path.is_dir() or path.suffix != ".py":
        raise JobDefinitionError(f"job file {path} is not a .py file; pass a Python job file")
    try:
        namespace = runpy.run_path(str(path), run_name="__weir_job__")
    except WeirError:
        raise
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
            f"`job` in {path} is a {type(job).__name__}, not an engine.Job; "
            'assign `job = Job("name")`'
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
