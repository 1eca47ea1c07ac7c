"""The window operator on columns: ``WindowRuntime``'s semantics, folded by the compiled kernels.

Configuration, lateness, firing, cleanup timers, retention and restore are the window
operator's (``window.py``); what changes is the representation. Keys are interned to dense ids
(``kernels.Interner``, one per operator); each open window is a ``kernels.WindowAcc``, the
accumulators of its keys in slots of its own; a batch (``columns.ColumnBatch``) has its window
ends and lateness computed in bulk and is folded with one kernel call per window it touches. A
fired window is exported as columns: result records are built only when a sink reads them, its
top-N is ranked from the columns, and its changed rows, like every dirty row at a flush, reach
the state writer as ``ColumnSegment``s, written as cells (``cellwrites.CellPart``).

The rare rows take the dict operator's code, which keeps every reason and rule: a value that is
not a number goes to the dead letters with ``FoldPlan.bad_field``'s reason, a late record to the
late output, a record within allowed lateness updates its fired window (in ``awaiting_final``,
dicts of slots, as in ``window.py``), and an int past int64 is folded by ``FoldPlan`` on the
key's slots and put back (``WindowAcc.load``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from weir.engine.agg import Builtin
from weir.engine.columnar import input_fields, kernel_kind
from weir.engine.kernels import KERNELS, Kernels
from weir.engine.kernels.fold import fold_window
from weir.engine.kernels.scan import ABSENT, FLOAT, INT, NULL, OTHER
from weir.engine.kernels.timek import LATE, ON_TIME
from weir.engine.runtime.messages import RankedWindow, TopStatus
from weir.engine.runtime.operators.cellwrites import CellPart
from weir.engine.runtime.operators.colrank import rank_window
from weir.engine.runtime.operators.columns import ColumnBatch, from_records
from weir.engine.runtime.operators.delta import ColumnSegment, StateDelta
from weir.engine.runtime.operators.window import WindowRuntime
from weir.engine.runtime.stored.fold import ANY, NUMBER
from weir.engine.windows import SlidingWindows, TumblingWindows, is_late
from weir.state.cellcodec import PackedRows

Array = Any
_I64 = np.int64


class Names:
    """Key ids to key strs, gathered a column at a time (``kernels.Interner.keys`` decodes
    each key once)."""

    def __init__(self, interner: Any) -> None:
        self._interner = interner
        self._arr = np.empty(0, object)
        self._known = 0

    def of(self, ids: Array) -> list[str]:
        n = len(self._interner)
        if n > self._known:
            if n > len(self._arr):
                grown = np.empty(max(n, 2 * len(self._arr), 1024), object)
                grown[: self._known] = self._arr[: self._known]
                self._arr = grown
            self._arr[self._known : n] = self._interner.keys(self._known)
            self._known = n
        names: list[str] = self._arr[ids].tolist()
        return names

    def few(self, ids: Array) -> list[str]:
        """The keys of a few ``ids`` (a top-N's), decoded from the interner's bytes: ``of``
        would first decode every key not named yet, a str kept per key (at 1M keys, ~0.1 s
        and ~60 MB for a ranking that names a hundred)."""
        if len(ids) and int(ids.max()) < self._known:
            return self.of(ids)
        blob, offsets, _, _ = self._interner.gather_keys(ids.astype(np.int32, copy=False))
        at = offsets.tolist()
        return [blob[a:b].decode() for a, b in zip(at[:-1], at[1:], strict=True)]


def _distinct(values: Array) -> list[int]:
    """The distinct values, ascending: ``np.unique``'s, without the ``numpy.ma`` import its
    first call makes (~15 ms in each worker)."""
    ordered = np.sort(values)
    first = np.ones(len(ordered), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    found: list[int] = ordered[first].tolist()
    return found


def packed_segment(interner: Any, end: int, kids: Array, columns: list[Any]) -> ColumnSegment:
    """Window ``end``'s rows of the keys ``kids`` (their slot ``columns``) as the state writer
    takes them."""
    blob, offsets, crc, groups = interner.gather_keys(kids)
    return ColumnSegment(end, PackedRows(blob, offsets, crc, groups, columns))


def as_list(values: Any) -> list[Any]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


class ColumnWindowRuntime(WindowRuntime):
    """See the module docstring. ``buckets`` stays empty: open windows are ``accs``."""

    def __init__(self, *args: Any, kernels: Kernels | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.k = kernels or KERNELS
        self._kinds, self._inputs = fold_kinds(self.op.aggregates.values())
        self.fields = input_fields(self.op)
        self.interner = self.k.Interner(self._max_par)
        self.names = Names(self.interner)
        self.accs: dict[int, Any] = {}
        self._fired_cols: list[ColumnSegment] = []
        self._current: tuple[float, RankedWindow | None] = (0.0, None)
        a = self._assigner
        self._tumbling = (a.size_ms, a.offset_ms) if isinstance(a, TumblingWindows) else None
        self._sliding = (
            (a.size_ms, a.slide_ms, a.offset_ms) if isinstance(a, SlidingWindows) else None
        )

    @property
    def open_windows(self) -> int:
        return sum(map(len, self.accs.values()))

    def open_ends(self) -> list[int]:
        return list(self.accs)

    def _tracks_current(self) -> bool:
        return True

    # -- input -------------------------------------------------------------------------------

    def process(
        self,
        keys: list[str],
        recs: list[Any],
        ts: list[int],
        wms: list[int],
        trace: list[int] | None = None,
    ) -> None:
        """A batch given as lists (as the dict operator takes it), folded as columns."""
        if keys:
            self.process_columns(from_records(-1, list(keys), list(recs), ts, wms, self.fields))

    def process_columns(self, batch: ColumnBatch, trace: list[int] | None = None) -> None:
        """Fold one batch; each row's ``wms`` is the watermark it arrived under."""
        py_rows: set[int] | None = None
        admitted = self._admit_columns(batch) if not batch.numeric else None
        if admitted is not None:
            batch, py_rows = admitted
        n = len(batch)
        if not n:
            return
        self.records_in += n
        ts, wms = batch.ts, batch.wms
        if self.processing_time:
            now = int(time.time() * 1000)
            ts, wms = np.full(n, now, _I64), np.full(n, now - 1, _I64)
        ends, origin = self._expand(ts)
        rows = np.arange(n) if origin is None else origin
        row_wms = wms if origin is None else wms[origin]
        if int(ends.min()) - 1 <= int(row_wms.max()):  # some pair is not on time
            codes = self.k.lateness(ends, row_wms, self._lateness)
            if codes.any():
                on = self._rare_pairs(batch, ts, row_wms, ends, rows, origin, codes)
                ends, rows = ends[on], rows[on]
        if not len(rows):
            return
        keys = batch.keys if origin is None and len(rows) == n else batch.keys.take(rows)
        self._fold(batch, ends, rows, keys.intern(self.interner), py_rows)

    def _expand(self, ts: Array) -> tuple[Array, Array | None]:
        if self._tumbling is not None:
            return self.k.tumbling_ends(ts, *self._tumbling), None
        if self._sliding is not None:
            ends, origin = self.k.sliding_expand(ts, *self._sliding)
            return ends, origin
        found, origin = self._assigner.expand(ts.tolist())
        return np.array(found, _I64), np.array(origin if origin is not None else [], np.int64)

    def _admit_columns(self, batch: ColumnBatch) -> tuple[ColumnBatch, set[int]] | None:
        """Rows whose aggregated fields are not what their aggregates take (``FoldPlan.rules``:
        numbers; or numbers and NULLs where only NULL-skipping aggregates read a field; anything
        where only ``count(x)`` does) go to the late output when they are late
        (``WindowRuntime._admit``'s order), else to the dead letters (the reason
        ``FoldPlan.bad_field`` gives); returns the rest, and which of them hold an int past
        int64 (folded by the Python fold). None: every row can be folded by the kernels."""
        bad = np.zeros(len(batch), bool)
        py: set[int] = set()
        for f in self.fields:
            col = batch.values[f]
            rule = self.plan.rules.get(f, NUMBER)
            if rule == ANY:  # count(x) alone: the kernel asks only whether it is NULL
                continue
            odd = (col.tags != INT) & (col.tags != FLOAT)
            if rule != NUMBER:
                odd &= (col.tags != NULL) & (col.tags != ABSENT)
            for r in np.flatnonzero(odd).tolist():
                if col.tags[r] == OTHER and type(col.objects.get(r)) is int:
                    py.add(r)
                else:
                    bad[r] = True
        if not bad.any() and not py:
            return None
        late = not self.processing_time
        for r in np.flatnonzero(bad).tolist():
            rec = batch.records.get(r)
            t, w = int(batch.ts[r]), int(batch.wms[r])
            if late and self._record_late(t, w):  # the late decision first, as in Flink
                self._late.add(self.op.name, batch.keys.key(r), t, w, rec)
                continue
            why = self.plan.bad_field(rec) if rec is not None else None
            kind, reason = why or ("not-a-number", "no number to aggregate")
            self._dead.add(f"aggregate:{self.op.name}", kind, reason, rec)
        keep = np.flatnonzero(~bad)
        where = {old: new for new, old in enumerate(keep.tolist())}
        return batch.take(keep), {where[r] for r in py}

    def _rare_pairs(
        self,
        batch: ColumnBatch,
        ts: Array,
        wms: Array,
        ends: Array,
        rows: Array,
        origin: Array | None,
        codes: Array,
    ) -> Array:
        """The (row, window) pairs not on time: within allowed lateness they update their
        fired window later (``_allowed``, in arrival order), else the record is late (once,
        and only when no window of it took it). Returns the on-time pairs' mask."""
        on = codes == ON_TIME
        rare = np.flatnonzero(~on).tolist()
        late = [i for i in rare if codes[i] == LATE]
        taken: set[int] = set()
        if origin is not None and late:
            late_set = set(late)
            taken = {int(origin[i]) for i in range(len(origin)) if i not in late_set}
        reported: set[int] = set()
        for i in rare:
            r = int(rows[i])
            if codes[i] != LATE:
                vals = [batch.values[f].value(r) for f in self.fields]
                rec = batch.records.get(r)
                self._allowed.append((batch.keys.key(r), int(ends[i]), rec, vals, int(wms[i])))
            elif r not in taken and r not in reported:
                reported.add(r)
                rec = batch.records.get(r)
                self._late.add(self.op.name, batch.keys.key(r), int(ts[r]), int(wms[i]), rec)
        return on

    def _fold(
        self, batch: ColumnBatch, ends: Array, rows: Array, kids: Array, py_rows: set[int] | None
    ) -> None:
        """Fold the on-time pairs, one kernel call per window end they touch."""
        one = int(ends[0]) == int(ends[-1]) and bool((ends == ends[0]).all())
        groups = [(int(ends[0]), None)] if one else [(e, ends == e) for e in _distinct(ends)]
        cols = [batch.values[f] if f is not None else None for f in self._inputs]
        for end, mask in groups:
            acc = self.accs.get(end)
            if acc is None:
                acc = self.accs[end] = self.k.WindowAcc(self._kinds)
            r = rows if mask is None else rows[mask]
            ids = kids if mask is None else kids[mask]
            whole = mask is None and len(r) == len(batch) and r[-1] == len(r) - 1
            picked = [
                None if c is None else (c.tags, c.i64, c.f64) if whole else
                (c.tags[r], c.i64[r], c.f64[r])
                for c in cols
            ]  # fmt: skip
            if py_rows and not py_rows.isdisjoint(r.tolist()):
                self._fold_with_python(acc, end, ids, r, picked, batch)
            else:
                fold_window(acc, ids, picked)

    def _fold_with_python(
        self, acc: Any, end: int, ids: Array, rows: Array, picked: list[Any], batch: ColumnBatch
    ) -> None:
        """A window's rows, some holding an int past int64: the kernel folds the runs between
        them, ``FoldPlan`` each such row on its key's slots, in arrival order."""
        start = 0
        marks = [i for i, r in enumerate(rows.tolist()) if _is_py(batch, self.fields, r)]
        for i in [*marks, len(rows)]:
            if i > start:
                part = [None if p is None else (p[0][start:i], p[1][start:i], p[2][start:i])
                        for p in picked]  # fmt: skip
                fold_window(acc, ids[start:i], part)
            if i < len(rows):
                kid = int(ids[i])
                slots = acc.slots(kid)
                bucket = {} if slots is None else {"k": slots}
                vals = [[batch.values[f].value(int(rows[i]))] for f in self.plan.fields]
                self.plan.fold({end: bucket}, {}, ["k"], [end], *vals, [None])
                acc.load(kid, bucket["k"], True)
            start = i + 1

    # -- time ----------------------------------------------------------------------------------

    def advance(self, watermark: int, data_watermark: int, trace: list[int] | None = None) -> None:
        """Fire due windows, apply late updates, finalize (see ``WindowRuntime.advance``)."""
        trace = self._move_time(watermark, data_watermark, trace)
        wm = self.watermark
        self._run_timers(sorted(e for e in self.accs if e - 1 <= wm), trace, wm)

    def _fire_due(self, end: int, wm: int) -> None:
        self._fire_acc(end, self.accs.pop(end), wm)

    def _fire_acc(self, end: int, acc: Any, wm: int) -> None:
        """Emit window ``end`` from its columns, write what RocksDB lacks of it and its
        cleanup timers, and keep it for late updates when it is not final yet."""
        start = self._assigner.start_of(end)
        final = is_late(end, self._lateness, wm)
        ids, columns = acc.export()
        self.results_out += len(ids)
        if self.emits or not final:
            names = self.names.of(ids)
            rows = list(map(list, zip(*map(as_list, columns), strict=True)))
            if self.emits:
                result = self.plan.result
                results = [
                    result(k, start, end, s, final) for k, s in zip(names, rows, strict=True)
                ]
                self.results.extend(results)
                self.tops.fired(start, end, results)
            if not final:
                self.awaiting_final[end] = dict(zip(names, rows, strict=True))
        if not self.emits:
            ranked = rank_window(
                self.names.few, ids, self.plan, columns, prefixes=self.interner.prefixes
            )
            self.tops.fired_ranked(start, end, len(ids), ranked)
        dirty = acc.take_dirty()
        crcs = None
        if len(dirty) == len(ids):  # every key changed: the rows exported above, not again
            segment = packed_segment(self.interner, end, ids, columns)
            self._fired_cols.append(segment)
            crcs = segment.rows.crc
        elif len(dirty):
            self._fired_cols.append(self._segment(end, acc, dirty))
        # its cleanup timers name the cells that hold its keys, from their CRC-32s: no key str
        if crcs is None:
            crcs = self.interner.gather_crcs(ids)
        self._write_bucket_timers(end, crcs)

    def top_status(self) -> TopStatus | None:
        """The top-N: the window that fired last, and (tumbling windows) the newest open one,
        ranked from its columns at most every ``RANK_INTERVAL_S``."""
        current: RankedWindow | None = None
        if self.tops.current is not None and self.accs:
            at, current = self._current
            now = time.monotonic()
            end = max(self.accs)
            if current is None or current["end"] != end or now - at >= 1.0:
                current = self._rank_current(end)
                self._current = (now, current)
        return {"latest": self.tops.latest, "current": current}

    def _rank_current(self, end: int) -> RankedWindow:
        ids, columns = self.accs[end].export()
        ranked = rank_window(
            self.names.few, ids, self.plan, columns, prefixes=self.interner.prefixes
        )
        return {"start": self._assigner.start_of(end), "end": end, "by": ranked}

    # -- state ---------------------------------------------------------------------------------

    def _segment(self, end: int, acc: Any, kids: Array) -> ColumnSegment:
        """Window ``end``'s rows ``kids`` as the state writer takes them: the keys' bytes and
        CRCs gathered here, on the loop (the writer thread must not read the interner, whose
        arena moves as it grows), no str per key."""
        return packed_segment(self.interner, end, kids, acc.export_rows(kids))

    def _delta(self, warm: bool = True) -> StateDelta:
        """One generation: the fired windows' and the open windows' changed rows as columns,
        written as cells (``CellPart``) with the allowed-late updates, then the encoded puts
        (timers); a fresh generation begins. Nothing is warmed: the rows carry their key
        groups, from which their cells are found."""
        columns, self._fired_cols = self._fired_cols, []
        for end, acc in self.accs.items():
            dirty = acc.take_dirty()
            if len(dirty):
                columns.append(self._segment(end, acc, dirty))
        puts, self._writes = self._writes, {}
        part = CellPart(
            self._cells, self._sid, self.plan.width, self._take_fired(), final=self._final()
        )
        return StateDelta(puts, [], [], self._prefix, columns=columns, cells=part)

    def _restore_windows(self, wm: int) -> None:
        opened: dict[int, tuple[list[str], list[list[Any]]]] = {}
        for key, end, slots in self.stored_windows(self._sid, seed=True):
            if end - 1 > wm:
                keys, values = opened.setdefault(end, ([], []))
                keys.append(key)
                values.append(slots)
            elif not is_late(end, self._lateness, wm):
                self.awaiting_final.setdefault(end, {})[key] = slots
        for end, (keys, values) in opened.items():
            acc = self.accs[end] = self.k.WindowAcc(self._kinds)
            for kid, slots in zip(self.interner.intern_list(keys).tolist(), values, strict=True):
                acc.load(kid, slots)


def fold_kinds(aggregates: Any) -> tuple[tuple[str, ...], list[str | None]]:
    """The fold kernel's kind and input field of each aggregate that holds a slot
    (``window_time()`` holds none); ``columnar.operator_refusal`` admits built-ins only."""
    aggs = [a for a in aggregates if isinstance(a, Builtin) and a.slots]
    kinds = tuple(kernel_kind(a) for a in aggs)
    return kinds, [a.field if k != "count" else None for a, k in zip(aggs, kinds, strict=True)]


def _is_py(batch: ColumnBatch, fields: list[str], row: int) -> bool:
    """Does row ``row`` hold an int past int64 in one of ``fields``?"""
    for f in fields:
        col = batch.values[f]
        if int(col.tags[row]) == OTHER and type(col.objects.get(row)) is int:
            return True
    return False


__all__ = ["ColumnWindowRuntime"]
