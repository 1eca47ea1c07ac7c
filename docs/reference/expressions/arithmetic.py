"""Numbers: int64 arithmetic that never wraps, true and floor division, exact comparisons."""

import pytest

from weir import col, lit, testing

ev = testing.evaluate

assert ev(col("a") + 1, {"a": 1}) == 2  # ints stay ints
assert ev(col("a") + 1, {"a": 1.5}) == 2.5  # a float on either side: a double
assert ev(col("a") / 2, {"a": 3}) == 1.5  # / is true division, always a float
assert ev(col("a") // 2, {"a": -3}) == -2  # // and % are Python's floor quotient and remainder
assert ev(col("a") % 3, {"a": -7}) == 2
assert ev(-col("a"), {"a": 4}) == -4

# ints and floats compare exactly; values of other types are never equal
assert ev(col("a") == 1, {"a": 1.0}) is True
assert ev(lit(2**53 + 1) > 2.0**53, {}) is True  # not rounded to a double first
assert ev(col("a") == "1", {"a": 1}) is False

# what a record cannot compute is its error: it goes to the dead letters with the reason
with pytest.raises(ValueError, match=r"9223372036854775807 \+ 1 overflows int64"):
    ev(col("a") + 1, {"a": 2**63 - 1})  # never wraps around
with pytest.raises(ValueError, match=r"1 / 0: division by zero"):
    ev(col("a") / col("b"), {"a": 1, "b": 0})
with pytest.raises(ValueError, match=r"cannot compute str 'x' \+ int 1: arithmetic takes numbers"):
    ev(col("a") + 1, {"a": "x"})  # strings are not numbers (and + does not concatenate)
with pytest.raises(ValueError, match=r"cannot order str 'b' and int 1"):
    ev(col("a") < 1, {"a": "b"})
with pytest.raises(ValueError, match=r"cannot compute bool True \+ int 1"):
    ev(col("a") + 1, {"a": True})  # nor are bools
