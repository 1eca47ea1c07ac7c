"""The SQL join views of a job by kind, for the backfill's refusal by name (``weir explain``
names them by their functions). Functions are recognised by their class's module and name,
so the check never imports the SQL parser (which ``weir backfill`` of a job without SQL does
not need)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.engine.nodes import ProcessNode

if TYPE_CHECKING:
    from weir.engine.job import Job

_KINDS = {  # (module, class) -> what a refusal calls it
    ("weir.engine.sql.outerjoin", "OuterIntervalJoin"): "SQL outer interval join",
    ("weir.engine.sql.temporal", "TemporalJoin"): "SQL temporal join (FOR SYSTEM_TIME AS OF)",
    ("weir.engine.sql.lookup", "LookupJoin"): "SQL lookup join (AS OF PROCTIME())",
    ("weir.engine.sql.sqljoin", "RegularJoin"): "SQL regular join (kept by its state TTL)",
}


def sql_joins_of(job: Job) -> list[tuple[str, str]]:
    """``job``'s SQL join views that the job API's ``joins_of`` does not name, ``(name,
    kind)``: outer interval joins, temporal and lookup joins, regular joins."""
    found = []
    for name, op in job.operators.items():
        if isinstance(op, ProcessNode):
            fn = type(op.function)
            kind = _KINDS.get((fn.__module__, fn.__name__))
            if kind is not None:
                found.append((name, kind))
    return found
