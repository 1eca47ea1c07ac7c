"""Stage 3 of a backfill, in the Spark tasks: the aggregated windows of a key group as state
keys (``kg | state id | len | key | end``) and accumulator slots exactly as the streaming fold
builds them, plus their cleanup timers, sorted and written with rocksdict's ``SstFileWriter``:
one SST file per key group."""

from __future__ import annotations

import os
import time
from typing import Any

from engine.agg import Builtin
from engine.job import WindowOperator
from engine.spark.plan import Plan, backfill_operator, load


def slots_for(op: WindowOperator, row: dict[str, Any]) -> list[Any]:
    """The accumulator slots the streaming fold would hold for these Spark aggregates."""
    slots: list[Any] = []
    for a in op.aggregates.values():
        assert isinstance(a, Builtin)
        if a.kind == "count":
            slots.append(int(row["n"]))
            continue
        all_int = bool(row[f"{a.field}__allint"])
        if a.kind == "mean":  # [sum, count]
            slots += [_number(row[f"sum__{a.field}"], all_int), int(row["n"])]
        else:
            slots.append(_number(row[f"{a.kind}__{a.field}"], all_int))
    return slots


def _number(v: Any, all_int: bool) -> Any:
    """Spark aggregates doubles; the streaming fold keeps ints when every value was one."""
    return int(v) if all_int and float(v).is_integer() else v


def write_ssts(plan: Plan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One SST file per key group in ``rows``: window values and their cleanup timers."""
    import msgpack
    from rocksdict import Options, SstFileWriter

    from state import layout

    job = load(plan.job_file)
    op = backfill_operator(job, plan.op)
    sid, tsid = op.state_id, op.timer_state_id
    pack = msgpack.Packer().pack
    by_kg: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_kg.setdefault(int(r["kg"]), []).append(r)
    written = []
    seq = time.time_ns()
    for kg, group in sorted(by_kg.items()):
        entries: dict[bytes, bytes] = {}
        timers: dict[int, list[str]] = {}
        for r in group:
            key, end = str(r["key"]), int(r["end"])
            entries[layout.state_key(kg, sid, key.encode(), end)] = pack(slots_for(op, r))
            timers.setdefault(end, []).append(key)
        for end, keys in timers.items():
            entries[layout.timer_key(kg, tsid, end, seq)] = pack(sorted(keys))
        path = os.path.join(plan.out_dir, "sst", f"kg-{kg:05d}.sst")
        writer = SstFileWriter(Options(raw_mode=True))
        writer.open(path)
        for k in sorted(entries):
            writer[k] = entries[k]
        writer.finish()
        ends = list(timers)
        written.append(
            {
                "kg": kg,
                "path": path,
                "windows": len(group),
                "min_end": min(ends),
                "max_end": max(ends),
            }
        )
    return written
