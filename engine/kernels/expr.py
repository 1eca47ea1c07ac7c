"""The columnar evaluator of the expression IR (``ir``) over scanned columns (``scan.Scan``).

Values are tagged columns like the scanner's fields (``Vec``: a tag per row, ``i64``, ``f64``,
string spans into ``data``), with one more tag, ``ERROR``: the row's first error, in the order
``ir.evaluate_row`` would raise it, is in ``errors``. The common cases run as whole-column numpy
operations or string kernels (``strk``, compiled or twin); every other row (ints against floats,
strings against strings, casts, overflow) is computed by ``ir``'s one-value reference itself, so
the two cannot disagree.

Example:
    >>> from weir.engine.kernels import load, scan
    >>> s = scan.scan_block(load().scan_lines, b'{"e":"a"}\\n{"e":"b"}\\n', ("e",))
    >>> keep, errors = filter_mask(load(), ir.Cmp("eq", ir.Col("e"), ir.Lit("a")), s)
    >>> keep.tolist(), errors
    ([True, False], {})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.engine.kernels import ir
from weir.engine.kernels.scan import ABSENT, FALSE, FLOAT, INT, NULL, OTHER, STR, TRUE, Scan

Array = Any
ERROR = 8
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal}
_CMP |= {"gt": np.greater, "ge": np.greater_equal}
_FLOAT_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
# lookup tables (a gather per column, where np.isin sorts): by tag, the tags a condition may
# hold and ``x == 'lit'``'s outcome before strings are compared (_PENDING: the reference
# decides); by ``str_equals``'s answer (0, 1, 2: not a string), == and !='s outcome
_PENDING = 255
_CONDITION = np.zeros(ERROR + 1, bool)
_CONDITION[[TRUE, FALSE, NULL, ABSENT, ERROR]] = True
_EQ_STR_BY_TAG = np.full(ERROR + 1, _PENDING, np.uint8)
_EQ_STR_BY_TAG[[ABSENT, NULL, ERROR]] = NULL, NULL, ERROR
_EQ_HIT = np.array([FALSE, TRUE, _PENDING], np.uint8)
_NE_HIT = np.array([TRUE, FALSE, _PENDING], np.uint8)


@dataclass
class Vec:
    """A tagged column (see the module docstring)."""

    tags: Array
    i64: Array
    f64: Array
    ss: Array
    sl: Array


class Values:
    """One ``Scan``'s tagged values: empty columns, a row's value, putting one, failing rows;
    ``errors`` maps a row to its first error.

    A string the evaluation makes (a literal, a cast, a per-row result) goes into ``more``, past
    the scanned block: its span points into ``data``, the two end to end, which is built only
    when a kernel reads spans and strings were made (appending to the block, MBs, copied it per
    string)."""

    def __init__(self, kernels: Any, scan: Scan) -> None:
        self.k = kernels
        self.scan = scan
        self.n = len(scan)
        self.block = scan.data
        self.more = bytearray()
        self._joined = (0, self.block)  # ``data`` as of len(more)
        self.errors: dict[int, str] = {}

    @property
    def data(self) -> bytes:
        """The bytes every string span points into: the block, then the strings made."""
        if not self.more:
            return self.block
        if self._joined[0] != len(self.more):
            self._joined = (len(self.more), self.block + bytes(self.more))
        return self._joined[1]

    @data.setter
    def data(self, data: bytes) -> None:
        self.block, self.more, self._joined = data, bytearray(), (0, data)

    def empty(self) -> Vec:
        kinds = (np.uint8, np.int64, np.float64, np.int64, np.int32)  # tags, i64, f64, ss, sl
        return Vec(*(np.zeros(self.n, k) for k in kinds))

    def value(self, v: Vec, i: int) -> ir.Scalar:
        t = int(v.tags[i])
        if t == INT:
            return int(v.i64[i])
        if t == FLOAT:
            return float(v.f64[i])
        if t == STR:
            s, n, past = int(v.ss[i]), int(v.sl[i]), len(self.block)
            if s < past:
                return self.block[s : s + n].decode()
            return self.more[s - past : s - past + n].decode()
        return {ABSENT: None, NULL: None, TRUE: True, FALSE: False}.get(t)

    def put(self, v: Vec, i: int, x: ir.Scalar) -> None:
        if x is None:
            v.tags[i] = NULL
        elif x is True or x is False:
            v.tags[i] = TRUE if x else FALSE
        elif type(x) is int:
            v.tags[i], v.i64[i] = INT, x
        elif type(x) is float:
            v.tags[i], v.f64[i] = FLOAT, x
        else:
            raw = str(x).encode()
            v.tags[i], v.ss[i], v.sl[i] = STR, len(self.block) + len(self.more), len(raw)
            self.more += raw

    def fail(self, v: Vec, rows: Array, reason: Callable[[int], str]) -> None:
        for i in np.flatnonzero(rows).tolist():
            self.errors.setdefault(i, reason(i))
        v.tags[rows] = ERROR

    def per_row(self, rows: Array, out: Vec, fn: Callable[..., ir.Scalar], *args: Vec) -> None:
        """Rows ``rows`` of ``out`` by the one-value reference ``fn``."""
        for i in np.flatnonzero(rows).tolist():
            try:
                self.put(out, i, fn(*(self.value(a, i) for a in args)))
            except ir.ExprError as exc:
                out.tags[i] = ERROR
                self.errors.setdefault(i, str(exc))


class Evaluator(Values):
    """Evaluates expressions over one ``Scan``; ``errors`` maps a row to its first error."""

    # -- nodes (one method per IR type, in ``_METHODS``: bound ones in self made a cycle) ---

    def eval(self, e: ir.Expr) -> Vec:
        """``e`` over every row."""
        method: Callable[[Evaluator, Any], Vec] = _METHODS[type(e)]
        return method(self, e)

    def _col(self, e: ir.Col) -> Vec:
        s = self.scan
        j = s.fields.index(e.name)
        v = Vec(s.tags[j].copy(), s.i64[j], s.f64[j], s.ss[j], s.sl[j])
        other = v.tags == OTHER
        if other.any():
            self.fail(v, other, lambda i: _other_reason(e.name, s.objects[(j, i)]))
        return v

    def _lit(self, e: ir.Lit) -> Vec:
        v = self.empty()
        if self.n:
            self.put(v, 0, e.value)
            for arr in (v.tags, v.i64, v.f64, v.ss, v.sl):
                arr[:] = arr[0]
        return v

    def _cmp(self, e: ir.Cmp) -> Vec:
        if e.op in ("eq", "ne") and isinstance(e.right, ir.Lit) and type(e.right.value) is str:
            return self._eq_str(e, self.eval(e.left), e.right.value)
        a, b = self.eval(e.left), self.eval(e.right)
        out, ta, tb = self.empty(), a.tags, b.tags
        done = _nullish(ta) | _nullish(tb) | (ta == ERROR) | (tb == ERROR)
        out.tags[:] = np.where((ta == ERROR) | (tb == ERROR), ERROR, NULL)
        fast = ~done & (ta == tb) & ((ta == INT) | (ta == FLOAT))
        if fast.any():
            hit = np.zeros(self.n, bool)
            ints, floats = fast & (ta == INT), fast & (ta == FLOAT)
            hit[ints] = _CMP[e.op](a.i64[ints], b.i64[ints])
            hit[floats] = _CMP[e.op](a.f64[floats], b.f64[floats])
            out.tags[fast] = np.where(hit[fast], TRUE, FALSE)
            done |= fast
        self.per_row(~done, out, lambda x, y: ir.compare(e.op, x, y), a, b)
        return out

    def _eq_str(self, e: ir.Cmp, a: Vec, lit: str) -> Vec:
        """``a == lit`` or ``a != lit`` for a string literal: strings by the ``str_equals``
        kernel, other values by the reference; the literal is never made a column (a ``Vec``
        of it would put its bytes past the block, and the other rows need only the ``str``)."""
        out, ta = self.empty(), a.tags
        out.tags = _EQ_STR_BY_TAG[ta]  # whole-column gathers: a batch is one call of each
        strs = ta == STR
        if strs.any():
            hit = self.k.str_equals(self.data, ta, a.ss, a.sl, lit.encode())
            by_hit = _EQ_HIT if e.op == "eq" else _NE_HIT
            out.tags = np.where(strs, by_hit[hit], out.tags)
        pending = out.tags == _PENDING
        if pending.any():
            self.per_row(pending, out, lambda x: ir.compare(e.op, x, lit), a)
        return out

    def _arith(self, e: ir.Arith) -> Vec:
        a, b = self.eval(e.left), self.eval(e.right)
        out, ta, tb = self.empty(), a.tags, b.tags
        err = (ta == ERROR) | (tb == ERROR)
        done = _nullish(ta) | _nullish(tb) | err
        out.tags[:] = np.where(err, ERROR, NULL)
        if e.op in ("add", "sub"):
            ints = ~done & (ta == INT) & (tb == INT)
            if ints.any():
                x, y = a.i64[ints], b.i64[ints]
                with np.errstate(over="ignore"):
                    r = x + y if e.op == "add" else x - y
                # int64 overflow: the result's sign differs from both operands' (add) or from
                # the minuend's where the operands' signs differ (sub)
                yy = y if e.op == "add" else ~y
                ovf = ((x ^ r) & (yy ^ r)) < 0
                rows = np.flatnonzero(ints)
                good = rows[~ovf]
                out.tags[good], out.i64[good] = INT, r[~ovf]
                done[good] = True
        float_op = _FLOAT_OPS.get(e.op)  # floordiv and mod: Python's rules, by the reference
        floats = ~done & (ta == FLOAT) & (tb == FLOAT) & (float_op is not None)
        if e.op == "div":
            floats &= b.f64 != 0
        if float_op is not None and floats.any():
            x, y = a.f64[floats], b.f64[floats]
            out.tags[floats], out.f64[floats] = FLOAT, float_op(x, y)
            done |= floats
        self.per_row(~done, out, lambda x, y: ir.arith(e.op, x, y), a, b)
        return out

    def _neg(self, e: ir.Neg) -> Vec:
        a = self.eval(e.x)
        out = self.empty()
        out.tags[:] = np.where(a.tags == ERROR, ERROR, NULL)
        floats = a.tags == FLOAT
        out.tags[floats], out.f64[floats] = FLOAT, -a.f64[floats]
        rest = ~floats & ~_nullish(a.tags) & (a.tags != ERROR)
        self.per_row(rest, out, ir.negate, a)
        return out

    def _truth(self, v: Vec, rows: Array | None = None) -> Vec:
        """``v`` as a condition: a row that is not TRUE, FALSE or NULL fails (only among
        ``rows``, when given)."""
        bad = ~_CONDITION[v.tags]
        if rows is not None:
            bad &= rows
        if bad.any():
            self.fail(v, bad, lambda i: f"{_describe(self.value(v, i))} is not a boolean")
        return v

    def _and(self, e: ir.And) -> Vec:
        return self._logic(e, FALSE)

    def _or(self, e: ir.Or) -> Vec:
        return self._logic(e, TRUE)

    def _logic(self, e: ir.And | ir.Or, absorbing: int) -> Vec:
        a = self._truth(self.eval(e.left))
        b = self._truth(self.eval(e.right))
        out = self.empty()
        null = _nullish(a.tags) | _nullish(b.tags)
        out.tags[:] = np.where(null, NULL, TRUE + FALSE - absorbing)
        out.tags[(a.tags == absorbing) | (b.tags == absorbing)] = absorbing
        out.tags[(a.tags == ERROR) | (b.tags == ERROR)] = ERROR
        return out

    def _not(self, e: ir.Not) -> Vec:
        a = self._truth(self.eval(e.x))
        out = self.empty()
        out.tags[:] = a.tags
        out.tags[a.tags == ABSENT] = NULL
        out.tags[a.tags == TRUE] = FALSE
        out.tags[a.tags == FALSE] = TRUE
        return out

    def _isnull(self, e: ir.IsNull) -> Vec:
        a = self.eval(e.x)
        out = self.empty()
        out.tags[:] = np.where(_nullish(a.tags), TRUE, FALSE)
        out.tags[a.tags == ERROR] = ERROR
        return out

    def _isin(self, e: ir.IsIn) -> Vec:
        a = self.eval(e.x)
        out = self.empty()
        out.tags[:] = np.where(a.tags == ERROR, ERROR, NULL)
        done = _nullish(a.tags) | (a.tags == ERROR)
        strs = ~done & (a.tags == STR)
        values = tuple(v.encode() for v in e.values if type(v) is str)
        if strs.any():
            hit = self.k.str_isin(self.data, a.tags, a.ss, a.sl, values) == 1
            out.tags[strs] = np.where(hit[strs], TRUE, FALSE)
            done |= strs
        self.per_row(~done, out, lambda x: any(ir.compare("eq", x, w) for w in e.values), a)
        return out

    def _startswith(self, e: ir.StartsWith) -> Vec:
        return self._string(e, self.k.str_startswith, e.prefix)

    def _contains(self, e: ir.Contains) -> Vec:
        return self._string(e, self.k.str_contains, e.part)

    def _endswith(self, e: ir.EndsWith) -> Vec:
        return self._string(e, _str_endswith, e.suffix)

    def _string(self, e: ir.StartsWith | ir.EndsWith | ir.Contains, kernel: Any, lit: str) -> Vec:
        a = self.eval(e.x)
        out = self.empty()
        out.tags[:] = np.where(a.tags == ERROR, ERROR, NULL)
        hit = kernel(self.data, a.tags, a.ss, a.sl, lit.encode())
        strs = a.tags == STR
        out.tags[strs] = np.where(hit[strs] == 1, TRUE, FALSE)
        bad = ~strs & ~_nullish(a.tags) & (a.tags != ERROR)
        if bad.any():
            name = type(e).__name__
            self.fail(out, bad, lambda i: f"{name} on {_describe(self.value(a, i))}, not a string")
        return out

    def _cast(self, e: ir.Cast) -> Vec:
        a = self.eval(e.x)
        out = self.empty()
        out.tags[:] = np.where(a.tags == ERROR, ERROR, NULL)
        rest = ~_nullish(a.tags) & (a.tags != ERROR)
        if e.to == "float":
            nums = rest & ((a.tags == INT) | (a.tags == FLOAT))
            out.tags[nums] = FLOAT
            out.f64[nums] = np.where(
                a.tags[nums] == INT, a.i64[nums].astype(np.float64), a.f64[nums]
            )
            rest &= ~nums
        elif e.to == "int":
            ints = rest & (a.tags == INT)
            out.tags[ints], out.i64[ints] = INT, a.i64[ints]
            rest &= ~ints
        self.per_row(rest, out, lambda x: ir.cast(x, e.to), a)
        return out

    # -- lazy operands: evaluated for some rows, whose errors alone count ------------------

    def _sub(self, e: ir.Expr, rows: Array) -> Vec:
        """``e`` for the rows ``rows`` (a ``Coalesce`` or ``Case`` operand the reference
        evaluates on those rows only): other rows' values are left unused and their errors
        are not the row's."""
        child = Evaluator(self.k, self.scan)
        child.block, child.more = self.block, self.more  # one ``more``: the spans stay valid
        v = child.eval(e)
        for i in np.flatnonzero(rows).tolist():
            why = child.errors.get(i)
            if why is not None:
                self.errors.setdefault(i, why)
        return v

    def _coalesce(self, e: ir.Coalesce) -> Vec:
        out = self.empty()
        out.tags[:] = NULL
        pending = np.ones(self.n, bool)  # rows whose operands so far were all NULL
        for x in e.xs:
            if not pending.any():
                break
            v = self._sub(x, pending)
            take = pending & ~_nullish(v.tags)  # a value or an error ends the search
            _copy(out, v, take)
            pending &= ~take
        return out

    def _case(self, e: ir.Case) -> Vec:
        out = self.empty()
        pending = np.ones(self.n, bool)  # rows whose conditions so far were FALSE or NULL
        for cond, then in e.whens:
            if not pending.any():
                break
            c = self._truth(self._sub(cond, pending), pending)
            failed = pending & (c.tags == ERROR)
            out.tags[failed] = ERROR
            hit = pending & (c.tags == TRUE)
            if hit.any():
                _copy(out, self._sub(then, hit), hit)
            pending &= ~(failed | hit)
        if pending.any():
            _copy(out, self._sub(e.otherwise, pending), pending)
        return out


_METHODS: dict[type, Callable[[Evaluator, Any], Vec]] = {
    ir.Col: Evaluator._col, ir.Lit: Evaluator._lit, ir.Cmp: Evaluator._cmp,
    ir.Arith: Evaluator._arith, ir.Neg: Evaluator._neg, ir.And: Evaluator._and,
    ir.Or: Evaluator._or, ir.Not: Evaluator._not, ir.IsNull: Evaluator._isnull,
    ir.IsIn: Evaluator._isin, ir.StartsWith: Evaluator._startswith,
    ir.EndsWith: Evaluator._endswith, ir.Contains: Evaluator._contains, ir.Cast: Evaluator._cast,
    ir.Coalesce: Evaluator._coalesce, ir.Case: Evaluator._case,
}  # fmt: skip


def _copy(out: Vec, v: Vec, rows: Array) -> None:
    for a, b in ((out.tags, v.tags), (out.i64, v.i64), (out.f64, v.f64), (out.ss, v.ss)):
        a[rows] = b[rows]
    out.sl[rows] = v.sl[rows]
    out.tags[rows & (out.tags == ABSENT)] = NULL


def _str_endswith(data: bytes, tags: Array, ss: Array, sl: Array, lit: bytes) -> Array:
    """Does each string end with ``lit``? As the ``strk`` kernels answer (1, 0, or 2 for a row
    without a string), with numpy: the last ``len(lit)`` bytes of each long enough string,
    gathered and compared (UTF-8 is self-synchronising, so a byte match is a character
    match)."""
    strs = tags == STR
    out = np.where(strs, 0, 2).astype(np.uint8)
    k = len(lit)
    rows = np.flatnonzero(strs & (sl >= k))
    if k == 0:
        out[rows] = 1
    elif rows.size:
        buf = np.frombuffer(data, np.uint8)
        at = (ss[rows] + sl[rows] - k)[:, None] + np.arange(k)
        out[rows[(buf[at] == np.frombuffer(lit, np.uint8)).all(axis=1)]] = 1
    return out


def _nullish(tags: Array) -> Array:
    return (tags == ABSENT) | (tags == NULL)


def _describe(v: object) -> str:
    return f"{type(v).__name__} {v!r}"


def _other_reason(name: str, v: object) -> str:
    if type(v) is int:
        return f"field {name!r} holds {v}, outside int64"
    return f"field {name!r} holds {type(v).__name__}, not a scalar"


def evaluate(kernels: Any, expr: ir.Expr, scan: Scan) -> tuple[Vec, dict[int, str], bytes]:
    """``expr`` over every row of ``scan``.

    Returns:
        ``(vec, errors, data)``: the tagged result, each failed row's reason, and the bytes
        the result's string spans point into.
    """
    ev = Evaluator(kernels, scan)
    vec = ev.eval(expr)
    return vec, ev.errors, ev.data


def filter_mask(kernels: Any, expr: ir.Expr, scan: Scan) -> tuple[Array, dict[int, str]]:
    """The rows a filter on ``expr`` keeps (TRUE only) and the rows it sends aside (an error,
    or a value that is not a boolean), with their reasons.

    Raises:
        KeyError: ``expr`` reads a field the scan did not extract.
    """
    ev = Evaluator(kernels, scan)
    vec = ev._truth(ev.eval(expr))
    return vec.tags == TRUE, ev.errors
