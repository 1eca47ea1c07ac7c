"""Which parts of a job run on columns (issue 38; ``docs/decisions/columnar-execution.md``).

A ``key_by`` runs on columns when every operator under it is a window operator the compiled
fold supports: its rows reach the keyed side, and cross the exchange, as column batches, and its
operators fold them with the kernels (``runtime/operators/colwindow.py``). Any other ``key_by``
runs record by record as before; both give the same windows, late records and dead letters.
``refusal`` says why a ``key_by`` does not run on columns, which ``weir explain`` shows; the
setting ``WEIR_COLUMNAR=off`` turns the columnar path off for a run (to compare, or to rule it
out when looking into a result).

Example:
    >>> from weir.engine.columnar import refusal
    >>> refusal(job.sources[0].children[0])  # None: it runs on columns
"""

from __future__ import annotations

import os

from weir.base.settings import Choice, Setting
from weir.engine.agg import Builtin
from weir.engine.nodes import BroadcastNode, ForwardNode, KeyByNode, OperatorNode, WindowNode
from weir.engine.windows import CumulateWindows, SlidingWindows, TumblingWindows

# declared once; the reference pages list it with a run's other variables
COLUMNAR_SETTING = Setting(
    "columnar",
    "auto: a key_by whose window operators the compiled fold supports runs on columns (`weir "
    "explain` says which do); off: every key_by runs record by record (the same results)",
    "auto",
    Choice(("auto", "off")),
    env="WEIR_COLUMNAR",
    env_only=True,
)


def columnar_on() -> bool:
    """Is the columnar path on for this process (``WEIR_COLUMNAR``, read each time)?"""
    choice = (os.environ.get(COLUMNAR_SETTING.env) or "auto").strip().lower()
    return choice != "off"


def kernel_kind(agg: Builtin) -> str:
    """The fold kernel's kind for ``agg`` (``kernels.fold.KINDS``): ``count()`` counts rows,
    ``count(x)`` non-NULL values; ``sum``, ``min``, ``max``, ``mean`` and ``avg`` (whose slots
    are a mean's) fold numbers, passing over NULLs under ``nulls="skip"`` (``*_skip``).

    Raises:
        ValueError: ``agg`` is ``window_time()`` (no slot) or has an expression input.

    Example:
        >>> from weir import agg
        >>> kernel_kind(agg.sum("v", nulls="skip")), kernel_kind(agg.avg("v"))
        ('sum_skip', 'mean_skip')
    """
    if agg.kind == "window_time" or agg.expr is not None:
        raise ValueError(f"agg.{agg.kind} with expression {agg.expr!r} has no fold kernel")
    if agg.kind == "count":
        return "count" if agg.field is None else "count_nn"
    base = "mean" if agg.kind == "avg" else agg.kind
    return f"{base}_skip" if agg.skips else base


def operator_refusal(op: OperatorNode) -> str | None:
    """Why ``op`` cannot fold columns (None: it can): tumbling, cumulating and sliding windows
    that slide by their size can, without a trigger or an evictor, when every aggregate is a
    built-in over a field or none (``count()``, ``count(x)``, ``sum``, ``min``, ``max``,
    ``mean``, ``avg`` rejecting or skipping NULLs, a cast of any, ``window_time()``)."""
    if not isinstance(op, WindowNode):
        return f"operator {op.name!r} is not a window operator"
    a = op.assigner
    if op.triggered:
        return f"operator {op.name!r} has a trigger or an evictor"
    if not isinstance(a, TumblingWindows | CumulateWindows | SlidingWindows):
        return f"operator {op.name!r} has {type(a).__name__}"
    if isinstance(a, SlidingWindows) and a.slide_ms != a.size_ms:
        return f"operator {op.name!r} has sliding windows that do not slide by their size"
    # the kernels (numpy) load when a job is planned, not with the settings that name this module
    from weir.engine.kernels.fold import KINDS

    for name, agg in op.aggregates.items():
        what = f"aggregate {name!r} of operator {op.name!r}"
        if not isinstance(agg, Builtin):
            return f"{what} is user-defined"
        if agg.expr is not None:
            return f"{what} is {agg.kind} of an expression"
        if agg.kind != "window_time" and kernel_kind(agg) not in KINDS:
            return f"{what} is {agg.kind}"
    return None


def refusal(node: KeyByNode | BroadcastNode | ForwardNode) -> str | None:
    """Why ``node``'s rows do not run on columns (None: they do)."""
    if not columnar_on():
        return f"{COLUMNAR_SETTING.env}=off"
    if not isinstance(node, KeyByNode):
        return "a broadcast or forward input"
    if not node.children:
        return "no operator"
    for op in node.children:
        why = operator_refusal(op)
        if why is not None:
            return why
    return None


def input_fields(op: WindowNode) -> list[str]:
    """The fields ``op``'s aggregates read, in first-use order."""
    out: list[str] = []
    for a in op.aggregates.values():
        if isinstance(a, Builtin) and a.field and a.field not in out:
            out.append(a.field)
    return out


__all__ = [
    "COLUMNAR_SETTING",
    "columnar_on",
    "input_fields",
    "kernel_kind",
    "operator_refusal",
    "refusal",
]
