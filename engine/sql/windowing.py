"""The window of a SQL query: a window table-valued function in FROM (``TABLE(TUMBLE(TABLE t,
DESCRIPTOR(ts), INTERVAL '10' SECOND))``) or a legacy group window in GROUP BY (``GROUP BY
TUMBLE(ts, INTERVAL '10' SECOND), id``), as one ``WindowSpec``.

Flink's argument order is kept: ``HOP(…, slide, size)`` and ``CUMULATE(…, step, size)``; a
window TVF takes an offset last (``TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL
'-8' HOUR)``). A HOP whose slide is longer than its size leaves gaps between its windows: a
record in a gap belongs to no window (Flink's legacy ``HOP`` group window does the same; its
window TVF aggregation refuses a size that is not a multiple of the slide).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from weir.engine import windows
from weir.engine.sql.dialect import TableArgument, WeirFlink
from weir.engine.sql.errors import SqlError, SqlUnsupported

UNIT_MS = {
    "MILLISECOND": 1,
    "SECOND": 1_000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
}
# the intervals each window takes, in Flink's order
WINDOW_ARGS = {
    "TUMBLE": ("size",),
    "HOP": ("slide", "size"),
    "SESSION": ("gap",),
    "CUMULATE": ("step", "size"),
}
LEGACY_KINDS = ("TUMBLE", "HOP", "SESSION")
LEGACY_BOUNDS = {f"{k}_{b}": (k, b) for k in LEGACY_KINDS for b in ("START", "END")}
LEGACY_ROWTIME = {f"{k}_ROWTIME": k for k in LEGACY_KINDS}  # the window's end - 1
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # TUMBLE, HOP, SESSION or CUMULATE
    time_column: str
    intervals: dict[str, int]  # argument name -> milliseconds
    sql: str  # the call as written, for messages and legacy bound checks
    partition_by: tuple[str, ...] | None = None  # SESSION's PARTITION BY (TVF only)
    from_tvf: bool = False
    offset_ms: int = 0  # a window TVF's offset argument

    def assigner(self) -> windows.WindowAssigner:
        ms, offset = self.intervals, self.offset_ms
        try:
            if self.kind == "TUMBLE":
                return windows.tumbling(ms=ms["size"], offset_ms=offset)
            if self.kind == "HOP":
                return windows.sliding(size_ms=ms["size"], slide_ms=ms["slide"], offset_ms=offset)
            if self.kind == "SESSION":
                return windows.session(gap_ms=ms["gap"])
            return windows.cumulate(size_ms=ms["size"], step_ms=ms["step"], offset_ms=offset)
        except ValueError as exc:
            raise SqlError(f"{self.sql}: {exc}") from None


def function_name(node: exp.Expr) -> str:
    """A call's name, upper case (``TUMBLE`` for ``tumble(…)``); '' for anything else."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return ""


def interval_ms(node: exp.Expr, what: str, *, signed: bool = False) -> int:
    """``INTERVAL '10' SECOND`` as 10000; anything else is refused, naming ``what``. Only a
    ``signed`` interval (an offset) may be zero or negative (``INTERVAL '-8' HOUR``)."""
    example = f"write it as INTERVAL '10' SECOND (units: {', '.join(UNIT_MS)})"
    if isinstance(node, exp.Neg) and signed:  # -INTERVAL '8' HOUR
        return -interval_ms(node.this, what, signed=True)
    if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
        raise SqlError(f"{what} is {node.sql(WeirFlink)}, not an interval; {example}")
    unit = node.unit.name.upper().rstrip("S") if node.unit is not None else ""
    if unit not in UNIT_MS:
        raise SqlError(f"{what} {node.sql(WeirFlink)} has unit {unit or 'none'!r}; {example}")
    try:
        ms = Decimal(str(node.this.this).strip()) * UNIT_MS[unit]
    except InvalidOperation:
        raise SqlError(
            f"{what} {node.sql(WeirFlink)} is not a number of {unit}s; {example}"
        ) from None
    if ms != ms.to_integral_value() or (ms <= 0 and not signed):
        adjective = "whole" if signed else "positive whole"
        raise SqlError(f"{what} {node.sql(WeirFlink)} must be a {adjective} number of milliseconds")
    return int(ms)


def _intervals(
    kind: str, given: list[exp.Expr], call: exp.Expr, *, tvf: bool
) -> tuple[dict[str, int], int]:
    """The window's intervals by name, and its offset (a window TVF's last argument)."""
    names = WINDOW_ARGS[kind]
    offset = 0
    if len(given) == len(names) + 1 and kind != "SESSION":
        if not tvf:
            raise SqlUnsupported(
                f"GROUP BY {call.sql(WeirFlink)}: a legacy group window takes no offset (Flink "
                f"refuses its alignment argument too); write FROM TABLE({kind}(TABLE t, "
                f"DESCRIPTOR(ts), {', '.join(names)}, offset))"
            )
        offset = interval_ms(given.pop(), f"{kind}'s offset", signed=True)
    if len(given) > len(names):
        raise SqlUnsupported(
            f"{call.sql(WeirFlink)}: {kind} takes {', '.join(names)}"
            + ("" if kind == "SESSION" else " and an offset")
        )
    if len(given) < len(names):
        raise SqlError(f"{call.sql(WeirFlink)}: {kind} needs the intervals {', '.join(names)}")
    intervals = {n: interval_ms(g, f"{kind}'s {n}") for n, g in zip(names, given, strict=True)}
    return intervals, offset


def tvf(node: exp.Expr) -> tuple[str, WindowSpec] | None:
    """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), …))`` as ``(table name, window)``; None when
    ``node`` (a FROM item's table) is not a table function."""
    if not (isinstance(node, exp.Anonymous) and str(node.this).upper() == "TABLE"):
        return None
    call = node.expressions[0] if len(node.expressions) == 1 else None
    kind = function_name(call) if call is not None else ""
    if call is None or kind not in WINDOW_ARGS:
        raise SqlUnsupported(
            f"FROM {node.sql(WeirFlink)}: weir's SQL reads the window functions "
            "TUMBLE, HOP, SESSION "
            "and CUMULATE in TABLE(…)"
        )
    args = list(call.expressions) if isinstance(call, exp.Anonymous) else []
    if len(args) < 2 or not isinstance(args[0], TableArgument):
        raise SqlError(
            f"{call.sql(WeirFlink)}: write {kind}(TABLE name, DESCRIPTOR(time column), …)"
        )
    data, descriptor = args[0], args[1]
    if not (function_name(descriptor) == "DESCRIPTOR" and len(descriptor.expressions) == 1):
        raise SqlError(f"{call.sql(WeirFlink)}: the second argument is DESCRIPTOR(time column)")
    time_col = descriptor.expressions[0]
    if not isinstance(time_col, exp.Column):
        raise SqlError(f"{call.sql(WeirFlink)}: DESCRIPTOR takes a column name")
    partition = data.args.get("partition_by")
    if partition and kind != "SESSION":
        raise SqlUnsupported(f"{call.sql(WeirFlink)}: PARTITION BY belongs to SESSION windows only")
    intervals, offset = _intervals(kind, args[2:], call, tvf=True)
    spec = WindowSpec(
        kind,
        time_col.name,
        intervals,
        call.sql(WeirFlink),
        tuple(c.name for c in partition) if partition else None,
        from_tvf=True,
        offset_ms=offset,
    )
    return data.this.name, spec


def legacy(node: exp.Expr) -> WindowSpec | None:
    """``TUMBLE(ts, INTERVAL …)`` (or HOP, SESSION) in GROUP BY; None for any other item."""
    kind = function_name(node)
    if kind == "CUMULATE":
        raise SqlUnsupported(
            f"GROUP BY {node.sql(WeirFlink)}: CUMULATE is a window table-valued "
            "function only; write "
            "FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), step, size))"
        )
    if kind not in ("TUMBLE", "HOP", "SESSION") or not isinstance(node, exp.Anonymous):
        return None
    args = list(node.expressions)
    if not args or not isinstance(args[0], exp.Column):
        raise SqlError(f"GROUP BY {node.sql(WeirFlink)}: the first argument is the time column")
    intervals, _ = _intervals(kind, args[1:], node, tvf=False)
    return WindowSpec(kind, args[0].name, intervals, node.sql(WeirFlink))
