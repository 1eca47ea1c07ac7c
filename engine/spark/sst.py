"""Stage 3 of a backfill, in the Spark tasks: the windows of a key group exactly as streaming
stores them (cells, ``state/cells.py``; sessions as rows, ``kg | state id | len | key | end``),
plus their cleanup timers, sorted and written with rocksdict's ``SstFileWriter``: one SST file
per key group.

Native path: accumulator slots built from Spark's aggregates a column at a time
(``slot_columns``). Python path (sessions, user-defined aggregates): rows sorted by ``(kg, key,
end, watermark, split, position)``, folded per window by ``folds.py`` or merged per key by
``sessions.py``.
"""

from __future__ import annotations

import pickle
import time
import uuid
from collections.abc import Iterator
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from weir.engine.agg import Builtin
from weir.engine.nodes import WindowNode
from weir.engine.spark.output import task_output
from weir.engine.spark.plan import Plan, backfill_operator, load
from weir.engine.windows import MAX_TIME, MIN_TIME, SessionWindows

if TYPE_CHECKING:
    from weir.engine.runtime.outputs import DeadLetters


def slot_columns(op: WindowNode, cols: dict[str, list[Any]]) -> list[list[Any]]:
    """The accumulator slots the streaming fold would hold for Spark's aggregates, a column per
    slot (``engine/agg.py``'s layout: ``mean`` and ``avg`` are ``[sum, count]``). Spark's
    aggregates pass over NULLs as SQL's do: a sum, min or max of only NULLs is NULL, and
    ``count(x)`` counts the non-NULL values of a field or an expression alike."""
    n = [int(v) for v in cols["n"]]
    out: list[list[Any]] = []
    for a in op.aggregates.values():
        assert isinstance(a, Builtin)
        if a.kind == "window_time":
            continue  # no slot: the result is the window's end - 1
        x = a.input  # a field, or an expression's values (the selector's columns)
        if a.kind == "count":
            out.append(n if x is None else [int(v) for v in cols[f"count__{x}"]])
            continue
        all_int = cols[f"{x}__allint"]
        spark_name = f"{'sum' if a.kind in ('mean', 'avg') else a.kind}__{x}"
        values = list(map(_number, cols[spark_name], all_int))
        if a.kind in ("mean", "avg"):
            # the fold's sum starts at 0 when NULLs are skipped; count the values it added
            out.append([0 if v is None else v for v in values])
            out.append(n if not a.skips else [int(v) for v in cols[f"count__{x}"]])
        else:
            out.append(values)
    return out


def _number(v: Any, all_int: Any) -> Any:
    """Spark aggregates doubles; the streaming fold keeps ints when every value was one (NULL,
    a sum or bound of no values, stays NULL)."""
    if v is None:
        return None
    return int(v) if all_int and float(v).is_integer() else v


def write_ssts(plan: Plan, cols: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Native path: one SST file per key group in ``cols`` (Spark's aggregates per window, a
    list per column: no object per row until the slots are grouped into cells)."""
    op = backfill_operator(load(plan.job_file), plan.op)
    slots = list(zip(*slot_columns(op, cols), strict=True))
    by_kg: dict[int, dict[int, list[tuple[str, list[Any]]]]] = {}
    for kg, key, end, row in zip(cols["kg"], cols["key"], cols["end"], slots, strict=True):
        by_kg.setdefault(int(kg), {}).setdefault(int(end), []).append((str(key), list(row)))
    return [
        _write_key_group(plan, op, kg, _cells(op, kg, windows), 0, _keys_by_end(windows))
        for kg, windows in sorted(by_kg.items())
    ]


def _cells(
    op: WindowNode, kg: int, windows: dict[int, list[tuple[str, list[Any]]]]
) -> dict[bytes, bytes]:
    """A key group's windows (``end -> [(key, slots)]``) as streaming stores them: cells
    (``state/cells.py``) of generation 0, older than anything a live job writes."""
    import numpy as np

    from weir.state import cells

    out: dict[bytes, bytes] = {}
    for end, rows in windows.items():
        keys = [k.encode() for k, _ in rows]
        width = len(rows[0][1])
        slots = [cells.slot_column([r[1][j] for r in rows]) for j in range(width)]
        groups = np.full(len(keys), kg, np.uint16)
        out.update(cells.encode_cells(cells.CellRows(keys, groups, slots), op.state_id, end, 0))
    return out


def _keys_by_end(windows: dict[int, list[tuple[str, list[Any]]]]) -> dict[int, list[str]]:
    return {end: [k for k, _ in rows] for end, rows in windows.items()}


def python_ssts(plan: Plan, batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """Python path: one SST file per key group of a task's sorted pair batches."""
    from weir.engine.runtime.outputs import DeadLetters
    from weir.engine.sinks import from_url as sink_from_url

    op = backfill_operator(load(plan.job_file), plan.op)
    if not isinstance(op.assigner, SessionWindows):
        yield from _folded_ssts(plan, op, batches)
        return
    # the session operator's own dead letters (records it cannot fold), beside stage 1's
    with task_output(plan).dead_letters(f"sessions-{uuid.uuid4().hex}") as dead_path:
        dead = DeadLetters(sink_from_url(f"file://{dead_path}"), quiet=True)
        try:
            yield from _session_ssts(plan, op, batches, dead)
        finally:
            dead.close()


def _session_ssts(
    plan: Plan, op: WindowNode, batches: Iterator[Any], dead: DeadLetters
) -> Iterator[dict[str, Any]]:
    """Python path, sessions: each key's records through the streaming session operator."""
    from weir.engine.spark.sessions import SessionReplay

    replay = SessionReplay(op, plan.max_parallelism, dead)
    for kg, rows in groupby(_rows(batches), key=itemgetter(0)):
        before, dead_before = replay.late, replay.dead
        for key, key_rows in groupby(rows, key=itemgetter(1)):
            replay.add_key(key, *_columns(list(key_rows)))
        windows = _within(plan, replay.finish())
        late, died = replay.late - before, replay.dead - dead_before
        if windows:
            yield _write_key_group(plan, op, kg, windows, late, None, died)
        elif late or died:
            yield _empty(kg, late, died)


def _folded_ssts(plan: Plan, op: WindowNode, batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """Python path, user-defined aggregates: each window folded by the streaming fold."""
    from weir.engine.spark.folds import WindowFolder

    fold = WindowFolder(op)
    for kg, rows in groupby(_rows(batches), key=itemgetter(0)):
        by_end: dict[int, list[tuple[str, list[Any]]]] = {}
        for (key, end), window_rows in groupby(rows, key=itemgetter(1, 2)):
            slots = fold.slots(key, end, *_columns(list(window_rows)))
            by_end.setdefault(end, []).append((key, slots))
        windows = _cells(op, kg, by_end)
        if windows:
            yield _write_key_group(plan, op, kg, windows, 0, _keys_by_end(by_end))


def _empty(kg: int, late: int, dead: int) -> dict[str, Any]:
    """A key group that wrote no window, for its counts."""
    return {"kg": kg, "path": None, "size": 0, "crc32": 0, "windows": 0, "min_end": None,
            "max_end": None, "late": late, "dead": dead}  # fmt: skip


Row = tuple[int, str, int, int, int, bytes]  # kg, key, end, ts, watermark, pickled record


def _rows(batches: Iterator[Any]) -> Iterator[Row]:
    """The rows of sorted Arrow batches."""
    names = ("kg", "key", "end", "ts", "wm", "rec")
    for b in batches:
        yield from zip(*(b.column(c).to_pylist() for c in names), strict=True)


def _columns(rows: list[Row]) -> tuple[list[int], list[int], list[Any]]:
    """Event times, watermarks and records of rows."""
    return [r[3] for r in rows], [r[4] for r in rows], [pickle.loads(r[5]) for r in rows]


def _within(plan: Plan, sessions: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """With ``--from``/``--to``: the sessions whose records all lie in ``[from, to)``, computed
    from every record (a session cut at the boundary is left out, never loaded partially)."""
    if plan.from_ms is None and plan.to_ms is None:
        return sessions
    from weir.engine.runtime.stored.codec import decode_session
    from weir.state import layout

    assigner = backfill_operator(load(plan.job_file), plan.op).assigner
    assert isinstance(assigner, SessionWindows) and assigner.gap_ms is not None  # _check_range
    lo = plan.from_ms if plan.from_ms is not None else MIN_TIME
    hi = plan.to_ms if plan.to_ms is not None else MAX_TIME + 1
    kept = {}
    for k, v in sessions.items():
        end = layout.decode_state_key(k)[3]
        if lo <= decode_session(v)[0] and end - assigner.gap_ms < hi:
            kept[k] = v
    return kept


def _write_key_group(
    plan: Plan,
    op: WindowNode,
    kg: int,
    windows: dict[bytes, bytes],
    late: int,
    keys_by_end: dict[int, list[str]] | None = None,
    dead: int = 0,
) -> dict[str, Any]:
    """The key group's SST file: its windows (cells, or a session's rows) and a cleanup timer
    per window end listing the keys (as ``WindowRuntime._add_timers`` writes them), sorted.
    ``keys_by_end``: the windows' keys by end (None: sessions, read back from their keys)."""
    import msgpack
    from rocksdict import Options, SstFileWriter

    from weir.state import layout

    if keys_by_end is None:
        keys_by_end = {}
        for k in windows:
            _, _, key, end = layout.decode_state_key(k)
            keys_by_end.setdefault(end, []).append(key.decode())
    entries = dict(windows)
    seq = time.time_ns()
    for end, keys in keys_by_end.items():
        entries[layout.timer_key(kg, op.timer_state_id, end, seq)] = msgpack.packb(sorted(keys))
    with task_output(plan).sst(kg) as (path, stored):
        writer = SstFileWriter(Options(raw_mode=True))
        writer.open(str(path))
        for k in sorted(entries):
            writer[k] = entries[k]
        writer.finish()
    return {
        "kg": kg,
        "path": stored[0].name,
        "size": stored[0].size,
        "crc32": stored[0].crc32,
        "windows": sum(map(len, keys_by_end.values())),
        "min_end": min(keys_by_end),
        "max_end": max(keys_by_end),
        "late": late,
        "dead": dead,
    }
