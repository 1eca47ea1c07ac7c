"""Writes the HTTP API's reference from the app's own OpenAPI schema (``make reference``).

``docs/reference/openapi.json`` is the schema as ``GET /openapi.json`` serves it, and
``docs/reference/http.md`` a page made from it: every route with its operationId, summary,
parameters, responses and error codes. ``tests/unit/test_docs_reference.py`` fails while
either differs from what this script writes, so the page cannot drift from the routes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"
METHODS = ("get", "post", "put", "patch", "delete")


def schema() -> dict[str, Any]:
    """The OpenAPI schema of an app with no jobs: the routes do not depend on them."""
    from weir.api.app import create_app
    from weir.api.registry import Registry

    spec: dict[str, Any] = create_app(Registry()).openapi()
    return spec


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _params(op: dict[str, Any]) -> list[str]:
    rows = []
    for p in op.get("parameters", []):
        s = p.get("schema", {})
        kind = s.get("type") or "/".join(x.get("type", "?") for x in s.get("anyOf", []))
        default = f" (default `{s['default']}`)" if "default" in s else ""
        need = "required" if p.get("required") else "optional"
        desc = _cell(p.get("description", ""))
        rows.append(f"| `{p['name']}` | {p['in']} | {kind} | {need}{default} | {desc} |")
    return rows


def _body(op: dict[str, Any]) -> str:
    content = op.get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    return f"Body: `{ref.rsplit('/', 1)[-1]}` (JSON).\n\n" if ref else ""


def _responses(op: dict[str, Any]) -> str:
    parts = []
    for status, resp in sorted(op.get("responses", {}).items()):
        ref = resp.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
        model = f" `{ref.rsplit('/', 1)[-1]}`" if ref else ""
        parts.append(f"`{status}`{model}: {_cell(resp.get('description', ''))}")
    return "Responses: " + "; ".join(parts) + ".\n\n" if parts else ""


def page(spec: dict[str, Any]) -> str:
    """The Markdown page for ``spec``."""
    out = [
        "# HTTP API\n\n",
        "<!-- generated from the app's OpenAPI schema by `make reference`; do not edit -->\n\n",
        f"{spec['info']['title']} {spec['info']['version']}. A running API serves the same "
        "schema at `/openapi.json` and an interactive page at `/docs`; the schema is also "
        "[openapi.json](openapi.json) beside this page, for generated clients. Every error "
        'answer is `{"error": {"code", "message"}}`. Routes tagged `admin` change state and '
        "need the token when one is set ([Threat model](../operations/threat-model.md)).\n\n",
    ]
    for path, item in spec["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            tags = f" ({', '.join(op['tags'])})" if op.get("tags") else ""
            out.append(f"## `{method.upper()} {path}`{tags}\n\n")
            out.append(f"operationId `{op.get('operationId', '')}`. ")
            summary = op.get("description") or op.get("summary") or ""
            out.append(f"{' '.join(summary.split())}\n\n")
            rows = _params(op)
            if rows:
                out.append(
                    "| parameter | in | type | | meaning |\n| --- | --- | --- | --- | --- |\n"
                )
                out.append("\n".join(rows) + "\n\n")
            out.append(_body(op))
            out.append(_responses(op))
    return "".join(out).rstrip() + "\n"


def outputs() -> dict[Path, str]:
    """Each generated file and the text it must hold."""
    spec = schema()
    return {
        OUT / "openapi.json": json.dumps(spec, indent=2, sort_keys=True) + "\n",
        OUT / "http.md": page(spec),
    }


def main() -> int:
    """Write the pages; with ``--check``, write nothing and fail naming each page that differs."""
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in outputs().items():
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path.relative_to(ROOT)))
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"stale: {', '.join(stale)}: run make reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
