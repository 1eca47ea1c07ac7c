"""Stage 1's last step: a split's keyed records to the ``(record, window)`` pairs the streaming
lateness rule keeps, as output columns (``pairs.py`` drives it).

The per-record rules are the streaming ones (``windows.is_late``, the assigners' ``expand``);
they run on whole batches as numpy arrays, so a record costs a few array operations rather than
several Python-level steps. Event times near the ends of the 64-bit range, where ``end - 1 +
lateness`` could leave it, take the assigners' own list arithmetic instead, which clamps.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any

import numpy as np

from weir.engine.nodes import WindowNode
from weir.engine.runtime.stored.fold import ANY, NUMBER, FoldPlan
from weir.engine.spark.plan import Plan, python_path
from weir.engine.windows import MAX_TIME, MIN_TIME, SessionWindows, TumblingWindows, is_late

# within this, ``t - (t - offset) % size + size - 1 + lateness`` cannot overflow an int64
_SAFE = 1 << 61
_KG_CACHE = 1 << 20  # canonical keys whose key group is remembered (bounded for sparse keys)

Columns = dict[str, Any]  # name -> list or array, one entry per kept pair


class Selector:
    """Keyed records of one split to output columns. Native path: the kept pairs' aggregated
    fields as doubles (and whether each was an int). Python path: the kept pairs with the
    record itself (pickled: it stays inside Spark's own executors, and a ``map`` may have made
    it anything), its event time, the watermark it arrived under and its position in the split,
    so the next stage folds each window's records in streaming's order. Sessions keep every
    record (lateness depends on the session a record joins: the next stage decides it); their
    ``end`` is 0."""

    def __init__(self, plan: Plan, op: WindowNode, split: str) -> None:
        self.plan = FoldPlan(op.aggregates)
        self.fields = self.plan.fields  # the fields the streaming fold reads
        self.python = python_path(op)
        self.assigner = op.assigner
        self.lateness = op.allowed_lateness_ms
        self.m = plan.max_parallelism
        self.lo = plan.from_ms if plan.from_ms is not None else MIN_TIME
        self.hi = plan.to_ms if plan.to_ms is not None else MAX_TIME + 1
        self.split = split
        self.seq = 0  # records of the split so far
        self.late = self.dead = 0
        self._kgs: dict[str, int] = {}

    def columns(self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]) -> Columns:
        """The kept pairs of one keyed batch (in split order)."""
        n = len(keys)
        cols: list[list[Any]] = []
        # a record whose aggregated inputs cannot be folded is late or dead before it is paired,
        # on both paths (the Python path's fold reads the same inputs); sessions: the replay
        # admits them
        if not isinstance(self.assigner, SessionWindows):
            keys, recs, ts, wms, cols = self._admit(keys, recs, ts, wms)
        sel, rows, ends = self._kept(ts, wms, recs)
        kgs = self._key_groups(keys)
        if self.python:
            out = self._python(keys, recs, ts, wms, rows.tolist())
            out["kg"], out["end"] = kgs[rows].tolist(), ends[sel].tolist()
        else:
            vals = self._values(cols, rows)
            out = {"kg": kgs[rows], "key": _take(keys, rows), "end": ends[sel], **vals}
        self.seq += n
        return out

    def arrow_columns(self, keys: Any, t: Any, w: Any, values: dict[str, Any]) -> Columns:
        """``columns`` of a batch read as columns (``columnar.py``): keys as an Arrow string
        array, event times and watermarks as int64 arrays, every aggregated field as an int64
        array (a plain job's fields, every one an integer)."""
        sel, rows, ends = self._kept_arrays(t, w)
        codes = keys.dictionary_encode()
        groups = self._key_groups(codes.dictionary.to_pylist())
        kgs = groups[codes.indices.to_numpy(zero_copy_only=False)]
        out: Columns = {"kg": kgs[rows], "end": ends[sel]}
        out["key"] = keys if _identity(rows, len(t)) else keys.take(rows)
        for f in self.fields:
            out[f] = values[f][rows].astype(np.float64)
            out[f + "__int"] = np.ones(len(rows), dtype=np.bool_)
        self.seq += len(t)
        return out

    def _python(
        self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int], rows: list[int]
    ) -> Columns:
        dumps, protocol = pickle.dumps, pickle.HIGHEST_PROTOCOL
        return {
            "key": [keys[i] for i in rows],
            "ts": [ts[i] for i in rows],
            "wm": [wms[i] for i in rows],
            "split": [self.split] * len(rows),
            "seq": [self.seq + i for i in rows],
            "rec": [dumps(recs[i], protocol=protocol) for i in rows],
        }

    def _key_groups(self, keys: list[str]) -> Any:
        """Every key's group; a key seen before in the split is looked up, not hashed again."""
        known = self._kgs
        try:
            return np.array(list(map(known.__getitem__, keys)), dtype=np.int32)
        except KeyError:
            if len(known) > _KG_CACHE:
                known.clear()
            crc, m = zlib.crc32, self.m
            for k in set(keys).difference(known):
                known[k] = crc(k.encode()) % m
            return np.array(list(map(known.__getitem__, keys)), dtype=np.int32)

    def _admit(
        self, keys: list[str], recs: list[Any], ts: list[int], wms: list[int]
    ) -> tuple[list[str], list[Any], list[int], list[int], list[list[Any]]]:
        """The records whose aggregated fields can be folded, and those fields: each other one
        is late if every window holding it is, else dead, as streaming's window operator
        judges it (``WindowRuntime._admit``: the late decision first)."""
        cols = self.plan.columns(recs)
        if cols is None:
            keep: list[int] = []
            for i, r in enumerate(recs):
                if self.plan.bad_field(r) is None:
                    keep.append(i)
                elif self._record_late(ts[i], wms[i]):
                    self.late += 1
                else:
                    self.dead += 1
            keys, recs = [keys[i] for i in keep], [recs[i] for i in keep]
            ts, wms = [ts[i] for i in keep], [wms[i] for i in keep]
            cols = self.plan.columns(recs) or [[] for _ in self.fields]
        return keys, recs, ts, wms, cols

    def _record_late(self, t: int, wm: int) -> bool:
        ends, _ = self.assigner.expand([t])  # type: ignore[union-attr]  # not sessions
        return bool(ends) and all(is_late(e, self.lateness, wm) for e in ends)

    def _values(self, cols: list[list[Any]], rows: Any) -> Columns:
        """The kept pairs' aggregated fields as doubles (NULL where a value is NULL, or where
        only ``count(field)`` reads the field: 1.0 for a value), and whether each was an int."""
        import pyarrow as pa  # type: ignore[import-untyped]

        out: Columns = {}
        for f, col in zip(self.fields, cols, strict=True):
            rule = self.plan.rules[f]
            if rule == NUMBER:
                out.update(_numbers(f, col, rows))
                continue
            nulls = np.array([v is None for v in col], dtype=np.bool_)[rows]
            if rule == ANY:
                values = np.ones(len(col), dtype=np.float64)[rows]
                out[f + "__int"] = np.ones(len(rows), dtype=np.bool_)
            else:
                filled = [0 if v is None else v for v in col]
                values = np.array(filled, dtype=np.float64)[rows]
                out[f + "__int"] = np.array([type(v) is not float for v in col], np.bool_)[rows]
            out[f] = pa.array(values, mask=nulls) if nulls.any() else values
        return out

    def _kept(self, ts: list[int], wms: list[int], recs: list[Any]) -> tuple[Any, Any, Any]:
        """``(pair indices, their records, window ends)`` of the pairs to keep. A record whose
        dynamic session gap is unusable is dead here, as streaming's session operator makes it."""
        if isinstance(self.assigner, SessionWindows):
            keep = list(range(len(ts)))
            if self.assigner.dynamic:
                gap_of = self.assigner.gap_of
                keep = [i for i in keep if gap_of(recs[i])[1] is None]
                self.dead += len(ts) - len(keep)
            rows = np.array(keep, dtype=np.int64)
            return rows, rows, np.zeros(len(ts), dtype=np.int64)
        return self._kept_arrays(np.array(ts, dtype=np.int64), np.array(wms, dtype=np.int64), ts)

    def _kept_arrays(self, t: Any, w: Any, ts: list[int] | None = None) -> tuple[Any, Any, Any]:
        """``_kept`` of windows other than sessions, on event times and watermarks as arrays
        (``ts``: the same event times as a list, if at hand)."""
        ends, origin = self._expand(t.tolist() if ts is None else ts, t)
        at = t if origin is None else t[origin]
        late = self._late(ends, w if origin is None else w[origin])
        on_time = ~late
        # a record is late when all its windows are
        if origin is None:  # one window a record (tumbling): a late pair is a late record
            self.late += int(late.sum())
        else:
            self.late += len(np.unique(origin)) - len(np.unique(origin[on_time]))
        if self.lo > MIN_TIME:  # --from/--to (their defaults leave every time in)
            on_time &= at >= self.lo
        if self.hi <= MAX_TIME:
            on_time &= at < self.hi
        sel = np.flatnonzero(on_time)
        rows = sel if origin is None else origin[sel]
        return sel, rows, ends

    def _expand(self, ts: list[int], t: Any) -> tuple[Any, Any]:
        """Window ends of every pair and, when a record has several, the record of each."""
        a = self.assigner
        assert not isinstance(a, SessionWindows)  # sessions keep every record (``_kept``)
        safe = len(t) and -_SAFE < int(t.min()) and int(t.max()) < _SAFE
        if isinstance(a, TumblingWindows) and safe and a.size_ms < _SAFE:
            return t - (t - a.offset_ms) % a.size_ms + a.size_ms, None
        ends, origin = a.expand(ts)
        e = np.array(ends, dtype=np.int64)
        return e, None if origin is None else np.array(origin, dtype=np.int64)

    def _late(self, ends: Any, wms: Any) -> Any:
        """``windows.is_late`` of every pair, clamped as it clamps."""
        if not len(ends):
            return np.zeros(0, dtype=np.bool_)
        if int(ends.max()) < _SAFE and self.lateness < _SAFE:
            return ends - 1 + self.lateness <= wms
        lateness = self.lateness
        return np.array(
            [is_late(e, lateness, m) for e, m in zip(ends.tolist(), wms.tolist(), strict=True)],
            dtype=np.bool_,
        )


def _numbers(f: str, col: list[Any], rows: Any) -> Columns:
    """A field of numbers (no NULL) as doubles, and whether each was an int."""
    kinds = set(map(type, col))
    out = {f: np.array(col, dtype=np.float64)[rows]}
    if kinds <= {int}:
        out[f + "__int"] = np.ones(len(rows), dtype=np.bool_)
    elif kinds == {float}:
        out[f + "__int"] = np.zeros(len(rows), dtype=np.bool_)
    else:
        out[f + "__int"] = np.array([type(v) is int for v in col], dtype=np.bool_)[rows]
    return out


def _identity(rows: Any, n: int) -> bool:
    """Whether ``rows`` is ``0..n-1``: every record kept once, in order (nothing late)."""
    return len(rows) == n and (n == 0 or (rows[0] == 0 and bool((np.diff(rows) == 1).all())))


def _take(values: list[Any], rows: Any) -> list[Any]:
    return values if _identity(rows, len(values)) else [values[i] for i in rows.tolist()]
