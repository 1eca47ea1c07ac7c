"""Casts: int, float and str, and what does not convert."""

import pytest

from weir import col, testing

ev = testing.evaluate

assert ev(col("a").cast(int), {"a": "42"}) == 42  # a string parses (as Python's int())
assert ev(col("a").cast(int), {"a": -2.7}) == -2  # a float truncates toward zero
assert ev(col("a").cast(float), {"a": 3}) == 3.0
assert ev(col("a").cast(str), {"a": 7}) == "7"  # an int's decimal form: a key, say
assert ev(col("a").cast("int"), {"a": None}) is None  # NULL stays NULL; names work as types

with pytest.raises(ValueError, match=r"cannot cast str 'x1' to int"):
    ev(col("a").cast(int), {"a": "x1"})
with pytest.raises(ValueError, match=r"cannot cast float 1.5 to str: only ints and strings"):
    ev(col("a").cast(str), {"a": 1.5})
with pytest.raises(ValueError, match=r"cannot cast bool True to int: bools do not cast"):
    ev(col("a").cast(int), {"a": True})
