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

An input is a field or an expression (its values computed from each record, named by
``Builtin.input``); both follow one rule. An input's values must be numbers when an aggregate
that rejects NULLs reads it; numbers or NULL (``None``, or a record without the field) when only
NULL-skipping aggregates do; anything when only ``count(x)`` does (it asks whether the value is
NULL). An expression that fails on a record makes it a dead letter under every rule. The slot
layouts are ``engine/agg.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from operator import itemgetter
from typing import Any

from weir.engine.agg import Aggregate, Builtin, UserDefined
from weir.engine.expressions.render import render
from weir.engine.expressions.steps import aggregate_input
from weir.engine.kernels import ir
from weir.state.keygroups import key_value

FoldFn = Callable[..., None]
ResultFn = Callable[[str, int, int, list[Any], bool], dict[str, Any]]
BucketMerge = Callable[[dict[str, list[Any]], dict[str, list[Any]]], None]
_NUMBER_TYPES = frozenset({int, float})
_NUMBER_OR_NULL = frozenset({int, float, type(None)})
# what a field's values may be, strictest first: a number (an aggregate rejects NULLs), a number
# or NULL (NULL-skipping aggregates only), anything (``count(field)`` only)
NUMBER, NUMBER_OR_NULL, ANY = 0, 1, 2


def _rule(a: Builtin) -> int:
    if a.kind == "count":
        return ANY
    return NUMBER_OR_NULL if a.skips else NUMBER


def get_field(rec: Any, field: str) -> Any:
    """A NULL-tolerant field read: a record without the field (or not a mapping) reads NULL."""
    try:
        return rec[field]
    except (KeyError, TypeError, IndexError):
        return None


def _value_or_null(value_of: Callable[[Any], Any], rec: Any) -> Any:
    try:
        return value_of(rec)
    except ir.ExprError:
        return None


def take_columns(keep: list[int], *columns: list[Any]) -> tuple[list[Any], ...]:
    """The rows ``keep`` of each column."""
    return tuple([col[i] for i in keep] for col in columns)


class FoldPlan:
    """The fields an aggregate set reads and its generated fold function. ``op``: the
    operator whose result records ``result`` builds, named in each (``"op"``, first), so a
    sink that several operators write to tells their records apart; None (the query API,
    whose answers name the operator once): records without it."""

    def __init__(self, aggregates: dict[str, Aggregate], op: str | None = None) -> None:
        self.aggregates = aggregates
        self.op = op
        # the columns the fold reads, by name (``Builtin.input``): fields, and the values of
        # expressions, which ``_values`` computes from the record
        self.fields: list[str] = []
        self.rules: dict[str, int] = {}  # input -> NUMBER, NUMBER_OR_NULL or ANY
        self._exprs: dict[str, ir.Expr] = {}  # an expression input's IR, by its name
        self._values: dict[str, Callable[[Any], Any]] = {}  # ... and its per-record function
        for a in aggregates.values():
            if not isinstance(a, Builtin) or a.input is None:
                continue
            name = a.input
            if name not in self.fields:
                self.fields.append(name)
                if a.expr is not None:
                    self._exprs[name] = a.expr
                    self._values[name] = aggregate_input(a.expr)
            self.rules[name] = min(self.rules.get(name, ANY), _rule(a))
        # the aggregates a top-N ranks: ``window_time`` is the same for every key of a window
        self.ranked = [n for n, a in aggregates.items() if getattr(a, "kind", "") != "window_time"]
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
                v = col_of.get(agg.input or "", "0")
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
            else:
                lines.extend(agg.merge_stmts(lo))
        return [indent + line for line in lines or ["pass"]]

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
        """``result(key, start, end, slots, final)`` -> the result record, in one call. Its
        ``key`` is the key's value (``keygroups.key_value``): ``None`` for the NULL key, as SQL
        prints it."""
        env: dict[str, Any] = {"key_value": key_value}
        # a key not starting with a backslash is its own value: no call for most keys
        fields = ['"key": (key_value(k) if k[:1] == "\\\\" else k)', '"start": s', '"end": e']
        if self.op is not None:
            fields.insert(0, f'"op": {self.op!r}')  # a name (``NAME_PATTERN``): a literal
        for j, (name, agg) in enumerate(self.aggregates.items()):
            lo = self.slices[name][0]
            if isinstance(agg, UserDefined):
                env[f"u{j}"] = agg.function
                expr = f"u{j}.result(a[{lo}])"
            else:
                expr = agg.result_expr(lo, env)
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
        lo, hi = self.slices[name]
        if isinstance(agg, UserDefined):
            result = agg.function.result
            return [result(a[lo]) for a in slots]
        if agg.kind == "mean" and not agg.skips and agg.cast is None:
            return [a[lo] / a[lo + 1] for a in slots]
        if agg.kind in ("count", "sum", "min", "max") and agg.cast is None:
            return list(map(itemgetter(lo), slots))
        one = agg.result
        return [one(a[lo:hi]) for a in slots]

    def columns(self, recs: list[Any]) -> list[list[Any]] | None:
        """The aggregated fields of ``recs``, a column each, to fold; None when a record lacks
        one or holds something its aggregates cannot take (``bad_field`` says which)."""
        cols: list[list[Any]] = []
        for f in self.fields:
            rule = self.rules[f]
            value_of = self._values.get(f)
            if value_of is not None:
                try:
                    col = list(map(value_of, recs))
                except ir.ExprError:
                    return None
            else:
                try:
                    if rule == NUMBER:
                        col = list(map(itemgetter(f), recs))
                    else:
                        col = list(map(dict.get, recs, repeat(f)))
                except (KeyError, TypeError, IndexError):
                    if rule == NUMBER:
                        return None
                    col = [get_field(r, f) for r in recs]  # not every record is a dict
            if rule != ANY and not set(map(type, col)) <= (
                _NUMBER_TYPES if rule == NUMBER else _NUMBER_OR_NULL
            ):
                return None
            cols.append(col)
        return cols

    def loose_columns(self, recs: list[Any]) -> list[list[Any]]:
        """``columns`` of a batch that holds a record ``bad_field`` refuses: every input read
        without a check, NULL where it cannot be read (the refused records are not folded)."""
        return [
            [get_field(r, f) for r in recs]
            if (value_of := self._values.get(f)) is None
            else [_value_or_null(value_of, r) for r in recs]
            for f in self.fields
        ]

    def bad_field(self, rec: Any) -> tuple[str, str] | None:
        """Why ``rec`` cannot be folded, as the kind of reason (what the dead letters' warnings
        count by) and the reason (None: it can)."""
        for f in self.fields:
            reason = self._bad_input(f, self.rules[f], rec)
            if reason is not None:
                return reason
        return None

    def _bad_input(self, f: str, rule: int, rec: Any) -> tuple[str, str] | None:
        """Why input ``f`` of ``rec`` cannot be folded under ``rule`` (None: it can). A field
        the record lacks is NULL where NULLs may be; an expression that fails is an error
        under every rule, a NULL is not."""
        value_of = self._values.get(f)
        if value_of is None:
            what = f"field {f!r}"
            try:
                v = rec[f]
            except (KeyError, TypeError, IndexError):
                if rule != NUMBER:
                    return None
                return "missing-field", f"record has no field {f!r} to aggregate"
        else:
            what = f"input ({render(self._exprs[f])})"
            try:
                v = value_of(rec)
            except ir.ExprError as exc:
                return "expression-error", f"input {exc}"
        if rule == ANY or type(v) in _NUMBER_TYPES or (v is None and rule == NUMBER_OR_NULL):
            return None
        if v is None:
            return "null", (
                f"{what} is NULL, and an aggregate that rejects NULLs reads it (give it "
                "nulls='skip' to pass over NULLs, as SQL's aggregates do)"
            )
        return "not-a-number", f"{what} is {type(v).__name__} {v!r}, not a number"

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        out: list[Any] = []
        for agg, (lo, hi) in zip(self.aggregates.values(), self.slices.values(), strict=True):
            out.extend(agg.merge(a[lo:hi], b[lo:hi]))
        return out
