"""The operator graph a job compiles to, for ``weir explain``: the same description for a
Python job and a SQL job, since both are a ``Job``.

    source -> stateless steps (filter, map, flat_map) -> key_by -> operators -> sinks

A job of several sources lists each by name; a step that a ``union`` shares is shown under
every source feeding it, marked with their names, and a co-process function under each of its
two key_by nodes, with which input that is. Each key_by says whether it runs on columns or
record by record, and why (``columnar.refusal``). ``describe`` gives it as JSON-ready data,
``render`` as indented text, one node a line.
"""

from __future__ import annotations

from typing import Any

from weir.engine import agg
from weir.engine.columnar import refusal
from weir.engine.expressions import render as render_expr
from weir.engine.job import Job
from weir.engine.kernels import ir
from weir.engine.nodes import (
    BroadcastNode,
    CoProcessNode,
    ForwardNode,
    KeyByNode,
    Node,
    OperatorNode,
    SinkNode,
    StatelessNode,
    WindowNode,
)


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def _step(node: StatelessNode) -> str:
    """A stateless step's function: SQL's clause, or its expression(s) when it is made of
    them."""
    if node.sql is not None:
        return node.sql.text
    if node.expr is not None:
        return render_expr(node.expr)
    if node.columns is not None:
        return ", ".join(f"{name}={render_expr(e)}" for name, e in node.columns.items())
    return _name(node.fn)


def _selector(selector: Any, expr: ir.Expr | None) -> str:
    """A key's or an event time's selector: a field, an expression or a function's name."""
    if expr is not None:
        return render_expr(expr)
    return selector if isinstance(selector, str) else _name(selector)


def describe_aggregate(a: agg.Aggregate) -> str:
    """``count(*)``, ``sum(value)``, ``sum(value, nulls=skip)``, ``max(col("v") * 2)``,
    ``cast(avg(v), int)``, ``window_time()``, or what a user-defined aggregate is."""
    if isinstance(a, agg.Builtin):
        default = "skip" if a.kind in ("avg", "count") else "reject"
        nulls = f", nulls={a.nulls}" if a.nulls != default and a.input is not None else ""
        if a.expr is not None:
            arg = render_expr(a.expr)
        else:
            arg = a.field or ("" if a.kind == "window_time" else "*")
        shown = f"{a.kind}({arg}{nulls})"
        return shown if a.cast is None else f"cast({shown}, {a.cast})"
    from weir.engine.sql.aggregates import Called, Cast, CountDistinct  # SQL's own aggregates

    if isinstance(a.function, Called | CountDistinct | Cast):
        return a.function.sql
    return f"custom {type(a.function).__module__}.{type(a.function).__qualname__}"


def _operator(op: OperatorNode, node: KeyByNode | ForwardNode) -> dict[str, Any]:
    out = op.describe()
    if isinstance(op, CoProcessNode):
        out["input"] = 2 if op.second is node else 1
    if isinstance(op, WindowNode):
        out["aggregates"] = {n: describe_aggregate(a) for n, a in op.aggregates.items()}
    out["sinks"] = [s.describe() for s in op.sinks]
    return out


def _reached(job: Job) -> dict[int, list[str]]:
    """Which sources reach each node (by ``id``), in the job's order."""
    found: dict[int, list[str]] = {}

    def walk(nodes: list[Node], name: str) -> None:
        for n in nodes:
            names = found.setdefault(id(n), [])
            if name not in names:
                names.append(name)
            if isinstance(n, StatelessNode):
                walk(n.children, name)

    for s in job.sources:
        walk(s.children, s.name)
    return found


def _node(node: Node, reached: dict[int, list[str]]) -> dict[str, Any]:
    union = reached.get(id(node), [])
    out: dict[str, Any] = {"union": union} if len(union) > 1 else {}
    if isinstance(node, StatelessNode):
        if node.sql is not None and node.sql.why_records is not None:
            out["per_record"] = node.sql.why_records  # why the clause is not an expression
        return {
            **out,
            "type": node.kind,
            "function": _step(node),
            "children": [_node(c, reached) for c in node.children],
        }
    if isinstance(node, SinkNode):
        return {**out, "type": "sink", "sink": node.sink.describe()}
    if isinstance(node, BroadcastNode):  # its operators are described under their key_by
        return {
            **out,
            "type": "broadcast",
            "states": list(node.state_names),
            "operators": [op.name for op in node.children],
        }
    if isinstance(node, ForwardNode):  # a broadcast function's non-keyed input
        return {
            **out,
            "type": "forward",
            "operators": [_operator(op, node) for op in node.children],
        }
    key = _selector(node.key, node.key_expr)
    ops = [_operator(op, node) for op in node.children]
    why = refusal(node)
    execution = "columns" if why is None else f"records: {why}"
    return {**out, "type": "key_by", "key": key, "execution": execution, "operators": ops}


def describe(job: Job) -> dict[str, Any]:
    """The job's graph: its source (with time attribute and watermarks) and what follows."""
    sources = []
    reached = _reached(job)
    for s in job.sources:
        ts = _selector(s.timestamp, s.timestamp_expr)
        sources.append(
            {
                "type": "source",
                "name": s.name,
                "source": s.source.describe(),
                "timestamp": ts,
                "watermark_bound_ms": s.watermarks.bound_ms,
                "idle_timeout_ms": s.watermarks.idle_timeout_ms,
                "children": [_node(c, reached) for c in s.children],
            }
        )
    return {"job": job.name, "max_parallelism": job.max_parallelism, "sources": sources}


def render(desc: dict[str, Any]) -> str:
    """``describe``'s graph as text, each step indented under the one feeding it."""
    lines = [f"job {desc['job']} (max parallelism {desc['max_parallelism']})"]
    named = len(desc["sources"]) > 1
    for s in desc["sources"]:
        name = f"{s['name']}: " if named else ""
        lines.append(
            f"  source {name}{s['source']}  time: {s['timestamp']}, watermark: max - "
            f"{s['watermark_bound_ms'] + 1} ms"
            + (f", idle after {s['idle_timeout_ms']} ms" if s["idle_timeout_ms"] else "")
        )
        for c in s["children"]:
            _render_node(c, 2, lines)
    return "\n".join(lines)


def _render_node(node: dict[str, Any], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    if "union" in node:
        lines.append(f"{pad}union of {', '.join(node['union'])}")
    if node["type"] == "sink":
        lines.append(f"{pad}-> sink {node['sink']}")
    elif node["type"] == "broadcast":
        states = ", ".join(node["states"]) or "any"
        lines.append(f"{pad}broadcast to every worker (states: {states})")
        lines += [f"{pad}  -> broadcast input of {name}" for name in node["operators"]]
    elif node["type"] in ("key_by", "forward"):
        what = f"key_by {node['key']}" if node["type"] == "key_by" else "forward (no key)"
        lines.append(f"{pad}{what}")
        if node.get("execution") == "columns":
            lines.append(f"{pad}  runs on columns")
        elif "execution" in node:  # record by record, and why
            lines.append(f"{pad}  runs record by record ({node['execution'][9:]})")
        for op in node["operators"]:
            _render_operator(op, depth + 1, lines)
    else:
        lines.append(f"{pad}{node['type']} {node['function']}")
        if "per_record" in node:
            lines.append(f"{pad}  runs per record, not on columns ({node['per_record']})")
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
    elif op["type"] in ("keyed_broadcast", "broadcast"):
        states = ", ".join(op["broadcast_states"]) or "any"
        kind = "keyed broadcast" if op["type"] == "keyed_broadcast" else "broadcast"
        lines.append(
            f"{pad}{kind} operator {op['name']}: {op['function']} (broadcast states: {states})"
        )
    elif op["type"] == "co_process":
        lines.append(
            f"{pad}co-process operator {op['name']}: {op['function']} (input {op['input']} of 2)"
        )
    elif "pattern" in op:
        within = f", within {op['within_ms']} ms" if op["within_ms"] else ""
        lines.append(f"{pad}pattern operator {op['name']}: skip {op['skip']}{within}")
        lines += [f"{pad}  {step}" for step in _pattern_steps(op["pattern"])]
    else:
        lines.append(f"{pad}process operator {op['name']}: {op['function']}")
        if "sql_view" in op:  # a SQL view on a process function says what it computes
            lines.append(f"{pad}  {op['sql_view']}")
    lines += [f"{pad}  -> sink {s}" for s in op["sinks"]]


def _pattern_steps(steps: list[dict[str, Any]], indent: str = "") -> list[str]:
    """A CEP pattern's steps, one a line: contiguity, name, condition, quantifier."""
    out = []
    for step in steps:
        extra = [f"times {step['times']}"] if "times" in step else []
        extra += [f"until {step['until']}"] if "until" in step else []
        extra += [f"within {step['within_ms']} ms"] if "within_ms" in step else []
        shown = ", ".join([step["quantifier"], *extra])
        if "group" in step:
            out.append(f"{indent}{step['contiguity']} {step['name']} ({shown}):")
            out += _pattern_steps(step["group"], indent + "  ")
        else:
            out.append(
                f"{indent}{step['contiguity']} {step['name']} where {step['where']} ({shown})"
            )
    return out
