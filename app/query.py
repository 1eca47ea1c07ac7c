"""``weir query JOB "SELECT …"``: a pull query against a running job's API (``POST /{job}/sql``),
printed as a table (``--json``: the answer as JSON). The API is the one ``--api-url`` names, or
the one the job publishes under ``--state-dir``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from weir.app.lifecycle import API_TIMEOUT_S, job_name, jobs_under
from weir.base.errors import ConfigError, ControlError


def main(args: argparse.Namespace) -> int:
    """Run the query; 0 when it answered, 1 when the API refused it (the reason on stderr)."""
    from weir.client import ApiError, Client, Retries, WeirClientError

    job = job_name(args.job)
    url = args.api_url or _published(Path(args.state_dir), job)
    with Client(url, token=args.api_token or None, timeout=API_TIMEOUT_S,
                retries=Retries(attempts=1), trust_env=False) as client:  # fmt: skip
        try:
            answer = client.sql(job, args.query, consistency=args.consistency,
                                budget=args.budget, cursor=args.cursor or None)  # fmt: skip
        except ApiError as exc:
            print(f"weir: error: the query was refused ({exc.status}): {exc}", file=sys.stderr)
            return 1
        except WeirClientError as exc:
            raise ControlError(f"the query of job {job!r} at {url} failed: {exc}") from None
    if args.json:
        print(json.dumps(answer.model_dump(), indent=1))
    else:
        print(render(answer.columns, answer.rows))
    if answer.next_cursor:
        print(f"more rows: pass --cursor {answer.next_cursor}", file=sys.stderr)
    return 0


def _published(state_dir: Path, job: str) -> str:
    for listed in jobs_under(state_dir):
        if listed.job == job and listed.api_url:
            return listed.api_url
    raise ConfigError(
        f"no API of job {job!r} published under {state_dir}; pass --api-url, or the "
        "--state-dir its weir run uses"
    )


def render(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """Rows as aligned text columns under a header (NULL for a missing value)."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    return value if isinstance(value, str) else json.dumps(value)
