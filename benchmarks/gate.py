"""The bench gate: each figure of a bench run beside the one kept from ``main``.

``make bench`` (and ``python -m benchmarks.bench --only …``) compares its JSON with
``benchmarks/results/bench.json``; ``python -m benchmarks.gate OLD.json NEW.json`` does the same for
any two files. Both JSONs are flattened to named figures (``checkpoints.throughput.ratio``); a
list of objects is named by its first field (``buffer_timeout[buffer_timeout_ms=10]``); lists of
plain numbers (quantile curves) and per-item detail (``each``) are left out, their summaries
being figures already.

A figure's direction says which way is better. It is decided by the first rule that matches:

1. ``EXPLICIT``, a table of name patterns for the figures a name alone cannot settle (a bare
   client's or a peer's rate measures the host, not weir; a setting echoed into the JSON is no
   result; back-pressure and errors are worse when they grow);
2. the last part of the name: rates (``per_s``) and ratios (``ratio``, ``_over_``,
   ``efficiency``) are better higher; times (``_ms``, ``seconds``) and sizes (``bytes``) lower;
3. anything else (counts such as ``events``, ``keys``, ``checkpoints``) is information: shown,
   never flagged.

A figure is flagged when it is worse than the kept one by more than the threshold (10% unless
told). A missing kept file, or a figure on one side only, is reported, never an error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

Direction = Literal["higher", "lower", "info"]

KEPT = Path(__file__).parent / "results" / "bench.json"
DEFAULT_THRESHOLD = 0.10

# first match wins; patterns are fnmatch on the whole flattened name
EXPLICIT: tuple[tuple[str, Direction], ...] = (
    ("seconds.*", "info"),  # a section's wall time follows --events and --only
    ("*.machine_parallel_capacity", "info"),  # the host's state during the run
    ("*.bare_*", "info"),  # the bare client's / bare endpoint's floor: the host, not weir
    ("*.produce_events_per_s", "info"),  # filling the topic: the producer and the broker
    ("*.quix_streams.*", "info"),  # the peer's own figures (weir's ratio to it is gated)
    ("queries.mixed_load.seconds", "info"),  # how long the load ran, a setting
    ("*.buffer_timeout_ms", "info"),  # settings echoed beside their results
    ("*.restart_delay_ms", "info"),
    ("*.rate", "info"),
    ("cpu.*.duckdb.*", "info"),  # the peers' own figures (weir's ratios to them are gated)
    ("cpu.*.pyflink_sql.*", "info"),
    ("*.events_per_cpu_s", "higher"),  # a rate, though its name ends in _s
    ("*p99_*_over_*", "lower"),  # a latency ratio (queries.p99_weir_over_bare)
    ("*.requests_per_cpu_s", "higher"),  # a rate, though its name ends in _s
    ("*.server_cpu_s", "info"),  # grows with the requests served in the fixed time
    ("joins.*.events_per_s", "higher"),  # join_bench: each join's input rate at p=1 and p=2
    ("joins.*.p2_over_p1", "higher"),
    ("cep.*.events_per_s", "higher"),  # cep_bench: the three-step pattern at p=1 and p=2
    ("cep.*.p2_over_p1", "higher"),
    ("*backpressure*", "lower"),
    ("*non_2xx", "lower"),
    ("*.errors", "lower"),
    ("*dead_letters*", "lower"),
    ("*.restarts", "lower"),
)
_HIGHER_TOKENS = ("per_s", "ratio", "_over_", "efficiency", "speedup")
_LOWER_SUFFIXES = ("_ms", "seconds", "_s", "bytes", "_mb", "rss")
_SKIPPED = frozenset({"each", "plots", "gate", "machine", "quantiles_ms"})


def direction(name: str) -> Direction:
    """Which way is better for the figure ``name`` (see the module's rules)."""
    for pattern, d in EXPLICIT:
        if fnmatchcase(name, pattern):
            return d
    leaf = name.rpartition(".")[2].split("[")[0]
    if any(t in leaf for t in _HIGHER_TOKENS):
        return "higher"
    if leaf.endswith(_LOWER_SUFFIXES):
        return "lower"
    return "info"


def flatten(doc: Any, prefix: str = "") -> dict[str, float]:
    """Every number of a bench JSON under its dotted name."""
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k not in _SKIPPED:
                out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(doc, list):
        for label, item in _list_items(doc):
            out.update(flatten(item, f"{prefix}[{label}]"))
    elif isinstance(doc, int | float) and not isinstance(doc, bool) and math.isfinite(doc):
        out[prefix] = float(doc)
    return out


def _list_items(items: list[Any]) -> list[tuple[str, Any]]:
    """A list of objects, each labelled by its first field when that tells them apart (else by
    position); a list of plain values is a curve, left out."""
    if not items or not all(isinstance(x, dict) and x for x in items):
        return []
    first = next(iter(items[0]))
    labels = [x.get(first) for x in items]
    if all(isinstance(v, int | float | str) for v in labels) and len(set(labels)) == len(labels):
        return [(f"{first}={v}", x) for v, x in zip(labels, items, strict=True)]
    return [(str(i), x) for i, x in enumerate(items)]


@dataclass(frozen=True)
class Row:
    figure: str
    kept: float | None
    now: float | None
    ratio: float | None  # now / kept
    direction: Direction
    worse: bool


def _section(name: str) -> str:
    """The bench section a figure belongs to (``seconds.<section>`` times one)."""
    parts = name.split(".")
    first = parts[0].split("[")[0]
    return parts[1] if first == "seconds" and len(parts) > 1 else first


def compare(kept: dict[str, Any], now: dict[str, Any], threshold: float) -> list[Row]:
    """A row per figure of either run; figures of sections ``now`` did not run are left out."""
    old, new = flatten(kept), flatten(now)
    ran = {_section(name) for name in new}
    # in the order the run wrote them, then what only the kept file has
    names = [*new, *(n for n in old if n not in new and _section(n) in ran)]
    rows = []
    for name in names:
        k, n = old.get(name), new.get(name)
        ratio = None if k is None or n is None or k == 0 else round(n / k, 3)
        d = direction(name)
        worse = ratio is not None and (
            (d == "higher" and ratio < 1 - threshold) or (d == "lower" and ratio > 1 + threshold)
        )
        rows.append(Row(name, k, n, ratio, d, worse))
    return rows


def gate(kept_path: Path, now: dict[str, Any], threshold: float) -> dict[str, Any]:
    """The ``gate`` entry of a bench JSON: every row, and the names of the worse figures."""
    try:
        kept = json.loads(kept_path.read_text())
    except (OSError, ValueError) as exc:
        return {"kept": str(kept_path), "problem": f"no kept figures: {exc}", "rows": []}
    if not isinstance(kept, dict):
        return {"kept": str(kept_path), "problem": "the kept file is not a JSON object", "rows": []}
    rows = compare(kept, now, threshold)
    return {
        "kept": str(kept_path),
        "threshold": threshold,
        "worse": [r.figure for r in rows if r.worse],
        "only_kept": [r.figure for r in rows if r.now is None],
        "only_now": [r.figure for r in rows if r.kept is None],
        "rows": [asdict(r) for r in rows],
    }


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def render(result: dict[str, Any]) -> str:
    """The gate as a table for a terminal."""
    if "problem" in result:
        return f"gate: {result['problem']} ({result['kept']})"
    rows = result["rows"]
    width = max([len(r["figure"]) for r in rows] + [6])
    lines = [f"{'figure':<{width}}  {'kept':>12}  {'now':>12}  {'ratio':>7}  better  flag"]
    for r in rows:
        missing = r["now"] is None or r["kept"] is None
        flag = "WORSE" if r["worse"] else ("missing" if missing else "")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(
            f"{r['figure']:<{width}}  {_num(r['kept']):>12}  {_num(r['now']):>12}  {ratio:>7}  "
            f"{r['direction']:<6}  {flag}".rstrip()
        )
    pct = round(result["threshold"] * 100, 1)
    lines.append(
        f"gate: {len(result['worse'])} of {len(rows)} figures worse than {result['kept']} by more "
        f"than {pct:g}%" + (f": {', '.join(result['worse'])}" if result["worse"] else "")
    )
    if result["only_kept"]:
        lines.append(f"gate: not measured now: {', '.join(result['only_kept'])}")
    if result["only_now"]:
        lines.append(f"gate: not in the kept file: {', '.join(result['only_now'])}")
    return "\n".join(lines)


def threshold_arg(text: str) -> float:
    """``--gate-threshold``: a fraction (0.1) or a percentage (10%)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number; give a fraction such as 0.1 or a percentage such as 10%"
        ) from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; give 0.1 for 10%")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kept", type=Path, help="the kept bench JSON (main's)")
    parser.add_argument("now", type=Path, help="the bench JSON to judge")
    parser.add_argument("--gate-threshold", type=threshold_arg, default=DEFAULT_THRESHOLD)
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a figure is worse"
    )
    args = parser.parse_args(argv)
    try:
        now = json.loads(args.now.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read {args.now}: {exc}; give a bench JSON (bench.json in --out)")
    result = gate(args.kept, now, args.gate_threshold)
    print(render(result))
    return 1 if args.strict and result.get("worse") else 0


if __name__ == "__main__":
    sys.exit(main())
