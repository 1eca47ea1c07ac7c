"""Generated batch folds for a set of aggregates.

For ``count=agg.count(), total=agg.sum("value")`` the generated loop is::

    def fold(cache, pending, created, keys, ends, c0, recs):
        get = cache.get
        for k, e, v0, r in zip(keys, ends, c0, recs):
            t = (k, e)
            a = get(t)
            if a is None:
                cache[t] = [1, v0]
                ...
            else:
                a[0] += 1
                a[1] += v0

One loop per batch with no per-aggregate calls: this is where the throughput comes from. Field
values are extracted and type-checked per column before folding (``columns``), so a bad record
never leaves a half-applied batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.agg import Aggregate, Builtin, UserDefined

FoldFn = Callable[..., None]


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
        args = ", ".join(["cache", "pending", "created", "keys", "ends", *cols, "recs"])
        loop_vars = ", ".join(["k", "e", *cols, "r"])
        zipped = ", ".join(["keys", "ends", *cols, "recs"])
        body = "\n".join(
            [
                f"def fold({args}):",
                "    get = cache.get",
                f"    for {loop_vars} in zip({zipped}):",
                "        t = (k, e)",
                "        a = get(t)",
                "        if a is None:",
                f"            cache[t] = [{', '.join(init)}]",
                "            created.append(t)",
                "            lst = pending.get(e)",
                "            if lst is None:",
                "                pending[e] = [k]",
                "            else:",
                "                lst.append(k)",
                "        else:",
                *[f"            {s}" for s in update],
            ]
        )
        exec(compile(body, f"<fold {list(self.aggregates)}>", "exec"), env)  # noqa: S102
        fold: FoldFn = env["fold"]
        return fold

    def results(self, slots: list[Any]) -> dict[str, Any]:
        """The aggregate fields of a result record, from accumulator slots."""
        return {
            name: agg.result(slots[lo:hi])
            for (name, agg), (lo, hi) in zip(
                self.aggregates.items(), self.slices.values(), strict=True
            )
        }

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        out: list[Any] = []
        for agg, (lo, hi) in zip(self.aggregates.values(), self.slices.values(), strict=True):
            out.extend(agg.merge(a[lo:hi], b[lo:hi]))
        return out
