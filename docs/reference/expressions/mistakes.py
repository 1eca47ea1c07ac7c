"""Python's own and, or, not, in and chained comparisons cannot work on an expression."""

import pytest

from weir import ExpressionError, col

with pytest.raises(TypeError, match=r"use & for and, \| for or, ~ for not"):
    wrong = (col("a") > 1) and (col("b") > 2)  # write (col("a") > 1) & (col("b") > 2)
with pytest.raises(TypeError, match=r"\.is_in"):
    wrong = col("event") in ["click", "view"]  # write col("event").is_in(["click", "view"])
with pytest.raises(TypeError):
    wrong = 1 < col("a") < 5  # write (col("a") > 1) & (col("a") < 5)
with pytest.raises(ExpressionError, match=r"is NULL for every record"):
    wrong = col("a") == None  # noqa: E711 - write col("a").is_null()

# & and | bind tighter than comparisons: parenthesise each comparison
both = (col("a") > 1) & (col("b") > 2)
assert repr(both) == '(col("a") > 1) & (col("b") > 2)'
