"""What every stage of a backfill shares: the plan the Spark tasks receive, the checks on the
operator, which path it takes (native Spark or Python), and the job file loaded once per Python
worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from weir.base.errors import ConfigError, JobDefinitionError
from weir.engine.agg import UserDefined
from weir.engine.job import Job
from weir.engine.nodes import (
    CoProcessNode,
    KeyedBroadcastNode,
    Node,
    SourceNode,
    StatelessNode,
    WindowNode,
)
from weir.engine.windows import SessionWindows


@dataclass(frozen=True)
class Plan:
    """What the Spark tasks need, picklable: the job file is loaded again in each task."""

    job_file: str
    job_name: str
    op: str
    max_parallelism: int
    from_ms: int | None
    to_ms: int | None
    out_dir: str  # an absolute directory or s3://BUCKET/PREFIX/<job> (``output.TaskOutput``)
    # the driver's AWS_*/WEIR_S3_* settings, for an S3 output; never shown in a repr
    storage_env: dict[str, str] = field(default_factory=dict, repr=False)


def backfill_operator(job: Job, op_name: str | None) -> WindowNode:
    """The window operator a backfill computes, checked for what Spark can run."""
    _refuse_broadcast(job)
    _refuse_continuous(job, op_name)  # first: a SQL window join is named, not its connect
    _refuse_several_inputs(job)
    _refuse_pattern(job, op_name)
    ops = [o for o in job.operators.values() if isinstance(o, WindowNode)]
    if op_name is not None:
        ops = [o for o in ops if o.name == op_name]
    if not ops:
        known = ", ".join(job.operators) or "none"
        raise JobDefinitionError(
            f"job {job.name!r} has no window operator {op_name or ''!r} to backfill; "
            f"operators: {known}"
        )
    if len(ops) > 1:
        raise ConfigError(
            f"job {job.name!r} has several window operators ({', '.join(o.name for o in ops)}); "
            "pick one with `op`, or backfill them all (``backfill_operators``)"
        )
    return _computable(ops[0])


def backfill_operators(job: Job, op_name: str | None) -> list[WindowNode]:
    """The window operators one backfill computes: ``op_name``'s, or (None) every operator of
    the job, so that one savepoint holds them all. Each must be one a backfill computes; any
    other keyed operator (a process function, a CEP pattern) is refused by name rather than
    left empty in the savepoint.

    Raises:
        JobDefinitionError: an operator the backfill cannot compute, named with the fix.
        ConfigError: ``op_name`` names no window operator.
    """
    if op_name is not None:
        return [backfill_operator(job, op_name)]
    _refuse_broadcast(job)
    _refuse_several_inputs(job)
    others = [o.name for o in job.operators.values() if not isinstance(o, WindowNode)]
    if others:
        raise JobDefinitionError(
            f"job {job.name!r} has operators a backfill does not compute ({', '.join(others)}: "
            "process functions or patterns); backfill its window operators one by one with "
            "`op` NAME, or run the job over the bounded input with weir run `exit_at_end`"
        )
    ops = [o for o in job.operators.values() if isinstance(o, WindowNode)]
    if not ops:
        raise JobDefinitionError(f"job {job.name!r} has no window operator to backfill")
    return [_computable(o) for o in ops]


def _computable(op: WindowNode) -> WindowNode:
    """``op`` if a backfill computes it, else its refusal by name."""
    if op.assigner.time == "processing":
        raise JobDefinitionError(
            f"operator {op.name!r} uses processing time; a backfill needs event time"
        )
    if op.triggered:
        raise JobDefinitionError(
            f"operator {op.name!r} has {_triggered_part(op)}, which a backfill does not "
            "compute (count windows follow arrival order, triggers fire between records); "
            "run the job on the stream (weir run) over the same input instead"
        )
    return op


def _refuse_pattern(job: Job, op_name: str | None) -> None:
    """A CEP pattern operator is refused by name: the backfill computes window operators."""
    from weir.engine.cep import patterns_of  # the job API's, imported when a backfill needs it

    if op_name is not None and op_name in patterns_of(job):
        raise JobDefinitionError(
            f"operator {op_name!r} of job {job.name!r} is a CEP pattern operator; the backfill "
            "computes window operators only: run the pattern over the bounded input with weir "
            "run `exit_at_end`"
        )


def _refuse_continuous(job: Job, op_name: str | None) -> None:
    """A continuous aggregate (SQL ``GROUP BY`` without a window) is refused by name: its rows
    are process-function state, which the backfill does not write."""
    from weir.engine.sql.continuous import continuous_views  # SQL's, when a backfill needs it
    from weir.engine.sql.windowed import window_views

    views = continuous_views(job) + window_views(job.operators)
    windows = [o for o in job.operators.values() if isinstance(o, WindowNode)]
    named = [v for v in views if v[0] == op_name] if op_name is not None else []
    if named or (op_name is None and views and not windows):
        name, kind = (named or views)[0]
        raise JobDefinitionError(
            f"operator {name!r} of job {job.name!r} is a {kind}; the backfill computes window "
            "operators only: run the view over the bounded input with weir run `exit_at_end`"
        )


def _refuse_broadcast(job: Job) -> None:
    found = [o for o in job.operators.values() if isinstance(o, KeyedBroadcastNode)]
    if found:
        names = ", ".join(repr(o.name) for o in found)
        raise JobDefinitionError(
            f"job {job.name!r} has a broadcast input (read by {names}); a backfill does not "
            "run broadcast state: the broadcast records' order against each key's records is "
            "the live job's alone. Backfill a job file without the broadcast input"
        )


def _refuse_several_inputs(job: Job) -> None:
    """The backfill runs one source's chain; a job of several inputs is refused rather than
    computed differently."""
    from weir.engine.joins import joins_of  # the job API's, imported when a backfill needs it
    from weir.engine.sql.joinkinds import sql_joins_of  # SQL's; it loads no parser

    for name, kind in [*joins_of(job), *sql_joins_of(job)]:
        raise JobDefinitionError(
            f"operator {name!r} of job {job.name!r} is a {kind}; the backfill does not compute "
            "joins: backfill a job file without it, or run the join over the bounded input "
            "with weir run `exit_at_end`"
        )
    if len(job.sources) > 1:
        names = ", ".join(s.name for s in job.sources)
        raise JobDefinitionError(
            f"job {job.name!r} reads {len(job.sources)} sources ({names}); the backfill computes "
            "jobs of one source: backfill a job file with one job.source(...)"
        )
    connected = [o.name for o in job.operators.values() if isinstance(o, CoProcessNode)]
    if connected:
        raise JobDefinitionError(
            f"job {job.name!r} has connected streams (co-process operator "
            f"{', '.join(connected)}); the backfill does not compute connect: backfill a job "
            "file without it"
        )
    if job.sources and _has_union(job.sources[0]):
        raise JobDefinitionError(
            f"job {job.name!r} has a union; the backfill does not compute union: backfill a "
            "job file without it"
        )


def _has_union(source: SourceNode) -> bool:
    """Does a step hang under two parents (a union of two branches of the source)?"""
    seen: set[int] = set()

    def walk(nodes: list[Node]) -> bool:
        for n in nodes:
            if id(n) in seen:
                return True
            seen.add(id(n))
            if isinstance(n, StatelessNode) and walk(n.children):
                return True
        return False

    return walk(source.children)


def _triggered_part(op: WindowNode) -> str:
    """What makes an operator a triggered one, as a backfill refusal names it."""
    described = op.describe()
    if op.assigner.describe()["type"] in ("count", "global"):
        return f"{op.assigner.describe()['type']} windows"
    parts = [f"{k} {described[k]}" for k in ("trigger", "evictor") if k in described]
    return " and ".join(parts)


def python_path(op: WindowNode) -> bool:
    """Whether the windows are folded in Python tasks (the streaming fold itself) rather than by
    Spark's native aggregates: sessions (merging needs each record's predecessor) and
    user-defined aggregates (their objects run in Python)."""
    return isinstance(op.assigner, SessionWindows) or any(
        isinstance(a, UserDefined) for a in op.aggregates.values()
    )


_JOBS: dict[str, Job] = {}


def load(job_file: str) -> Job:
    job = _JOBS.get(job_file)
    if job is None:
        from weir.engine.runtime.loader import load_job as load_job_file

        job = _JOBS[job_file] = load_job_file(Path(job_file))
    return job
