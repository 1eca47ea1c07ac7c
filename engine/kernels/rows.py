"""The expression IR (``ir``) compiled to a Python function of one record: what the per-record
chain runs for an expression until the columnar loop takes the job.

``compile_row(expr)`` generates one function whose value equals ``ir.evaluate_row(expr, rec)``
value for value and error for error. The function is straight-line code, one statement per
node in the reference's evaluation order (operands left to right; a ``Coalesce`` or ``Case``
operand only where the reference evaluates it), with the common cases inline (a field, a
field against a literal, int or float arithmetic) and every other case handed to the
reference's own helpers (``ir.compare``, ``ir.arith``, ...), which also raise every error. No
text from the expression enters the source: names and literals are constants of the
function's namespace. The Hypothesis suite (``tests/property/test_expressions.py``) checks it
against the reference on random trees.

``result`` shapes what the function returns, so a step needs no second call per record:
``"value"``; ``"predicate"`` (True for TRUE, False for FALSE and NULL, an error for a value
that is not a boolean); ``"flag"`` (1 where the value is not NULL, else 0). ``wrap`` rewrites
an error's message (the step names the expression); ``null``, when given, is the error for a
NULL value.

Example:
    >>> from weir.engine.kernels import ir
    >>> f = compile_row(ir.Cmp("eq", ir.Col("event"), ir.Lit("click")))
    >>> f({"event": "click"}), f({"event": "view"}), f({})
    (True, False, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from weir.engine.kernels import ir

RowFn = Callable[[Mapping[str, Any]], Any]
Result = Literal["value", "predicate", "flag"]
_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_OPS |= {"add": "+", "sub": "-", "mul": "*"}


def not_an_object(rec: object) -> None:
    """An expression reads fields: a record that is not an object (a ``map`` made it so)."""
    raise ir.ExprError(f"the record is {type(rec).__name__}, not an object with fields")


def compile_row(
    expr: ir.Expr,
    *,
    result: Result = "value",
    wrap: Callable[[str], str] | None = None,
    null: str | None = None,
) -> RowFn:
    """``expr`` as a function of one record (see the module docstring).

    Raises:
        TypeError: ``expr`` is not an IR node.
    """
    g = _Gen()
    body = _Block(g, 2 if wrap else 1, [])
    body.line(_MAPPING_CHECK)
    v = body.node(expr)
    if result == "predicate":  # within the try: truth()'s error is the expression's
        body.line(f"if {v} is not True and {v} is not False and {v} is not None: truth({v})")
    lines = ["def row(rec):", *_guarded(body.lines, wrap, g)]
    if null is not None:
        lines.append(f"    if {v} is None: raise ExprError({g.const(null)})")
    tail = {"value": v, "predicate": f"{v} is True", "flag": f"0 if {v} is None else 1"}
    lines.append(f"    return {tail[result]}")
    return g.function(lines, expr)


def compile_columns(
    columns: Mapping[str, ir.Expr], wrap: Callable[[str, str], str]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A projection: the record with each of ``columns`` set to its expression's value on the
    record as it came in; ``wrap(name, why)`` is the error of a column that fails."""
    g = _Gen()
    lines = ["def row(rec):", f"    {_MAPPING_CHECK}", "    out = dict(rec)"]
    for name, e in columns.items():
        body = _Block(g, 2, [])
        v = body.node(e)
        column = g.const(name)
        lines += _guarded(body.lines, _naming(wrap, name), g)
        lines.append(f"    out[{column}] = {v}")
    lines.append("    return out")
    return g.function(lines, ir.Lit(None))


def _naming(wrap: Callable[[str, str], str], name: str) -> Callable[[str], str]:
    return lambda why: wrap(name, why)


_MAPPING_CHECK = "if type(rec) is not dict and not isinstance(rec, Mapping): not_object(rec)"


def _guarded(body: list[str], wrap: Callable[[str], str] | None, g: _Gen) -> list[str]:
    if wrap is None or not body:  # no statement (a literal): nothing can fail
        return body
    w = g.const(wrap)
    return [
        "    try:",
        *body,
        "    except ExprError as exc:",
        f"        raise ExprError({w}(str(exc))) from None",
    ]


class _Gen:
    """A generated function's namespace: the reference's helpers and the constants."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = {
            "ExprError": ir.ExprError, "Mapping": Mapping, "not_object": not_an_object,
            "field_value": ir.field_value, "compare": ir.compare, "arith": ir.arith,
            "negate": ir.negate, "cast": ir.cast, "truth": ir.truth,
            "string_test": ir.string_test, "MIN": ir.I64_MIN, "MAX": ir.I64_MAX,
            "SCALAR": frozenset({str, float, bool, type(None)}),
        }  # fmt: skip
        self.count = 0

    def var(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def const(self, value: object) -> str:
        name = f"k{len(self.env)}"
        self.env[name] = value
        return name

    def function(self, lines: list[str], expr: ir.Expr) -> RowFn:
        exec(compile("\n".join(lines) + "\n", f"<expression {expr!r}>", "exec"), self.env)  # noqa: S102
        fn: RowFn = self.env["row"]
        return fn


class _Block:
    """Statements at one indentation; ``node`` adds a node's and names the variable (or
    constant) holding its value."""

    def __init__(self, g: _Gen, depth: int, lines: list[str]) -> None:
        self.g = g
        self.pad = "    " * depth
        self.depth = depth
        self.lines = lines  # shared with the blocks nested in it: statements in order

    def line(self, text: str) -> None:
        self.lines.append(self.pad + text)

    def nested(self) -> _Block:
        return _Block(self.g, self.depth + 1, self.lines)

    def node(self, e: ir.Expr) -> str:
        build = _NODES.get(type(e))
        if build is None:
            raise TypeError(f"{e!r} is not an expression IR node")
        return build(self, e)


def _col(b: _Block, e: ir.Col) -> str:
    v, name = b.g.var(), b.g.const(e.name)
    b.line(f"{v} = rec.get({name})")
    b.line(
        f"if type({v}) not in SCALAR and not (type({v}) is int and MIN <= {v} <= MAX): "
        f"{v} = field_value({name}, {v})"
    )
    return v


def _lit(b: _Block, e: ir.Lit) -> str:
    return b.g.const(e.value)


def _cmp(b: _Block, e: ir.Cmp) -> str:
    x, y, v, op = b.node(e.left), b.node(e.right), b.g.var(), _OPS[e.op]
    if isinstance(e.right, ir.Lit) and type(e.right.value) is str and e.op in ("eq", "ne"):
        test = f"(type({x}) is str and {x} == {y})"
        b.line(f"{v} = None if {x} is None else {test if e.op == 'eq' else 'not ' + test}")
        return v
    b.line(f"{v} = ({x} {op} {y}) if {_num(x)} and {_num(y)} else compare({e.op!r}, {x}, {y})")
    return v


def _num(x: str) -> str:
    """``x`` is a number: an int or a float, not a bool."""
    return f"(type({x}) is int or type({x}) is float)"


def _arith(b: _Block, e: ir.Arith) -> str:
    x, y, v = b.node(e.left), b.node(e.right), b.g.var()
    if e.op in ("add", "sub", "mul"):
        op = _OPS[e.op]
        b.line(f"if type({x}) is int and type({y}) is int:")
        b.line(f"    {v} = {x} {op} {y}")
        b.line(f"    if not MIN <= {v} <= MAX: {v} = arith({e.op!r}, {x}, {y})")
        b.line(f"elif type({x}) is float and type({y}) is float: {v} = {x} {op} {y}")
        b.line(f"else: {v} = arith({e.op!r}, {x}, {y})")
    elif e.op == "div":  # the reference divides the operands as floats
        both = (
            f"(type({x}) is int or type({x}) is float) and (type({y}) is int or type({y}) is float)"
        )
        b.line(f"{v} = float({x}) / float({y}) if {both} and {y} else arith('div', {x}, {y})")
    else:
        b.line(f"{v} = arith({e.op!r}, {x}, {y})")
    return v


def _neg(b: _Block, e: ir.Neg) -> str:
    x, v = b.node(e.x), b.g.var()
    b.line(f"{v} = -{x} if type({x}) is float else negate({x})")
    return v


def _condition(b: _Block, x: str) -> None:
    """``truth`` of ``x``: an error unless TRUE, FALSE or NULL."""
    b.line(f"if {x} is not None and type({x}) is not bool: truth({x})")


def _logic(b: _Block, e: ir.And | ir.Or) -> str:
    x = b.node(e.left)
    _condition(b, x)
    y = b.node(e.right)
    _condition(b, y)
    v = b.g.var()
    absorbing, other = ("False", "True") if isinstance(e, ir.And) else ("True", "False")
    b.line(
        f"{v} = {absorbing} if {x} is {absorbing} or {y} is {absorbing} else "
        f"(None if {x} is None or {y} is None else {other})"
    )
    return v


def _not(b: _Block, e: ir.Not) -> str:
    x, v = b.node(e.x), b.g.var()
    _condition(b, x)
    b.line(f"{v} = None if {x} is None else not {x}")
    return v


def _isnull(b: _Block, e: ir.IsNull) -> str:
    x, v = b.node(e.x), b.g.var()
    b.line(f"{v} = {x} is None")
    return v


def _isin(b: _Block, e: ir.IsIn) -> str:
    x, v = b.node(e.x), b.g.var()
    strs = b.g.const(frozenset(w for w in e.values if type(w) is str))
    values = b.g.const(e.values)
    general = f"any(compare('eq', {x}, w) for w in {values})"
    b.line(f"{v} = None if {x} is None else ({x} in {strs} if type({x}) is str else {general})")
    return v


def _string(b: _Block, e: ir.StartsWith | ir.EndsWith | ir.Contains) -> str:
    x, v, node = b.node(e.x), b.g.var(), b.g.const(e)
    if isinstance(e, ir.StartsWith):
        fast = f"{x}.startswith({b.g.const(e.prefix)})"
    elif isinstance(e, ir.EndsWith):
        fast = f"{x}.endswith({b.g.const(e.suffix)})"
    else:
        fast = f"{b.g.const(e.part)} in {x}"
    b.line(f"{v} = {fast} if type({x}) is str else string_test({node}, {x})")
    return v


def _cast(b: _Block, e: ir.Cast) -> str:
    if e.to not in ("int", "float", "str"):  # it becomes source text: only these three
        raise TypeError(f"Cast to {e.to!r}: the IR casts to int, float or str")
    x, v = b.node(e.x), b.g.var()
    same = f"type({x}) is {e.to}" + (f" and MIN <= {x} <= MAX" if e.to == "int" else "")
    b.line(f"{v} = {x} if {same} else cast({x}, {e.to!r})")
    return v


def _coalesce(b: _Block, e: ir.Coalesce) -> str:
    v = b.g.var()
    block = b
    for i, x in enumerate(e.xs):
        block.line(f"{v} = {block.node(x)}")
        if i < len(e.xs) - 1:
            block.line(f"if {v} is None:")
            block = block.nested()
    return v


def _case(b: _Block, e: ir.Case) -> str:
    v = b.g.var()
    block = b
    for cond, then in e.whens:
        c = block.node(cond)
        _condition(block, c)
        block.line(f"if {c} is True:")
        taken = block.nested()
        taken.line(f"{v} = {taken.node(then)}")
        block.line("else:")
        block = block.nested()
    block.line(f"{v} = {block.node(e.otherwise)}")
    return v


_NODES: dict[type, Callable[[Any, Any], str]] = {
    ir.Col: _col, ir.Lit: _lit, ir.Cmp: _cmp, ir.Arith: _arith, ir.Neg: _neg, ir.And: _logic,
    ir.Or: _logic, ir.Not: _not, ir.IsNull: _isnull, ir.IsIn: _isin, ir.StartsWith: _string,
    ir.EndsWith: _string, ir.Contains: _string, ir.Cast: _cast, ir.Coalesce: _coalesce,
    ir.Case: _case,
}  # fmt: skip
