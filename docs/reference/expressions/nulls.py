"""NULL: a missing field and JSON null; what each operator does with it."""

from weir import coalesce, col, testing, when

ev = testing.evaluate
rec = {"a": 1, "b": None}  # "b" is null, "c" is missing: both are NULL

assert ev(col("b"), rec) is None and ev(col("c"), rec) is None
assert ev(col("a") + col("c"), rec) is None  # arithmetic with NULL is NULL
assert ev(col("c") == 1, rec) is None  # so is a comparison
assert ev(col("c").is_null(), rec) is True  # is_null is never NULL
assert ev(col("a").is_in([1, 2]), rec) is True and ev(col("c").is_in([1]), rec) is None

# & | ~ are three-valued (Kleene's logic, as SQL): FALSE & NULL is FALSE, TRUE | NULL is TRUE
assert ev((col("a") > 5) & (col("c") > 0), rec) is False
assert ev((col("a") > 0) | (col("c") > 0), rec) is True
assert ev((col("a") > 0) & (col("c") > 0), rec) is None
assert ev(~(col("c") > 0), rec) is None

# replacing NULL
assert ev(col("c").fill_null(0) + 1, rec) == 1
assert ev(coalesce(col("b"), col("c"), "none"), rec) == "none"
assert ev(when(col("c").is_null()).then("missing").otherwise("present"), rec) == "missing"
