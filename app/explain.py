"""``weir explain JOB``: the operator graph a job compiles to, as text or JSON."""

from __future__ import annotations

import json

from weir.engine.explain import describe, render
from weir.engine.runtime.loader import load_job


def main(job_file: str, *, as_json: bool) -> int:
    graph = describe(load_job(job_file))
    print(json.dumps(graph, indent=2) if as_json else render(graph))
    return 0
