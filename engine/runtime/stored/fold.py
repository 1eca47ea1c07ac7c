"""Generated batch folds for a set of aggregates.

For ``count=agg.count(), total=agg.sum("value")`` the generated loop is::

    def fold(buckets, dirty, keys, ends, c0, recs):
        if ends and ends.count(ends[0]) == len(ends):
            ...  # one window for the whole batch: the loop below without ``e``, one dirty update
        last = None
        for k, e, v0, r in zip(keys, ends, c0, recs):
            if e != last:
                b = buckets.get(e)
                if b is None:
                    b = buckets[e] = {}
                d = dirty.get(e)
                if d is None:
                    d = dirty[e] = set()
                last = e
            d.add(k)
            a = b.get(k)
            if a is None:
                b[k] = [1, v0]
            else:
                a[0] += 1
                a[1] += v0

One loop per batch with no per-aggregate calls and no tuple keys: this is where the throughput
comes from. ``buckets`` maps a window end to ``{key: accumulator slots}``; ``dirty`` maps a
window end to the keys changed since the last flush. Field values are
extracted and type-checked per column before folding, so a bad record never leaves a
half-applied batch.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from weir.engine.agg import Aggregate, Builtin, UserDefined

FoldFn = Callable[..., None]
ResultFn = Callable[[str, int, int, list[Any], bool], dict[str, Any]]
BucketMerge = Callable[[dict[str, list[Any]], dict[str, list[Any]]], None]
_NUMBER_TYPES = frozenset({int, float})


def take_columns(keep: list[int], *columns: list[Any]) -> tuple[list[Any], ...]:
    """The rows ``keep`` of each column."""
    return tuple([col[i] for i in keep] for col in columns)


class FoldPlan:
    """The fields an aggregate set reads and its generated fold function."""

    def __init__(self, aggregates: dict[str, Aggregate]) -> None:
        self.aggregates = aggregates
        self.fields: list[str] = []
        for a in aggregates.values():
            if isinstance(a, Builtin) and a.field and a.field not in self.fields:
                self.fields.append(a.field)
        self.slices: dict[str, tuple[int, int]] = {}
        pos = 0
        for name, a in aggregates.items():
            self.slices[name] = (pos, pos + a.slots)
            pos += a.slots
        self.width = pos
        self.fold: FoldFn = self._generate()
        self.result: ResultFn = self._generate_result()
        self.merge_into: Callable[[list[Any], list[Any]], None] = self._generate_merge()
        self._udas = [
            (lo, agg.function)
            for name, agg in aggregates.items()
            if isinstance(agg, UserDefined)
            for lo in (self.slices[name][0],)
        ]
        # ``copy(slots)``: slots that share no accumulator object with ``slots``. A user-defined
        # aggregate's ``add`` or ``merge`` may change its accumulator in place, so a window
        # composed from panes must not hold a pane's own object (a later merge would change the
        # pane). Built-in slots are numbers: a list copy is enough.
        self.copy: Callable[[list[Any]], list[Any]] = self._copy_udas if self._udas else list.copy
        self.merge_bucket: BucketMerge = self._generate_merge_bucket()

    def _copy_udas(self, slots: list[Any]) -> list[Any]:
        out = slots.copy()
        for lo, uda in self._udas:
            out[lo] = uda.merge(uda.create(), slots[lo])
        return out

    def _generate(self) -> FoldFn:
        cols = [f"c{i}" for i in range(len(self.fields))]
        col_of = dict(zip(self.fields, cols, strict=True))
        env: dict[str, Any] = {}
        init: list[str] = []
        update: list[str] = []
        for j, (name, agg) in enumerate(self.aggregates.items()):
            pos = self.slices[name][0]
            if isinstance(agg, UserDefined):
                env[f"u{j}"] = agg.function
                init.append(f"u{j}.add(u{j}.create(), r)")
                update.append(f"a[{pos}] = u{j}.add(a[{pos}], r)")
            else:
                v = col_of.get(agg.field or "", "0")
                init.extend(agg.init_exprs(v))
                update.extend(agg.update_stmts("a", pos, v))
        # only user-defined aggregates read the record itself
        rec = ["r"] if self._reads_records() else []
        recs = ["recs"] if rec else []
        args = ", ".join(["buckets", "dirty", "keys", "ends", *cols, "recs"])
        one_vars = ", ".join(["k", *cols, *rec])
        one_zip = f"zip({', '.join(['keys', *cols, *recs])})" if cols or rec else "keys"
        loop_vars = ", ".join(["k", "e", *cols, "r"])
        zipped = ", ".join(["keys", "ends", *cols, "recs"])
        accumulate = [
            "        a = get(k)",
            "        if a is None:",
            f"            b[k] = [{', '.join(init)}]",
            "        else:",
            *[f"            {s}" for s in update],
        ]
        body = "\n".join(
            [
                f"def fold({args}):",
                "    if ends and ends.count(ends[0]) == len(ends):",
                "        e = ends[0]",
                "        b = buckets.get(e)",
                "        if b is None:",
                "            b = buckets[e] = {}",
                "        d = dirty.get(e)",
                "        if d is None:",
                "            d = dirty[e] = set()",
                "        d.update(keys)",
                "        get = b.get",
                f"        for {one_vars} in {one_zip}:",
                *["    " + line for line in accumulate],
                "        return",
                "    last = None",
                f"    for {loop_vars} in zip({zipped}):",
                "        if e != last:",
                "            b = buckets.get(e)",
                "            if b is None:",
                "                b = buckets[e] = {}",
                "            d = dirty.get(e)",
                "            if d is None:",
                "                d = dirty[e] = set()",
                "            get = b.get",
                "            last = e",
                "        d.add(k)",
                *accumulate,
            ]
        )
        exec(compile(body, f"<fold {list(self.aggregates)}>", "exec"), env)  # noqa: S102
        fold: FoldFn = env["fold"]
        return fold

    def _reads_records(self) -> bool:
        return any(isinstance(a, UserDefined) for a in self.aggregates.values())

    def _generate_merge(self) -> Callable[[list[Any], list[Any]], None]:
        """``merge_into(a, b)``: accumulator ``b`` merged into ``a``, in place, one call."""
        env: dict[str, Any] = {}
        lines = ["def merge_into(a, b):", *self._merge_lines(env, "    ")]
        exec(compile("\n".join(lines) + "\n", "<merge>", "exec"), env)  # noqa: S102
        fn: Callable[[list[Any], list[Any]], None] = env["merge_into"]
        return fn

    def _merge_lines(self, env: dict[str, Any], indent: str) -> list[str]:
        """The statements merging accumulator ``b`` into ``a`` in place."""
        lines: list[str] = []
        for j, (name, agg) in enumerate(self.aggregates.items()):
            lo, hi = self.slices[name]
            if isinstance(agg, UserDefined):
                env[f"u{j}"] = agg.function
                lines.append(f"a[{lo}] = u{j}.merge(a[{lo}], b[{lo}])")
            elif agg.kind == "min":
                lines.append(f"if b[{lo}] < a[{lo}]: a[{lo}] = b[{lo}]")
            elif agg.kind == "max":
                lines.append(f"if b[{lo}] > a[{lo}]: a[{lo}] = b[{lo}]")
            else:  # count, sum, mean: every slot adds
                lines.extend(f"a[{i}] += b[{i}]" for i in range(lo, hi))
        return [indent + line for line in lines]

    def _generate_merge_bucket(self) -> BucketMerge:
        """``merge_bucket(into, bucket)``: every key's accumulator of ``bucket`` merged into
        ``into`` (a copy, see ``copy``, for a key ``into`` lacks), in one loop with the merge
        inlined: composing a sliding window from its panes runs this once per pane."""
        env: dict[str, Any] = {"copy": self.copy}
        lines = [
            "def merge_bucket(into, bucket):",
            "    get = into.get",
            "    for k, b in bucket.items():",
            "        a = get(k)",
            "        if a is None:",
            "            into[k] = copy(b)",
            "        else:",
            *self._merge_lines(env, "            "),
        ]
        exec(compile("\n".join(lines) + "\n", "<merge_bucket>", "exec"), env)  # noqa: S102
        fn: BucketMerge = env["merge_bucket"]
        return fn

    def _generate_result(self) -> ResultFn:
        """``result(key, start, end, slots, final)`` -> the result record, in one call."""
        env: dict[str, Any] = {}
        fields = ['"key": k', '"start": s', '"end": e']
        for j, (name, agg) in enumerate(self.aggregates.items()):
            lo, hi = self.slices[name]
            if isinstance(agg, UserDefined):
                env[f"u{j}"] = agg.function
                expr = f"u{j}.result(a[{lo}])"
            elif agg.kind == "mean":
                expr = f"a[{lo}] / a[{lo + 1}]"
            else:
                expr = f"a[{lo}]"
            fields.append(f"{name!r}: {expr}")
        fields.append('"final": f')
        body = f"def result(k, s, e, a, f):\n    return {{{', '.join(fields)}}}\n"
        exec(compile(body, f"<result {list(self.aggregates)}>", "exec"), env)  # noqa: S102
        fn: ResultFn = env["result"]
        return fn

    def column(self, name: str, slots: list[list[Any]]) -> list[Any]:
        """Aggregate ``name``'s result for each accumulator in ``slots`` (what ``result`` puts
        under ``name``), a column at a time."""
        agg = self.aggregates[name]
        lo = self.slices[name][0]
        if isinstance(agg, UserDefined):
            result = agg.function.result
            return [result(a[lo]) for a in slots]
        if agg.kind == "mean":
            return [a[lo] / a[lo + 1] for a in slots]
        return list(map(itemgetter(lo), slots))

    def columns(self, recs: list[Any]) -> list[list[Any]] | None:
        """The aggregated fields of ``recs``, a column each, to fold; None when a record lacks
        one or holds something that is not a number there (``bad_field`` says which)."""
        cols: list[list[Any]] = []
        try:
            for f in self.fields:
                col = list(map(itemgetter(f), recs))
                if not set(map(type, col)) <= _NUMBER_TYPES:
                    return None
                cols.append(col)
        except (KeyError, TypeError, IndexError):
            return None
        return cols

    def bad_field(self, rec: Any) -> tuple[str, str] | None:
        """Why ``rec`` cannot be folded, as the kind of reason and the reason (None: it can)."""
        for f in self.fields:
            try:
                v = rec[f]
            except (KeyError, TypeError, IndexError):
                return "missing-field", f"record has no field {f!r} to aggregate"
            if type(v) not in _NUMBER_TYPES:
                return "not-a-number", f"field {f!r} is {type(v).__name__} {v!r}, not a number"
        return None

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        out: list[Any] = []
        for agg, (lo, hi) in zip(self.aggregates.values(), self.slices.values(), strict=True):
            out.extend(agg.merge(a[lo:hi], b[lo:hi]))
        return out
