"""The expression builder: ``Expr`` and its operators, ``col``, ``lit``, ``when``,
``coalesce``, and ``to_ir``, which turns an expression or a Python scalar into the IR."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NoReturn

from weir.base.errors import ExpressionError
from weir.engine.expressions.render import ATOM, CMP_SYMBOLS, quote, render, wrap
from weir.engine.kernels import ir

Scalar = None | bool | int | float | str
IntoExpr = Any  # an Expr, or a scalar that becomes a literal (None, bool, int, float, str)
_Str = str  # ``Expr.str`` is the string namespace: annotations in the class use this name
CastTo = Literal["int", "float", "str"] | type[int] | type[float] | type[str]
_CASTS: dict[object, Literal["int", "float", "str"]] = {
    int: "int", float: "float", str: "str", "int": "int", "float": "float", "str": "str",
}  # fmt: skip
_NO_TRUTH = (
    "an expression has no truth value while the job is defined: {e}. Python's and, or, not, "
    "in and chained comparisons (1 < x < 5) cannot work on it; use & for and, | for or, ~ for "
    'not, .is_in([...]) for in, and wrap each comparison in parentheses: (col("a") > 1) & '
    '(col("a") < 5)'
)


class Expr:
    """An expression over a record's fields (build one with ``col``, ``lit``, ``when``,
    ``coalesce``). Operators build bigger expressions: ``+ - * / // %`` and unary ``-``,
    ``== != < <= > >=``, ``&`` (and), ``|`` (or), ``~`` (not); Python values on either side
    become literals.

    Example:
        >>> from weir import col
        >>> (col("price") * col("qty")).alias("total")
        (col("price") * col("qty")).alias("total")
    """

    __slots__ = ("_ir", "_name")

    def __init__(self, node: ir.Expr, name: _Str | None = None) -> None:
        self._ir = node
        self._name = name

    @property
    def ir(self) -> ir.Expr:
        """The expression IR this expression compiles to."""
        return self._ir

    @property
    def output_name(self) -> _Str | None:
        """The name ``with_columns`` gives it: its alias, else its first column's name."""
        if self._name is not None:
            return self._name
        cols = ir.columns_of(self._ir)
        return cols[0] if cols else None

    def alias(self, name: _Str) -> Expr:
        """The same expression, named ``name`` (for ``with_columns(expr.alias("x"))``).

        Example:
            >>> from weir import col
            >>> (col("v") * 2).alias("double").output_name
            'double'
        """
        if not isinstance(name, str) or not name:
            raise ExpressionError(f"alias({name!r}): pass a non-empty field name")
        return Expr(self._ir, name)

    def __repr__(self) -> _Str:
        text = render(self._ir)
        if self._name is None:
            return text
        return f"{wrap(self._ir, ATOM)}.alias({quote(self._name)})"

    # -- arithmetic ---------------------------------------------------------------------------

    def __add__(self, other: IntoExpr) -> Expr:
        return _arith("add", self, other)

    def __radd__(self, other: IntoExpr) -> Expr:
        return _arith("add", other, self)

    def __sub__(self, other: IntoExpr) -> Expr:
        return _arith("sub", self, other)

    def __rsub__(self, other: IntoExpr) -> Expr:
        return _arith("sub", other, self)

    def __mul__(self, other: IntoExpr) -> Expr:
        return _arith("mul", self, other)

    def __rmul__(self, other: IntoExpr) -> Expr:
        return _arith("mul", other, self)

    def __truediv__(self, other: IntoExpr) -> Expr:
        return _arith("div", self, other)

    def __rtruediv__(self, other: IntoExpr) -> Expr:
        return _arith("div", other, self)

    def __floordiv__(self, other: IntoExpr) -> Expr:
        return _arith("floordiv", self, other)

    def __rfloordiv__(self, other: IntoExpr) -> Expr:
        return _arith("floordiv", other, self)

    def __mod__(self, other: IntoExpr) -> Expr:
        return _arith("mod", self, other)

    def __rmod__(self, other: IntoExpr) -> Expr:
        return _arith("mod", other, self)

    def __neg__(self) -> Expr:
        return Expr(ir.Neg(self._ir))

    # -- comparisons (a reflected one, ``1 < col("v")``, arrives as ``col("v") > 1``) ----------

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return _cmp("eq", self, other)

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return _cmp("ne", self, other)

    def __lt__(self, other: IntoExpr) -> Expr:
        return _cmp("lt", self, other)

    def __le__(self, other: IntoExpr) -> Expr:
        return _cmp("le", self, other)

    def __gt__(self, other: IntoExpr) -> Expr:
        return _cmp("gt", self, other)

    def __ge__(self, other: IntoExpr) -> Expr:
        return _cmp("ge", self, other)

    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so no hash

    # -- logic ----------------------------------------------------------------------------

    def __and__(self, other: IntoExpr) -> Expr:
        return Expr(ir.And(self._ir, to_ir(other)))

    def __rand__(self, other: IntoExpr) -> Expr:
        return Expr(ir.And(to_ir(other), self._ir))

    def __or__(self, other: IntoExpr) -> Expr:
        return Expr(ir.Or(self._ir, to_ir(other)))

    def __ror__(self, other: IntoExpr) -> Expr:
        return Expr(ir.Or(to_ir(other), self._ir))

    def __invert__(self) -> Expr:
        return Expr(ir.Not(self._ir))

    def __bool__(self) -> NoReturn:
        raise ExpressionError(_NO_TRUTH.format(e=self))

    def __contains__(self, item: object) -> NoReturn:
        raise ExpressionError(
            f"`... in {self}`: an expression is not a container; test membership with "
            f'.is_in([...]) (e.g. col("event").is_in(["click", "view"])) and a substring '
            "with .str.contains(...)"
        )

    # -- predicates and conversions -------------------------------------------------------

    def is_in(self, values: Iterable[Scalar]) -> Expr:
        """TRUE where the value equals one of ``values`` (literals), NULL where it is NULL.

        Example:
            >>> from weir import col
            >>> col("event").is_in(["click", "view"])
            col("event").is_in(["click", "view"])
        """
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise ExpressionError(
                f'is_in({values!r}): pass a list of values, e.g. is_in(["click", "view"])'
            )
        return Expr(ir.IsIn(self._ir, tuple(_scalar(v, "is_in") for v in values)))

    def is_null(self) -> Expr:
        """TRUE where the value is NULL (a missing field or JSON ``null``), else FALSE.

        Example:
            >>> from weir import col
            >>> col("user").is_null()
            col("user").is_null()
        """
        return Expr(ir.IsNull(self._ir))

    def is_not_null(self) -> Expr:
        """TRUE where the value is not NULL (``~e.is_null()``).

        Example:
            >>> from weir import col
            >>> col("user").is_not_null()
            col("user").is_not_null()
        """
        return Expr(ir.Not(ir.IsNull(self._ir)))

    def fill_null(self, value: IntoExpr) -> Expr:
        """The value, or ``value`` where it is NULL (``coalesce(self, value)``).

        Example:
            >>> from weir import col
            >>> col("discount").fill_null(0)
            coalesce(col("discount"), 0)
        """
        return Expr(ir.Coalesce((self._ir, to_ir(value))))

    def cast(self, to: CastTo) -> Expr:
        """The value converted to ``int``, ``float`` or ``str`` (the types or their names).
        int from a float truncates toward zero, from a string parses it; str from an int is
        its decimal form; a value that does not convert is the record's error.

        Example:
            >>> from weir import col
            >>> col("id").cast(str)
            col("id").cast(str)
        """
        kind = _CASTS.get(to) if isinstance(to, str | type) else None
        if kind is None:
            raise ExpressionError(f"cast({to!r}): cast to int, float or str")
        return Expr(ir.Cast(self._ir, kind))

    @property
    def str(self) -> StringOps:
        """String predicates: ``.str.starts_with``, ``.str.ends_with``, ``.str.contains``."""
        return StringOps(self._ir)


class StringOps:
    """``Expr.str``: predicates on a string value (NULL gives NULL; a value that is not a
    string is the record's error)."""

    __slots__ = ("_ir",)

    def __init__(self, node: ir.Expr) -> None:
        self._ir = node

    def starts_with(self, prefix: _Str) -> Expr:
        """TRUE where the string starts with ``prefix``.

        Example:
            >>> from weir import col
            >>> col("url").str.starts_with("https://")
            col("url").str.starts_with("https://")
        """
        return Expr(ir.StartsWith(self._ir, _text(prefix, "starts_with")))

    def ends_with(self, suffix: _Str) -> Expr:
        """TRUE where the string ends with ``suffix``.

        Example:
            >>> from weir import col
            >>> col("file").str.ends_with(".json")
            col("file").str.ends_with(".json")
        """
        return Expr(ir.EndsWith(self._ir, _text(suffix, "ends_with")))

    def contains(self, part: _Str) -> Expr:
        """TRUE where the string contains ``part`` as a plain substring (not a regular
        expression, unlike Polars' default).

        Example:
            >>> from weir import col
            >>> col("agent").str.contains("bot")
            col("agent").str.contains("bot")
        """
        return Expr(ir.Contains(self._ir, _text(part, "contains")))


def col(name: str) -> Expr:
    """The record's field ``name`` (a top-level key; NULL where it is missing or ``null``).

    Example:
        >>> from weir import col
        >>> col("value") * 2
        col("value") * 2
    """
    if not isinstance(name, str) or not name:
        raise ExpressionError(f"col({name!r}): pass a field name (a non-empty string)")
    return Expr(ir.Col(name))


def lit(value: Scalar) -> Expr:
    """A literal: ``None`` (NULL), a bool, an int (int64), a float or a str.

    Example:
        >>> from weir import lit
        >>> lit(1) + 2
        lit(1) + 2
    """
    return Expr(ir.Lit(_scalar(value, "lit")))


def coalesce(*exprs: IntoExpr) -> Expr:
    """The first operand that is not NULL (NULL when all are); later operands are evaluated
    only for the records that need them.

    Example:
        >>> from weir import coalesce, col
        >>> coalesce(col("nickname"), col("name"), "anonymous")
        coalesce(col("nickname"), col("name"), "anonymous")
    """
    if not exprs:
        raise ExpressionError("coalesce(): pass one or more expressions")
    return Expr(ir.Coalesce(tuple(to_ir(e) for e in exprs)))


class When:
    """``when(condition)``: finish it with ``.then(value)``."""

    __slots__ = ("_cond", "_whens")

    def __init__(self, whens: tuple[tuple[ir.Expr, ir.Expr], ...], cond: ir.Expr) -> None:
        self._whens = whens
        self._cond = cond

    def then(self, value: IntoExpr) -> Then:
        """The value where the condition is TRUE (a str is a literal, not a column name).

        Example:
            >>> from weir import col, when
            >>> when(col("v") > 100).then("big")
            when(col("v") > 100).then("big")
        """
        return Then((*self._whens, (self._cond, to_ir(value))))


class Then(Expr):
    """A ``when(...).then(...)`` chain: an expression that is NULL where no condition holds,
    or add ``.when(...).then(...)`` and ``.otherwise(value)``."""

    __slots__ = ("_whens",)

    def __init__(self, whens: tuple[tuple[ir.Expr, ir.Expr], ...]) -> None:
        super().__init__(ir.Case(whens, ir.Lit(None)))
        self._whens = whens

    def when(self, condition: IntoExpr) -> When:
        """Another condition, tried where the previous ones are not TRUE.

        Example:
            >>> from weir import col, when
            >>> when(col("v") > 100).then("big").when(col("v") > 10).then("medium")
            when(col("v") > 100).then("big").when(col("v") > 10).then("medium")
        """
        return When(self._whens, to_ir(condition))

    def otherwise(self, value: IntoExpr) -> Expr:
        """The value where no condition is TRUE.

        Example:
            >>> from weir import col, when
            >>> when(col("v") > 100).then("big").otherwise("small")
            when(col("v") > 100).then("big").otherwise("small")
        """
        return Expr(ir.Case(self._whens, to_ir(value)))


def when(condition: IntoExpr) -> When:
    """A conditional value, as SQL's CASE: the first ``then`` whose condition is TRUE, else
    ``otherwise`` (NULL if not given). A value is evaluated only for the records that take it,
    so ``when(col("n") != 0).then(col("v") / col("n"))`` never divides by zero.

    Example:
        >>> from weir import col, when
        >>> when(col("n") != 0).then(col("v") / col("n")).otherwise(0.0)
        when(col("n") != 0).then(col("v") / col("n")).otherwise(0.0)
    """
    return When((), to_ir(condition))


# -- compiling to the IR ------------------------------------------------------------------


def to_ir(value: IntoExpr) -> ir.Expr:
    """``value``'s IR: an ``Expr``'s own, or a literal's.

    Raises:
        ExpressionError: ``value`` is neither an expression nor a scalar weir holds.

    Example:
        >>> to_ir(col("v") > 1)
        Cmp(op='gt', left=Col(name='v'), right=Lit(value=1))
        >>> to_ir("x")
        Lit(value='x')
    """
    if isinstance(value, Expr):
        return value.ir
    return ir.Lit(_scalar(value, "an expression"))


def _scalar(value: object, where: str) -> Scalar:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not ir.I64_MIN <= value <= ir.I64_MAX:
            raise ExpressionError(
                f"{where}: the int {value} is outside int64; weir's integers are 64-bit "
                "(use a float literal)"
            )
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise ExpressionError(
        f"{where}: {type(value).__name__} {value!r} is not an expression or a literal; use "
        "col(name), or None, a bool, an int, a float or a str"
    )


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"str.{where}({value!r}): pass a string")
    return value


def _arith(op: ir.ArithOp, left: IntoExpr, right: IntoExpr) -> Expr:
    return Expr(ir.Arith(op, to_ir(left), to_ir(right)))


def _cmp(op: ir.CmpOp, left: Expr, right: object) -> Expr:
    if right is None:
        symbol = CMP_SYMBOLS[op]
        raise ExpressionError(
            f"{left} {symbol} None is NULL for every record (SQL's rule: a comparison with "
            f"NULL is NULL); test for NULL with {left}.is_null() or .is_not_null()"
        )
    return Expr(ir.Cmp(op, left.ir, to_ir(right)))
