"""Expressions as text: the Python that builds them (``col("event") == "impression"``), for
``repr``, ``weir explain`` and dead-letter reasons. ``render`` inverts the builder: evaluating
its text with ``col``, ``lit``, ``when`` and ``coalesce`` in scope gives the same IR (a
property test checks it on random trees)."""

from __future__ import annotations

import math

from weir.engine.kernels import ir

Scalar = None | bool | int | float | str

CMP_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%"}
# Python's precedence: comparisons bind looser than | and &, so (a == 1) & (b == 2)
_CMP, _OR, _AND, _SUM, _PRODUCT, _UNARY, ATOM = range(7)


def render(e: ir.Expr) -> str:
    """``e`` as the Python that builds it: ``col("event") == "impression"``.

    Example:
        >>> from weir.engine.kernels import ir
        >>> render(ir.And(ir.Cmp("gt", ir.Col("v"), ir.Lit(1)), ir.IsNull(ir.Col("u"))))
        '(col("v") > 1) & col("u").is_null()'
    """
    return _render(e)[0]


def _render(e: ir.Expr) -> tuple[str, int]:
    """``e``'s text and its precedence."""
    if isinstance(e, ir.Col):
        return f"col({quote(e.name)})", ATOM
    if isinstance(e, ir.Lit):
        return f"lit({_literal(e.value)})", ATOM
    if isinstance(e, ir.Cmp):
        # a literal on the left keeps lit(): Python would reflect `1 < x` into `x > 1`
        left = wrap(e.left, _SUM)
        return f"{left} {CMP_SYMBOLS[e.op]} {_operand(e.right, _SUM)}", _CMP
    if isinstance(e, ir.Arith):
        prec = _SUM if e.op in ("add", "sub") else _PRODUCT
        left = _left(e.left, e.right, prec, (int, float))
        return f"{left} {_ARITH_SYMBOLS[e.op]} {_operand(e.right, prec + 1)}", prec
    if isinstance(e, ir.And | ir.Or):
        prec, symbol = (_AND, "&") if isinstance(e, ir.And) else (_OR, "|")
        left = _left(e.left, e.right, prec, (bool,))
        return f"{left} {symbol} {_operand(e.right, prec + 1)}", prec
    if isinstance(e, ir.Neg):
        return f"-{wrap(e.x, _UNARY)}", _UNARY
    if isinstance(e, ir.Not):
        if isinstance(e.x, ir.IsNull):
            return f"{wrap(e.x.x, ATOM)}.is_not_null()", ATOM
        return f"~{wrap(e.x, _UNARY)}", _UNARY
    return _render_call(e), ATOM


def _left(left: ir.Expr, right: ir.Expr, prec: int, plain: tuple[type, ...]) -> str:
    """An operator's left operand. A literal is plain Python (``2 * col("v")``, which
    Python hands to the expression's ``__rmul__``) when it is of a type whose own operator
    declines an expression (``"a" % x`` would format a string) and the right operand is an
    expression; else ``lit(...)``."""
    if isinstance(left, ir.Lit) and type(left.value) in plain and not isinstance(right, ir.Lit):
        return _literal(left.value)
    return wrap(left, prec)


def _render_call(e: ir.Expr) -> str:
    if isinstance(e, ir.IsNull):
        return f"{wrap(e.x, ATOM)}.is_null()"
    if isinstance(e, ir.IsIn):
        return f"{wrap(e.x, ATOM)}.is_in([{', '.join(_literal(v) for v in e.values)}])"
    if isinstance(e, ir.StartsWith):
        return f"{wrap(e.x, ATOM)}.str.starts_with({quote(e.prefix)})"
    if isinstance(e, ir.EndsWith):
        return f"{wrap(e.x, ATOM)}.str.ends_with({quote(e.suffix)})"
    if isinstance(e, ir.Contains):
        return f"{wrap(e.x, ATOM)}.str.contains({quote(e.part)})"
    if isinstance(e, ir.Cast):
        return f"{wrap(e.x, ATOM)}.cast({e.to})"
    if isinstance(e, ir.Coalesce):
        return f"coalesce({', '.join(_argument(x) for x in e.xs)})"
    assert isinstance(e, ir.Case), e
    chain = "".join(f".when({render(c)}).then({_argument(v)})" for c, v in e.whens)[1:]
    if isinstance(e.otherwise, ir.Lit) and e.otherwise.value is None:
        return chain
    return f"{chain}.otherwise({_argument(e.otherwise)})"


def wrap(e: ir.Expr, prec: int) -> str:
    """``e`` as an operand that needs precedence ``prec``: parenthesised if it binds looser."""
    text, own = _render(e)
    return f"({text})" if own < prec else text


def _operand(e: ir.Expr, prec: int) -> str:
    """An operator's right operand: a literal as plain Python (but NULL, as ``lit(None)``:
    ``x == None`` is refused), anything else as ``_wrap``."""
    if isinstance(e, ir.Lit) and e.value is not None:
        return _literal(e.value)
    return wrap(e, prec)


def _argument(e: ir.Expr) -> str:
    """A function's argument (``then``, ``otherwise``, ``coalesce``): literals plain."""
    return _literal(e.value) if isinstance(e, ir.Lit) else render(e)


def _literal(v: Scalar) -> str:
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    return repr(v)


def quote(s: str) -> str:
    """A Python string literal in double quotes (``repr`` picks single quotes)."""
    r = repr(s)
    if r[0] == '"':  # repr chose double quotes: s has a ' and no "
        return r
    # in a single-quoted repr every ' is escaped: unescape it, escape every "
    return '"' + r[1:-1].replace('"', '\\"').replace("\\'", "'") + '"'
