"""The operator graph a job compiles to, for ``weir explain``: the same description for a
Python job and a SQL job, since both are a ``Job``.

    source -> stateless steps (filter, map, flat_map) -> key_by -> operators -> sinks

``describe`` gives it as JSON-ready data, ``render`` as indented text, one node a line.
"""

from __future__ import annotations

from typing import Any

from weir.engine import agg
from weir.engine.job import (
    Job,
    Node,
    Operator,
    SinkNode,
    StatelessNode,
    WindowOperator,
)


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def describe_aggregate(a: agg.Aggregate) -> str:
    """``count(*)``, ``sum(value)``, or what a user-defined aggregate is."""
    if isinstance(a, agg.Builtin):
        return f"{a.kind}({a.field or '*'})"
    from weir.engine.sql.aggregates import Called, CountDistinct  # SQL's own aggregates

    if isinstance(a.function, Called | CountDistinct):
        return a.function.sql
    return f"custom {type(a.function).__module__}.{type(a.function).__qualname__}"


def _operator(op: Operator) -> dict[str, Any]:
    out = op.describe()
    if isinstance(op, WindowOperator):
        out["aggregates"] = {n: describe_aggregate(a) for n, a in op.aggregates.items()}
    out["sinks"] = [s.describe() for s in op.sinks]
    return out


def _node(node: Node) -> dict[str, Any]:
    if isinstance(node, StatelessNode):
        return {
            "type": node.kind,
            "function": _name(node.fn),
            "children": [_node(c) for c in node.children],
        }
    if isinstance(node, SinkNode):
        return {"type": "sink", "sink": node.sink.describe()}
    key = node.key if isinstance(node.key, str) else _name(node.key)
    return {"type": "key_by", "key": key, "operators": [_operator(op) for op in node.children]}


def describe(job: Job) -> dict[str, Any]:
    """The job's graph: its source (with time attribute and watermarks) and what follows."""
    sources = []
    for s in job.sources:
        ts = s.timestamp if isinstance(s.timestamp, str) else _name(s.timestamp)
        sources.append(
            {
                "type": "source",
                "source": s.source.describe(),
                "timestamp": ts,
                "watermark_bound_ms": s.watermarks.bound_ms,
                "idle_timeout_ms": s.watermarks.idle_timeout_ms,
                "children": [_node(c) for c in s.children],
            }
        )
    return {"job": job.name, "max_parallelism": job.max_parallelism, "sources": sources}


def render(desc: dict[str, Any]) -> str:
    """``describe``'s graph as text, each step indented under the one feeding it."""
    lines = [f"job {desc['job']} (max parallelism {desc['max_parallelism']})"]
    for s in desc["sources"]:
        lines.append(
            f"  source {s['source']}  time: {s['timestamp']}, watermark: max - "
            f"{s['watermark_bound_ms']} ms - 1"
            + (f", idle after {s['idle_timeout_ms']} ms" if s["idle_timeout_ms"] else "")
        )
        for c in s["children"]:
            _render_node(c, 2, lines)
    return "\n".join(lines)


def _render_node(node: dict[str, Any], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    if node["type"] == "sink":
        lines.append(f"{pad}-> sink {node['sink']}")
    elif node["type"] == "key_by":
        lines.append(f"{pad}key_by {node['key']}")
        for op in node["operators"]:
            _render_operator(op, depth + 1, lines)
    else:
        lines.append(f"{pad}{node['type']} {node['function']}")
        for c in node["children"]:
            _render_node(c, depth + 1, lines)


def _render_operator(op: dict[str, Any], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    if op["type"] == "window":
        window = ", ".join(f"{k}={v}" for k, v in op["window"].items() if k != "type")
        lines.append(
            f"{pad}window operator {op['name']}: {op['window']['type']} ({window}), "
            f"allowed lateness {op['allowed_lateness_ms']} ms"
        )
        lines += [f"{pad}  {k}: {op[k]}" for k in ("trigger", "evictor") if k in op]
        lines += [f"{pad}  {n} = {a}" for n, a in op["aggregates"].items()]
    else:
        lines.append(f"{pad}process operator {op['name']}: {op['function']}")
    lines += [f"{pad}  -> sink {s}" for s in op["sinks"]]
